"""Reading text files line by line, fast and with errors a person can act on; writing files atomically.

Input may be plain, gzip, bzip2 or xz compressed (recognised by the file's first bytes, as KenLM
does, so the name does not matter), or ``-`` for standard input. Standard input is read once:
the first reader copies it to a temporary file (removed at exit) and every later reader of ``-``
in the same process reads that copy, so a command that makes two passes over its text (count,
then encode) sees the same text twice.

Files are read in large binary chunks and decoded as UTF-8 a chunk at a time (much faster
than decoding line by line); when a chunk fails to decode, the error names the file and the
1-based line of the first bad byte. A NUL byte in the first 64 KiB marks a binary file, one further on a
damaged file (named with its line); a corrupt compressed file is a :class:`~sampledlm.errors.UserError` naming it.

Lines end with LF, CRLF or a lone CR (old Mac files), in any mix; a UTF-8 byte-order mark
at the start of the file is dropped.

Every file the toolkit writes goes through :func:`atomic_write`: the data goes to a temporary
file in the destination's directory, is flushed to disk, and is renamed over the destination
only when complete, so an interrupted or failed write (a full disk included) never leaves a
partial file behind. A name ending in ``.gz``, ``.bz2`` or ``.xz`` is written compressed. The
file gets the permissions of any newly created file (``0666`` less the umask).
"""

from __future__ import annotations

import atexit
import bz2
import contextlib
import errno
import gzip
import hashlib
import io
import json
import lzma
import os
import socket
import stat
import sys
import tempfile
import zlib
from typing import IO, Iterator

from ..errors import UserError

CHUNK_BYTES = 1 << 23  # 8 MiB: large enough that per-chunk overhead vanishes
BOM = b"\xef\xbb\xbf"
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz")
#: what a failing read of a damaged or truncated compressed file raises
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)
#: errors of a write that mean "the destination cannot take the data" (reported as UserError)
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


# --- standard input, read once --------------------------------------------------------------------
_stdin_spool: tuple[object, str] | None = None  # (the stdin buffer it was copied from, the copy's path)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def stdin_path() -> str:
    """Path of a temporary copy of standard input, made on first use (see module docstring)."""
    global _stdin_spool
    if sys.stdin is None:
        raise UserError("-: there is no standard input to read")
    src = getattr(sys.stdin, "buffer", None) or sys.stdin  # a text stream without .buffer (StringIO) too
    if _stdin_spool is not None and _stdin_spool[0] is src:
        return _stdin_spool[1]
    fd, tmp = tempfile.mkstemp(prefix="sampledlm-stdin-", suffix=".txt")
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


def readable_path(path: str) -> str:
    """The path to open for reading ``path``: a regular file itself; ``-`` and anything that can be read only once (a
    named pipe, a shell's process substitution ``<(cmd)``, /dev/stdin) copied once to a temporary file, so that every
    reader of the command (a compression sniff, a vocabulary pass, the id pass) sees all of it."""
    if path == "-":
        return stdin_path()
    try:
        st = os.stat(path)
    except OSError:
        return path  # the caller's open reports it (no such file, permission denied)
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return path
    if path in _pipe_spools:
        return _pipe_spools[path]
    fd, tmp = tempfile.mkstemp(prefix="sampledlm-pipe-", suffix=".txt")
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
                    raise UserError(f"{path}: looks like a binary file (NUL byte), expected UTF-8 text")
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
            nul = data.find(b"\x00") if sniff else -1
            if nul >= 0:  # past the first 64 KiB: a damaged file (a NUL would join the words around it)
                bad_line = line_no + data.count(b"\n", 0, nul) + 1
                raise UserError(f"{path}:{bad_line}: NUL byte in the text (a damaged file?): remove it, text is expected")
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


def iter_lines(path: str, encoding_errors: str = "strict") -> Iterator[str]:
    """Yield the decoded lines of ``path`` one at a time (see :func:`iter_chunks`)."""
    for lines, _ in iter_chunks(path, encoding_errors):
        yield from lines


