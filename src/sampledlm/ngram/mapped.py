"""The binary n-gram model directory: flat arrays that load by memory-mapping.

``sampledlm ngram build-binary MODEL.arpa -o DIR`` writes::

    DIR/config.json    {"format": "sampledlm-model", "family": "ngram", "version": 2,
                        "ngram": {"order": N, "counts": [M_1 .. M_N], "words": W, "info": {...}}}
    DIR/words.json     the W model words, id order (<s>, </s>, <unk> among them)
    DIR/keys_K.npy     int64 [M_K]   sorted keys ctx * W + word (:mod:`.tables`; order 1: arange(W))
    DIR/logp_K.npy     float64 [M_K] log10 p of each stored n-gram
    DIR/bow_K.npy      float64 [M_K] log10 back-off weight (0 where the n-gram is no context)
    DIR/provenance.json, DIR/README.md   versions, date, and the model card (:mod:`sampledlm.provenance`;
                       informative only: never read when the model loads, absent from directories before 0.2.0)

the very arrays of :class:`~.model.NgramLM` (KenLM's sorted-array layout, searched by bisection),
so a query needs nothing rebuilt: :func:`open_binary` maps the ``.npy`` files read-only
(``np.load(mmap_mode="r")``) and reads only the small JSON files. Loading costs the same for a
model of 1 MB or 10 GB; a query then faults in the pages it touches (a binary search touches
about log2(M) of them, the top ones shared by every query). The probabilities are stored as
float64, so every query answers exactly what the ARPA file it came from answers.

Loading checks each array's dtype and length against ``config.json`` (headers only); the
content is not hashed (that would read the whole model), but ``config.json`` records each
file's SHA-256 and :func:`verify_binary` (``sampledlm ngram build-binary --verify DIR``) checks them.
A query checks what it returns (:class:`MappedNgramLM`): a log10 probability that is not a finite
number <= 0 comes from a damaged file, reported as such (a :class:`UserError`), not a silent ``nan``
perplexity.

Every file is written atomically, the informative provenance files next to last and ``config.json`` last, so a
directory whose writer was killed has no ``config.json`` and is refused as incomplete; the next ``build-binary`` (or ``prune
--binary``) into it writes it again (:func:`interrupted_write`) without asking for ``--force``.
A write that fails with an exception (a full disk, an interrupt) removes what it wrote before the
exception goes on (:func:`write_binary_arrays`), and the writer's ``.lock`` is removed when it is done
(:func:`lock_directory`): a finished directory holds the model's files only.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import re
import shutil

import numpy as np

from ..errors import UserError
from ..data.textio import atomic_write, read_json
from ..data.tokenizer import TextOptions
from .model import NgramLM, NgramTable

FORMAT, FAMILY, VERSION = "sampledlm-model", "ngram", 2
ARRAYS = (("keys", np.int64), ("logp", np.float64), ("bow", np.float64))


def _file_hash(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


#: The files :func:`write_binary` writes before config.json (keys_1.npy first), and their hidden temporaries (and
#: the provenance files of a model a killed write was replacing).
_WRITTEN = re.compile(r"^((keys|logp|bow)_[0-9]+\.npy|words\.json|\..+\.tmp|\.replaced|provenance\.json|README\.md)$")
#: Where the files of the model being replaced wait until the new one is complete (restored if it fails).
REPLACED = ".replaced"
#: The files of a model (less config.json): its arrays, its words, and after config.json its provenance and model
#: card (:mod:`sampledlm.provenance`: informative, never read by a loader).
_MODEL_FILE = re.compile(r"^((keys|logp|bow)_[0-9]+\.npy|words\.json|provenance\.json|README\.md)$")


def interrupted_write(names: list[str]) -> bool:
    """Whether a directory holding ``names`` and no config.json is what a killed :func:`write_binary` left:
    nothing but its files and temporaries, the first of them (keys_1.npy, or its temporary) among them."""
    names = [n for n in names if n != ".lock"]
    temps = [n for n in names if n == REPLACED or n.startswith(".") and n.endswith(".tmp")]  # killed at any file
    return bool(names) and all(_WRITTEN.match(n) for n in names) and (
        any(n.startswith(("keys_", ".keys_")) for n in names) or len(temps) == len(names))


def lock_directory(out_dir: str):
    """An exclusive OS lock on ``out_dir/.lock`` while writing (:func:`sampledlm.outputs.lock_directory`: a second
    writer stops with a clear message, the lock file is gone once the block ends, and a directory this created is
    removed again if the block fails and nothing is left in it; a killed writer's ``.lock`` is taken by the next)."""
    from ..outputs import lock_directory as lock

    return lock(out_dir)


#: The provenance records of the texts the model being written comes from (``{role: {path, bytes, sha256}}``),
#: set by the command around the write (:func:`data_records_of_write`).
_DATA_RECORDS: contextvars.ContextVar[dict] = contextvars.ContextVar("ngram_data_records", default={})
#: How the texts were read (:class:`~sampledlm.data.tokenizer.TextOptions`), recorded in the model's info so that
#: eval, score and generate read text as training did (an ARPA file has no place for them)
_TEXT_OPTIONS: contextvars.ContextVar[dict] = contextvars.ContextVar("ngram_text_options", default={})


@contextlib.contextmanager
def data_records_of_write(records: dict, text_options=None):
    """Within the block, :func:`write_binary_arrays` writes ``records`` into the model's provenance (a command's
    texts, hashed before the estimate: :mod:`.build.output`) and ``text_options`` (a TextOptions or its dict; the
    defaults are not written) into its info."""
    opts = text_options.to_dict() if hasattr(text_options, "to_dict") else dict(text_options or {})
    tokens = _DATA_RECORDS.set(dict(records)), _TEXT_OPTIONS.set(opts)
    try:
        yield
    finally:
        _DATA_RECORDS.reset(tokens[0])
        _TEXT_OPTIONS.reset(tokens[1])


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
    (bounded estimation, :mod:`.binary_stream`); the files are those ``np.save`` writes.

    The files of a model being replaced wait in :data:`REPLACED` until the new one is complete. When the
    write fails with an exception (a full disk, Ctrl-C), every file it wrote is removed and the replaced
    model put back before the exception goes on; the lock file goes with :func:`lock_directory`. A killed writer leaves
    its files without config.json, which the next write completes (:func:`interrupted_write`)."""
    if not locked:
        with lock_directory(out_dir):
            return write_binary_arrays(out_dir, words, counts, info, arrays, locked=True)
    order = len(counts)
    old = os.path.join(out_dir, "config.json")
    backup = os.path.join(out_dir, REPLACED)
    if os.path.isdir(backup):  # a model a killed write was replacing: the user asked to replace it
        shutil.rmtree(backup, ignore_errors=True)
    names = os.listdir(out_dir)
    kept: list[str] = []  # the model being replaced, moved aside (config.json first: the directory is incomplete)
    if "config.json" in names:
        os.mkdir(backup)
        for name in ["config.json"] + [n for n in names if _MODEL_FILE.match(n)]:
            os.replace(os.path.join(out_dir, name), os.path.join(backup, name))
            kept.append(name)
        names = os.listdir(out_dir)
    written: list[str] = []
    try:
        for name in names:  # arrays of a higher order, of a killed write
            m = re.match(r"^(keys|logp|bow)_([0-9]+)\.npy$", name)
            if m and int(m.group(2)) > order:
                os.remove(os.path.join(out_dir, name))
        hashes = {}
        for k in range(1, order + 1):
            for name, dtype in ARRAYS:
                fname = f"{name}_{k}.npy"
                hashes[fname] = _write_npy(os.path.join(out_dir, fname), arrays(name, k), counts[k - 1], dtype)
                written.append(fname)
        with atomic_write(os.path.join(out_dir, "words.json")) as f:
            json.dump(list(words), f, ensure_ascii=False)
        written.append("words.json")
        hashes["words.json"] = _file_hash(os.path.join(out_dir, "words.json"))
        info = {k: v for k, v in info.items() if isinstance(v, (str, int, float, list, dict, bool, type(None)))}
        if _TEXT_OPTIONS.get() and _TEXT_OPTIONS.get() != TextOptions().to_dict():
            info["text_options"] = _TEXT_OPTIONS.get()
        config = {"format": FORMAT, "family": FAMILY, "version": VERSION,
                  "ngram": {"order": order, "counts": list(counts), "words": len(words), "info": info,
                            "sha256": hashes}}
        from .. import provenance

        # the provenance files before config.json: a kill between them leaves an incomplete directory, which the
        # next write completes (sweeping the killed writer's temporaries), never a complete model beside a stray
        # temporary file that no later command would touch
        written += sorted(provenance.NAMES)
        provenance.write(out_dir, provenance.new("ngram", describe(config), _DATA_RECORDS.get(), "cpu"))
        with atomic_write(old) as f:
            json.dump(config, f, indent=2)
            f.write("\n")
    except (Exception, KeyboardInterrupt):  # not a kill (nor a BaseException standing for one): undo, go on
        for name in written:  # atomic_write has removed its own temporary
            with contextlib.suppress(OSError):
                os.remove(os.path.join(out_dir, name))
        for name in kept[1:] + kept[:1]:  # the replaced model back, config.json last
            with contextlib.suppress(OSError):
                os.replace(os.path.join(backup, name), os.path.join(out_dir, name))
        with contextlib.suppress(OSError):
            os.rmdir(backup)
        raise
    if kept:
        shutil.rmtree(backup, ignore_errors=True)


def describe(config: dict) -> str:
    """One line saying what a binary directory's model is (its model card's first line)."""
    ng = config["ngram"]
    info = ng.get("info") or {}
    how = f", {info['smoothing']} smoothing" if isinstance(info.get("smoothing"), str) else ""
    pruned = ", entropy-pruned" if isinstance(info.get("pruned"), dict) else ""
    return (f"A back-off n-gram model (binary directory): order {ng['order']}{how}{pruned}, "
            f"{ng['words']:,} words, n-grams {', '.join(f'{c:,}' for c in ng['counts'])}")


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
    """``path`` (a 1-d ``.npy`` of ``want_len`` elements of ``dtype``) mapped read-only: its header is read, not its data."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file (the binary model directory is incomplete)")
    try:
        if want_len:
            arr = np.lib.format.open_memmap(path, mode="r")
        else:  # nothing to map (mmap refuses an empty range)
            with open(path, "rb") as f:
                arr = np.lib.format.read_array(f, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:  # EOFError: numpy's answer to an empty file
        why = "an empty file" if isinstance(e, EOFError) or _size(path) == 0 else (str(e) or type(e).__name__)
        raise UserError(f"{path}: not a readable .npy array ({why})") from None
    if arr.dtype != np.dtype(dtype) or arr.ndim != 1 or len(arr) != want_len:
        raise UserError(f"{path}: holds {arr.dtype}{list(arr.shape)}, config.json says {np.dtype(dtype)}[{want_len}]")
    return arr


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1


def open_binary(path: str, config: dict | None = None) -> "MappedNgramLM":
    """The :class:`NgramLM` of a binary model directory, its arrays memory-mapped read-only.

    Loading reads config.json, words.json and each array's ``.npy`` header: what it checks is each array's
    dtype and length (against config.json), never the values, so it costs the same for any model size.
    Each query's results are checked (:class:`MappedNgramLM`): a log10 probability that is not a finite
    number <= 0 (a NaN, an infinity or a positive value read from an array) is reported as a damaged
    directory. Damage that leaves plausible numbers (zeroed pages, a changed digit, keys out of
    order, which bisection silently misses) cannot be seen without reading everything: finding it is the
    job of the checksums, ``sampledlm ngram build-binary --verify DIR`` (:func:`verify_binary`)."""
    sec = _section(path, config)
    wpath = os.path.join(path, "words.json")
    words = read_json(wpath, missing="the binary model directory is incomplete")
    if not (isinstance(words, list) and len(words) == sec["words"] and all(isinstance(w, str) for w in words)
            and len(set(words)) == len(words)):
        raise UserError(f"{wpath}: expected {sec['words']} distinct words as a JSON list of strings")
    want = (sec.get("sha256") or {}).get("words.json") if isinstance(sec.get("sha256"), dict) else None
    if want and _file_hash(wpath) != want:  # small: checked at every open
        raise UserError(f"{wpath}: differs from the checksum config.json records (a word renamed or the file "
                        "replaced); build the binary directory again")
    tables = []
    for k, m in enumerate(sec["counts"], 1):
        arrays = [_map(os.path.join(path, f"{name}_{k}.npy"), m, dtype) for name, dtype in ARRAYS]
        tables.append(NgramTable(*arrays))
    info = dict(sec.get("info") or {})
    info["source"] = path
    try:
        lm = MappedNgramLM(words, tables, info)
    except KeyError as e:
        raise UserError(f"{wpath}: the word list lacks {e.args[0]}") from None
    lm.directory = path
    return lm


class MappedNgramLM(NgramLM):
    """:class:`NgramLM` over memory-mapped arrays that checks what each query returns.

    Nothing checked the arrays' values at load (:func:`open_binary`). A valid model gives every
    prediction, and every subset of words, a finite log10 probability <= 0; anything else can only
    come from a damaged array, so a query that gives one raises a :class:`UserError` pointing to
    ``build-binary --verify``, which names the file. The check is one vectorised pass over the results
    (the compiled stream scorer reads the arrays inside its kernels, so its results are where to look)."""

    directory = ""
    TOLERANCE = 1e-6  # a back-off weight plus a rounded log10 probability may pass 0 by the 8th digit

    def _check(self, out: np.ndarray, what: str = "log10 probability") -> None:
        v = np.asarray(out)
        bad = ~(np.isfinite(v) & (v <= self.TOLERANCE))
        if bad.any():
            d = self.directory or self.info.get("source", "")
            raise UserError(f"{d}: damaged: a query gave the {what} {float(v[bad][0])!r}, which no valid model "
                            f"gives; sampledlm ngram build-binary --verify {d} names the damaged file (then build the "
                            "directory again)")

    def check_all(self) -> None:
        """Every value checked, as :func:`.arpa.read_arpa` checks an ARPA file's (reads the whole model: for
        what reads it anyway, as pruning): log10 probabilities finite and <= 0, back-off weights finite, keys
        strictly increasing (the lookups bisect them). A :class:`UserError` naming the file otherwise."""
        d = self.directory or self.info.get("source", "")
        for k, t in enumerate(self.tables, 1):
            for name, arr, ok in (("logp", t.logp, lambda v: np.isfinite(v) & (v <= 0)),
                                  ("bow", t.bow, np.isfinite)):
                bad = np.flatnonzero(~ok(np.asarray(arr)))
                if len(bad):
                    raise UserError(f"{os.path.join(d, f'{name}_{k}.npy')}: damaged: entry {int(bad[0])} is "
                                    f"{float(arr[bad[0]])!r}; check with sampledlm ngram build-binary --verify {d}")
            keys = np.asarray(t.keys)
            if len(keys) > 1 and not bool(np.all(keys[1:] > keys[:-1])):
                raise UserError(f"{os.path.join(d, f'keys_{k}.npy')}: damaged: keys out of order; check with "
                                f"sampledlm ngram build-binary --verify {d}")

    def _back_off(self, ctx, gram, with_order):
        out = super()._back_off(ctx, gram, with_order)
        self._check(out[0] if with_order else out)
        return out

    def _stream_logprob10(self, words, is_eos):
        out, order = super()._stream_logprob10(words, is_eos)
        self._check(out)
        return out, order

    def subset_logmass10_ids(self, hist, member):
        out = super().subset_logmass10_ids(hist, member)
        self._check(out, "log10 probability mass")
        return out


def verify_binary(path: str) -> list[str]:
    """The files of a binary model directory that do not match config.json's SHA-256 record, each as its name
    (its content differs), ``NAME (missing)`` or ``NAME (unreadable: why)``; empty: every file intact."""
    sec = _section(path, None)
    sums = sec.get("sha256")
    if not isinstance(sums, dict) or not sums:
        raise UserError(f"{os.path.join(path, 'config.json')}: records no checksums (sha256): nothing to verify against")
    bad = []
    for name, want in sorted(sums.items()):
        p = os.path.join(path, name)
        if not os.path.lexists(p):
            bad.append(f"{name} (missing)")
            continue
        try:
            got = _file_hash(p)
        except OSError as e:
            bad.append(f"{name} (unreadable: {e.strerror or e})")
            continue
        if got != want:
            bad.append(name)
    return bad


def check_before_use(paths) -> float:
    """``eval``'s default check: every binary model directory among ``paths`` against the SHA-256 of each of its
    files that config.json records (:func:`verify_binary`), so that a damaged or edited array (a shifted log
    probability) is an error, not a plausible perplexity; other paths are skipped. Returns the seconds spent."""
    import time

    t0 = time.perf_counter()
    for path in paths:
        if os.path.isdir(path) and is_binary(path):
            sums = _section(path, None).get("sha256")
            if not isinstance(sums, dict) or not sums:
                continue  # written before checksums were recorded: nothing to check against
            bad = verify_binary(path)
            if bad:
                raise UserError(f"{path}: {', '.join(bad)} differ(s) from the checksums config.json records: the "
                                "directory is damaged or was edited; build it again (or give --no-verify to use "
                                "it anyway)")
    return time.perf_counter() - t0
