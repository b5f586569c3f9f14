"""What a training run carries besides its weights: its :class:`TrainState` (what a checkpoint holds of the loop), the
seeding that makes ``--resume`` exact (:func:`seed_everything`), the optimisers' and random generators' states as
tensors + JSON for a checkpoint's files, and SIGINT/SIGTERM turned into a flag the loop checks (:func:`interrupt_flag`)."""

from __future__ import annotations

import contextlib
import math
import random
import signal
import threading
from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import UserError


@dataclass
class TrainState:
    """Everything besides tensors that a checkpoint holds."""

    epoch: int = 0  # current epoch (0-based)
    batch: int = 0  # next batch index within the epoch
    step: int = 0  # optimiser steps so far
    lr: float = 0.0
    best_valid: float = math.inf
    halvings: int = 0
    done: bool = False
    finalized: bool = False
    loss_sum: float = 0.0  # sum over this epoch's steps of loss * predictions
    loss_count: int = 0
    epoch_tokens: int = 0
    epoch_seconds: float = 0.0
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0  # the training process's CPU time (all its threads), validation included
    metrics: list = field(default_factory=list)


def seed_everything(seed: int, epoch: int, rank: int = 0) -> None:
    """Seed torch (every device), numpy and Python from ``(seed, epoch)``, and the rank under torchrun
    (rank 0 draws what a single process draws)."""
    s = (seed * 1_000_003 + epoch + rank * 7_919_993) % (2**31)
    torch.manual_seed(s)
    np.random.seed(s)
    random.seed(s)


# --- interrupts ----------------------------------------------------------------------------
@contextlib.contextmanager
def interrupt_flag():
    """Turn SIGINT/SIGTERM, and SIGHUP unless ignored (``nohup``), into a flag the loop checks after each step (main
    thread only): each stops training at a checkpoint."""
    flag = {"set": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag["set"]:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        flag["set"] = flag["signal"] = signum

    stops = [signal.SIGINT, signal.SIGTERM]
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        stops.append(signal.SIGHUP)
    old = {s: signal.signal(s, handler) for s in stops}
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# --- optimizer and rng state as tensors + json -------------------------------------------------
def optimizer_to_files(optimizers: list[torch.optim.Optimizer]) -> tuple[dict[str, torch.Tensor], dict]:
    tensors: dict[str, torch.Tensor] = {}
    meta: list[dict] = []
    for i, opt in enumerate(optimizers):
        sd = opt.state_dict()
        scalars: dict[str, dict] = {}
        for pid, st in sd["state"].items():
            for k, v in st.items():
                if torch.is_tensor(v):
                    tensors[f"{i}/{pid}/{k}"] = v
                else:
                    scalars.setdefault(str(pid), {})[k] = v
        meta.append({"type": type(opt).__name__, "param_groups": sd["param_groups"], "scalars": scalars})
    return tensors, {"optimizers": meta}


def optimizer_from_files(optimizers: list[torch.optim.Optimizer], tensors: dict[str, torch.Tensor], meta: dict, path: str) -> None:
    metas = meta.get("optimizers", [])
    if len(metas) != len(optimizers):
        raise UserError(f"{path}: optimizer state does not match the training options")
    for i, (opt, m) in enumerate(zip(optimizers, metas)):
        if m.get("type") != type(opt).__name__:
            raise UserError(f"{path}: optimizer {m.get('type')} saved, {type(opt).__name__} configured")
        state: dict[int, dict] = {}
        for key, t in tensors.items():
            j, pid, k = key.split("/", 2)
            if int(j) == i:
                state.setdefault(int(pid), {})[k] = t
        for pid, sc in m.get("scalars", {}).items():
            state.setdefault(int(pid), {}).update(sc)
        try:
            opt.load_state_dict({"state": state, "param_groups": m["param_groups"]})
        except (ValueError, KeyError) as e:
            raise UserError(f"{path}: optimizer state does not fit the model ({e})") from None


def rng_to_files(device: torch.device | None = None) -> tuple[dict[str, torch.Tensor], dict]:
    """Torch's (and on a GPU, that GPU's), numpy's and Python's random states as tensors + JSON."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    tensors = {"torch": torch.get_rng_state(), "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64))}
    if device is not None and device.type == "cuda":
        tensors["torch_cuda"] = torch.cuda.get_rng_state(device)
    meta = {"numpy": [np_state[0], int(np_state[2]), int(np_state[3]), float(np_state[4])],
            "python": [py_state[0], list(py_state[1]), py_state[2]]}
    return tensors, meta


def rng_from_files(tensors: dict[str, torch.Tensor], meta: dict, device: torch.device | None = None) -> None:
    """Restore :func:`rng_to_files`' states (a GPU's only when resuming on a GPU: a run moved between
    devices continues from the same weights, not the same random draws)."""
    torch.set_rng_state(tensors["torch"])
    if device is not None and device.type == "cuda" and "torch_cuda" in tensors:
        torch.cuda.set_rng_state(tensors["torch_cuda"], device)
    name, pos, has_gauss, gauss = meta["numpy"]
    np.random.set_state((name, tensors["numpy_keys"].numpy().astype(np.uint32), pos, has_gauss, gauss))
    v, internal, g = meta["python"]
    random.setstate((v, tuple(internal), g))