# --- writing ----------------------------------------------------------------------------------------
def _umask() -> int:
    """The process's umask: read from /proc where it can be (setting it, even briefly, races with threads)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _compressor(path: str, raw: IO[bytes]) -> IO[bytes] | None:
    if path.endswith(".gz"):
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0)
    if path.endswith(".bz2"):
        return bz2.BZ2File(raw, "wb")
    if path.endswith(".xz"):
        return lzma.LZMAFile(raw, "wb")
    return None


def write_error(path: str, e: OSError) -> UserError | None:
    """The one-line error for a write to ``path`` that failed with ``e``; None when ``e`` is not a write error."""
    if isinstance(e, OSError) and e.errno in _WRITE_ERRNOS:
        return UserError(f"{path}: cannot write: {e.strerror or os.strerror(e.errno)}")
    return None


def _temp_prefix(path: str) -> str:
    """Temporary files beside ``path`` are ``.NAME.HOST.PID.XXXXXXXX.tmp``: hidden, and naming their writer."""
    return f".{os.path.basename(path)}.{socket.gethostname().replace('.', '_')}."


def _sweep_dead_temps(path: str) -> None:
    """Remove the temporary files a writer of ``path`` on this host left when it was killed (kill -9, power loss):
    those whose process no longer exists. Files of live writers and of other hosts are left alone."""
    _sweep(os.path.dirname(os.path.abspath(path)), _temp_prefix(path))


def sweep_dead_temps(directory: str) -> None:
    """:func:`_sweep_dead_temps` for every file of ``directory`` (a run directory, when its writer takes the lock)."""
    _sweep(directory, None)


def _sweep(directory: str, prefix: str | None) -> None:
    host = f".{socket.gethostname().replace('.', '_')}."
    try:
        names = [n for n in os.listdir(directory) if n.startswith(".") and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        if prefix is not None:
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix):]
        elif host in name:
            rest = name.split(host, 1)[1]
        else:
            continue
        pid = rest.split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _remove(os.path.join(directory, name))
        except (PermissionError, OverflowError):  # alive under another user, or not a pid
            pass


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: str = "utf-8", compress: bool | None = None) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success rename it over ``path``.

    On any exception the temporary file is removed and ``path`` is left untouched (a
    previous version stays intact); a write the disk refuses (full, quota, read-only) is a
    :class:`UserError` naming ``path``. ``path == "-"`` writes to standard output.
    ``compress``: None (the default) compresses when the name ends in ``.gz``/``.bz2``/``.xz``;
    False never does. The file's mode is ``0666`` less the umask, like any newly created file.
    """
    if not path:
        raise UserError("the output path is empty: give a file name (or - for standard output)")
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', not {mode!r}")
    binary = mode == "wb"
    if path == "-":
        stream = sys.stdout.buffer if binary else sys.stdout
        try:
            yield stream
            stream.flush()
        except OSError as e:
            err = write_error("standard output", e)
            if err is not None:
                raise err from None
            raise
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"{path}: cannot write: directory {directory} does not exist")
    _sweep_dead_temps(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path) + f"{os.getpid()}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise UserError(f"{path}: cannot write: {e.strerror}") from None
    layers: list[IO] = []  # innermost (the file) first
    fd_open = True  # fd not yet owned by a file object
    try:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666 & ~_umask())
        raw = os.fdopen(fd, "wb")
        fd_open = False
        layers.append(raw)
        comp = _compressor(path, raw) if compress is not False else None
        if comp is not None:
            layers.append(comp)
        if not binary:
            layers.append(io.TextIOWrapper(layers[-1], encoding=encoding, newline="\n"))
        yield layers[-1]
        if not binary:
            layers[-1].flush()
            layers.pop().detach()  # leaves the layer below open
        if comp is not None:
            layers.pop().close()  # writes the compressed stream's trailer; raw stays open
        raw.flush()
        os.fsync(raw.fileno())
        layers.pop().close()
        os.replace(tmp, path)
    except BaseException as e:
        for layer in reversed(layers):
            with contextlib.suppress(Exception):
                layer.close()
        if fd_open:
            with contextlib.suppress(OSError):
                os.close(fd)
        _remove(tmp)
        err = write_error(path, e) if isinstance(e, OSError) else None
        if err is not None:
            raise err from None
        raise


def _read_only(directory: str) -> bool:
    """Whether ``directory`` is on a file system mounted read-only (where ``os.access`` says only "no")."""
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def check_writable(path: str) -> None:
    """Fail early (before long work) when ``path`` cannot be created."""
    if not path:
        raise UserError("the output path is empty: give a file name (or - for standard output)")
    if path == "-":
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"{path}: cannot write: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise UserError(f"{path}: cannot write: {'read-only file system' if _read_only(directory) else 'permission denied'}")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory")
    _probe_create(path, directory)


def _probe_create(path: str, directory: str) -> None:
    """Create and remove a temporary file where ``path``'s writer will: ``os.access`` answers from permission bits
    alone, and root passes it on file systems that refuse every new file (/proc, /sys, a full inode table)."""
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=f"{_temp_prefix(path)}{os.getpid()}.", suffix=".tmp")
    except OSError as e:
        why = (f"the file system of {directory} refuses new files" if e.errno == errno.ENOENT
               else e.strerror or os.strerror(e.errno or 0))
        raise UserError(f"{path}: cannot write: {why}") from None
    os.close(fd)
    _remove(probe)
