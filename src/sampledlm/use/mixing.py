"""One model or a linear interpolation of several, with weights given or fitted by EM on held-out text.

    >>> lm = open_models(["gru", "kn5.arpa"], weights="auto", valid="valid.txt")

``weights``: ``None`` or ``"auto"`` (EM on ``valid``, default: the first model's recorded validation
file), or comma-separated numbers, the first model's first (two models: one number ``w`` means
``w, 1 - w``). See :mod:`sampledlm.lm` for the interpolation and its EM.
"""

from __future__ import annotations

from ..data.corpus import load_ids
from ..data.tokenizer import TextOptions
from ..errors import UserError
from ..lm import LanguageModel, Mixture
from ..loader import load_model


def parse_weights(text: str, count: int) -> list[float]:
    """``"0.6,0.4"`` -> ``[0.6, 0.4]``; with two models ``"0.6"`` -> ``[0.6, 0.4]``."""
    try:
        w = [float(x) for x in text.split(",")]
    except ValueError:
        raise UserError(f"--weights {text!r}: give comma-separated numbers or 'auto'") from None
    if len(w) == 1 and count == 2:
        if not 0.0 <= w[0] <= 1.0:
            raise UserError(f"--weights {text}: one number is the first model's weight (the second gets the rest), "
                            "so it lies in [0, 1]")
        w = [w[0], 1.0 - w[0]]
    elif len(w) != count:
        raise UserError(f"--weights {text}: {len(w)} number(s) for {count} models: give one per model (MODEL's "
                        "first)" + (", or one, MODEL's, with two models" if count == 2 else ""))
    return w


def validation_file(lm: LanguageModel) -> str | None:
    """The validation file a model directory recorded at training time, if any (a neural run's ``data.valid``, a
    maximum-entropy model's ``valid_file``)."""
    config = getattr(lm, "config", {}) or {}
    return (config.get("data") or {}).get("valid") or config.get("valid_file")


def set_weights(mix: Mixture, weights: str | None, valid: str | None, name: str = "MODEL") -> str | None:
    """Give ``mix`` its weights (module docstring); returns the file EM read, or None when they were given."""
    if weights is None or weights == "auto":
        vpath = valid or validation_file(mix.models[0])
        if not vpath:
            raise UserError(f"{name}: no validation file recorded; give --interp-valid FILE or --weights")
        opts = TextOptions(**(mix.text_options or {}))
        ids = load_ids(vpath, mix.vocab, opts, cache=False)
        if len(ids) == 0:
            raise UserError(f"{vpath}: no sentences to fit the interpolation weights on (empty file or blank lines "
                            "only); give a held-out text with --interp-valid or the weights with --weights")
        mix.fit_weights(ids)
        return vpath
    mix.weights = mix.check_weights(parse_weights(weights, len(mix.models)))
    return None


def check_weight_source(weights: str | None, valid: str | None) -> None:
    """Weights are given (``--weights W,...``) or fitted on ``--interp-valid`` (``--weights auto``), not both:
    with both, the file would never be read."""
    if valid and weights not in (None, "auto"):
        raise UserError(f"--interp-valid {valid} fits the weights (--weights auto); --weights {weights} gives them: "
                        "give one of the two")


def open_models(paths: list[str], weights: str | None = None, valid: str | None = None,
                batch_size: int | None = None, device: str | None = None) -> LanguageModel:
    """The model at ``paths[0]``, or the interpolation of all of them (module docstring).

    ``batch_size``: the evaluation bunch of every neural component (sentences for recurrent models,
    distinct histories for feed-forward ones; None: their defaults). ``device``: where neural
    components run (None or ``auto``: the GPU when torch sees one).
    """
    if (weights is not None or valid) and len(paths) < 2:
        raise UserError("--weights and --interp-valid need a second model to interpolate with")
    check_weight_source(weights, valid)
    models = [load_model(p, device=device) for p in paths]
    for m in models:
        if batch_size and hasattr(m, "batch_size"):
            m.batch_size = batch_size
    if len(models) == 1:
        return models[0]
    mix = Mixture(models)
    mix.fitted_on = set_weights(mix, weights, valid, paths[0])  # the file EM read (None: weights given)
    return mix


def fitted_weights_note(lm: LanguageModel, paths: list[str]) -> str | None:
    """A line saying which weights EM chose for a mixture :func:`open_models` fitted (None otherwise), for commands
    whose output does not show them (score, generate, rescore, serve), so that a run says what mixture it used."""
    source = getattr(lm, "fitted_on", None)
    if source is None:
        return None
    weights = ", ".join(f"{p} {w:.3f}" for p, w in zip(paths, lm.weights))
    return f"interpolation weights by EM on {source}: {weights}"
