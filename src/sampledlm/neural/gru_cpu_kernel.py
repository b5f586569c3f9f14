"""The compiled loops of :mod:`.gru_cpu` (numba): one time step's elementwise work, fused, forward and backward.

Backward, the step's arithmetic has no transcendental function (the gates' values are saved), so one loop over
``[B, h]`` does in a pass what took about twenty PyTorch operations, each with its own call and temporary. Forward,
the gates need ``sigmoid`` and ``tanh``, which numba would compute one element at a time through the C library;
:func:`tanh32` is a rational function of ``x`` (the one Eigen uses for float32: within 3e-7 of ``tanh`` over the
whole line) that compiles to vector instructions, and ``sigmoid(x) = (1 + tanh(x / 2)) / 2``. The loops are compiled
with ``error_model="numpy"``: under numba's default a division checks for zero and raises, a branch that keeps the
loop from being vectorised."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy", inline="always")
def tanh32(x):
    """``tanh(x)`` in float32: ``x`` clamped to [-9, 9], then an odd degree-13 polynomial over an even degree-6 one
    (Eigen's ``generic_fast_tanh_float``; at |x| = 9 tanh is 1 to float32 precision)."""
    x = min(max(x, np.float32(-9.0)), np.float32(9.0))
    x2 = x * x
    p = x2 * np.float32(-2.76076847742355e-16) + np.float32(2.00018790482477e-13)
    p = x2 * p + np.float32(-8.60467152213735e-11)
    p = x2 * p + np.float32(5.12229709037114e-08)
    p = x2 * p + np.float32(1.48572235717979e-05)
    p = x2 * p + np.float32(6.37261928875436e-04)
    p = x2 * p + np.float32(4.89352455891786e-03)
    q = x2 * np.float32(1.19825839466702e-06) + np.float32(1.18534705686654e-04)
    q = x2 * q + np.float32(2.26843463243900e-03)
    q = x2 * q + np.float32(4.89352518554385e-03)
    return x * p / q


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy", inline="always")
def _row_forward(px, ph, b_hh, g, hv, before, after):
    """One row of :func:`step_forward`: ``px [3h]`` the input side, ``ph [3h]`` the recurrent product; writes the
    row's gates ``g [3h]``, ``hv [h]`` (``W_hn h + b_hn``) and its new state ``after [h]`` from ``before [h]``."""
    hid = hv.shape[0]
    half = np.float32(0.5)
    for j in range(2 * hid):
        g[j] = half * tanh32(half * (px[j] + ph[j] + b_hh[j])) + half
    for j in range(hid):
        hv[j] = ph[2 * hid + j] + b_hh[2 * hid + j]
    for j in range(hid):
        g[2 * hid + j] = tanh32(px[2 * hid + j] + g[j] * hv[j])
    for j in range(hid):
        n = g[2 * hid + j]
        after[j] = n + g[hid + j] * (before[j] - n)


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def step_forward(pre_h, pre_x, t, b_hh, hs, gates, hn):
    """Step ``t`` from ``pre_h = h_{t-1} W_hh^T [B, 3h]`` (no bias) and ``pre_x [T, B, 3h]`` (``W_ih x_t + b_ih``)::

        r, z = sigmoid(pre_x[t] + pre_h + b_hh)  (the first 2h columns)    hn[t] = pre_h + b_hh  (the last h)
        n = tanh(pre_x[t] + r hn[t])                                        hs[t + 1] = n + z (hs[t] - n)

    writing ``gates[t] = [r, z, n]``, ``hn[t]`` and ``hs[t + 1]``. Shapes: ``gates [T, B, 3h]``, ``hn [T, B, h]``,
    ``hs [T + 1, B, h]``. One loop per quantity, each over a row's contiguous columns, so that each vectorises."""
    for b in range(pre_h.shape[0]):
        _row_forward(pre_x[t, b], pre_h[b], b_hh, gates[t, b], hn[t, b], hs[t, b], hs[t + 1, b])


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy", inline="always")
def _identity_input(x_row, b_ih, px):
    """``px [3h] = [x, x, x] + b_ih``: the input side of the GRU without input matrices for one row ``x_row [h]``."""
    hid = x_row.shape[0]
    for k in range(3):
        for j in range(hid):
            px[k * hid + j] = x_row[j] + b_ih[k * hid + j]


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def step_forward_identity(pre_h, x, b_ih, t, b_hh, hs, gates, hn):
    """:func:`step_forward` for the GRU without input matrices: the input side is ``[x_t, x_t, x_t] + b_ih``,
    formed a row at a time in a ``[3h]`` buffer (``x [T, B, h]``, ``b_ih [3h]``) instead of a ``[T, B, 3h]``
    tensor (its repeat and bias add were a tenth of the PTB GRU's step)."""
    px = np.empty(3 * x.shape[2], dtype=x.dtype)
    for b in range(pre_h.shape[0]):
        _identity_input(x[t, b], b_ih, px)
        _row_forward(px, pre_h[b], b_hh, gates[t, b], hn[t, b], hs[t, b], hs[t + 1, b])


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def segment_forward(pre_x, b_ih, identity, w_hh, b_hh, hs, gates, hn):
    """Every step of a segment of a few rows (scoring), the recurrent product included: ``h_{t-1} W_hh^T`` as ``3h``
    dot products against ``w_hh [3h, h]``'s rows, then :func:`_row_forward`. A row's per-step calls (the product,
    the step, the loop) cost more than their arithmetic, about 12 of a step's 14 us at h = 256. ``pre_x`` as for
    :func:`step_forward`, or (``identity``) ``x [T, B, h]`` with ``b_ih [3h]``."""
    steps, batch = gates.shape[0], gates.shape[1]
    h3 = w_hh.shape[0]
    ph = np.empty(h3, dtype=w_hh.dtype)
    px = np.empty(h3, dtype=w_hh.dtype)
    for t in range(steps):
        for b in range(batch):
            h = hs[t, b]
            for i in range(h3):
                acc = np.float32(0.0)
                w = w_hh[i]
                for k in range(h.shape[0]):
                    acc += w[k] * h[k]
                ph[i] = acc
            if identity:
                _identity_input(pre_x[t, b], b_ih, px)
            else:
                px[:] = pre_x[t, b]
            _row_forward(px, ph, b_hh, gates[t, b], hn[t, b], hs[t, b], hs[t + 1, b])


@numba.njit(cache=True, nogil=True, fastmath=True)
def step_backward(dh, d_out, t, gates, hn, hs, d_in, d_n, d_pre_h, dh_z, identity):
    """For step ``t`` with ``g = dh + d_out[t]`` (``d_out`` of length 0: none), gates ``r, z, n = gates[t]``::

        d_n = g (1 - z) (1 - n^2)       d_r = d_n hn[t] r (1 - r)       d_z = g (h_{t-1} - n) z (1 - z)
        d_pre_h[t] = [d_r, d_z, d_n r]  dh_z = g z
        d_in[t] = [d_r, d_z, d_n]       (identity: d_in[t] = d_r + d_z + d_n, d_n[t] = d_n)

    (``h_{t-1} = hs[t]``); the caller adds ``d_pre_h[t] @ W_hh`` to ``dh_z`` for ``dh_{t-1}``. The input side
    ``d_in`` is the gradient of the input pre-activations ``[T, B, 3h]``, or (``identity``: the GRU without input
    matrices, whose input side needs only ``d_x`` and, for ``b_in``'s gradient, ``d_n``) ``d_x [T, B, h]`` and
    ``d_n [T, B, h]``, instead of a ``[T, B, 3h]`` tensor summed afterwards. Shapes: ``dh, dh_z [B, h]``, ``gates,
    d_pre_h [T, B, 3h]``, ``hn [T, B, h]``, ``hs [T + 1, B, h]``."""
    batch, hid = dh.shape
    one = np.float32(1.0)
    with_out = d_out.shape[0] > 0
    for b in range(batch):
        for j in range(hid):
            g = dh[b, j] + d_out[t, b, j] if with_out else dh[b, j]
            r, z, n = gates[t, b, j], gates[t, b, hid + j], gates[t, b, 2 * hid + j]
            dn = g * (one - z) * (one - n * n)
            d_r = dn * hn[t, b, j] * r * (one - r)
            d_z = g * (hs[t, b, j] - n) * z * (one - z)
            d_pre_h[t, b, j], d_pre_h[t, b, hid + j], d_pre_h[t, b, 2 * hid + j] = d_r, d_z, dn * r
            dh_z[b, j] = g * z
            if identity:
                d_in[t, b, j], d_n[t, b, j] = d_r + d_z + dn, dn
            else:
                d_in[t, b, j], d_in[t, b, hid + j], d_in[t, b, 2 * hid + j] = d_r, d_z, dn
