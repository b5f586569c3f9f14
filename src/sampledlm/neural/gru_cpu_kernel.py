"""The compiled loop of :mod:`.gru_cpu`'s backward pass (numba): one time step's elementwise gradients, fused.

The step's arithmetic has no transcendental function (the gates' values are saved), so one loop over ``[B, h]``
does in a pass what took about twenty PyTorch operations, each with its own call and temporary."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, fastmath=True)
def step_backward(dh, d_out, t, gates, hn, hs, d_pre_x, d_pre_h, dh_z):
    """For step ``t`` with ``g = dh + d_out[t]`` (``d_out`` of length 0: none), gates ``r, z, n = gates[t]``::

        d_n = g (1 - z) (1 - n^2)       d_r = d_n hn[t] r (1 - r)       d_z = g (h_{t-1} - n) z (1 - z)
        d_pre_x[t] = [d_r, d_z, d_n]    d_pre_h[t] = [d_r, d_z, d_n r]   dh_z = g z

    (``h_{t-1} = hs[t]``); the caller adds ``d_pre_h[t] @ W_hh`` to ``dh_z`` for ``dh_{t-1}``. Shapes: ``dh, dh_z
    [B, h]``, ``gates, d_pre_x, d_pre_h [T, B, 3h]``, ``hn [T, B, h]``, ``hs [T + 1, B, h]``."""
    batch, hid = dh.shape
    one = np.float32(1.0)
    with_out = d_out.shape[0] > 0
    for b in range(batch):
        for j in range(hid):
            g = dh[b, j]
            if with_out:
                g += d_out[t, b, j]
            r = gates[t, b, j]
            z = gates[t, b, hid + j]
            n = gates[t, b, 2 * hid + j]
            d_n = g * (one - z) * (one - n * n)
            d_r = d_n * hn[t, b, j] * r * (one - r)
            d_z = g * (hs[t, b, j] - n) * z * (one - z)
            d_pre_x[t, b, j] = d_r
            d_pre_x[t, b, hid + j] = d_z
            d_pre_x[t, b, 2 * hid + j] = d_n
            d_pre_h[t, b, j] = d_r
            d_pre_h[t, b, hid + j] = d_z
            d_pre_h[t, b, 2 * hid + j] = d_n * r
            dh_z[b, j] = g * z
