"""Jelinek-Mercer smoothing: linear interpolation of maximum-likelihood estimates, weights tuned on held-out text.

Recursively (Jelinek & Mercer 1980; Chen & Goodman eq. 4), with order 0 the uniform 1/V::

    p_k(w | h) = lambda_{k,b(h)} c(h w)/c(h) + (1 - lambda_{k,b(h)}) p_{k-1}(w | h')

where c(h) = sum_x c(h x), and a history never seen at order k (c(h) = 0) passes straight
to order k-1. The weights are shared within buckets b(h) = min(floor(log2 c(h)), 15) of the
context count (Bahl et al. 1983; Chen & Goodman bucket by count too), so a well-observed
history trusts its own ML estimate more.

The lambdas maximise the likelihood of the validation stream by EM ("deleted
interpolation", Baum-Welch on the nested mixture). For each held-out token, top order down,
with m_N = 1 the share of the token that reaches order k::

    r_k     = lambda ML_k / p_k          (posterior that order k's ML term produced it)
    num_kb += m_k r_k,   den_kb += m_k,   m_{k-1} = m_k (1 - r_k)

and lambda_kb = num_kb / den_kb. Every step raises the held-out likelihood; we stop when the
relative gain is below 1e-7 or after 200 iterations.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from .counts import NgramCounts
from ..tables import context_and_gram_indices

BUCKETS = 16


def _levels(counts: NgramCounts, valid_ids: np.ndarray):
    """Per order: (ML of each held-out token [N], bucket [N] (-1: context unseen)); and per-order tables."""
    from ...data.batches import ngram_histories, sentence_positions  # lazily: batching imports torch
    ids = np.asarray(valid_ids)
    pos = sentence_positions(ids)
    n = counts.order
    hist = ngram_histories(ids, pos, n, counts.bos)
    ctx, gram = context_and_gram_indices(counts.keys, hist, ids.astype(np.int64), counts.width)
    ml, bucket, per_order = [], [], []
    for k in range(1, n + 1):
        c = counts.orders[k - 1].count.astype(np.float64)
        if k == 1:
            c = c.copy()
            c[counts.bos] = 0.0
        denom = counts.context_sums(k, c)
        b_ctx = np.where(denom > 0, np.minimum(np.floor(np.log2(np.maximum(denom, 1))), BUCKETS - 1), -1).astype(np.int64)
        if k == 1:
            b_ctx[:] = np.where(denom > 0, 0, -1)
        per_order.append((c, denom, b_ctx))
        cx, g = ctx[k - 1], gram[k - 1]
        seen = cx >= 0
        b = np.full(len(ids), -1, dtype=np.int64)
        b[seen] = b_ctx[cx[seen]]
        m = np.zeros(len(ids))
        hit = (g >= 0) & (b >= 0)
        m[hit] = c[g[hit]] / denom[cx[hit]]
        ml.append(m)
        bucket.append(b)
    return ml, bucket, per_order


def _mix(ml, bucket, lam, vocab_size):
    """p_k for every order (list, [N] each), bottom-up."""
    p = np.full(len(ml[0]), 1.0 / vocab_size)
    ps = []
    for k in range(len(ml)):
        b = bucket[k]
        use = b >= 0
        l = np.where(use, lam[k][np.maximum(b, 0)], 0.0)
        p = l * ml[k] + (1 - l) * p
        ps.append(p)
    return ps


def tune_lambdas(ml, bucket, vocab_size: int, iters: int = 200, tol: float = 1e-7) -> tuple[list[np.ndarray], float]:
    """EM for the interpolation weights (see module docstring); returns (lambdas, held-out mean ln p)."""
    n = len(ml)
    lam = [np.full(BUCKETS, 0.5) for _ in range(n)]
    prev = -np.inf
    ll = prev
    for _ in range(iters):
        ps = _mix(ml, bucket, lam, vocab_size)
        ll = float(np.mean(np.log(ps[-1])))
        if ll - prev < tol * abs(ll):
            break
        prev = ll
        mass = np.ones(len(ml[0]))
        for k in range(n - 1, -1, -1):
            b = bucket[k]
            use = b >= 0
            l = np.where(use, lam[k][np.maximum(b, 0)], 0.0)
            r = np.where(use, l * ml[k] / ps[k], 0.0)
            num = np.bincount(b[use], weights=(mass * r)[use], minlength=BUCKETS)
            den = np.bincount(b[use], weights=mass[use], minlength=BUCKETS)
            lam[k] = np.where(den > 0, num / np.maximum(den, 1e-300), lam[k])
            lam[k] = np.clip(lam[k], 1e-6, 1 - 1e-6)
            mass = mass * (1 - r)
    return lam, ll


def jelinek_mercer(counts: NgramCounts, vocab_size: int, valid_ids=None, **_) -> tuple[list, dict]:
    if valid_ids is None or len(valid_ids) == 0:
        raise UserError("Jelinek-Mercer smoothing tunes its interpolation weights on held-out text: "
                        + ("give a validation file (--valid)" if valid_ids is None
                           else "the validation text (--valid) holds no words"))
    if np.asarray(valid_ids).max() >= vocab_size:
        raise ValueError("validation ids outside the vocabulary")
    ml, bucket, per_order = _levels(counts, valid_ids)
    lam, ll = tune_lambdas(ml, bucket, vocab_size)
    weights = []
    for k in range(1, counts.order + 1):
        c, denom, b_ctx = per_order[k - 1]
        lam_ctx = np.where(b_ctx >= 0, lam[k - 1][np.maximum(b_ctx, 0)], 0.0)
        ctx = counts.orders[k - 1].ctx if k > 1 else np.zeros(len(c), np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = np.nan_to_num(lam_ctx[ctx] * c / denom[ctx])
        weights.append((alpha, 1.0 - lam_ctx))
    info = {"lambdas": [[round(float(x), 4) for x in l] for l in lam], "valid_mean_lnp": ll}
    return weights, info
