"""Scorers: models that give a score a_w(h) for any word after any history (see objectives.base).

:func:`build_model` turns the ``"model"`` section of a run's config.json into a model::

    {"type": "ffnn", "order": 3, "embed_dim": 50, "hidden": [200], "direct": false, "deep_output": null, "dropout": 0.0}
    {"type": "gru" | "lstm", "embed_dim": 200, "hidden": 200, "layers": 1, "dropout": 0.0, "proj": null, "tie": false}
"""

from __future__ import annotations

from ..errors import UserError
from .base import NeuralScorer  # noqa: F401
from .ffnn import FFNN
from ..objectives.output import OutputLayer  # noqa: F401
from .rnn import RNNLM

MODEL_TYPES = ("ffnn", "gru", "lstm")

#: every key a model section may hold, with its default
MODEL_DEFAULTS = {
    "ffnn": {"order": 3, "embed_dim": 50, "hidden": [200], "direct": False, "deep_output": None, "dropout": 0.0},
    "gru": {"embed_dim": 200, "hidden": 200, "layers": 1, "dropout": 0.0, "proj": None, "tie": False},
}
MODEL_DEFAULTS["lstm"] = MODEL_DEFAULTS["gru"]


def model_spec(type_: str, **options) -> dict:
    """A complete model section: defaults filled in, unknown keys refused (None values mean 'default')."""
    if type_ not in MODEL_TYPES:
        raise UserError(f"unknown model type {type_!r}; choose from {', '.join(MODEL_TYPES)}")
    defaults = MODEL_DEFAULTS[type_]
    unknown = sorted(k for k, v in options.items() if k not in defaults and v is not None)
    if unknown:
        raise UserError(f"option(s) {', '.join(unknown)} do not apply to model {type_!r}")
    spec = {"type": type_}
    for k, d in defaults.items():
        v = options.get(k)
        spec[k] = d if v is None else v
    if type_ == "ffnn":
        spec["hidden"] = [int(h) for h in (spec["hidden"] if isinstance(spec["hidden"], (list, tuple)) else [spec["hidden"]])]
    return spec


def build_model(spec: dict, num_words: int, sparse_output: bool = False) -> NeuralScorer:
    """Build the model a (complete) model section describes, for V = ``num_words``."""
    spec = dict(spec)
    type_ = spec.pop("type", None)
    full = model_spec(type_, **spec)
    full.pop("type")
    try:
        if type_ == "ffnn":
            return FFNN(num_words, order=full["order"], embed_dim=full["embed_dim"], hidden=tuple(full["hidden"]),
                        direct=full["direct"], deep_output=full["deep_output"], dropout=full["dropout"],
                        sparse_output=sparse_output)
        return RNNLM(num_words, cell=type_, sparse_output=sparse_output, **full)
    except ValueError as e:
        raise UserError(f"model {type_}: {e}") from None
