"""Reading text files line by line, fast and with errors a person can act on; writing files atomically.

Input may be plain, gzip (``.gz``) or xz (``.xz``) compressed, or ``-`` for standard input.
Files are read in large binary chunks and decoded as UTF-8 a chunk at a time (much faster
than decoding line by line); when a chunk fails to decode, the error names the file and the
1-based line of the first bad byte. A NUL byte in the first chunk marks a binary file.

Every file the toolkit writes goes through :func:`atomic_write`: the data goes to a temporary
file in the destination's directory, is flushed to disk, and is renamed over the destination
only when complete, so an interrupted or failed write never leaves a partial file behind.
"""

from __future__ import annotations

import contextlib
import gzip
import lzma
import os
import sys
import tempfile
from typing import IO, Iterator

from ..errors import UserError

CHUNK_BYTES = 1 << 23  # 8 MiB: large enough that per-chunk overhead vanishes


def _open_binary(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory, expected a text file")
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rb")
        if path.endswith(".xz"):
            return lzma.open(path, "rb")
        return open(path, "rb")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None


def file_size(path: str) -> int | None:
    """Size on disk in bytes (compressed size for .gz/.xz), or None for stdin."""
    if path == "-":
        return None
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def iter_chunks(path: str, encoding_errors: str = "strict") -> Iterator[tuple[list[str], int]]:
    """Yield ``(lines, nbytes)`` for successive chunks of whole lines of ``path``.

    ``lines`` are decoded ``str`` without their line terminators (``\\n`` or ``\\r\\n``);
    ``nbytes`` is the number of raw bytes the chunk consumed (for progress bars).
    ``encoding_errors`` is ``"strict"`` (raise :class:`UserError` naming file and line) or any
    codec error handler such as ``"replace"``.
    """
    f = _open_binary(path)
    line_no = 0  # lines completed before the current chunk
    first = True
    tail = b""
    try:
        while True:
            try:
                block = f.read(CHUNK_BYTES)
            except (OSError, EOFError, lzma.LZMAError) as e:
                raise UserError(f"{path}: cannot read: {e}") from None
            if first:
                first = False
                if b"\x00" in block[:65536]:
                    raise UserError(f"{path}: looks like a binary file (NUL byte), expected UTF-8 text")
            if not block:
                data, tail = tail, b""
            else:
                data = tail + block
                cut = data.rfind(b"\n")
                if cut < 0:
                    tail = data
                    continue
                data, tail = data[: cut + 1], data[cut + 1 :]
            if not data:
                break
            try:
                text = data.decode("utf-8", errors=encoding_errors)
            except UnicodeDecodeError as e:
                bad_line = line_no + data.count(b"\n", 0, e.start) + 1
                raise UserError(
                    f"{path}:{bad_line}: invalid UTF-8 (byte 0x{data[e.start]:02x}); "
                    "fix the file or pass --encoding-errors replace"
                ) from None
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            if "\r" in text:
                lines = [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
            line_no += len(lines)
            yield lines, len(data)
            if not block:
                break
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def iter_lines(path: str, encoding_errors: str = "strict") -> Iterator[str]:
    """Yield the decoded lines of ``path`` one at a time (see :func:`iter_chunks`)."""
    for lines, _ in iter_chunks(path, encoding_errors):
        yield from lines


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: str = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success rename it over ``path``.

    On any exception the temporary file is removed and ``path`` is left untouched
    (a previous version stays intact). ``path == "-"`` writes to standard output.
    """
    if path == "-":
        if "b" in mode:
            yield sys.stdout.buffer
        else:
            yield sys.stdout
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"{path}: cannot write: directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    except OSError as e:
        raise UserError(f"{path}: cannot write: {e.strerror}") from None
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": encoding, "newline": "\n"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_writable(path: str) -> None:
    """Fail early (before long work) when ``path`` cannot be created."""
    if path == "-":
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"{path}: cannot write: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise UserError(f"{path}: cannot write: permission denied")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory")
