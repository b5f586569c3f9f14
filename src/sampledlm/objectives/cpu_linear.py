"""Float32 matrix products on the CPU through oneDNN, where PyTorch's own path is the slower one.

PyTorch multiplies float32 matrices on an x86 CPU with MKL's ``sgemm``, which is known to choose its kernels by the
CPU's vendor: on a 2-vCPU AMD EPYC of family 26 (AVX-512) one thread reaches about 114 GFLOP/s in a
``[1120, 256] x [256, 768]`` product (``MKL_ENABLE_INSTRUCTIONS=AVX512`` changes nothing), while oneDNN, which PyTorch
also ships (it serves bfloat16 and the compiler's fused linear layers) and which picks kernels by instruction set,
reaches about 250 (``[32, 256] x [256, 768]``, the recurrent step: 135 against 82 µs). On an Intel CPU it is the
other way round: on the project's 2-core Intel Xeon (AVX-512) MKL was faster in every product the trainers make
(one thread; 2026-11-29): the recurrent step 0.20 against 0.25 ms and its backward 0.17 against 0.21, the input
projection ``[1120, 256] x [256, 768]`` 5.3 against 6.4, a softmax's ``[1120, 256] x [256, 10000]`` 101 against 112
and its weight gradient 71 against 102 ms; a GRU-256 segment (35 x 32, forward and backward) 24.6 against 31.7 ms.
So the path is on by default where the CPU is not Intel's (:func:`enabled`).

The functions here call
oneDNN's linear operator (``torch.ops.mkldnn._linear_pointwise``, ``y = x W^T + b``) for float32 CPU tensors and fall
back to ``torch`` otherwise. They build no autograd graph: they serve hand-written backward passes
(the segment GRU of :mod:`sampledlm.neural.gru_cpu`) and :class:`LinearFunction`, whose backward pass uses them too.

The sums run in another order than MKL's, so results agree with ``torch.mm`` to float32 rounding, not bit for bit.
``SAMPLEDLM_ONEDNN=0`` in the environment turns the path off (every product through ``torch``), ``SAMPLEDLM_ONEDNN=1``
turns it on whatever the CPU, for comparison; a PyTorch build that lacks the operator has it off
(:func:`available` tries it once).
"""

from __future__ import annotations

import functools
import os

import torch

_ATTR, _SCALARS, _ALGO = "none", [None], ""


@functools.cache
def available() -> bool:
    """Whether oneDNN's linear operator is present and right (tried once on a small product)."""
    try:
        if not torch.backends.mkldnn.is_available():
            return False
        gen = torch.Generator().manual_seed(0)
        x, w = torch.randn(3, 5, generator=gen), torch.randn(4, 5, generator=gen)
        with torch.no_grad():
            y = torch.ops.mkldnn._linear_pointwise(x, w, None, _ATTR, _SCALARS, _ALGO)
        return y.shape == (3, 4) and torch.allclose(y, x @ w.t(), atol=1e-5)
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


def cpu_vendor() -> str:
    """The CPU's vendor string as Linux reports it (``GenuineIntel``, ``AuthenticAMD``; "" where unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


@functools.cache
def enabled() -> bool:
    """Whether products take the oneDNN path: ``SAMPLEDLM_ONEDNN`` (1/0) where set, else on unless the CPU is
    Intel's (where MKL is the faster: module docstring); never where :func:`available` says the operator is absent.
    Decided once per process, from the machine alone, so that two runs of one command on one machine multiply the
    same way."""
    switch = os.environ.get("SAMPLEDLM_ONEDNN", "").strip().lower()
    if switch in ("0", "false", "no", "off"):
        return False
    if switch not in ("1", "true", "yes", "on") and cpu_vendor() == "GenuineIntel":
        return False
    return available()


# oneDNN's call costs about 15 µs more than MKL's (a [4, 256] x [256, 40] product: 17.5 against 4.1 µs), so smaller
# products stay with torch: [1, 256] x [256, 768] (one row of running text) 27 against 13 µs, [8, 256] x [256, 768]
# even, [60, 256] x [256, 300] 64 against 99 µs, [1120, 256] x [256, 10000] 47 against 76 ms.
_MIN_MACS = 1 << 21


# PyTorch keeps each oneDNN product it has run in an LRU cache of up to 1,024 entries, one per shape, each holding
# buffers the size of its operands. An operand of a vocabulary's rows whose other side varies from step to step (an
# adaptive softmax's tail: as many rows as the step's targets in it) then adds a new entry every step: at V = 240k a
# GRU's adaptive softmax grew from 2.5 to 6.6 GB in 66 steps (1.7 GB flat through torch), and at V = 485k it was
# killed at 22.7 GB. Operands of more than _MAX_ROWS rows stay with torch (the PTB pages' V = 10k and 22k do not).
_MAX_ROWS = 1 << 16


def goes_to_onednn(x: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether ``x [m, k] @ w [n, k]^T`` goes to oneDNN."""
    return (x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 2
            and w.device.type == "cpu" and w.dtype == torch.float32 and w.dim() == 2
            and x.shape[0] * w.shape[0] * w.shape[1] >= _MIN_MACS
            and x.shape[0] <= _MAX_ROWS and w.shape[0] <= _MAX_ROWS and enabled())


