"""The compiled loop of :mod:`.row_adam` (numba): Adam's update of the touched rows in one pass, in place."""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, error_model="numpy")
def adam_rows(weight, exp_avg, exp_avg_sq, rows, values, sign, beta1, beta2, step_size, eps):
    """For each distinct row ``i = rows[r]`` with gradient ``g = sign * values[r]``::

        m = beta1 m_i + (1 - beta1) g;   v = beta2 v_i + (1 - beta2) g^2;   W_i -= step_size m / (sqrt(v) + eps)

    All arrays float32 and C-contiguous, the scalars float32; ``rows`` must not repeat (a coalesced gradient)."""
    one = np.float32(1.0)
    a1, a2 = one - beta1, one - beta2
    dim = weight.shape[1]
    for r in range(rows.shape[0]):
        i = rows[r]
        for k in range(dim):
            g = sign * values[r, k]
            m = beta1 * exp_avg[i, k] + a1 * g
            v = beta2 * exp_avg_sq[i, k] + a2 * g * g
            exp_avg[i, k] = m
            exp_avg_sq[i, k] = v
            weight[i, k] -= step_size * m / (math.sqrt(v) + eps)
