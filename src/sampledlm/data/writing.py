"""Writing files atomically (temporary file + rename), and checking an output can be written before long work.

Every file the toolkit writes goes through :func:`atomic_write`: the data goes to a temporary file in the
destination's directory, is flushed to disk, and is renamed over the destination only when complete, so an
interrupted or failed write (a full disk included) never leaves a partial file behind. A name ending in ``.gz``,
``.bz2`` or ``.xz`` is written compressed. The file gets the permissions of any newly created file (``0666`` less
the umask). A symbolic link's target is replaced (the link stays); a character device or a named pipe
(``/dev/null``, ``>(cmd)``) is written in place. Temporary files are named ``.NAME.HOST.PID.XXXXXXXX.tmp``; those of
a killed writer are removed by the next write of the same file.
"""

from __future__ import annotations

import bz2
import contextlib
import contextvars
import errno
import gzip
import io
import lzma
import os
import socket
import stat
import sys
import tempfile
from typing import IO, Iterator

from ..errors import UserError


_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def no_directory(name: str, directory: str) -> UserError:
    """The error for output ``name`` whose ``directory`` is not one: missing, or a file on the way to it (``-o
    notes.txt/v.txt`` said the directory did not exist when it was a file)."""
    up = directory
    while up and not os.path.exists(up) and os.path.dirname(up) != up:
        up = os.path.dirname(up)
    if up and os.path.exists(up) and not os.path.isdir(up):
        return UserError(f"{name}: cannot write: {up} is a file, not a directory")
    return UserError(f"{name}: cannot write: directory {directory} does not exist")

def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


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


def temp_prefix(path: str) -> str:
    """The name every temporary file or folder beside ``path`` starts with (then the writer's pid, a random part and
    ``.tmp``): a killed writer's are removed by the next write of ``path``."""
    return _temp_prefix(path)


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
            dead = os.path.join(directory, name)
            if os.path.isdir(dead) and not os.path.islink(dead):  # a killed writer's scratch folder (ONNX export)
                import shutil

                shutil.rmtree(dead, ignore_errors=True)
            else:
                _remove(dead)
        except (PermissionError, OverflowError):  # alive under another user, or not a pid
            pass


#: Paths whose write must not replace a file that appeared meanwhile (:func:`new_file_only`)
_NEW_ONLY: contextvars.ContextVar[frozenset] = contextvars.ContextVar("new_file_only", default=frozenset())


@contextlib.contextmanager
def new_file_only(path: str):
    """Within the block, :func:`atomic_write` of ``path`` (absent when the command checked it) puts its file in
    place only if none has appeared there meanwhile: two commands started on the same ``-o`` without ``--force``
    both passed the check at their start, and the later one to finish replaced the other's model."""
    token = _NEW_ONLY.set(_NEW_ONLY.get() | {_final_path(path)})
    try:
        yield
    finally:
        _NEW_ONLY.reset(token)


def _put_in_place(tmp: str, path: str, name: str) -> None:
    if path not in _NEW_ONLY.get():
        os.replace(tmp, path)
        return
    appeared = UserError(f"{name}: written by another process while this one ran; it is kept and this output is "
                         "dropped (give --force to replace it, or choose another -o)")
    try:
        os.link(tmp, path)  # fails if path exists: a rename that never replaces
    except FileExistsError:
        raise appeared from None
    except OSError:  # a file system without hard links: check, then rename (a narrow window stays)
        if os.path.exists(path):
            raise appeared from None
        os.replace(tmp, path)
        return
    os.remove(tmp)


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
    if stream_output(path):
        with _stream_write(path, binary, encoding, compress) as f:
            yield f
        return
    name, path = path, _final_path(path)  # through a symbolic link: the file it names is replaced, the link kept
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise no_directory(name, directory)
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
        comp = _stack(layers, path, binary, encoding, compress)
        yield layers[-1]
        if not binary:
            layers[-1].flush()
            layers.pop().detach()  # leaves the layer below open
        if comp is not None:
            layers.pop().close()  # writes the compressed stream's trailer; raw stays open
        raw.flush()
        os.fsync(raw.fileno())
        layers.pop().close()
        _put_in_place(tmp, path, name)
    except BaseException as e:
        for layer in reversed(layers):
            with contextlib.suppress(Exception):
                layer.close()
        if fd_open:
            with contextlib.suppress(OSError):
                os.close(fd)
        _remove(tmp)
        err = write_error(name, e) if isinstance(e, OSError) else None
        if err is not None:
            raise err from None
        raise


def _final_path(path: str) -> str:
    """The absolute path a write of ``path`` replaces: a symbolic link's target (followed to the end), so that the
    link stays a link."""
    return os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path)


def stream_output(path: str) -> bool:
    """Whether ``path`` is written in place rather than replaced: a character device (``/dev/null``,
    ``/dev/stdout``'s terminal) or a named pipe (``>(cmd)``'s ``/dev/fd/N``), which a temporary file renamed over
    would destroy. A block device or a socket is refused (:class:`UserError`): nothing of ours is written there."""
    if path == "-":
        return False
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        raise UserError(f"{path}: is a {'block device' if stat.S_ISBLK(mode) else 'socket'}; write to a file")
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _stack(layers: list[IO], path: str, binary: bool, encoding: str, compress: bool | None) -> IO | None:
    """Push onto ``layers`` (the raw file first) a compressor where ``path``'s name asks for one and, for text, a
    UTF-8 text layer; returns the compressor (None without)."""
    comp = _compressor(path, layers[0]) if compress is not False else None
    if comp is not None:
        layers.append(comp)
    if not binary:
        layers.append(io.TextIOWrapper(layers[-1], encoding=encoding, newline="\n"))
    return comp


@contextlib.contextmanager
def _stream_write(path: str, binary: bool, encoding: str, compress: bool | None) -> Iterator[IO]:
    """:func:`atomic_write` into a device or a pipe: opened and written in place (nothing to rename)."""
    try:
        raw = open(path, "wb")
    except OSError as e:
        raise UserError(f"{path}: cannot write: {e.strerror}") from None
    layers: list[IO] = [raw]
    try:
        _stack(layers, path, binary, encoding, compress)
        yield layers[-1]
        for layer in reversed(layers):
            layer.close()
    except OSError as e:
        for layer in reversed(layers):
            with contextlib.suppress(Exception):
                layer.close()
        err = write_error(path, e)
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
    if stream_output(path):
        if not os.access(path, os.W_OK):
            raise UserError(f"{path}: cannot write: permission denied")
        return
    directory = os.path.dirname(_final_path(path))
    if not os.path.isdir(directory):
        raise no_directory(path, directory)
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
