"""One model-directory envelope for every trained family, and the file primitives under it.

A model directory (what ``sampledlm train``, ``sampledlm maxent train`` and the demo write, and what
:func:`sampledlm.loader.load_model` opens) holds::

    config.json        {"format": "sampledlm-model", "family": "neural" | "maxent", "version": 2,
                        "vocab": {"size": V, "fingerprint": ...}, ...the family's own sections...}
    vocab.txt          word<TAB>count, ids in file order (see sampledlm.data.vocab)
    *.safetensors      tensors with a SHA-256 of their content in the header (checked on load)
    metrics.jsonl      one JSON object per validation (each epoch's end, and --valid-every's points within one),
                       when the family trains in epochs

Directories written before the envelope existed still load: ``"format": "sampledlm-run"`` (version 1)
is a neural run and ``"format": "sampledlm-maxent-1"`` a maxent model (:data:`LEGACY_FORMATS`).

Nothing here runs code from a file: JSON and safetensors only, never pickle. Every write goes
through :func:`sampledlm.data.textio.atomic_write` (a temporary file renamed into place).
A directory being written is locked (:func:`lock_directory`) so that two processes given the
same output directory cannot interleave their files.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import torch

from .data.textio import atomic_write, read_json  # noqa: F401  (read_json: re-exported)
from .data.vocab import Vocab
from .errors import UserError

FORMAT = "sampledlm-model"
VERSION = 2
LEGACY_FORMATS = {"sampledlm-run": "neural", "sampledlm-maxent-1": "maxent"}
FAMILIES = ("neural", "maxent", "ngram")  # ngram: the binary n-gram directory (ngram/mapped.py)


# --- safetensors with a checksum ------------------------------------------------------------
def _raw_bytes(t: torch.Tensor):
    """A CPU tensor's bytes as a buffer, without a copy (``t`` contiguous)."""
    return memoryview(t.reshape(-1).view(torch.uint8).numpy()) if t.numel() else b""


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().contiguous()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(_raw_bytes(t))
    return h.hexdigest()


#: safetensors' names of the dtypes a model file holds
_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
           torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
           torch.bool: "BOOL"}


