"""Dropout whose mask costs one random 64-bit draw per four units on a CPU (Srivastava et al. 2014).

``y = x * m / (1 - p)`` with ``m`` a 0/1 mask kept with probability ``1 - p``. ``torch.nn.Dropout``
draws the mask with ``bernoulli_``: one generator call per unit, which on a CPU costs about as much
as the recurrent layer's input projection (PTB GRU, one thread: 2.8 ms a call on ``[32, 35, 256]``).
Here the mask comes from 16-bit slices of 64-bit random integers: unit i is kept when its slice
``r_i`` (uniform over the 65,536 values of an int16) is at least ``-32768 + round(p * 65536)``. The
rate is therefore ``p`` rounded to a multiple of 1/65,536, and the kept units are scaled by the
exact ``1 / (1 - p')`` of that rounded rate, so ``E[y] = x`` holds exactly. Same module, no
parameters: models saved with ``torch.nn.Dropout`` load unchanged. On other devices, and in eval
mode, it is ``torch.nn.Dropout``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

_SLICES = 4  # int16 slices per int64 draw
_LEVELS = 1 << 16


def _draw_slices(n: int, p: float) -> tuple[torch.Tensor, int, float]:
    """``(slices [n] int16, threshold, scale)``: unit i is kept when ``slices[i] >= threshold``, with probability
    ``1 - p'`` (``p'``: ``p`` rounded to a multiple of 2^-16); ``scale = 1 / (1 - p')``."""
    drop_levels = round(p * _LEVELS)
    bits = torch.empty((n + _SLICES - 1) // _SLICES, dtype=torch.int64).random_(-(1 << 63), None)  # all 64 bits (random_() leaves the top one 0)
    return bits.view(torch.int16)[:n], drop_levels - _LEVELS // 2, _LEVELS / (_LEVELS - drop_levels)


def dropout_mask(shape: torch.Size, p: float) -> tuple[torch.Tensor, float]:
    """``(keep [shape] bool, scale)``: a CPU mask keeping each unit with probability ``1 - p'`` (``p'``:
    ``p`` rounded to a multiple of 2^-16), and ``1 / (1 - p')``."""
    slices, threshold, scale = _draw_slices(shape.numel(), p)
    return slices.view(shape) >= threshold, scale


class _MaskedScale(torch.autograd.Function):
    """``y = x * keep * scale`` for float32 ``x``, forward and backward each one compiled pass
    (:func:`.dropout_kernel.masked_scale`) that keeps the int16 slices, not a mask and two products."""

    @staticmethod
    def forward(fctx, x, slices, threshold, scale):
        fctx.save_for_backward(slices)
        fctx.threshold, fctx.scale = threshold, scale
        return _apply(x, slices, threshold, scale)

    @staticmethod
    def backward(fctx, grad):
        (slices,) = fctx.saved_tensors
        return _apply(grad, slices, fctx.threshold, fctx.scale), None, None, None


def _apply(x: torch.Tensor, slices: torch.Tensor, threshold: int, scale: float) -> torch.Tensor:
    from .dropout_kernel import masked_scale

    x = x.detach().contiguous()
    out = torch.empty_like(x)
    masked_scale(x.view(-1).numpy(), slices.numpy(), np.int16(threshold), np.float32(scale), out.view(-1).numpy())
    return out


class WordDropout(nn.Module):
    """Embedding dropout (Gal & Ghahramani 2016; Merity et al. 2018 use 0.1 on PTB): in training each word type
    present in a batch is dropped with probability ``p``, every occurrence at once (its input vector zeroed), and the
    kept ones scaled by ``1 / (1 - p)``, so ``E[y] = x``; the identity in eval mode. Unlike unit dropout it removes
    a word's whole identity from the batch, so the model cannot lean on any one word's input vector.

    Shapes: ``forward(ids [B, T], vectors [B, T, d]) -> [B, T, d]``."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        self.p = float(p)

    def forward(self, ids: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return vectors
        types, where = torch.unique(ids, return_inverse=True)
        keep = (torch.rand(types.shape, device=ids.device) >= self.p).to(vectors.dtype) / (1.0 - self.p)
        return vectors * keep[where].unsqueeze(-1)


class Dropout(nn.Dropout):
    """``torch.nn.Dropout`` with a cheaper mask on the CPU (see the module's docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu" or self.inplace:
            return super().forward(x)
        if self.p >= 1.0:
            return x * 0.0
        if x.dtype == torch.float32:
            slices, threshold, scale = _draw_slices(x.numel(), self.p)
            return _MaskedScale.apply(x, slices, threshold, scale)
        keep, scale = dropout_mask(x.shape, self.p)
        return x * keep * scale
