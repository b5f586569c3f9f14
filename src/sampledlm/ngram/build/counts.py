"""Stage 1, count: every n-gram of orders 1..N in an id stream, with raw counts.

Each sentence of the stream (see :mod:`sampledlm.data.corpus`) is read as ``<s> w_1 ... w_m </s>``
with ONE ``<s>`` (KenLM's and SRILM's convention). The order-k table holds every k-gram
that occurs inside a padded sentence; so near a sentence start the n-grams are shorter and
begin with ``<s>`` (``<s> w_1`` is a bigram, ``<s> w_1 w_2`` a trigram).

Counting is vectorised over the stream: the k-gram ending at padded position ``j`` is the
key ``index_{k-1}(j-1) * W + w_j`` (see :mod:`.tables`), and sorting those keys (:func:`group_keys`) gives
the sorted order-k table, its raw counts and, for every position, the k-gram's index. No
Python dictionaries of tuples; memory is a few int64 arrays of the stream's length per order.

For each order the tables keep (all int64 arrays over the order's n-grams):

* ``keys``   sorted ``ctx * W + word`` (order 1: ``arange(W)``)
* ``ctx``    index of the (k-1)-word prefix in the order-(k-1) table
* ``suffix`` index of the (k-1)-word suffix (w_2 .. w_k) in the order-(k-1) table
* ``first``  the first word (used to spot n-grams that begin with ``<s>``)
* ``count``  raw count c(w_1 .. w_k)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...data.vocab import EOS_ID
from ...errors import UserError


def group_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index=True, return_inverse=True, return_counts=True)``, the same four
    arrays, about 3x faster: one unstable argsort (numpy's SIMD sort for 64-bit integers, where the
    stable sort that ``return_index`` makes ``np.unique`` use has none), each group's first occurrence
    taken as the smallest position in it."""
    n = len(keys)
    if n == 0:
        e = np.zeros(0, np.int64)
        return keys[:0], e, e, e
    perm = np.argsort(keys, kind="quicksort")
    ks = keys[perm]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(ks[1:], ks[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    inverse = np.empty(n, dtype=np.int64)
    inverse[perm] = np.cumsum(new) - 1
    count = np.diff(np.append(starts, n))
    return ks[starts], np.minimum.reduceat(perm, starts), inverse, count


@dataclass
class OrderCounts:
    keys: np.ndarray
    ctx: np.ndarray
    suffix: np.ndarray
    first: np.ndarray
    count: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class NgramCounts:
    """Raw counts of orders 1..N; ``orders[k-1]`` is the order-k table; ``width`` = W (words incl. ``<s>``)."""

    orders: list[OrderCounts]
    width: int
    bos: int

    @property
    def order(self) -> int:
        return len(self.orders)

    @property
    def keys(self) -> list[np.ndarray]:
        return [o.keys for o in self.orders]

    def context_sums(self, k: int, values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` (one per order-k n-gram) over each context: [M_{k-1}] (k = 1: [1])."""
        if k == 1:
            return np.array([values.sum()], dtype=np.float64)
        return np.bincount(self.orders[k - 1].ctx, weights=values, minlength=len(self.orders[k - 2])).astype(np.float64)


def pad_stream(ids: np.ndarray, bos: int, eos: int = EOS_ID) -> tuple[np.ndarray, np.ndarray]:
    """Insert ``<s>`` before every sentence: ``(padded ids, position in padded sentence)``, int64.

    Position 0 is the ``<s>``; a stream that does not end with ``</s>`` gets one appended.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) and ids[-1] != eos:
        ids = np.concatenate([ids, [eos]])
    starts = np.concatenate([[0], np.flatnonzero(ids[:-1] == eos) + 1]) if len(ids) else np.zeros(0, np.int64)
    padded = np.insert(ids, starts, bos)
    new_starts = starts + np.arange(len(starts))
    is_start = np.zeros(len(padded), dtype=bool)
    is_start[new_starts] = True
    idx = np.arange(len(padded), dtype=np.int64)
    pos = idx - np.maximum.accumulate(np.where(is_start, idx, 0))
    return padded, pos


def count_ngrams(ids: np.ndarray, width: int, order: int, bos: int) -> NgramCounts:
    """Count all n-grams of orders 1..``order`` in the id stream ``ids`` (see module docstring)."""
    padded, pos = pad_stream(ids, bos)
    uni = np.bincount(padded, minlength=width).astype(np.int64)
    all_words = np.arange(width, dtype=np.int64)
    orders = [OrderCounts(all_words, np.zeros(width, np.int64), np.zeros(width, np.int64), all_words, uni)]
    index = padded  # index of the (k-1)-gram ending at each position (-1: none)
    for k in range(2, order + 1):
        at = np.flatnonzero(pos >= k - 1)
        keys = index[at - 1] * width + padded[at]
        uniq, first_at, inverse, count = group_keys(keys)
        ctx = uniq // width
        suffix = index[at[first_at]]
        nxt = np.full(len(padded), -1, dtype=np.int64)
        nxt[at] = inverse.reshape(-1)
        orders.append(OrderCounts(uniq, ctx, suffix, orders[-1].first[ctx], count.astype(np.int64)))
        index = nxt
    return NgramCounts(orders, width, bos)


def check_order_supported(sizes: list[int], order: int) -> None:
    """Refuse an order the text cannot support: ``sizes[k-1]`` n-grams counted of order k, and one of them is 0
    (every sentence shorter than k - 2 words), so that the estimate of that order would have nothing to discount."""
    for k, n in enumerate(sizes[1:], start=2):
        if n == 0:
            raise UserError(f"--order {order}: the training text has no {k}-grams (its longest sentence has {k - 3} "
                            f"words, {k - 1} tokens with <s> and </s>); use --order {k - 1} or less")
