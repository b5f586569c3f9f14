"""The binary n-gram model directory: flat arrays that load by memory-mapping.

``sampledlm ngram build-binary MODEL.arpa -o DIR`` writes::

    DIR/config.json    {"format": "sampledlm-model", "family": "ngram", "version": 2,
                        "ngram": {"order": N, "counts": [M_1 .. M_N], "words": W, "info": {...}}}
    DIR/words.json     the W model words, id order (<s>, </s>, <unk> among them)
    DIR/keys_K.npy     int64 [M_K]   sorted keys ctx * W + word (:mod:`.tables`; order 1: arange(W))
    DIR/logp_K.npy     float64 [M_K] log10 p of each stored n-gram
    DIR/bow_K.npy      float64 [M_K] log10 back-off weight (0 where the n-gram is no context)

the very arrays of :class:`~.model.NgramLM` (KenLM's sorted-array layout, searched by bisection),
so a query needs nothing rebuilt: :func:`open_binary` maps the ``.npy`` files read-only
(``np.load(mmap_mode="r")``) and reads only the small JSON files. Loading costs the same for a
model of 1 MB or 10 GB; a query then faults in the pages it touches (a binary search touches
about log2(M) of them, the top ones shared by every query). The probabilities are stored as
float64, so every query answers exactly what the ARPA file it came from answers.

Loading checks each array's dtype and length against ``config.json`` (headers only); the
content is not hashed (that would read the whole model), but ``config.json`` records each
file's SHA-256 and :func:`verify_binary` (``sampledlm ngram build-binary --verify DIR``) checks them.
Every file is written atomically and ``config.json`` last, so a directory whose writer was
killed has no ``config.json`` and is refused as incomplete; the next ``build-binary`` (or ``prune
--binary``) into it writes it again (:func:`interrupted_write`) without asking for ``--force``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re

import numpy as np

from ..errors import UserError
from ..data.textio import atomic_write, read_json, sweep_dead_temps
from .model import NgramLM, NgramTable

FORMAT, FAMILY, VERSION = "sampledlm-model", "ngram", 2
ARRAYS = (("keys", np.int64), ("logp", np.float64), ("bow", np.float64))


def _file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


#: The files :func:`write_binary` writes before config.json (keys_1.npy first), and their hidden temporaries.
_WRITTEN = re.compile(r"^((keys|logp|bow)_[0-9]+\.npy|words\.json|\..+\.tmp)$")


def interrupted_write(names: list[str]) -> bool:
    """Whether a directory holding ``names`` and no config.json is what a killed :func:`write_binary` left:
    nothing but its files and temporaries, the first of them (keys_1.npy, or its temporary) among them."""
    names = [n for n in names if n != ".lock"]
    return bool(names) and all(_WRITTEN.match(n) for n in names) and any(n.startswith(("keys_", ".keys_"))
                                                                         for n in names)


@contextlib.contextmanager
def lock_directory(out_dir: str):
    """An exclusive OS lock on ``out_dir/.lock`` while writing (a second writer stops with a clear message).

    :func:`sampledlm.store.lock_directory` does the same for model directories, but ``store`` imports torch,
    which the n-gram commands never load (they start in a fraction of a second)."""
    import fcntl

    try:
        os.makedirs(out_dir, exist_ok=True)
        fd = os.open(os.path.join(out_dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise UserError(f"{out_dir}: cannot create or lock this directory ({e.strerror or e})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"{out_dir}: another sampledlm process is writing into this directory") from None
        sweep_dead_temps(out_dir)
        yield
    finally:
        os.close(fd)


def write_binary(lm: NgramLM, out_dir: str, locked: bool = False) -> None:
    """Write ``lm`` as a binary model directory (module docstring); atomic per file, config.json last.
    ``locked``: the caller holds the directory's lock (:func:`lock_directory`, taken here otherwise)."""
    write_binary_arrays(out_dir, list(lm.words), lm.counts(), lm.info,
                        lambda name, k: [getattr(lm.tables[k - 1], name)], locked)


