"""Reading text files line by line, fast and with errors a person can act on.

Input may be plain, gzip, bzip2 or xz compressed (recognised by the file's first bytes, as KenLM
does, so the name does not matter), or ``-`` for standard input. Standard input is read once:
the first reader copies it to a temporary file (removed at exit) and every later reader of ``-``
in the same process reads that copy, so a command that makes two passes over its text (count,
then encode) sees the same text twice.

Files are read in large binary chunks and decoded as UTF-8 a chunk at a time (much faster
than decoding line by line); when a chunk fails to decode, the error names the file and the
1-based line of the first bad byte. A NUL byte in the first 64 KiB marks a binary file (further on, it is a
character of the word it is in, on every reading path alike, with an :class:`~sampledlm.errors.InputWarning` naming
its line); a corrupt compressed file is a
:class:`~sampledlm.errors.UserError` naming it.

Lines end with LF, CRLF or a lone CR (old Mac files), in any mix; a UTF-8 byte-order mark
at the start of the file is dropped.

Writing (:func:`atomic_write`, :func:`check_writable`) lives in :mod:`.writing`, re-exported here.
"""

from __future__ import annotations

import atexit
import bz2
import gzip
import hashlib
import json
import lzma
import os
import stat
import sys
import tempfile
import zlib
from typing import IO, Iterator

from ..errors import UserError
from .writing import (_remove, _temp_prefix, atomic_write, check_writable, stream_output,  # noqa: F401 - re-exported
                      sweep_dead_temps, write_error)

CHUNK_BYTES = 1 << 23  # 8 MiB: large enough that per-chunk overhead vanishes
BOM = b"\xef\xbb\xbf"
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")
#: what a failing read of a damaged or truncated compressed file raises
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)
#: errors of a write that mean "the destination cannot take the data" (reported as UserError)


# --- standard input, read once --------------------------------------------------------------------
_stdin_spool: tuple[object, str] | None = None  # (the stdin buffer it was copied from, the copy's path)


def stdin_path(temp_dir: str | None = None) -> str:
    """Path of a temporary copy of standard input, made on first use (see module docstring), in ``temp_dir`` (the
    system's temporary directory by default)."""
    global _stdin_spool
    if sys.stdin is None:
        raise UserError("-: there is no standard input to read")
    src = getattr(sys.stdin, "buffer", None) or sys.stdin  # a text stream without .buffer (StringIO) too
    if _stdin_spool is not None and _stdin_spool[0] is src:
        return _stdin_spool[1]
    fd, tmp = tempfile.mkstemp(prefix="sampledlm-stdin-", suffix=".txt", dir=temp_dir)
    atexit.register(_remove, tmp)
    try:
        with os.fdopen(fd, "wb") as out:
            while block := src.read(CHUNK_BYTES):
                out.write(block.encode("utf-8", "surrogateescape") if isinstance(block, str) else block)
    except OSError as e:
        _remove(tmp)
        raise UserError(f"-: cannot copy standard input to {tmp}: {e.strerror or e}") from None
    if _stdin_spool is not None:
        _remove(_stdin_spool[1])
    _stdin_spool = (src, tmp)
    return tmp


_pipe_spools: dict[str, str] = {}  # a pipe's path (/dev/fd/63 of <(...), a FIFO) -> its copy


def readable_path(path: str, temp_dir: str | None = None) -> str:
    """The path to open for reading ``path``: a regular file itself; ``-`` and anything that can be read only once (a
    named pipe, a shell's process substitution ``<(cmd)``, /dev/stdin) copied once to a temporary file (in
    ``temp_dir`` where given), so that every reader of the command (a compression sniff, a vocabulary pass, the id
    pass) sees all of it."""
    if path == "-":
        return stdin_path(temp_dir)
    try:
        st = os.stat(path)
    except OSError:
        return path  # the caller's open reports it (no such file, permission denied)
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return path
    if path in _pipe_spools:
        return _pipe_spools[path]
    fd, tmp = tempfile.mkstemp(prefix="sampledlm-pipe-", suffix=".txt", dir=temp_dir)
    atexit.register(_remove, tmp)
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            while block := src.read(CHUNK_BYTES):
                out.write(block)
    except OSError as e:
        _remove(tmp)
        raise read_error(path, e) from None
    _pipe_spools[path] = tmp
    return tmp


# --- reading ----------------------------------------------------------------------------------------
def compression_of(head: bytes) -> str | None:
    """``"gz"``, ``"bz2"``, ``"xz"`` or None, from a file's first 10 bytes."""
    if head[:2] == b"\x1f\x8b":
        return "gz"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"):
        return "bz2"
    return None


def open_binary(path: str) -> IO[bytes]:
    """``path`` opened for reading, decompressed (``.gz``, ``.bz2``, ``.xz`` by content); a :class:`UserError` naming
    it when it cannot be (missing, a directory, unreadable)."""
    real = readable_path(path)
    if os.path.isdir(real):
        raise UserError(f"{path}: is a directory, expected a text file")
    try:
        with open(real, "rb") as f:
            kind = compression_of(f.read(10))
        if kind == "gz":
            return gzip.open(real, "rb")
        if kind == "bz2":
            return bz2.open(real, "rb")
        if kind == "xz":
            return lzma.open(real, "rb")
        return open(real, "rb")
    except OSError as e:
        raise read_error(path, e) from None


