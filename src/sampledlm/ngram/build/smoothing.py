"""The classic smoothings besides Kneser-Ney: Witten-Bell, Katz (Good-Turing back-off), add-k.

Each returns, per order k, ``(alpha [M_k], gamma [M_{k-1}])`` (order 1: gamma has one
entry, for the empty context) over the raw counts c of :mod:`.counts`; the interpolate stage
(:mod:`.estimate`) turns them into ARPA probabilities. Notation: c(h) = sum_x c(h x) (counts
of h followed by something), N1+(h .) = |{x : c(h x) > 0}|, V = number of predicted words
(``</s>`` and ``<unk>`` included, ``<s>`` excluded); order 0 is the uniform 1/V.

Witten-Bell (interpolated; Witten & Bell 1991, Chen & Goodman eq. 9)::

    p(w|h) = (c(h w) + N1+(h .) p(w|h')) / (c(h) + N1+(h .))

Katz back-off with Good-Turing discounts (Katz 1987; Chen & Goodman eq. 13-14), k <= K = 5::

    d_r = (r*/r - (K+1) n_{K+1}/n_1) / (1 - (K+1) n_{K+1}/n_1),   r* = (r+1) n_{r+1}/n_r
    p(w|h) = d_c c(h w)/c(h)  if c(h w) > 0   else  beta(h) p(w|h')

with d_r = 1 for r > K and beta(h) making p(.|h) sum to one (computed in :mod:`.estimate`).
A context whose extensions all occur more than K times would keep no mass for unseen words
(and give them probability 0); its estimates are scaled by c(h) / (c(h) + N1+(h .)), leaving
Witten-Bell's escape mass for the back-off.
When the counts-of-counts give a d_r outside (0, 1] (small data), K is lowered, and at
K < 2 the order falls back to absolute discounting, d_r = (r - D)/r with D = n1/(n1 + 2 n2).
At the unigram level the discounted mass goes to unseen words uniformly (renormalised when
every word was seen).

Add-k (Lidstone; add-one = Laplace) at the highest order, with no lower-order information::

    p(w|h) = (c(h w) + k) / (c(h) + k V)

so an unseen history gives the uniform 1/V (the lower-order tables hold 1/V).
"""

from __future__ import annotations

import numpy as np

from .counts import NgramCounts


def _raw(counts: NgramCounts, k: int) -> np.ndarray:
    c = counts.orders[k - 1].count.astype(np.float64)
    if k == 1:
        c = c.copy()
        c[counts.bos] = 0.0
    return c


def _ctx(counts: NgramCounts, k: int) -> np.ndarray:
    return counts.orders[k - 1].ctx if k > 1 else np.zeros(len(counts.orders[0]), np.int64)


def witten_bell(counts: NgramCounts, vocab_size: int, **_) -> tuple[list, dict]:
    weights = []
    for k in range(1, counts.order + 1):
        c = _raw(counts, k)
        denom = counts.context_sums(k, c)
        types = counts.context_sums(k, (c > 0).astype(np.float64))
        total = denom + types
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = c / total[_ctx(counts, k)]
            gamma = np.where(total > 0, types / total, 1.0)
        weights.append((np.nan_to_num(alpha), gamma))
    return weights, {}


def good_turing(c: np.ndarray, max_k: int = 5) -> tuple[np.ndarray, dict]:
    """Katz discount ratios d[r] for r = 0..max_k+1 (d[r] = 1 above the cut-off); and what was used."""
    n = np.bincount(c[(c >= 1) & (c <= max_k + 1)].astype(np.int64), minlength=max_k + 2).astype(np.float64)
    for k in range(max_k, 1, -1):
        if np.all(n[1 : k + 2] > 0):
            common = (k + 1) * n[k + 1] / n[1]
            r = np.arange(1, k + 1)
            d_r = ((r + 1) * n[r + 1] / (r * n[r]) - common) / (1 - common) if common < 1 else np.zeros(k)
            if np.all((d_r > 0) & (d_r <= 1)):
                d = np.ones(max_k + 2)
                d[1 : k + 1] = d_r
                d[0] = 0.0
                return d, {"K": k}
    disc = n[1] / (n[1] + 2 * n[2]) if n[1] > 0 and n[2] > 0 else 0.5
    r = np.arange(max_k + 2, dtype=np.float64)
    d = np.where(r > 0, (r - disc) / np.maximum(r, 1), 0.0)
    return d, {"K": 0, "absolute_discount": round(float(disc), 6)}


def katz(counts: NgramCounts, vocab_size: int, katz_k: int = 5, **_) -> tuple[list, dict]:
    weights, info = [], {"good_turing": []}
    for k in range(1, counts.order + 1):
        c = _raw(counts, k)
        d, used = good_turing(c, katz_k)
        info["good_turing"].append(used)
        denom = counts.context_sums(k, c)
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = np.nan_to_num(d[np.minimum(c, katz_k + 1).astype(np.int64)] * c / denom[_ctx(counts, k)])
        if k == 1:  # leftover unigram mass to unseen words (not <s>), or renormalise
            unseen = c == 0
            unseen[counts.bos] = False
            left = 1.0 - alpha.sum()
            if unseen.any():
                alpha[unseen] = left / unseen.sum()
            else:
                alpha /= alpha.sum()
            weights.append((alpha, np.zeros(1)))
        else:  # a context whose extensions all have counts > K keeps no mass for unseen words:
            # give it Witten-Bell's escape mass N1+(h .) / (c(h) + N1+(h .)) by scaling its estimates
            types = counts.context_sums(k, (c > 0).astype(np.float64))
            closed = (denom > 0) & (1.0 - counts.context_sums(k, alpha) < 1e-9)
            scale = np.where(closed, denom / np.maximum(denom + types, 1.0), 1.0)
            weights.append((alpha * scale[_ctx(counts, k)], None))  # None: back-off weights from leftover mass
    return weights, info


def add_k(counts: NgramCounts, vocab_size: int, k: float = 1.0, **_) -> tuple[list, dict]:
    if not k > 0:
        raise ValueError("add-k needs k > 0")
    n = counts.order
    weights = []
    for order in range(1, n + 1):
        m = len(counts.orders[order - 1])
        m_ctx = len(counts.orders[order - 2]) if order > 1 else 1
        if order < n:
            weights.append((np.zeros(m), np.ones(m_ctx)))
            continue
        c = _raw(counts, order)
        denom = counts.context_sums(order, c) + k * vocab_size
        weights.append((c / denom[_ctx(counts, order)], k * vocab_size / denom))
    return weights, {"k": k}
