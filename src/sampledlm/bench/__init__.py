"""Reproductions of the seed papers' experiments, one module each, run by ``sampledlm bench``.

An experiment is a module with ``run(quick: bool, data_dir: str | None, out_dir: str) -> dict``
that writes ``<out_dir>/<name>.md``, ``.json`` and ``.png`` (stamped by :mod:`.report`) and
returns the JSON's ``data``. ``data_dir`` (a directory of train/valid/test files, already checked
by :func:`.report.data_files`) matters only to experiments that train a language model; the
others ignore it. Adding an experiment = one module here + one line in ``EXPERIMENTS``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ..errors import UserError


@dataclass(frozen=True)
class Experiment:
    module: str  # module name inside this package
    summary: str  # one line for --list
    trains_lm: bool = False  # True: --data DIR replaces its default corpus


EXPERIMENTS: dict[str, Experiment] = {
    "css-estimates": Experiment("css_estimates", "Botev et al. fig. 1: p(c=1|x) by IS, CSS-IS, CSS-Bernoulli, C = 10,000"),
    "css-softmax-regression": Experiment(
        "css_softmax_regression", "Botev et al. fig. 2: synthetic softmax regression, exact LL per iteration"),
    "xu-nnlm": Experiment("xu_nnlm", "Xu et al. tables 4-7: standard vs binary FFNN LM at 100/20/10/5 %",
                          trains_lm=True),
    "xu-melm": Experiment("xu_melm", "Xu et al. table 1, fig. 2: KN3, standard vs binary MaxEnt LM, subsampling",
                          trains_lm=True),
    "nce-samples": Experiment("nce_samples", "NCE slides: FFNN LM test perplexity against noise samples k",
                              trains_lm=True),
    "css-gru": Experiment("css_gru", "Botev et al. fig. 3: GRU LM, exact training LL per epoch, per objective",
                          trains_lm=True),
    "scaling": Experiment("scaling", "tokens/s against V (10k-1M) for every objective, vs the full softmax"),
}


def get(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise UserError(f"unknown experiment {name!r}; available: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def run(name: str, quick: bool, data_dir: str | None, out_dir: str, train: bool = True) -> dict:
    """Run experiment ``name`` and return its results (the ``data`` of its JSON page).
    ``train=False``: rebuild the page from the finished runs, train nothing (experiments whose
    ``run`` takes a ``train`` argument)."""
    exp = get(name)
    module = importlib.import_module(f"{__name__}.{exp.module}")
    if not train:
        import inspect

        if "train" not in inspect.signature(module.run).parameters:
            raise UserError(f"{name}: --no-train is not available for this experiment")
        return module.run(quick=quick, data_dir=data_dir, out_dir=out_dir, train=False)
    return module.run(quick=quick, data_dir=data_dir, out_dir=out_dir)
