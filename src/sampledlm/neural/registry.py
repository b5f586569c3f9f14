"""The ``--model`` names (adding a model = one file + one line in :data:`MODELS`).

A model's section of ``config.json`` is ``{"type": NAME, **its Config fields}``, e.g.::

    {"type": "ffnn", "order": 3, "embed_dim": 50, "hidden": [200], "direct": false, "deep_output": null, "dropout": 0.2}
    {"type": "gru", "embed_dim": 200, "hidden": 256, "layers": 1, "dropout": 0.25, "proj": 200, "tie": true}
    {"type": "transformer", "embed_dim": 256, "layers": 4, "heads": 4, "ff_dim": null, "context": 64, ...}
"""

from __future__ import annotations

import dataclasses

from .. import config as cfgmod
from ..errors import UserError
from .base import NeuralScorer
from .ffnn import FFNN
from .rnn import GRULM, LSTMLM, RNNLM  # noqa: F401
from .transformer import TransformerLM

MODELS: dict[str, type[NeuralScorer]] = {
    "ffnn": FFNN,
    "gru": GRULM,
    "lstm": LSTMLM,
    "transformer": TransformerLM,
}


def model_class(type_: str) -> type[NeuralScorer]:
    if not isinstance(type_, str) or type_ not in MODELS:
        raise UserError(f"unknown model type {type_!r}; choose from {', '.join(MODELS)}")
    return MODELS[type_]


def model_spec(type_: str, **options) -> dict:
    """A complete model section: defaults filled in, unknown keys and bad values refused (None = default)."""
    cls = model_class(type_)
    names = {f.name for f in dataclasses.fields(cls.Config)}
    unknown = sorted(k for k, v in options.items() if k not in names and v is not None)
    if unknown:
        raise UserError(f"option(s) {', '.join(cfgmod.setting_name(u) for u in unknown)} do not apply to model {type_!r}")
    given = {k: v for k, v in options.items() if v is not None}
    if "hidden" in given:  # one flag, two shapes: a list of layer sizes (ffnn) or one state size (rnn)
        sizes = list(given["hidden"]) if isinstance(given["hidden"], (list, tuple)) else [given["hidden"]]
        if isinstance(cls.Config().hidden, list):
            given["hidden"] = sizes
        elif len(sizes) != 1:
            raise UserError(f"{cfgmod.setting_name('hidden')} is given once for a {type_} model (use {cfgmod.setting_name('layers')} "
                            f"for depth), found {sizes}")
        else:
            given["hidden"] = sizes[0]
    cfg = cfgmod.from_dict(cls.Config, given, f"model {type_}")
    return {"type": type_, **dataclasses.asdict(cfg)}


def complete_spec(spec: dict, train: dict) -> dict:
    """A new run's model section with the settings a model takes from the training options filled in
    (the transformer's window from ``bptt``), through the class's ``complete(spec, train)`` if it has one."""
    cls = model_class(spec.get("type"))
    return cls.complete(dict(spec), train) if hasattr(cls, "complete") else spec


def build_model(spec: dict, num_words: int, sparse_output: bool = False, counts=None) -> NeuralScorer:
    """Build the model a model section describes, for V = ``num_words``; ``counts`` (training counts
    ``[V]``) reach the models that rank words by frequency (``uses_counts``: adaptive input bands)."""
    if not isinstance(spec, dict):
        raise UserError("config.json: the model section should be a JSON object")
    spec = dict(spec)
    type_ = spec.pop("type", None)
    cls = model_class(type_)
    full = model_spec(type_, **spec)
    full.pop("type")
    cfg = cls.Config(**full)
    try:
        if getattr(cls, "uses_counts", False):
            return cls.from_config(cfg, num_words, sparse_output=sparse_output, counts=counts)
        return cls.from_config(cfg, num_words, sparse_output=sparse_output)
    except ValueError as e:
        raise UserError(f"model {type_}: {e}") from None