def write_binary_arrays(out_dir: str, words: list[str], counts: list[int], info: dict, arrays,
                        locked: bool = False) -> None:
    """The binary model directory from arrays given in pieces: ``arrays(name, k)`` yields, in order, the
    parts of array ``name`` (keys, logp, bow) of order k, ``counts[k-1]`` elements in all. Each ``.npy``
    file is written (and hashed) a part at a time, so a model larger than memory streams through
    (bounded estimation, :mod:`.binary_stream`); the files are those ``np.save`` writes."""
    if not locked:
        with lock_directory(out_dir):
            return write_binary_arrays(out_dir, words, counts, info, arrays, locked=True)
    order = len(counts)
    old = os.path.join(out_dir, "config.json")
    if os.path.exists(old):
        os.remove(old)  # the directory is incomplete until the new config.json lands
    for name in os.listdir(out_dir):  # arrays of a higher order, of the model replaced or a killed write
        m = re.match(r"^(keys|logp|bow)_([0-9]+)\.npy$", name)
        if m and int(m.group(2)) > order:
            os.remove(os.path.join(out_dir, name))
    hashes = {}
    for k in range(1, order + 1):
        for name, dtype in ARRAYS:
            fname = f"{name}_{k}.npy"
            hashes[fname] = _write_npy(os.path.join(out_dir, fname), arrays(name, k), counts[k - 1], dtype)
    with atomic_write(os.path.join(out_dir, "words.json")) as f:
        json.dump(list(words), f, ensure_ascii=False)
    hashes["words.json"] = _file_hash(os.path.join(out_dir, "words.json"))
    info = {k: v for k, v in info.items() if isinstance(v, (str, int, float, list, dict, bool, type(None)))}
    config = {"format": FORMAT, "family": FAMILY, "version": VERSION,
              "ngram": {"order": order, "counts": list(counts), "words": len(words), "info": info, "sha256": hashes}}
    with atomic_write(old) as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def _write_npy(path: str, parts, length: int, dtype) -> str:
    """A 1-d ``.npy`` file of ``length`` elements from ``parts`` (atomic); returns its SHA-256."""
    import io

    dtype = np.dtype(dtype)
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                "fortran_order": False, "shape": (int(length),)})
    h = hashlib.sha256(head.getvalue())
    written = 0
    with atomic_write(path, "wb") as f:
        f.write(head.getvalue())
        for part in parts:
            data = np.ascontiguousarray(part, dtype=dtype)
            f.write(data)
            h.update(data)
            written += len(data)
        if written != length:
            raise AssertionError(f"{path}: {written} elements written, {length} expected")
    return h.hexdigest()


def is_binary(path: str) -> bool:
    """Whether ``path`` is a directory holding a binary n-gram model (by its config.json)."""
    cfg = os.path.join(path, "config.json")
    if not os.path.isfile(cfg):
        return False
    try:
        with open(cfg, encoding="utf-8") as f:
            conf = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(conf, dict) and conf.get("family") == FAMILY


def _read_config(path: str) -> dict:
    """config.json of a binary directory (read here: the model-directory module imports torch, a second's cost)."""
    cpath = os.path.join(path, "config.json")
    if not os.path.isfile(cpath):
        raise UserError(f"{cpath}: no such file (not a model directory, or one whose writer did not finish)")
    try:
        with open(cpath, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError(f"{cpath}: not valid JSON ({e})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT or config.get("family") != FAMILY:
        raise UserError(f"{cpath}: not a binary n-gram model (format/family are not {FORMAT!r}/{FAMILY!r})")
    if config.get("version") != VERSION:
        raise UserError(f"{cpath}: model format version {config.get('version')!r} is not supported (this reads {VERSION})")
    return config


def _section(path: str, config: dict | None) -> dict:
    if config is None:
        config = _read_config(path)
    sec = config.get("ngram")
    cpath = os.path.join(path, "config.json")
    if not isinstance(sec, dict):
        raise UserError(f"{cpath}: no 'ngram' section: not a binary n-gram model")
    order, counts, width = sec.get("order"), sec.get("counts"), sec.get("words")
    if not (isinstance(order, int) and order >= 1 and isinstance(counts, list) and len(counts) == order
            and all(isinstance(c, int) and c >= 0 for c in counts) and isinstance(width, int) and counts[0] == width):
        raise UserError(f"{cpath}: 'ngram' section malformed (order {order!r}, counts {counts!r}, words {width!r})")
    return sec


def _map(path: str, want_len: int, dtype) -> np.ndarray:
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file (the binary model directory is incomplete)")
    try:
        arr = np.load(path, mmap_mode="r") if want_len else np.load(path)
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a readable .npy array ({e})") from None
    if arr.dtype != np.dtype(dtype) or arr.ndim != 1 or len(arr) != want_len:
        raise UserError(f"{path}: holds {arr.dtype}{list(arr.shape)}, config.json says {np.dtype(dtype)}[{want_len}]")
    return arr


def open_binary(path: str, config: dict | None = None) -> NgramLM:
    """The :class:`NgramLM` of a binary model directory, its arrays memory-mapped read-only."""
    sec = _section(path, config)
    wpath = os.path.join(path, "words.json")
    words = read_json(wpath, missing="the binary model directory is incomplete")
    if not (isinstance(words, list) and len(words) == sec["words"] and all(isinstance(w, str) for w in words)
            and len(set(words)) == len(words)):
        raise UserError(f"{wpath}: expected {sec['words']} distinct words as a JSON list of strings")
    tables = []
    for k, m in enumerate(sec["counts"], 1):
        arrays = [_map(os.path.join(path, f"{name}_{k}.npy"), m, dtype) for name, dtype in ARRAYS]
        tables.append(NgramTable(*arrays))
    info = dict(sec.get("info") or {})
    info["source"] = path
    try:
        return NgramLM(words, tables, info)
    except KeyError as e:
        raise UserError(f"{wpath}: the word list lacks {e.args[0]}") from None


def verify_binary(path: str) -> list[str]:
    """Files of a binary model directory whose SHA-256 differs from config.json's record (empty: all intact)."""
    sec = _section(path, None)
    bad = []
    for name, want in sorted((sec.get("sha256") or {}).items()):
        p = os.path.join(path, name)
        if not os.path.isfile(p) or _file_hash(p) != want:
            bad.append(name)
    return bad
