"""Word vectors in memory: the words, their vectors, optional counts; cosine neighbours.

``WordVectors.vectors [V, dim]`` float32, row ``i`` for ``words[i]``; words are in file order,
which for every file we write is by count, descending (the order analogy evaluation relies on to
keep "the most frequent N words").
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError


class WordVectors:
    """An ordered word list with one float32 vector per word."""

    def __init__(self, words: list[str], vectors: np.ndarray, counts: np.ndarray | None = None):
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(words):
            raise ValueError(f"{len(words)} words but vectors of shape {vectors.shape}")
        self.words = list(words)
        self.vectors = vectors
        self.counts = None if counts is None else np.asarray(counts, dtype=np.int64)
        self.index: dict[str, int] = {}
        for i, w in enumerate(self.words):
            self.index.setdefault(w, i)  # a duplicate (possible in others' files) keeps its first row
        self._unit: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.words)

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def unit(self) -> np.ndarray:
        """Rows scaled to unit length ``[V, dim]`` (a zero row stays zero)."""
        if self._unit is None:
            norm = np.linalg.norm(self.vectors, axis=1, keepdims=True)
            self._unit = self.vectors / np.where(norm > 0, norm, 1.0).astype(np.float32)
        return self._unit

    def lookup(self, word: str, lowercase: bool = False) -> int | None:
        """Row of ``word`` (``lowercase``: also try its lower-case form); None when absent (where :meth:`neighbors`
        and :meth:`similarity` refuse a word outside the vocabulary: this is the way to ask)."""
        i = self.index.get(word)
        if i is None and lowercase:
            i = self.index.get(word.lower())
        return i

    def neighbors(self, word: str, n: int = 10) -> list[tuple[str, float]]:
        """The ``n`` words of highest cosine similarity to ``word`` (itself excluded)."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise UserError(f"neighbors: n {n!r}: give a whole number >= 1")
        i = self.lookup(word, lowercase=True)
        if i is None:
            raise UserError(f"{word!r} is not in the vocabulary ({len(self)} words)")
        u = self.unit()
        sims = u @ u[i]
        sims[i] = -np.inf
        n = min(n, len(self) - 1)
        top = np.argpartition(-sims, n)[:n] if n < len(self) - 1 else np.arange(len(self))
        top = top[np.argsort(-sims[top], kind="stable")][:n]
        return [(self.words[j], float(sims[j])) for j in top]

    def similarity(self, a: str, b: str) -> float:
        u = self.unit()
        ia, ib = self.lookup(a, True), self.lookup(b, True)
        if ia is None or ib is None:
            raise UserError(f"{a if ia is None else b!r} is not in the vocabulary")
        return float(u[ia] @ u[ib])
