"""Run directories: everything needed to reload, audit and resume a neural model, and nothing that runs code.

Layout of ``RUN_DIR``::

    config.json              model, objective, training options, data, vocabulary fingerprint (see below)
    vocab.txt                the vocabulary (word<TAB>count), ids in file order
    model.safetensors        the model to use: best validation perplexity so far; after training ends,
                             the best weights after ``objective.finalize`` (e.g. log-alpha calibration)
    objective.safetensors    the objective's parameters and buffers that go with model.safetensors
    metrics.jsonl            one JSON object per epoch (epoch, step, train loss, valid ppl, lr, tokens/s, wall time)
    learning_curve.png       train loss and valid perplexity per epoch
    checkpoint.json          {"path": "checkpoints/ckpt-000001234"}: the latest complete training checkpoint
    checkpoints/ckpt-*/      model, objective, optimizer (safetensors + json), rng.safetensors, trainer_state.json

Every file is written through :func:`sampledlm.data.textio.atomic_write`. A checkpoint is a *new*
directory; only when all its files are on disk does ``checkpoint.json`` (atomically) point to it,
and only then is the previous one removed. An interrupted checkpoint therefore leaves the previous
one intact and in use.

Every safetensors file we write carries a SHA-256 of its tensors in its header metadata; loading
recomputes it, so a damaged file is refused with a clear :class:`UserError` rather than giving
silently wrong numbers. Weights are read with safetensors only: no pickle, nothing executable.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import numpy as np
import torch

from ..errors import UserError
from ..data.textio import atomic_write
from ..data.vocab import Vocab

FORMAT = "sampledlm-run"
VERSION = 1
CONFIG_KEYS = {"format", "version", "model", "objective", "train", "data", "vocab"}


# --- safetensors with a checksum ------------------------------------------------------------
def _digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def save_tensors(path: str, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to a safetensors file atomically, with a checksum in its metadata."""
    from safetensors.torch import save

    clean = {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}
    meta = dict(metadata or {})
    meta["sha256"] = _digest(clean)
    data = save(clean, metadata=meta)
    with atomic_write(path, "wb") as f:
        f.write(data)


def load_tensors(path: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Read a safetensors file written by :func:`save_tensors`; refuse a damaged one."""
    from safetensors import safe_open

    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    try:
        with safe_open(path, framework="pt") as f:
            meta = dict(f.metadata() or {})
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # safetensors raises its own error types for bad headers / truncation
        raise UserError(f"{path}: not a readable safetensors file ({e}); the file is damaged or truncated") from None
    want = meta.pop("sha256", None)
    if want is None:
        raise UserError(f"{path}: no checksum in the file header; not written by sampledlm")
    if _digest(tensors) != want:
        raise UserError(f"{path}: checksum mismatch: the file is damaged")
    return tensors, meta


def load_state_into(module: torch.nn.Module, tensors: dict[str, torch.Tensor], path: str) -> None:
    """``module.load_state_dict`` with a clear error when names or shapes differ from the config's model."""
    own = module.state_dict()
    if hasattr(module, "upgrade_state"):  # files written by an earlier version of the module
        tensors = module.upgrade_state(dict(tensors))
    missing = sorted(set(own) - set(tensors))
    extra = sorted(set(tensors) - set(own))
    bad = sorted(k for k in set(own) & set(tensors) if tuple(own[k].shape) != tuple(tensors[k].shape))
    if missing or extra or bad:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing[:4])}")
        if extra:
            parts.append(f"unexpected {', '.join(extra[:4])}")
        if bad:
            k = bad[0]
            parts.append(f"{k} has shape {tuple(tensors[k].shape)}, config.json says {tuple(own[k].shape)}")
        raise UserError(f"{path}: weights do not match the model in config.json ({'; '.join(parts)})")
    module.load_state_dict(tensors)


# --- json ------------------------------------------------------------------------------------
def write_json(path: str, obj) -> None:
    with atomic_write(path) as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


def read_json(path: str):
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None


# --- config ----------------------------------------------------------------------------------
def make_config(model_spec: dict, objective: str, objective_options: dict, train: dict, data: dict, vocab: Vocab) -> dict:
    return {
        "format": FORMAT, "version": VERSION,
        "model": model_spec,
        "objective": {"name": objective, "options": {k: v for k, v in objective_options.items() if v is not None}},
        "train": train,
        "data": data,
        "vocab": {"size": len(vocab), "fingerprint": vocab.fingerprint()},
    }


def check_config(config, path: str) -> dict:
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise UserError(f"{path}: not a sampledlm run config (format should be {FORMAT!r})")
    if config.get("version") != VERSION:
        raise UserError(f"{path}: config version {config.get('version')!r} is not supported (expected {VERSION})")
    unknown = sorted(set(config) - CONFIG_KEYS)
    missing = sorted(CONFIG_KEYS - set(config))
    if unknown or missing:
        raise UserError(f"{path}: unknown keys {unknown} / missing keys {missing}")
    return config


