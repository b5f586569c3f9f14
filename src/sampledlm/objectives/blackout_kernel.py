"""The compiled loop of BlackOut's loss (numba): the loss and its gradient in four passes over each example's
scores, in a module of its own so that numba is imported only when BlackOut trains on the CPU.

The torch form (:class:`sampledlm.objectives.nce.BlackOutLoss`) makes about fifteen passes over the ``[N, S]``
scores, each through a new tensor: the subtraction of log q, the mask, the log-sum-exp, ``exp``, ``expm1`` and
both branches of the ``log(1 - p)``. On the PTB GRU with 1,000 negatives that was a fifth of a step.
"""

from __future__ import annotations

import math

import numba
import numpy as np

CAP = -1e-7  # x = l_d - log Z is capped here, as :func:`sampledlm.objectives.nce.log1mexp` caps it


@numba.njit(inline="always")
def _log1m(p):
    """``log(1 - p)`` for ``0 <= p <= 1/2``: its series below 1/64 (four terms: error under p^5 / 5 < 1e-9 p),
    ``log1p`` above (most negatives hold a tiny share of Z, and the series is a few multiply-adds)."""
    if p < 0.015625:
        return -p * (1.0 + p * (0.5 + p * (0.33333334 + p * 0.25)))
    return math.log1p(-p)


# fast math without its no-infinities flag: a negative not kept is -inf, and exp(-inf) must be 0
@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"nsz", "arcp", "contract", "afn", "reassoc"})
def loss_and_grads(l_true, scores, logq, keep, has_keep, loss, g_true, g_neg, r):
    """BlackOut's per-example loss and its gradient (the formulas of ``BlackOutLoss``), for each example ``i``:

    ``l_d = scores[i, d] - logq[0 or i, d]`` over the kept negatives d (``keep[i, d]`` when ``has_keep``),
    ``log Z = logsumexp(l_true[i], l_d)``, ``p_d = exp(l_d - log Z)``, ``r_d = p_d / (1 - p_d)``, ``b = sum_d r_d``:

    - ``loss[i] = log Z - l_true[i] - sum_d log(1 - p_d)``;
    - ``g_neg[i, d] = p_d + r_d - p_d b`` (0 where d is not kept), ``g_true[i] = p_y - 1 - p_y b``.

    float32 arrays in, float32 out, sums in float64. ``logq`` is ``[1, S]`` (shared negatives) or ``[N, S]``;
    ``r`` a scratch row of ``S`` floats. ``g_neg`` first holds ``l_d`` (-inf where not kept), then ``p_d``."""
    n, s = scores.shape
    shared = logq.shape[0] == 1
    ninf = np.float32(-np.inf)
    for i in range(n):
        qi = 0 if shared else i
        top = l_true[i]
        for d in range(s):
            v = scores[i, d] - logq[qi, d]
            if has_keep and not keep[i, d]:
                v = ninf
            g_neg[i, d] = v
            top = max(top, v)
        total = 0.0
        for d in range(s):
            e = math.exp(g_neg[i, d] - top)
            g_neg[i, d] = e
            total += e
        e_true = math.exp(l_true[i] - top)
        total += e_true
        log_z = top + math.log(total)
        inv = np.float32(1.0 / total)
        neg = 0.0
        b = 0.0
        for d in range(s):
            p = g_neg[i, d] * inv
            if p <= 0.5:
                neg += _log1m(p)
                rd = p / (np.float32(1.0) - p)
            else:  # rare: x = l_d - log Z near 0, 1 - p by expm1 from x itself
                x = np.float32(scores[i, d] - logq[qi, d] - log_z)
                one_minus = np.float32(-math.expm1(min(x, CAP)))
                neg += math.log(one_minus)
                rd = np.float32(0.0) if x >= CAP else p / one_minus  # no gradient through the cap
            r[d] = rd
            g_neg[i, d] = p
            b += rd
        p_true = e_true / total
        loss[i] = log_z - l_true[i] - neg
        g_true[i] = p_true - 1.0 - p_true * b
        scale = np.float32(1.0 - b)
        for d in range(s):
            g_neg[i, d] = g_neg[i, d] * scale + r[d]


def compiled_loss(l_true: np.ndarray, scores: np.ndarray, logq: np.ndarray, keep: np.ndarray | None):
    """``(loss [N], g_true [N], g_neg [N, S])`` by :func:`loss_and_grads`, on C-contiguous float32 arrays."""
    n, s = scores.shape
    loss = np.empty(n, dtype=np.float32)
    g_true = np.empty(n, dtype=np.float32)
    g_neg = np.empty((n, s), dtype=np.float32)
    mask = keep if keep is not None else np.ones((1, 1), dtype=np.bool_)
    loss_and_grads(l_true, scores, logq, mask, keep is not None, loss, g_true, g_neg, np.empty(s, dtype=np.float32))
    return loss, g_true, g_neg
