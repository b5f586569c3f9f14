"""Where a neural model runs (``--device``) and in which precision it trains (``--precision``).

Devices: ``auto`` (the first CUDA GPU when torch sees one, else the CPU), ``cpu``, ``cuda`` or
``cuda:N``. Everything a training step touches lives on that device: the model, the objective
(its noise tables, so the samplers draw there), each batch (copied from pinned host memory without
blocking) and the validation pass. Files are device-free: tensors are written from the CPU and
loaded into whatever device the model is on, so a run trained on a GPU resumes or evaluates on a
CPU and the reverse.

Precisions (Micikevicius et al. 2018, "Mixed precision training"):

* ``fp32``: everything in float32;
* ``bf16``: the forward pass of a training step under bfloat16 autocast (a GRU trains 1.3-1.6x the
  words per CPU second on a Zen 4 core with AVX512-BF16, at the same PTB perplexity; slower where the
  CPU emulates bfloat16); weights, optimiser updates and every evaluation stay float32;
* ``fp16``: the same with float16, whose narrow exponent needs the loss scaled up before the
  backward pass and the gradients scaled back before the update (a ``torch.amp.GradScaler``).

The output layer's scores are returned in float32 (:class:`~sampledlm.objectives.output.OutputLayer`),
so the log-sum-exp, the log-softmax, the sigmoid renormalisation and the loss of every objective are
computed in float32 under either low precision; only the matrix products run in 16 bits.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys

import torch

from ..config import setting_value
from ..errors import UserError

PRECISIONS = ("fp32", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


DEVICE_ENV = "SAMPLEDLM_DEVICE"


def resolve_device(name: str | torch.device | None = "auto") -> torch.device:
    """The ``torch.device`` a ``--device`` value names; a GPU that is not there is a one-line error.

    ``auto`` is the device that ``$SAMPLEDLM_DEVICE`` names when it is set (e.g. ``cpu`` on a shared GPU
    machine; the test suite sets it so that its numbers never depend on a GPU's arithmetic), else the first
    CUDA GPU when torch sees one, else the CPU."""
    if isinstance(name, torch.device):
        return name
    name = (name or "auto").strip().lower()
    if name == "auto":
        chosen = os.environ.get(DEVICE_ENV, "").strip().lower()
        if chosen and chosen != "auto":
            try:
                return resolve_device(chosen)
            except UserError as e:
                raise UserError(f"${DEVICE_ENV}={chosen}: {e}") from None
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        index = name[5:]
        if index and not index.isdigit():
            raise UserError(f"{setting_value('device', name)}: expected cuda:N with N a GPU number")
        if not torch.cuda.is_available():
            raise UserError(f"{setting_value('device', name)}: this torch build or machine has no CUDA GPU "
                            f"(torch {torch.__version__}); use {setting_value('device', 'cpu')} or auto")
        if index and int(index) >= torch.cuda.device_count():
            raise UserError(f"{setting_value('device', name)}: only {torch.cuda.device_count()} GPU(s) visible")
        return torch.device(name)
    raise UserError(f"{setting_value('device', name)}: choose auto, cpu, cuda or cuda:N")


def device_name(device: torch.device) -> str:
    """A readable name: ``cpu`` or ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return str(device)


def autocast(device: torch.device, precision: str):
    """The autocast context of a training forward pass in ``precision`` (a no-op for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=_DTYPES[precision])


def grad_scaler(device: torch.device, precision: str):
    """A loss scaler for fp16 (None otherwise): scales the loss up before backward, unscales before
    clipping and stepping, and skips a step whose gradients overflowed."""
    if precision != "fp16":
        return None
    return torch.amp.GradScaler(device.type)


def to_device(batch, device: torch.device):
    """A tuple (or one) of host tensors on ``device``: pinned and copied without blocking to a GPU."""
    if device.type == "cpu":
        return batch
    if torch.is_tensor(batch):
        return batch.pin_memory().to(device, non_blocking=True)
    return tuple(to_device(t, device) if torch.is_tensor(t) else t for t in batch)


def module_device(module: torch.nn.Module) -> torch.device:
    """The device of a module's first parameter or buffer (the CPU when it has none)."""
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")


#: glibc's mallopt parameters and the values :func:`keep_freed_memory` sets
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_MMAP_THRESHOLDS = (1 << 30, 32 << 20)  # the second: the ceiling of glibc releases before 2.35 (64-bit)
_TRIM_THRESHOLD = 1 << 30
_TOP_PAD = 64 << 20


def keep_freed_memory() -> int:
    """Have glibc's allocator keep freed blocks for reuse instead of handing them back to the kernel; returns
    the largest block size it now keeps (bytes; 0: not applied, not Linux with glibc).

    A CPU training step allocates and frees the same large temporaries every step (a sampled objective's
    gathered rows, ``[N S, h]``: 18 MB on the PTB GRU; the softmax's scores and their gradient, ``[N, V]``: 45 MB
    each). By default glibc serves blocks above its mmap threshold with a fresh ``mmap`` and unmaps them on free,
    so every step pays the kernel for zeroing and faulting in their pages again (about 1.3 µs a 4 KiB page: 14 ms
    for each ``[1120, 10000]`` float32 tensor). Here blocks of up to 1 GiB come from the heap (32 MiB where glibc
    refuses more), the heap is not trimmed below 1 GiB, and it grows 64 MiB beyond each request, so that a block a
    little larger than the last freed one does not fault in fresh pages either. Measured on the PTB GRU with one
    thread: NCE about 15 % faster a step (the 32 MiB threshold), the softmax 2.0x (210 against 105 ms; the
    1 GiB threshold and the pad). The cost is memory: the process keeps its peak heap."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return 0
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    kept = next((size for size in _MMAP_THRESHOLDS if mallopt(_M_MMAP_THRESHOLD, size)), 0)  # 0 from mallopt: refused
    if not (kept and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD) and mallopt(_M_TOP_PAD, _TOP_PAD)):
        return 0
    return kept