def read_error(path: str, e: OSError) -> UserError:
    """The one-line message for an OSError met while opening or reading ``path``."""
    if isinstance(e, FileNotFoundError):
        return UserError(f"{path}: no such file")
    if isinstance(e, PermissionError):
        return UserError(f"{path}: permission denied")
    if isinstance(e, IsADirectoryError):
        return UserError(f"{path}: is a directory, expected a file")
    return UserError(f"{path}: cannot read: {e.strerror or e}")


def read_json(path: str, missing: str = ""):
    """The JSON value in ``path``; a :class:`UserError` naming the file if it is absent (``missing`` says what
    that means to the caller) or unreadable."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file" + (f" ({missing})" if missing else "")
                        if not os.path.isdir(path) else f"{path}: is a directory, expected a file")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None
    except OSError as e:
        raise read_error(path, e) from None


def file_size(path: str) -> int | None:
    """Size on disk in bytes (compressed size for compressed files), or None for stdin."""
    if path == "-":
        return None
    try:
        return os.path.getsize(readable_path(path))
    except OSError:
        return None


def content_hash(path: str) -> str:
    """SHA-1 of the file's bytes as stored (compressed files are not decompressed); hex.

    What caches are keyed on: unlike size and modification time it changes whenever the
    content does, even for a file rewritten within the same second with the same size.
    """
    real = readable_path(path)
    try:
        with open(real, "rb") as f:
            return hashlib.file_digest(f, "sha1").hexdigest()
    except OSError as e:
        raise read_error(path, e) from None


def _last_break(data: bytes, end: int) -> int:
    """Index of the last ``\\n`` or ``\\r`` in ``data[:end]``, -1 when none."""
    return max(data.rfind(b"\n", 0, end), data.rfind(b"\r", 0, end))


def iter_chunks(path: str, encoding_errors: str = "strict", chunk_bytes: int | None = None,
                hint: str = "fix the file (UTF-8 text expected)", sniff: bool = True) -> Iterator[tuple[list[str], int]]:
    """Yield ``(lines, nbytes)`` for successive chunks of whole lines of ``path``.

    ``lines`` are decoded ``str`` without their line terminators (``\\n``, ``\\r\\n`` or a lone
    ``\\r``); ``nbytes`` is the number of raw bytes the chunk consumed (for progress bars), about
    ``chunk_bytes`` (default :data:`CHUNK_BYTES`). ``encoding_errors`` is ``"strict"`` (raise
    :class:`UserError` naming file and line, and ``hint``: what the user can do, e.g. the option of a
    command that has one) or any codec error handler such as ``"replace"``. ``sniff``: a NUL byte in
    the first 64 KiB means a binary file (a reader whose format tells text from binary itself, e.g.
    ARPA's header, turns it off). Nothing of a chunk stays referenced here while the next one is read
    (bounded estimation sizes its chunks to its memory budget).
    """
    f = open_binary(path)
    line_no = 0  # lines completed before the current chunk
    first = True
    warned_nul = False
    tail = b""
    try:
        while True:
            try:
                block = f.read(chunk_bytes or CHUNK_BYTES)
            except _READ_ERRORS as e:
                raise UserError(f"{path}: cannot read (corrupt or truncated file?): {e}") from None
            if first:
                first = False
                if block.startswith(BOM):
                    block = block[len(BOM):]
                if sniff and b"\x00" in block[:65536]:
                    line = block.count(b"\n", 0, block.index(b"\x00")) + 1
                    raise UserError(f"{path}:{line}: a NUL byte (0x00) near the start: looks "
                                    "like a binary file, expected UTF-8 text")
            if not block:
                data, tail = tail, b""
            else:
                data = tail + block
                cut = _last_break(data, len(data))
                if cut == len(data) - 1 and data[cut] == 13:  # a final \r may be the first half of \r\n
                    cut = _last_break(data, cut)
                if cut < 0:
                    tail = data
                    continue
                data, tail = data[: cut + 1], data[cut + 1 :]
            if not data:
                break
            nbytes = len(data)
            if b"\r" in data:
                data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if sniff and not warned_nul and b"\x00" in data:
                warned_nul = True
                _warn_nul(path, line_no + data.count(b"\n", 0, data.index(b"\x00")) + 1)
            try:
                text = data.decode("utf-8", errors=encoding_errors)
            except UnicodeDecodeError as e:
                bad_line = line_no + data.count(b"\n", 0, e.start) + 1
                raise UserError(
                    f"{path}:{bad_line}: invalid UTF-8 (byte 0x{data[e.start]:02x}); {hint}"
                ) from None
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            line_no += len(lines)
            del data, text
            yield lines, nbytes
            del lines
            if not block:
                break
    finally:
        f.close()


def _warn_nul(path: str, line: int) -> None:
    """A NUL byte past the first 64 KiB is kept (a character of its word, on every reading path alike) and said once
    a reading: text holds none, and a file zero-filled by a crash or cut from a binary one does."""
    import warnings

    from ..errors import InputWarning

    warnings.warn(InputWarning(f"{path}:{line}: a NUL byte (0x00) mid-file, read as part of a word; text files have "
                               "none (a file zero-filled by a crash, or binary data?)"), stacklevel=3)


def iter_lines(path: str, encoding_errors: str = "strict") -> Iterator[str]:
    """Yield the decoded lines of ``path`` one at a time (see :func:`iter_chunks`)."""
    for lines, _ in iter_chunks(path, encoding_errors):
        yield from lines
