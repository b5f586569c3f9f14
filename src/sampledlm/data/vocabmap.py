"""How a run started from another (``--init-from RUN``, every train command) meets its source's vocabulary.

The new run reads its text with the source's words (the same vocabulary) or with a new vocabulary: then the two
meet by word, not by id. :class:`VocabMap` says which words they share (their ids on both sides), what
``config.json`` records of the origin (:meth:`VocabMap.origin`), and :func:`announce` the one line every train
command prints about it. Any vocabulary with ``words`` (in id order) and an ``index`` (word -> id) will do: the
LM's :class:`~sampledlm.data.vocab.Vocab`, the embeddings' ``EmbedVocab``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class VocabMap:
    """The words a new vocabulary shares with its source's: ``source[k]`` (an id there) is ``target[k]`` here."""

    same: bool  # the same words in the same order
    source: np.ndarray  # [S] int64, ids in the source vocabulary of the shared words (in the new vocabulary's order)
    target: np.ndarray  # [S] int64, their ids in the new vocabulary
    source_size: int
    size: int

    @classmethod
    def between(cls, src_vocab, vocab) -> "VocabMap":
        shared = [w for w in vocab.words if w in src_vocab.index]
        return cls(list(src_vocab.words) == list(vocab.words),
                   np.array([src_vocab.index[w] for w in shared], dtype=np.int64),
                   np.array([vocab.index[w] for w in shared], dtype=np.int64), len(src_vocab), len(vocab))

    @property
    def shared(self) -> int:
        return len(self.target)

    def id_map(self) -> np.ndarray:
        """``[source_size]`` int64: each source id's id in the new vocabulary, -1 for a word it lacks."""
        out = np.full(self.source_size, -1, dtype=np.int64)
        out[self.source] = self.target
        return out

    def origin(self, where: str) -> dict:
        """What ``config.json`` records of the source: its path, its vocabulary's size, how the vocabularies meet."""
        return {"run": os.path.abspath(where), "vocabulary": "same" if self.same else "mapped",
                "source_words": self.source_size, "shared_words": self.shared, "new_words": self.size - self.shared}


def origin(where: str, src_vocab, vocab) -> dict:
    """:meth:`VocabMap.origin` of ``src_vocab`` and ``vocab``."""
    return VocabMap.between(src_vocab, vocab).origin(where)


def announce(where: str, origin: dict) -> str:
    """The line a train command prints on standard error when it starts from ``where`` (``origin``: the record)."""
    return (f"starting from {where}: vocabulary {origin['vocabulary']} ({origin['shared_words']:,} words shared, "
            f"{origin['new_words']:,} new)")
