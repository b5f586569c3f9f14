"""word2vec's two file formats, and the toolkit's own embedding directory.

**Text** (``word2vec -binary 0``): a header line ``V dim``, then one line per word: the word and its
``dim`` values separated by single spaces. We write each value with 9 significant digits, enough
for a float32 to read back bit for bit (word2vec.c's ``%lf`` keeps 6 decimals and loses bits).

**Binary** (``word2vec -binary 1``): the same header line, then per word the UTF-8 word, a space,
``dim`` little-endian float32 (``4 * dim`` bytes) and a newline (word2vec.c writes one; gensim
writes none, so the reader skips any whitespace before a word).

Both load in gensim's ``KeyedVectors.load_word2vec_format`` (``binary=False/True``) with identical
vectors, and both readers here read gensim's files. Words may not contain whitespace.

**Directory** (``sampledlm embed train -o DIR``): the model-directory envelope of the toolkit:
``config.json`` (``"format": "sampledlm-model", "family": "embeddings"``, the training options
and figures), ``vocab.txt`` (``word<TAB>count``), ``vectors.safetensors`` (``input [V, dim]`` and
the output side: ``output [V, dim]`` for negative sampling, ``nodes [V - 1, dim]`` for the tree),
checksummed, and the word vectors again as ``vectors.bin`` and ``vectors.txt``. ``config.json`` is
written last: a directory without one is a write that did not finish. :func:`load_vectors` opens
any of the three, by content.
"""

from __future__ import annotations

import contextlib
import hashlib
import os

import numpy as np

from ..data.textio import atomic_write
from ..errors import UserError
from .vectors import WordVectors

FAMILY = "embeddings"


def _check_words(path: str, words: list[str]) -> None:
    for w in words:
        if not w or any(c.isspace() for c in w):
            raise UserError(f"{path}: cannot write word {w!r}: word2vec files hold no empty word or whitespace in one")


def write_text(path: str, wv: WordVectors) -> None:
    """word2vec text format, written atomically."""
    _check_words(path, wv.words)
    with atomic_write(path) as f:
        f.write(f"{len(wv)} {wv.dim}\n")
        fmt = " ".join(["%.9g"] * wv.dim)
        for w, row in zip(wv.words, wv.vectors.astype(np.float64)):
            f.write(w + " " + fmt % tuple(row) + "\n")


def write_binary(path: str, wv: WordVectors) -> None:
    """word2vec binary format, written atomically."""
    _check_words(path, wv.words)
    vec = wv.vectors.astype("<f4")
    with atomic_write(path, "wb") as f:
        f.write(f"{len(wv)} {wv.dim}\n".encode())
        for w, row in zip(wv.words, vec):
            f.write(w.encode("utf-8") + b" " + row.tobytes() + b"\n")


def _header(path: str, line: bytes) -> tuple[int, int]:
    parts = line.split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise UserError(f"{path}:1: expected a word2vec header 'WORDS DIM', found {line[:60]!r}")
    v, d = int(parts[0]), int(parts[1])
    if d == 0:
        raise UserError(f"{path}:1: vector size 0")
    return v, d


def _bad_word(w: str) -> bool:
    return not w or any(c.isspace() for c in w)


def _check_size(path: str, v: int, d: int, min_bytes_per_value: int, file_size: int) -> None:
    """A damaged header must not make the reader allocate more than the file could hold."""
    if v * d * min_bytes_per_value > file_size:
        raise UserError(f"{path}:1: the header announces {v} words of {d} values, more than the file's "
                        f"{file_size} bytes can hold")


def is_binary(path: str) -> bool:
    """True unless the first line after the header reads as text: a word and ``dim`` numbers."""
    with open(path, "rb") as f:
        header = f.readline()
        parts = header.split()
        d = int(parts[1]) if len(parts) == 2 and parts[1].isdigit() else -1
        first = f.readline(64 * 1024)
    try:
        fields = first.decode("utf-8").rstrip().split(" ")
        if len(fields) != d + 1:
            return True
        [float(x) for x in fields[1:]]
        return False
    except (UnicodeDecodeError, ValueError):
        return True


