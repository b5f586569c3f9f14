"""Stages 2 and 3 for Kneser-Ney: adjust counts, then discount (Chen & Goodman 1998; KenLM's lmplz).

**Adjust.** Lower orders are estimated from *continuation* counts, how many distinct words
precede an n-gram, not how often it occurs (Kneser & Ney 1995)::

    a(w_1..w_k) = c(w_1..w_k)            k = N (highest order), or w_1 = <s>
                = N1+(. w_1..w_k)          otherwise: |{v : c(v w_1..w_k) > 0}|

(``<s>`` can never be preceded, so n-grams that start with it keep their raw counts; the
unigram ``<s>`` gets a = 0: it is never predicted.)

**Discount.** From the counts-of-counts n_r of the adjusted counts of each order
(Chen & Goodman eq. 26; modified KN)::

    Y = n1 / (n1 + 2 n2)
    D1 = 1 - 2 Y n2/n1,   D2 = 2 - 3 Y n3/n2,   D3+ = 3 - 4 Y n4/n3

or one discount per order ``D = Y`` (original interpolated KN). When a count-of-count is zero
or a discount falls outside [0, r] (small or artificial data), the order falls back to
KenLM's ``--discount_fallback`` values (0.5, 1, 1.5) and the model records it.

**Initial probabilities and back-off mass** for a context h with extensions (eq. 17/19)::

    alpha(h w) = (a(h w) - D(a(h w))) / sum_x a(h x)
    gamma(h)   = (D1 N1(h .) + D2 N2(h .) + D3+ N3+(h .)) / sum_x a(h x)

where N_r(h .) counts the words x with a(h x) = r (r = 3: at least 3). The interpolation
stage then forms p(w|h) = alpha(h w) + gamma(h) p(w|h') (:mod:`.estimate`).
"""

from __future__ import annotations

import numpy as np

from .counts import NgramCounts

FALLBACK = (0.5, 1.0, 1.5)


def adjusted_counts(counts: NgramCounts) -> list[np.ndarray]:
    """a(.) for every order (see module docstring); float64 arrays over each order's n-grams."""
    n = counts.order
    out = []
    for k in range(1, n + 1):
        o = counts.orders[k - 1]
        if k == n:
            a = o.count.copy()
        else:
            cont = np.bincount(counts.orders[k].suffix, minlength=len(o))
            a = np.where(o.first == counts.bos, o.count, cont)
        if k == 1:
            a[counts.bos] = 0
        out.append(a.astype(np.float64))
    return out


def counts_of_counts(a: np.ndarray, upto: int = 4) -> np.ndarray:
    """n_r = number of n-grams with adjusted count r, r = 0..upto (n_0 is unused)."""
    r = a[(a >= 1) & (a <= upto)].astype(np.int64)
    return np.bincount(r, minlength=upto + 1)


def discounts(a: np.ndarray, modified: bool = True) -> tuple[np.ndarray, bool]:
    """``(D, fell_back)``: D[r] for r = 0..3 (D[0] = 0; D[3] applies to counts >= 3)."""
    return discounts_from_n(counts_of_counts(a), modified)


def discounts_from_n(n: np.ndarray, modified: bool = True) -> tuple[np.ndarray, bool]:
    """:func:`discounts` from the counts-of-counts n_0..n_4 (what a streaming pass collects)."""
    n = np.asarray(n).astype(np.float64)
    if modified:
        if np.any(n[1:5] == 0):
            return np.array((0.0, *FALLBACK)), True
        y = n[1] / (n[1] + 2 * n[2])
        d = np.array([0.0] + [r - (r + 1) * y * n[r + 1] / n[r] for r in (1, 2, 3)])
    else:
        if n[1] == 0 or n[2] == 0:
            return np.array((0.0, *FALLBACK)), True
        y = n[1] / (n[1] + 2 * n[2])
        d = np.array([0.0, y, y, y])
    if np.any(d[1:] < 0) or np.any(d[1:] > np.arange(1, 4)):
        return np.array((0.0, *FALLBACK)), True
    return d, False


def discounted_weights(counts: NgramCounts, k: int, a: np.ndarray, d: np.ndarray,
                       pruned: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha [M_k], gamma [M_{k-1}])`` for absolute discounting of ``a`` with D[min(a, 3)].

    Contexts without extensions get gamma = 1 (all mass to the lower order). ``pruned`` (bool [M_k]):
    n-grams that will be dropped; their whole count goes to gamma (lmplz ``--prune``, :mod:`.prune`).
    """
    bucket = np.minimum(a, 3).astype(np.int64)
    denom = counts.context_sums(k, a)
    if pruned is None:
        mass = counts.context_sums(k, d[bucket] * (a > 0))
    else:
        mass = counts.context_sums(k, np.where(pruned, a, d[bucket] * (a > 0)))
    ctx = counts.orders[k - 1].ctx if k > 1 else np.zeros(len(a), np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = np.where(a > 0, (a - d[bucket]) / denom[ctx], 0.0)
        gamma = np.where(denom > 0, mass / denom, 1.0)
    return alpha, gamma


def kneser_ney(counts: NgramCounts, modified: bool = True,
               pruned: list | None = None) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict]:
    """Interpolated (modified) Kneser-Ney: per order ``(alpha, gamma)`` and a report of the discounts.

    ``pruned``: per order, None or a bool mask of the n-grams count pruning drops (:mod:`.prune`)."""
    adj = adjusted_counts(counts)
    weights, info = [], {"discounts": [], "fallback_orders": []}
    for k, a in enumerate(adj, 1):
        d, fell_back = discounts(a, modified)
        if fell_back:
            info["fallback_orders"].append(k)
        info["discounts"].append([round(float(x), 6) for x in d[1:]])
        weights.append(discounted_weights(counts, k, a, d, pruned[k - 1] if pruned else None))
    return weights, info
