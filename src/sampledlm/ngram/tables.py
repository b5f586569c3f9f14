"""Sorted n-gram tables: the one data structure that counting, estimation and query share.

Words are integer ids ``0 .. W-1`` (``W`` includes ``<s>``). An n-gram of order ``k`` is
named by its *index* in the order-``k`` table:

* order 1: the index is the word id itself (the unigram table has all ``W`` words);
* order ``k >= 2``: the table is a sorted int64 array of keys ``ctx * W + w``, where ``ctx``
  is the index of the (k-1)-word prefix in the order-(k-1) table and ``w`` the last word.

Because every prefix index is itself ordered by (its prefix, its last word), a table sorted
by key is sorted lexicographically by (w_1, ..., w_k): the layout of KenLM's sorted-array
trie, built here with ``np.unique`` / ``np.searchsorted`` instead of pointers. Looking up an
n-gram is a chain of ``k - 1`` binary searches; all lookups are vectorised over a batch.
Keys fit in int64 while ``M_{k-1} * W < 2^63`` (e.g. 10^12 prefixes x 10^6 words).
"""

from __future__ import annotations

import numpy as np

def lookup(keys: np.ndarray, ctx: np.ndarray, word: np.ndarray, width: int) -> np.ndarray:
    """Indices of the n-grams ``(ctx, word)`` in the sorted ``keys`` of one order; -1 where absent.

    ``ctx`` [N] int64 (indices into the lower order, -1 = absent prefix), ``word`` [N] int64.
    """
    out = np.full(len(ctx), -1, dtype=np.int64)
    if len(keys) == 0:
        return out
    ok = ctx >= 0
    q = ctx[ok] * width + word[ok]
    if len(q) > 4096:  # searching sorted needles walks the table in order: 2-3x faster on large tables
        by = np.argsort(q, kind="stable")
        pos = np.empty(len(q), dtype=np.int64)
        pos[by] = np.searchsorted(keys, q[by])
    else:
        pos = np.searchsorted(keys, q)
    pos_c = np.minimum(pos, len(keys) - 1)
    hit = keys[pos_c] == q
    out[np.flatnonzero(ok)[hit]] = pos_c[hit]
    return out


def lookup_grams(keys_by_order: list[np.ndarray], grams: np.ndarray, width: int) -> np.ndarray:
    """Index of each row of ``grams`` [N, k] (oldest word first) in the order-k table; -1 where absent.

    ``keys_by_order[j]`` is the key array of order ``j + 1`` (entry 0 is unused: unigrams are ids).
    """
    grams = np.asarray(grams, dtype=np.int64)
    idx = grams[:, 0].copy()
    for j in range(1, grams.shape[1]):
        idx = lookup(keys_by_order[j], idx, grams[:, j], width)
    return idx


def context_and_gram_indices(keys_by_order: list[np.ndarray], hist: np.ndarray, word: np.ndarray,
                             width: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """For every order, the indices of the history suffix and of the n-gram ending in ``word``.

    ``hist`` [N, h] (oldest first), ``word`` [N]. Returns ``(ctx, gram)``, two lists indexed by
    ``j = 0 .. min(h, n-1)``: ``ctx[j]`` = index of the last ``j`` history words in the order-j table
    (``j = 0``: the empty context, all 0), ``gram[j]`` = index of (those words, word) in the
    order-(j+1) table; -1 where absent. Costs O(n^2) binary searches per row.
    """
    n = len(keys_by_order)
    word = np.asarray(word, dtype=np.int64)
    hist = np.asarray(hist, dtype=np.int64)
    if hist.ndim != 2:
        hist = hist.reshape(len(word), -1)
    h = min(hist.shape[1], n - 1)
    ctx = [np.zeros(len(word), dtype=np.int64)]
    gram = [word.copy()]
    for j in range(1, h + 1):
        c = lookup_grams(keys_by_order, hist[:, hist.shape[1] - j:], width)
        ctx.append(c)
        gram.append(lookup(keys_by_order[j], c, word, width))
    return ctx, gram


# --- trie-style lookups: each context's n-grams as a range (compiled) -------------------------------------
def context_starts(keys: np.ndarray, num_contexts: int, width: int) -> np.ndarray:
    """``starts [num_contexts + 1]``: the n-grams whose context has index ``c`` are ``keys[starts[c]:starts[c+1]]``
    (the pointer array of KenLM's trie, built from the sorted keys with one vectorised search)."""
    return np.searchsorted(keys, np.arange(num_contexts + 1, dtype=np.int64) * width).astype(np.int64)
