"""Every reproduction and benchmark page of ``docs/results/``, one module each, run by ``python -m benchmarks``
from a checkout of the project (this folder is not part of the installed package; it imports ``sampledlm``
and nothing in ``sampledlm`` imports it).

An experiment is a module with ``run(quick: bool, data_dir: str | None, out_dir: str) -> dict``
that writes ``<out_dir>/<page>.md``, ``.json`` and ``.png`` (stamped and written by :mod:`.report`;
``page`` is the experiment's name unless its entry says otherwise) and returns the JSON's ``data``. ``data_dir`` (a directory of train/valid/test files, already checked
by :func:`.report.data_files`) matters only to experiments that train a language model; the
others ignore it. Adding an experiment = one module here + one line in ``EXPERIMENTS``.

The fault, fuzz and crash campaigns are run the same way (``python -m benchmarks faults``) and write their pages
here too, but their modules live beside the tests, in ``tests/campaigns/`` (:data:`CAMPAIGNS`): they are run on
demand against the working tree, not measurements of it.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The pages measure this checkout's code: this process and the child processes the experiments start
# (``python -m sampledlm ...``, ``python -m benchmarks.X``) import sampledlm from its src/, whatever their working
# directory and whichever sampledlm is installed.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_REPO, os.path.join(_REPO, "src")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
if os.path.join(_REPO, "src") not in sys.path and "sampledlm" not in sys.modules:
    sys.path.insert(0, os.path.join(_REPO, "src"))

from sampledlm.errors import UserError  # noqa: E402


#: Where the campaigns' modules are (``tests/campaigns/`` of the checkout, a folder of modules, not of tests).
CAMPAIGNS = "tests.campaigns"


@dataclass(frozen=True)
class Experiment:
    module: str  # module name inside this package, or a dotted name (a campaign's: ``tests.campaigns.faults``)
    summary: str  # one line for --list
    trains_lm: bool = False  # True: --data DIR replaces its default corpus
    page: str | None = None  # the page's file name in OUT (default: the experiment's name)

    def page_name(self, name: str) -> str:
        return self.page or name


EXPERIMENTS: dict[str, Experiment] = {
    "css-estimates": Experiment("css_estimates", "Botev et al. fig. 1: p(c=1|x) by IS, CSS-IS, CSS-Bernoulli, C = 10,000"),
    "css-softmax-regression": Experiment(
        "css_softmax_regression", "Botev et al. fig. 2: synthetic softmax regression, exact LL per iteration"),
    "xu-nnlm": Experiment("xu_nnlm", "Xu et al. tables 4-7: standard vs binary FFNN LM at 100/20/10/5 %",
                          trains_lm=True),
    "xu-melm": Experiment("xu_melm", "Xu et al. table 1, fig. 2: KN3, standard vs binary MaxEnt LM, subsampling",
                          trains_lm=True),
    "nce-samples": Experiment("nce_samples", "Labeau 2014 (NCE slides): FFNN LM test perplexity against noise samples k",
                              trains_lm=True),
    "css-gru": Experiment("css_gru", "Botev et al. fig. 3: GRU LM, exact training LL per epoch, per objective",
                          trains_lm=True),
    "scaling": Experiment("scaling", "tokens/s against V (10k-1M) for every objective, vs the full softmax; "
                          "samplers; the PTB feed-forward step per objective"),
    "objectives-ptb": Experiment("objectives_ptb", "FFNN trigram LM trained with each of the nine objectives: "
                                 "test ppl, + KN3, time to best", trains_lm=True, page="objectives_ptb"),
    "outputs": Experiment("outputs", "structured and self-normalised output layers beside the others: training "
                          "cost per token at V = 10k-1M, a decoder's scoring cost, every objective on PTB",
                          trains_lm=True),
    "neural": Experiment("neural_lms", "FFNN and GRU LMs with the full softmax, + KN3; a softmax step's time "
                         "profile; kill -9 and --resume", trains_lm=True),
    "ngram": Experiment("ngram_bench", "n-gram LMs: agreement with KenLM lmplz, speed and memory, "
                        "perplexity by order x smoothing", trains_lm=True),
    "ngram-scale": Experiment("ngram_scale", "n-grams at corpus scale: bounded-memory estimation vs in memory "
                              "(and lmplz), memory-mapped binary loading, entropy vs count pruning", trains_lm=True),
    "corpus": Experiment("corpus_speed", "reading, tokenising and encoding speed of the corpus pipeline",
                         trains_lm=True),
    "asr": Experiment("asr", "a simulated recogniser's lattices and 100-best lists rescored by KN5, FFNN, GRU and "
                      "mixtures (WER); scoring speed against KenLM", trains_lm=True),
    "faults": Experiment(f"{CAMPAIGNS}.faults", "the fault campaign (bad inputs, damaged models, full disks, "
                         "kill -9): each case before (762f3e9) and now"),
    "fuzz": Experiment(f"{CAMPAIGNS}.fuzz", "every reader of outside files and the commands that read them fed "
                       "damaged and random inputs: outcomes counted (clean errors, tracebacks, wrong results, "
                       "partial files)"),
    "serve": Experiment("serve", "sampledlm serve: queries/s and latency with 1-64 clients, batching on and off "
                        "(KN5, GRU); 1,000+ hostile requests", trains_lm=True),
    "transformer": Experiment("transformer", "Transformer decoder: one epoch beside PyTorch's word_language_model "
                              "example (re-implemented), alternating speed, the best PTB configuration", trains_lm=True),
    "embeddings": Experiment("embeddings", "word2vec skip-gram/CBOW against gensim 4.4 (words/s, similarity, "
                             "analogy, file round trips); NNLM projections as embeddings"),
    "training": Experiment("training", "the trainer end to end: css-is tokens/s at V = 10k and 1M on the CPU, two "
                           "data-parallel ranks against one process, and on a GPU the LSTM tokens/s table and the "
                           "medium PTB LSTM", trains_lm=True),
    "quality-cpu": Experiment("quality_cpu", "PTB test perplexity against CPU seconds: the GRU with every output "
                              "objective at its defaults, beside faster-rnnlm's GRU (NCE, hierarchical softmax)",
                              trains_lm=True),
    "onnx": Experiment("onnx_export", "a GRU exported to ONNX: ONNX Runtime's log probabilities against sampledlm "
                       "score, and its speed against PyTorch on one thread", trains_lm=True),
    "decoder-state": Experiment("decoder_state", "a GRU scored word by word through Model.advance: time per word "
                                "from word 10 to 1,000, against re-reading the history", trains_lm=True),
    "lr-grid": Experiment("lr_grid", "one learning-rate grid for every PTB GRU-256 row, the softmax included: "
                          "valid perplexity by rate, test at the chosen rate, gaps against the tuned softmax",
                          trains_lm=True),
    "lr-grid-adamw": Experiment("lr_grid_adamw", "the lr grid again with AdamW (weight decay 0.1) for every PTB "
                                "GRU-256 row, the softmax included", trains_lm=True),
    "equal-cpu": Experiment("equal_cpu", "every sampled and structured PTB GRU-256 row at its lr-grid rate, trained "
                            "for the tuned softmax's CPU seconds: test perplexity against the softmax, curves by CPU "
                            "seconds", trains_lm=True),
    "large-vocab": Experiment("large_vocab", "a 165M-token Wikipedia corpus at V = 485k and 100k: corpus "
                              "statistics, KN5 (ours and lmplz), every output objective under one CPU budget, "
                              "cost against V, exact evaluation speed"),
    "crashes": Experiment(f"{CAMPAIGNS}.crashes", "every writing command killed with SIGKILL at 20 moments (and 10 "
                          "more during a final write): torn outputs, recoveries, temporary files"),
}

#: Other names of an experiment (same runs, same page): ``python -m benchmarks maxent`` = ``xu-melm``.
ALIASES: dict[str, str] = {"maxent": "xu-melm", "objectives": "scaling", "objectives_ptb": "objectives-ptb"}


def resolve(name: str) -> str:
    """The experiment's own name (``name`` itself, or what the alias ``name`` stands for)."""
    return ALIASES.get(name, name)