def read_text(path: str) -> WordVectors:
    """Read a word2vec text file; one-line errors naming the line."""
    words: list[str] = []
    with open(path, "rb") as f:
        v, d = _header(path, f.readline())
        _check_size(path, v, d, 2, os.fstat(f.fileno()).st_size)  # a value and its separator: 2 bytes at least
        vec = np.empty((v, d), dtype=np.float32)
        for n, raw in enumerate(f, 2):
            if not raw.strip():
                continue
            if len(words) == v:
                raise UserError(f"{path}:{n}: more than the {v} words the header announces")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise UserError(f"{path}:{n}: not UTF-8 text") from None
            parts = line.rstrip().split(" ")
            if len(parts) != d + 1:
                raise UserError(f"{path}:{n}: expected a word and {d} values, found {len(parts) - 1} values")
            if _bad_word(parts[0]):
                raise UserError(f"{path}:{n}: the word {parts[0]!r} is empty or holds white space")
            try:
                with np.errstate(over="ignore"):
                    row = np.asarray(parts[1:], dtype=np.float32)
            except ValueError:
                raise UserError(f"{path}:{n}: a value of {parts[0]!r} is not a number") from None
            if not np.isfinite(row).all():
                raise UserError(f"{path}:{n}: a value of {parts[0]!r} is not a finite float32 (NaN, inf or too large)")
            vec[len(words)] = row
            words.append(parts[0])
    if len(words) != v:
        raise UserError(f"{path}: the header announces {v} words, the file holds {len(words)}")
    if not np.isfinite(vec).all():
        raise UserError(f"{path}: holds non-finite values (NaN or inf)")
    return WordVectors(words, vec)


def read_binary(path: str) -> WordVectors:
    """Read a word2vec binary file (with or without a newline after each vector)."""
    with open(path, "rb") as f:
        data = f.read()
    nl = data.find(b"\n")
    v, d = _header(path, data[: nl if nl >= 0 else len(data)])
    pos = nl + 1
    words: list[str] = []
    _check_size(path, v, d, 4, len(data))
    vec = np.empty((v, d), dtype=np.float32)
    size = 4 * d
    for i in range(v):
        while pos < len(data) and data[pos] in b" \n\r\t":
            pos += 1
        sp = data.find(b" ", pos)
        if sp < 0 or sp + 1 + size > len(data):
            raise UserError(f"{path}: truncated at word {i + 1} of {v} (byte {pos})")
        try:
            word = data[pos:sp].decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{path}: word {i + 1} (byte {pos}) is not UTF-8") from None
        if _bad_word(word):
            raise UserError(f"{path}: word {i + 1} (byte {pos}), {word[:40]!r}, is empty or holds white space")
        words.append(word)
        vec[i] = np.frombuffer(data, dtype="<f4", count=d, offset=sp + 1)
        pos = sp + 1 + size
    if data[pos:].strip():
        raise UserError(f"{path}: {len(data) - pos} bytes after the {v} words the header announces")
    if not np.isfinite(vec).all():
        raise UserError(f"{path}: holds non-finite values (NaN or inf)")
    return WordVectors(words, vec)


def fingerprint(words: list[str]) -> str:
    return hashlib.sha1("\n".join(words).encode("utf-8")).hexdigest()[:16]


#: What :func:`write_directory` writes before config.json, in order (vectors.safetensors first: see
#: :func:`interrupted_write`).
DIRECTORY_FILES = ("vectors.safetensors", "vocab.txt", "vectors.bin", "vectors.txt")


#: the prefix of the files :func:`write_directory` writes before it moves them into place
STAGED = ".staged."


def interrupted_write(names: list[str]) -> bool:
    """Whether a directory holding ``names`` (and no config.json) is what a killed :func:`write_directory` left:
    nothing but its files, their staged copies, the provenance files and their hidden temporaries, the first of
    them (vectors.safetensors) among them. A directory holding only a vocab.txt, say, is someone's files, not a
    write of ours."""
    from ..provenance import NAMES

    names = [n for n in names if n != ".lock"]
    ours = all(n in DIRECTORY_FILES or n in NAMES or n.startswith(STAGED) or (n.startswith(".") and n.endswith(".tmp"))
               for n in names)
    # the first file written is vectors.safetensors, staged: a kill in its write leaves only that file's temporary
    return ours and any(n.startswith(("vectors.", ".vectors.", STAGED + "vectors.", "." + STAGED + "vectors."))
                        for n in names)


