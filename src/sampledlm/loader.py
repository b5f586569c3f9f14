"""One loader for every model: an ARPA file or a model directory of any family.

    >>> from sampledlm.loader import load_model
    >>> lm = load_model("kn3.arpa.gz")        # n-gram (ARPA text, .gz/.bz2/.xz)
    >>> lm = load_model("runs/gru")           # a neural run directory
    >>> lm = load_model("runs/melm")          # a maximum-entropy model directory
    >>> lm = load_model("kn3.bin")            # a binary n-gram directory (sampledlm ngram build-binary)

Each returns a :class:`sampledlm.lm.LanguageModel`. A directory's ``config.json`` says its family
(:mod:`sampledlm.store`); a file is read as ARPA.
"""

from __future__ import annotations

import os

from .errors import UserError
from .lm import LanguageModel, Mixture


def load_model(path: str, device: str | None = None) -> LanguageModel:
    """The language model stored at ``path`` (see module docstring)."""
    if os.path.isdir(path):
        from .ngram.mapped import is_binary

        if is_binary(path):  # before read_config: the model-directory module imports torch
            from .ngram.lm import ArpaLM

            return ArpaLM.open(path)
        from .store import no_model_here, read_config

        if not os.path.exists(os.path.join(path, "config.json")):
            raise no_model_here(path, "a model directory (a run of train or maxent train, a binary n-gram model) "
                                      "or an ARPA file")
        config, family = read_config(path)
        if family == "neural":
            from .neural.lm import load_neural

            return load_neural(path, config, device=device)
        from .maxent.lm import load_maxent

        return load_maxent(path, config)
    if os.path.isfile(path) or path == "-":
        inside = os.path.dirname(os.path.abspath(path))
        own = path.endswith(".safetensors") or os.path.basename(path) in ("config.json", "vocab.txt")
        if own and os.path.isfile(os.path.join(inside, "config.json")):  # a model directory's own file, not a model
            raise UserError(f"{path}: a file of the model directory {os.path.dirname(path) or '.'}; load the "
                            "directory (the model is all its files)")
        from .ngram.lm import ArpaLM

        return ArpaLM.open(path)
    raise UserError(f"{path}: no such model file or directory")


def load_mixture(paths: list[str], weights: list[float] | None = None, device: str | None = None) -> LanguageModel:
    """One model, or the linear interpolation of several (weights: None = equal, set later by EM)."""
    models = [load_model(p, device=device) for p in paths]
    return models[0] if len(models) == 1 else Mixture(models, weights)
