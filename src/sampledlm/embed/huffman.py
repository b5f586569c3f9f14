"""The Huffman tree of hierarchical softmax (Morin & Bengio 2005; Mikolov et al. 2013).

Words are the leaves of a binary Huffman tree built from their counts, so frequent words get short
codes and the expected path length is minimal: training a word costs ``O(len(code))`` dot products
instead of ``O(V)``. The ``V - 1`` inner nodes each own an output vector; ``P(w | l1) =
prod_j sigma((1 - 2 code_j) u_{point_j} . l1)``, which sums to one over the leaves.

:func:`huffman_codes` returns, for each word ``w``, its ``code`` (bits from the root down: 0 = the
first child, 1 = the second) and ``points`` (the inner nodes from the root down, numbered
``0 .. V - 2``; the root is ``V - 2``), padded into ``[V, L]`` arrays, ``L`` the longest code.
Built with a heap exactly as gensim builds it: the leaves heapified in vocabulary order, the two
smallest popped and merged, items compared by count alone, so equal counts come out in the heap's
own order. The tree is a deterministic function of the counts in vocabulary order, and for
gensim's vocabulary order (:mod:`.vocab`) it is gensim's tree node for node. Which words of equal count
become siblings matters to the vectors: see :mod:`.vocab`.
"""

from __future__ import annotations

import heapq

import numpy as np


class _Item:
    """A node on the heap: ordered by count alone (as gensim's ``Heapitem``)."""

    __slots__ = ("count", "index")

    def __init__(self, count: int, index: int):
        self.count, self.index = count, index

    def __lt__(self, other: "_Item") -> bool:
        return self.count < other.count


def huffman_codes(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(codes [V, L] uint8, points [V, L] int32, lengths [V] int32)`` for word ``counts [V]``.

    With a single word the tree has no inner node: its code is empty."""
    counts = np.asarray(counts, dtype=np.int64)
    v = len(counts)
    if v == 0:
        raise ValueError("no words to build a Huffman tree from")
    heap = [_Item(int(c), i) for i, c in enumerate(counts)]
    heapq.heapify(heap)
    parent = np.full(2 * v - 1, -1, dtype=np.int64)
    bit = np.zeros(2 * v - 1, dtype=np.uint8)
    for node in range(v, 2 * v - 1):
        a = heapq.heappop(heap)
        b = heapq.heappop(heap)
        parent[a.index], parent[b.index] = node, node
        bit[b.index] = 1
        heapq.heappush(heap, _Item(a.count + b.count, node))
    lengths = np.zeros(v, dtype=np.int32)
    paths = []
    for w in range(v):
        code, pts = [], []
        n = w
        while parent[n] >= 0:
            code.append(bit[n])
            pts.append(parent[n] - v)
            n = parent[n]
        paths.append((code[::-1], pts[::-1]))
        lengths[w] = len(code)
    L = max(1, int(lengths.max()))
    codes = np.zeros((v, L), dtype=np.uint8)
    points = np.zeros((v, L), dtype=np.int32)
    for w, (code, pts) in enumerate(paths):
        codes[w, : len(code)] = code
        points[w, : len(pts)] = pts
    return codes, points, lengths