def write_directory(path: str, wv: WordVectors, extra: dict, tensors: dict[str, np.ndarray], text: bool = True,
                    locked: bool = False, before_config=None) -> None:
    """The embedding model directory (module docstring) with ``vectors.bin`` and (``text``) ``vectors.txt``;
    ``tensors``: the output side, by name.

    Every file is written atomically, first under a staged name (:data:`STAGED`: a model being replaced stays whole
    until the new files are all written, and a failed write removes them), then moved into place, and
    ``config.json`` last, after removing the one already there: a
    directory with a ``config.json`` is complete, and one whose writer was killed has none (the next
    ``embed train`` writes it again). ``locked``: the caller already holds the directory's lock
    (:func:`sampledlm.store.lock_directory`, which this takes otherwise). ``before_config()``: called just before
    ``config.json`` is written (the provenance files: written after it, a kill between the two would leave a
    complete model beside a temporary file that no later command removes)."""
    from ..store import lock_directory

    if not locked:
        with lock_directory(path):
            write_directory(path, wv, extra, tensors, text, locked=True, before_config=before_config)
        return
    import torch

    from ..store import save_tensors, write_json
    from .vocab import EmbedVocab

    _check_words(os.path.join(path, "vectors.bin"), wv.words)
    counts = wv.counts if wv.counts is not None else np.zeros(len(wv), dtype=np.int64)
    staged: list[tuple[str, str]] = []  # (staged name, final name): a model replaced (--force) stays whole until
                                        # every new file is written (a full disk had left it without config.json)

    def stage(name: str) -> str:
        staged.append((os.path.join(path, STAGED + name), os.path.join(path, name)))
        return staged[-1][0]

    try:
        save_tensors(stage("vectors.safetensors"),
                     {"input": torch.from_numpy(wv.vectors), **{k: torch.from_numpy(np.ascontiguousarray(v))
                                                                for k, v in tensors.items()}})
        EmbedVocab(wv.words, counts).save(stage("vocab.txt"))
        write_binary(stage("vectors.bin"), wv)
        if text:
            write_text(stage("vectors.txt"), wv)
    except BaseException:
        for name, _ in staged:
            with contextlib.suppress(OSError):
                os.remove(name)
        raise
    old = [os.path.join(path, "config.json")] + ([] if text else [os.path.join(path, "vectors.txt")])
    for p in old:  # incomplete until the new config.json lands; no vectors.txt of another model stays behind
        if os.path.exists(p):
            os.remove(p)
    for name, final in staged:
        os.replace(name, final)
    config = {"format": "sampledlm-model", "family": FAMILY, "version": 2,
              "vocab": {"size": len(wv), "fingerprint": fingerprint(wv.words)}, **extra}
    if before_config is not None:
        before_config()
    write_json(os.path.join(path, "config.json"), config)


def read_model(path: str):
    """``(config, vocab, tensors)`` of an embedding directory: its config.json, its ``EmbedVocab`` and the
    tensors of vectors.safetensors (numpy), each checked against the others."""
    from ..store import load_tensors, read_json
    from .vocab import EmbedVocab

    cpath = os.path.join(path, "config.json")
    config = read_json(cpath)
    if not isinstance(config, dict) or config.get("family") != FAMILY:
        raise UserError(f"{cpath}: not a word-embedding directory (family {config.get('family') if isinstance(config, dict) else None!r})")
    vocab = EmbedVocab.load(os.path.join(path, "vocab.txt"))
    want = config.get("vocab") or {}
    if len(vocab) != want.get("size") or fingerprint(vocab.words) != want.get("fingerprint"):
        raise UserError(f"{os.path.join(path, 'vocab.txt')}: does not match config.json (the file was changed)")
    tensors, _ = load_tensors(os.path.join(path, "vectors.safetensors"))
    tensors = {k: v.numpy() for k, v in tensors.items()}
    if "input" not in tensors or tensors["input"].ndim != 2 or tensors["input"].shape[0] != len(vocab):
        raise UserError(f"{path}: vectors.safetensors holds no input vectors [{len(vocab)}, dim] for the words of "
                        "vocab.txt")
    return config, vocab, tensors


def read_directory(path: str, which: str = "input") -> WordVectors:
    """Vectors of an embedding directory: ``input`` (the word vectors), ``output``, or ``sum`` of the two."""
    _, vocab, tensors = read_model(path)
    vec = tensors["input"]
    if which in ("output", "sum"):
        if "output" not in tensors:
            raise UserError(f"{path}: no output vectors per word (trained with hierarchical softmax: "
                            "its output vectors belong to tree nodes)")
        out = tensors["output"]
        vec = out if which == "output" else vec + out
    if vec.shape[0] != len(vocab):
        raise UserError(f"{path}: {vec.shape[0]} vectors for {len(vocab)} words")
    return WordVectors(vocab.words, vec, vocab.counts)


def load_vectors(path: str, which: str = "input") -> WordVectors:
    """Open word vectors from an embedding directory, a word2vec binary or a word2vec text file."""
    if os.path.isdir(path):
        return read_directory(path, which)
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file or directory")
    if which != "input":  # it would be read as the input vectors, the one table such a file holds
        raise UserError(f"{path}: a word2vec file holds one table of vectors; --which {which} needs an embedding "
                        "directory (sampledlm embed train -o DIR)")
    other = _other_kind(path)
    if other:
        raise UserError(f"{path}: {other}, not word vectors (a word2vec .bin or .txt file, or an embedding directory)")
    try:
        return read_binary(path) if is_binary(path) else read_text(path)
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None


def _other_kind(path: str) -> str | None:
    """What a file that is not word vectors is, when its first bytes say (an ARPA model, a safetensors file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    if head.lstrip().startswith(b"\\data\\"):
        return "an ARPA n-gram model"
    if len(head) > 9 and head[8:10] == b'{"':
        return "a safetensors file (a model's weights: give its directory)"
    return None


def save_vectors(path: str, wv: WordVectors, binary: bool | None = None) -> None:
    """Write ``wv`` as word2vec binary (``binary`` True, or a ``.bin`` name) or text."""
    if binary is None:
        binary = path.endswith(".bin")
    (write_binary if binary else write_text)(path, wv)
