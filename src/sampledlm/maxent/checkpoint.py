"""Epoch checkpoints of a maximum-entropy training: ``maxent train --resume DIR`` goes on from the last finished
epoch of a run that was stopped (kill -9, a machine taken back), and ends with the model an unbroken run makes.

Everything lives in ``DIR/.checkpoint/`` (the output directory, written under its lock):

- ``run.json``: how the run was started (texts with their sha256, settings, text options, ranks), written once
  before the first epoch, with ``vocab.txt`` beside it (and ``texts/``, copies of texts given as sentences in
  Python, whose temporary files are gone when the run is resumed);
- ``state-E-rR.safetensors``: rank R's arrays after epoch E (weights, their running averages, AdaGrad's sums, the
  best epoch's evaluated weights: four arrays the size of the rank's vocabulary shard of feature weights, float64)
  with the schedule's state (learning rate, halving, best perplexity, epoch log, the shuffling generator's state)
  in its metadata;
- ``epoch.json``: ``{"epoch": E}``, the commit point, written by rank 0 once every rank has written its file of
  epoch E; older files are removed after it.

The folder is removed once the model is written. A run across machines (``--distributed``) is not checkpointed:
its ranks do not share a folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Callable

import numpy as np

from ..errors import UserError

FOLDER = ".checkpoint"
_STATE = re.compile(r"^state-(\d+)-r(\d+)\.safetensors$")


def folder(out_dir: str) -> str:
    return os.path.join(out_dir, FOLDER)


def write_run(out_dir: str, run: dict, vocab, keep_texts: tuple[str, ...] = ()) -> None:
    """``run.json`` and ``vocab.txt`` of a new run (before its first epoch). ``keep_texts``: the roles (``train``,
    ``valid``) whose files are temporary (sentences given in Python): copied into ``texts/``, where a resumed run
    reads them."""
    from .. import store
    from ..data.textio import atomic_write

    os.makedirs(folder(out_dir), exist_ok=True)
    for role in keep_texts:
        os.makedirs(os.path.join(folder(out_dir), "texts"), exist_ok=True)
        kept = os.path.join(folder(out_dir), "texts", f"{role}.txt")
        with open(run[role], "rb") as src, atomic_write(kept, "wb") as dst:
            shutil.copyfileobj(src, dst)
        run = {**run, role: os.path.abspath(kept)}
    vocab.save(os.path.join(folder(out_dir), "vocab.txt"))
    store.write_json(os.path.join(folder(out_dir), "run.json"), run)


def read_run(out_dir: str) -> tuple[dict, object]:
    """``(run.json, vocabulary)`` of the interrupted run in ``out_dir``; a :class:`UserError` when there is none."""
    from .. import store
    from ..data.vocab import Vocab

    path = os.path.join(folder(out_dir), "run.json")
    if not os.path.isfile(path):
        family = _family(out_dir)
        if family not in (None, "maxent"):
            raise UserError(f"{out_dir}: holds a {family} model, not a maxent run"
                            + (" (a neural run resumes with sampledlm train --resume; in Python: "
                               "sampledlm.resume_lm)" if family == "neural" else ""))
        what = ("holds a finished maxent model" if family == "maxent"
                else "holds no interrupted maxent training" if os.path.isdir(out_dir) else "does not exist")
        raise UserError(f"{out_dir}: {what}: nothing to resume")
    run = store.read_json(path)
    if not isinstance(run, dict) or not isinstance(run.get("settings"), dict):
        raise UserError(f"{path}: not a maxent run's settings (damaged?)")
    return run, Vocab.load(os.path.join(folder(out_dir), "vocab.txt"))


def _family(out_dir: str) -> str | None:
    """The family of the model ``out_dir`` holds (``maxent``, ``neural``, ...), or None where it holds none."""
    from ..store import read_config

    try:
        return read_config(out_dir)[1]
    except UserError:
        return None


def committed_epoch(out_dir: str) -> int:
    """The last epoch whose state every rank has written (0: none yet)."""
    path = os.path.join(folder(out_dir), "epoch.json")
    if not os.path.isfile(path):
        return 0
    from .. import store

    epoch = store.read_json(path).get("epoch")
    if not isinstance(epoch, int) or epoch < 0:
        raise UserError(f"{path}: not an epoch number (damaged?)")
    return epoch


def remove(out_dir: str) -> None:
    shutil.rmtree(folder(out_dir), ignore_errors=True)


class Checkpointer:
    """Saves and loads one rank's training state. ``barrier()`` returns once every rank has called it (the
    validation all-reduce of a sharded run; nothing for one process)."""

    def __init__(self, out_dir: str, rank: int = 0, barrier: Callable[[], None] = lambda: None):
        self.dir, self.rank, self.barrier = folder(out_dir), rank, barrier
        self.out_dir = out_dir

    def _path(self, epoch: int) -> str:
        return os.path.join(self.dir, f"state-{epoch}-r{self.rank}.safetensors")

    def save(self, epoch: int, arrays: dict[str, np.ndarray], meta: dict) -> None:
        import torch

        from .. import store

        os.makedirs(self.dir, exist_ok=True)
        store.save_tensors(self._path(epoch), {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()},
                           {"state": json.dumps({**meta, "epoch": epoch})})
        self.barrier()  # every rank's file of this epoch is on disk before the commit point names it
        if self.rank == 0:
            store.write_json(os.path.join(self.dir, "epoch.json"), {"epoch": epoch})
            for entry in os.listdir(self.dir):
                m = _STATE.match(entry)
                if m and int(m.group(1)) < epoch:
                    os.remove(os.path.join(self.dir, entry))

    def load(self) -> tuple[dict[str, np.ndarray], dict] | None:
        """This rank's arrays and schedule state after the committed epoch; None before any epoch was committed."""
        epoch = committed_epoch(self.out_dir)
        if epoch == 0:
            return None
        from .. import store

        tensors, meta = store.load_tensors(self._path(epoch))
        try:
            state = json.loads(meta["state"])
        except (KeyError, ValueError):
            raise UserError(f"{self._path(epoch)}: no training state in its header (damaged?)") from None
        return {k: v.numpy() for k, v in tensors.items()}, state
