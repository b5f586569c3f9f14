"""A maximum-entropy model directory as a :class:`~sampledlm.lm.LanguageModel`.

    >>> from sampledlm.loader import load_model
    >>> lm = load_model("runs/melm")          # -> MaxEntLM
    >>> lm.perplexity(ids)                    # exact, normalised (every word and </s> counted)

``logprobs`` is the model's exact evaluation (:meth:`MaxEntModel.log_prob_targets`: the sparse
normaliser over all V words, softmax or renormalised sigmoids). n-gram and skip features never
look past a sentence start; trigger windows do (running text) unless ``independent=True``.
Both the current directory format and the legacy ``sampledlm-maxent-1`` one load
(see :mod:`sampledlm.maxent.scorer`).
"""

from __future__ import annotations

import numpy as np

from ..data.vocab import Vocab
from ..errors import UserError
from ..lm import LanguageModel
from .scorer import MaxEntModel

#: positions scored per call of the kernel (bounds the memory of the active-feature arrays)
CHUNK = 1 << 20


class MaxEntLM(LanguageModel):
    """A :class:`MaxEntModel` with its vocabulary and the text options of its training text."""

    family = "maxent"

    def __init__(self, model: MaxEntModel, vocab: Vocab, text_options: dict | None = None):
        if len(vocab) != model.num_words:
            raise ValueError(f"vocabulary of {len(vocab)} words for a model of {model.num_words}")
        self.model = model
        self.vocab = vocab
        self.text_options = text_options if text_options is not None else model.text_options

    @property
    def context_length(self) -> int | None:
        """The most words a feature looks back (2 for Feat-I's trigrams, 3 with skip-trigrams), so that a lattice
        is expanded exactly as for an n-gram; None with trigger features, whose window reaches back further."""
        spec = self.model.features.spec
        return None if spec.has_triggers else spec.max_back

    @property
    def crosses_sentences(self) -> bool:
        """Trigger windows reach back across sentence starts in running text."""
        return "trigger" in self.model.features.spec.names

    def logprobs(self, ids: np.ndarray, *, independent: bool = False) -> np.ndarray:
        ids = np.asarray(ids)
        if len(ids) == 0:
            return np.zeros(0)
        if not np.issubdtype(ids.dtype, np.integer) or ids.ndim != 1:
            raise UserError("an id stream is a vector of integers")
        if int(ids.min()) < 0 or int(ids.max()) >= self.model.num_words:
            raise UserError(f"id stream holds ids outside the model's vocabulary (0..{self.model.num_words - 1})")
        targets = ids.astype(np.int64)
        out = np.empty(len(ids))
        for lo in range(0, len(ids), CHUNK):
            at = np.arange(lo, min(lo + CHUNK, len(ids)), dtype=np.int64)
            ctx = self.model.context(ids, at, independent=independent)
            out[lo:lo + len(at)] = self.model.log_prob_targets(ctx, targets[at])
        return out

    def describe(self) -> str:
        m = self.model
        kind = "binarized" if m.objective == "binary" else "standard"
        feats = ",".join(n for n in m.features.spec.names if n != "unigram") or "unigram"
        return f"maxent LM ({kind}, {feats}; {m.features.num_pairs:,} pairs), V={len(self.vocab)}"


def load_maxent(model_dir: str, config: dict) -> MaxEntLM:
    """The maxent model in ``model_dir``; ``config`` from :func:`sampledlm.store.read_config`."""
    import os

    try:
        model, vocab = MaxEntModel.from_config(model_dir, config)
    except UserError as e:  # a field of config.json the features or the objective refuse: name the file
        if str(e).startswith(model_dir):
            raise
        raise UserError(f"{os.path.join(model_dir, 'config.json')}: {e}") from None
    lm = MaxEntLM(model, vocab)
    lm.config = config  # what a mixture's --weights auto reads its validation file from, as a neural run's
    return lm