def linear(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x [m, k] @ w[n, k]^T (+ bias [n]) -> [m, n]``, float32; ``x`` and ``w`` may be strided views (a transposed
    matrix is read as it lies). No autograd graph."""
    with torch.no_grad():
        if goes_to_onednn(x, w):
            return torch.ops.mkldnn._linear_pointwise(x, w, bias, _ATTR, _SCALARS, _ALGO)
        return torch.nn.functional.linear(x, w, bias)


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a [m, k] @ b [k, n] -> [m, n]``, float32 (``b`` read transposed, as it lies). No autograd graph.

    oneDNN's linear operator copies a strided ``x`` into rows first (``w`` it reads as it lies). A weight's gradient
    ``dY^T [m, k] @ X [k, n]`` (k: the batch's positions) has ``a`` transposed, and that copy, at about 2 ns an
    element, cost as much as the product: ``[10000, 1120] x [1120, 256]`` (the softmax's output table) 51 ms. When
    ``b`` is the smaller, the product is formed as ``(b^T a^T)^T`` instead, so that the copy is ``b``'s: 27 ms."""
    if (goes_to_onednn(a, b.t()) and not a.is_contiguous() and a.t().is_contiguous()
            and b.numel() <= a.numel()):
        return linear(b.t(), a).t().contiguous()
    return linear(a, b.t())


class LinearFunction(torch.autograd.Function):
    """``LinearFunction.apply(x [..., k], w [n, k], bias [n] or None) -> x w^T + bias [..., n]``, as
    ``torch.nn.functional.linear``, with the forward product and both backward ones (``dx = dy w``,
    ``dw = dy^T x``) through :func:`linear`."""

    @staticmethod
    def forward(fctx, x, w, bias):
        fctx.save_for_backward(x, w)
        fctx.has_bias = bias is not None
        flat = x.reshape(-1, x.shape[-1])
        return linear(flat, w, bias).view(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(fctx, dy):
        x, w = fctx.saved_tensors
        flat_dy = dy.reshape(-1, dy.shape[-1])
        need = fctx.needs_input_grad
        dx = mm(flat_dy, w).view(x.shape) if need[0] else None
        dw = mm(flat_dy.t(), x.reshape(-1, x.shape[-1])) if need[1] else None
        db = flat_dy.sum(0) if fctx.has_bias and need[2] else None
        return dx, dw, db


def fast_linear(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.nn.functional.linear(x, w, bias)``, through oneDNN (forward and backward) for float32 CPU products of
    at least ``_MIN_MACS`` multiply-adds outside autocast, tracing, export and ``torch.compile``; otherwise exactly
    ``torch.nn.functional.linear``."""
    if (x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() >= 1 and w.dim() == 2
            and x.numel() * w.shape[0] >= _MIN_MACS and w.dtype == torch.float32 and w.shape[0] <= _MAX_ROWS
            and not torch.is_autocast_enabled("cpu") and not torch.jit.is_tracing()
            and not torch.onnx.is_in_onnx_export() and not _compiling() and enabled()):
        return LinearFunction.apply(x, w, bias)
    return torch.nn.functional.linear(x, w, bias)


def _compiling() -> bool:
    """Whether ``torch.compile`` is tracing (it then fuses the linear layers itself)."""
    compiler = getattr(torch, "compiler", None)
    return bool(compiler is not None and hasattr(compiler, "is_compiling") and compiler.is_compiling())


class FastLinear(torch.nn.Linear):
    """``torch.nn.Linear`` (the same parameters, state and initialisation) whose products go through
    :func:`fast_linear`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_linear(x, self.weight, self.bias)
