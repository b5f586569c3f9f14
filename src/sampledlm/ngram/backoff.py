"""A back-off ARPA model seen through a neural model's vocabulary: what the ``shortlist`` objective
(Schwenk 2007) asks of the n-gram that covers the words outside its short-list.

    backoff = open_backoff("kn3.arpa", vocab)        # UserError when missing or another vocabulary
    backoff.log_probs(hist, words)                    # ln p(words[i] | hist[i]),  [N]
    backoff.log_mass(hist, member)                    # ln sum_{w: member[w]} p(w | hist[i]),  [N]

``hist [N, order-1]`` holds ids of ``vocab``, oldest first, ``vocab.bos_id`` (= V) for ``<s>``
padding before a sentence's first word (:func:`sampledlm.data.batches.ngram_histories`).
"""

from __future__ import annotations

import os

import numpy as np

from ..data.vocab import BOS, UNK, Vocab
from ..errors import UserError
from .model import LN10, NgramLM


class VocabBackoff:
    """An :class:`NgramLM` queried with the ids of ``vocab`` (the two must hold the same words)."""

    def __init__(self, ngram: NgramLM, vocab: Vocab, path: str = "the back-off model"):
        model_words = set(ngram.words) - {BOS}
        ours = set(vocab.words)
        if model_words - {UNK} != ours - {UNK}:
            extra, missing = sorted(model_words - ours - {UNK}), sorted(ours - model_words - {UNK})
            raise UserError(f"{path}: its vocabulary differs from the model's ({len(missing)} of the model's words "
                            f"missing{' e.g. ' + repr(missing[0]) if missing else ''}, {len(extra)} others"
                            f"{' e.g. ' + repr(extra[0]) if extra else ''}): use the n-gram trained on the same text")
        self.ngram, self.path = ngram, path
        self.map = ngram.map_vocab(vocab)  # [V + 1]: vocab id (and bos_id) -> model id
        self.num_words = len(vocab)

    @property
    def order(self) -> int:
        return self.ngram.order

    def log_probs(self, hist: np.ndarray, words: np.ndarray) -> np.ndarray:
        """``ln p(words[i] | hist[i])``, float64 ``[N]``."""
        return self.ngram.logprob10_ids(self.map[np.asarray(hist, dtype=np.int64)],
                                        self.map[np.asarray(words, dtype=np.int64)]) * LN10

    def log_mass(self, hist: np.ndarray, member: np.ndarray) -> np.ndarray:
        """``ln sum_{w: member[w]} p(w | hist[i])``, float64 ``[N]``; ``member`` bool ``[V]`` over vocab ids."""
        m = np.zeros(self.ngram.width, dtype=bool)
        m[self.map[: self.num_words][np.asarray(member, dtype=bool)]] = True
        return self.ngram.subset_logmass10_ids(self.map[np.asarray(hist, dtype=np.int64)], m) * LN10


def open_backoff(path: str, vocab: Vocab) -> VocabBackoff:
    """Read the ARPA file ``path`` for a model over ``vocab``; a one-line UserError naming the file when
    it is missing, unreadable or over another vocabulary."""
    from .arpa import read_arpa

    if os.path.isdir(path):
        from .mapped import open_binary

        return VocabBackoff(open_binary(path), vocab, path)
    if not os.path.isfile(path):
        raise UserError(f"{path}: back-off n-gram model not found (--backoff; the short-list model needs it)")
    return VocabBackoff(read_arpa(path), vocab, path)
