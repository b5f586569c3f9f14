"""Where a neural model runs (``--device``) and in which precision it trains (``--precision``).

Devices: ``auto`` (the first CUDA GPU when torch sees one, else the CPU), ``cpu``, ``cuda`` or
``cuda:N``. Everything a training step touches lives on that device: the model, the objective
(its noise tables, so the samplers draw there), each batch (copied from pinned host memory without
blocking) and the validation pass. Files are device-free: tensors are written from the CPU and
loaded into whatever device the model is on, so a run trained on a GPU resumes or evaluates on a
CPU and the reverse.

Precisions (Micikevicius et al. 2018, "Mixed precision training"):

* ``fp32``: everything in float32;
* ``bf16``: the forward pass of a training step under bfloat16 autocast (about twice as fast on
  CPUs with AVX512-BF16 or AMX and on GPUs' tensor cores); weights, optimiser updates and every
  evaluation stay float32;
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
            raise UserError(f"--device {name}: expected cuda:N with N a GPU number")
        if not torch.cuda.is_available():
            raise UserError(f"--device {name}: this torch build or machine has no CUDA GPU "
                            f"(torch {torch.__version__}); use --device cpu or auto")
        if index and int(index) >= torch.cuda.device_count():
            raise UserError(f"--device {name}: only {torch.cuda.device_count()} GPU(s) visible")
        return torch.device(name)
    raise UserError(f"--device {name}: choose auto, cpu, cuda or cuda:N")


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
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 << 20  # glibc's ceiling on 64-bit systems (4 MiB * sizeof(long))
_TRIM_THRESHOLD = 1 << 30


def keep_freed_memory() -> bool:
    """Have glibc's allocator keep freed blocks of up to 32 MiB for reuse instead of handing them back to
    the kernel; returns whether it applied (Linux with glibc).

    A CPU training step allocates and frees the same large temporaries every step (a sampled objective's
    gathered rows, ``[N S, h]``: 18 MB on the PTB GRU). By default glibc serves blocks above its
    mmap threshold with a fresh ``mmap`` and unmaps them on free, so every step pays the kernel for
    zeroing and faulting in their pages again: measured on the PTB GRU with NCE (one thread), this
    alone made a step about 15 % slower. The cost is memory: the process keeps its peak heap."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and bool(mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD))

