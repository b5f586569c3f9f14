"""The compiled loop of :mod:`.dropout` (numba): the mask test and the scaling in one pass."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def masked_scale(x, slices, threshold, scale, out):
    """``out[i] = x[i] * scale`` where ``slices[i] >= threshold``, else 0. ``x``, ``out`` float32 ``[n]``, ``slices``
    int16 ``[n]`` (at least), ``threshold`` int16, ``scale`` float32."""
    zero = np.float32(0.0)
    for i in range(x.shape[0]):
        out[i] = x[i] * scale if slices[i] >= threshold else zero