def build_from_config(config: dict, vocab: Vocab):
    """``(model, objective)`` for a config (weights freshly initialised)."""
    from .registry import build_model
    from ..objectives import make_objective

    obj = config["objective"]
    objective = make_objective(obj["name"], counts=vocab.counts, **obj.get("options", {}))
    model = build_model(config["model"], len(vocab), sparse_output=getattr(objective, "sparse_output", False))
    return model, objective


def save_model_files(run_dir: str, model: torch.nn.Module, objective: torch.nn.Module, finalized: bool) -> None:
    """The usable model: objective first, then model weights (each file atomic)."""
    meta = {"finalized": "true" if finalized else "false"}
    save_tensors(os.path.join(run_dir, "objective.safetensors"), objective.state_dict(), meta)
    save_tensors(os.path.join(run_dir, "model.safetensors"), model.state_dict(), meta)


def load_vocab_checked(run_dir: str, config: dict) -> Vocab:
    path = os.path.join(run_dir, "vocab.txt")
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    vocab = Vocab.load(path)
    want = config["vocab"]
    if len(vocab) != want.get("size") or vocab.fingerprint() != want.get("fingerprint"):
        raise UserError(f"{path}: vocabulary does not match config.json (size {len(vocab)} vs {want.get('size')}, "
                        f"fingerprint {vocab.fingerprint()} vs {want.get('fingerprint')})")
    return vocab


def load_run(run_dir: str, weights: str | None = None):
    """Load a run directory: ``(model, objective, vocab, config)``, model in eval mode.

    ``weights``: a weights file to use instead of ``RUN_DIR/model.safetensors`` (its objective
    file beside it). When training never finished an epoch, the latest checkpoint is used.
    """
    if not os.path.isdir(run_dir):
        raise UserError(f"{run_dir}: no such run directory")
    cfg_path = os.path.join(run_dir, "config.json")
    config = check_config(read_json(cfg_path), cfg_path)
    vocab = load_vocab_checked(run_dir, config)
    model, objective = build_from_config(config, vocab)
    if weights is None:
        weights = os.path.join(run_dir, "model.safetensors")
        if not os.path.exists(weights):
            ckpt = latest_checkpoint(run_dir)
            if ckpt is None:
                raise UserError(f"{run_dir}: no model.safetensors and no checkpoint: training has not saved a model yet")
            weights = os.path.join(ckpt, "model.safetensors")
    tensors, _ = load_tensors(weights)
    load_state_into(model, tensors, weights)
    obj_path = os.path.join(os.path.dirname(weights), "objective.safetensors")
    if os.path.exists(obj_path) or objective.state_dict():
        obj_tensors, _ = load_tensors(obj_path)
        load_state_into(objective, obj_tensors, obj_path)
    model.eval()
    return model, objective, vocab, config


# --- checkpoints -----------------------------------------------------------------------------
def latest_checkpoint(run_dir: str) -> str | None:
    """The directory ``checkpoint.json`` points to, or None when there is none."""
    ptr = os.path.join(run_dir, "checkpoint.json")
    if not os.path.exists(ptr):
        return None
    rel = read_json(ptr).get("path")
    path = os.path.join(run_dir, rel) if isinstance(rel, str) else None
    if path is None or not os.path.isdir(path):
        raise UserError(f"{ptr}: points to {rel!r}, which is not a checkpoint directory")
    return path


def write_checkpoint(run_dir: str, name: str, files: dict[str, object]) -> str:
    """Write a checkpoint directory ``checkpoints/<name>`` and make it the latest.

    ``files`` maps file names to tensors dicts (``.safetensors``) or JSON-able objects (``.json``).
    Order: every file of the new directory, then ``checkpoint.json``, then the old directories go.
    """
    rel = os.path.join("checkpoints", name)
    path = os.path.join(run_dir, rel)
    if os.path.isdir(path):
        shutil.rmtree(path)  # a half-written leftover from an earlier interruption (never the live one)
    os.makedirs(path)
    for fname, content in files.items():
        if fname.endswith(".safetensors"):
            save_tensors(os.path.join(path, fname), content)
        else:
            write_json(os.path.join(path, fname), content)
    write_json(os.path.join(run_dir, "checkpoint.json"), {"path": rel})
    root = os.path.join(run_dir, "checkpoints")
    for other in os.listdir(root):
        if other != name:
            shutil.rmtree(os.path.join(root, other), ignore_errors=True)
    return path


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


def rng_to_files() -> tuple[dict[str, torch.Tensor], dict]:
    import random

    np_state = np.random.get_state()
    py_state = random.getstate()
    tensors = {"torch": torch.get_rng_state(), "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64))}
    meta = {"numpy": [np_state[0], int(np_state[2]), int(np_state[3]), float(np_state[4])],
            "python": [py_state[0], list(py_state[1]), py_state[2]]}
    return tensors, meta


def rng_from_files(tensors: dict[str, torch.Tensor], meta: dict) -> None:
    import random

    torch.set_rng_state(tensors["torch"])
    name, pos, has_gauss, gauss = meta["numpy"]
    np.random.set_state((name, tensors["numpy_keys"].numpy().astype(np.uint32), pos, has_gauss, gauss))
    v, internal, g = meta["python"]
    random.setstate((v, tuple(internal), g))