def get(name: str) -> Experiment:
    if resolve(name) not in EXPERIMENTS:
        raise UserError(f"unknown experiment {name!r}; available: {', '.join(EXPERIMENTS)} "
                        f"(other names: {', '.join(f'{a} = {n}' for a, n in ALIASES.items())})")
    return EXPERIMENTS[resolve(name)]


def run(name: str, quick: bool, data_dir: str | None, out_dir: str, train: bool = True,
        only: set[str] | None = None) -> dict:
    """Run experiment ``name`` and return its results (the ``data`` of its JSON page).
    ``train=False``: rebuild the page from the finished runs, train nothing (experiments whose
    ``run`` takes a ``train`` argument). ``only``: re-train just these runs and keep the other rows
    of the page in ``out_dir`` (experiments whose ``run`` takes an ``only`` argument)."""
    exp = get(name)
    name = resolve(name)
    module = importlib.import_module(exp.module if "." in exp.module else f"{__name__}.{exp.module}")
    if only is not None:
        import inspect

        if "only" not in inspect.signature(module.run).parameters:
            raise UserError(f"{name}: --only is not available for this experiment")
        return module.run(quick=quick, data_dir=data_dir, out_dir=out_dir, train=train, only=only)
    if not train:
        import inspect

        if "train" not in inspect.signature(module.run).parameters:
            raise UserError(f"{name}: --no-train is not available for this experiment")
        return module.run(quick=quick, data_dir=data_dir, out_dir=out_dir, train=False)
    return module.run(quick=quick, data_dir=data_dir, out_dir=out_dir)