def save_tensors(path: str, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to a safetensors file atomically, with a checksum in its metadata.

    The file is written tensor by tensor, in safetensors' layout (an 8-byte little-endian header size, the JSON
    header, the tensors' bytes back to back), so that writing holds no copy of the whole model: the library's
    ``save`` builds the file in memory first, which for a 485k-word model with its optimiser state in a checkpoint
    took the process past 22 GB. Files are read back with safetensors itself (:func:`load_tensors`)."""
    import json
    import struct

    clean = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    meta = dict(metadata or {})
    meta["sha256"] = _digest(clean)
    header: dict = {"__metadata__": meta}
    offset = 0
    for name in sorted(clean):
        t = clean[name]
        if t.dtype not in _DTYPES:
            raise ValueError(f"{name}: dtype {t.dtype} cannot be written")
        size = t.numel() * t.element_size()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    with atomic_write(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in sorted(clean):
            f.write(_raw_bytes(clean[name]))


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
    if hasattr(module, "upgrade_state"):  # files written by an earlier version of the module
        tensors = module.upgrade_state(dict(tensors))
    own = module.state_dict()
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
    for k in sorted(tensors):
        t = tensors[k]
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise UserError(f"{path}: tensor {k!r} holds non-finite values (NaN or inf); the file is damaged")
    module.load_state_dict(tensors)


# --- json ------------------------------------------------------------------------------------
def write_json(path: str, obj) -> None:
    with atomic_write(path) as f:
        json.dump(obj, f, indent=2, sort_keys=False)
        f.write("\n")


# --- the envelope ----------------------------------------------------------------------------
def envelope(family: str, vocab: Vocab) -> dict:
    """The fields every model directory's config.json starts with."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")
    return {"format": FORMAT, "family": family, "version": VERSION,
            "vocab": {"size": len(vocab), "fingerprint": vocab.fingerprint()}}


def no_run_directory(path: str, flag: str = "") -> UserError:
    """The error for a path that is not a model directory: a file is named as one (an ARPA model given to a
    command that continues or exports a run), anything else as missing."""
    where = f"{flag} {path}" if flag else path
    if os.path.isfile(path):
        return UserError(f"{where}: is a file, not a run directory")
    if os.path.isdir(path):  # it exists: "no such" would send the user looking for a typo
        return UserError(f"{where}: a directory, but no model in it (no config.json)")
    return UserError(f"{where}: no such run directory")


def check_source(path: str, family: str, what: str) -> None:
    """``--init-from PATH`` of a train command: a one-line error naming the flag and ``path`` unless ``path`` is a
    model directory of ``family`` (``what``: that family in words; the family's loader checks the rest)."""
    cpath = os.path.join(path, "config.json")
    if not os.path.isdir(path) or not os.path.isfile(cpath):
        raise no_run_directory(path, "--init-from")
    config = read_json(cpath)
    config = config if isinstance(config, dict) else {}
    fmt = config.get("format")
    found = config.get("family", LEGACY_FORMATS.get(fmt) if isinstance(fmt, str) else None)
    if found != family:
        held = f"a model of family {found}" if isinstance(found, str) else "no sampledlm model"
        raise UserError(f"--init-from {path}: holds {held}, not {what}")


def no_model_here(model_dir: str, expected: str = "a model directory") -> UserError:
    """The error for a path that holds no sampledlm model: a file, nothing, or a directory without config.json (one
    holding only dot-files is what an interrupted command left: its lock, its temporaries)."""
    if os.path.isfile(model_dir):
        return UserError(f"{model_dir}: a file, not {expected}")
    if not os.path.isdir(model_dir):
        return UserError(f"{model_dir}: no such model directory")
    names = os.listdir(model_dir)
    if names and all(n.startswith(".") for n in names):
        if os.path.isfile(os.path.join(model_dir, ".checkpoint", "run.json")):  # maxent's epoch checkpoints
            return UserError(f"{model_dir}: holds a maxent training that stopped before it wrote its model: go on "
                             f"with 'sampledlm maxent train --resume {model_dir}' (or remove the directory to start "
                             "over)")
        return UserError(f"{model_dir}: holds no model, only what an interrupted command left (a lock or temporary "
                         "files): run that command again, or remove the directory")
    return UserError(f"{model_dir}: holds no config.json, so it is not {expected}")


def read_config(model_dir: str) -> tuple[dict, str]:
    """``(config, family)`` of a model directory; a clear error for anything else."""
    if not os.path.isdir(model_dir):
        raise no_model_here(model_dir)
    path = os.path.join(model_dir, "config.json")
    names = os.listdir(model_dir)
    if not os.path.exists(path) and names and all(n.startswith(".") for n in names):
        raise no_model_here(model_dir)
    config = read_json(path)
    if not isinstance(config, dict):
        raise UserError(f"{path}: not a sampledlm model config (a JSON object is expected)")
    fmt = config.get("format")
    for key in ("format", "family"):  # looked up in tables below: a list or an object would not even hash
        if key in config and not isinstance(config[key], str):
            raise UserError(f"{path}: field {key!r} should be a string, found {type(config[key]).__name__}")
    if fmt in LEGACY_FORMATS:
        return config, LEGACY_FORMATS[fmt]
    if fmt != FORMAT:
        raise UserError(f"{path}: not a sampledlm model (format {fmt!r}; expected {FORMAT!r})")
    if config.get("family") == "embeddings":  # ours, but no language model: it assigns no probabilities
        raise UserError(f"{os.path.dirname(path) or '.'}: word embeddings, not a language model (their commands: "
                        "sampledlm embed eval / neighbors / plot)")
    if config.get("version") != VERSION:
        raise UserError(f"{path}: model format version {config.get('version')!r} is not supported by this "
                        f"sampledlm (it reads version {VERSION})")
    family = config.get("family")
    if family not in FAMILIES:
        raise UserError(f"{path}: unknown model family {family!r} (known: {', '.join(FAMILIES)})")
    return config, family


def load_vocab_checked(model_dir: str, config: dict) -> Vocab:
    """``vocab.txt`` of a model directory, refused unless its size and fingerprint match config.json."""
    path = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    vocab = Vocab.load(path)
    want = config.get("vocab")
    cpath = os.path.join(model_dir, "config.json")
    if not isinstance(want, dict):
        raise UserError(f"{cpath}: no vocabulary fingerprint")
    size, fingerprint = want.get("size"), want.get("fingerprint")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1 or not isinstance(fingerprint, str):
        # the record is what was damaged, not the vocabulary file
        raise UserError(f"{cpath}: vocab: expected a size (a whole number) and a fingerprint (a string), found "
                        f"{json.dumps(want)[:120]}")
    if len(vocab) != want.get("size") or vocab.fingerprint() != want.get("fingerprint"):
        raise UserError(f"{path}: vocabulary does not match config.json (size {len(vocab)} vs {want.get('size')}, "
                        f"fingerprint {vocab.fingerprint()} vs {want.get('fingerprint')}); the file was changed")
    return vocab


def check_type(config: dict, key: str, kind, path: str):
    """``config[key]``, refused with a clear message unless it is of JSON type ``kind``."""
    value = config.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind in (int, float, (int, float)):
        name = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise UserError(f"{path}: field {key!r} should be a {name}, found {type(value).__name__}")
    return value


# --- locks -----------------------------------------------------------------------------------
def lock_directory(path: str):
    """Hold an exclusive lock on ``path/.lock`` while writing into ``path``
    (:func:`sampledlm.outputs.lock_directory`): a second process that asks for the same directory stops at once with a
    clear message instead of interleaving its files with the first one's; the lock is released when the process
    ends, however it ends (an OS file lock), and its file removed when the block ends. What a killed writer of the
    directory left (temporaries in it and in ``checkpoints/``) is swept once the lock is held."""
    from .outputs import lock_directory as lock

    return lock(path, sweep=("", "checkpoints"), remove_created=False,
                busy_hint="; wait for it to finish or choose another output")
