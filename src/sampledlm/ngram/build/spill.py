"""Flat arrays spilled to a temporary directory, and the few streaming operations bounded estimation needs.

A :class:`Spill` is one run's private directory ``TEMP/sampledlm-ngram.HOST.PID.XXXX/`` holding flat
binary files (one dtype each, no header). It holds an OS lock on its ``.lock`` file while the run lives;
:func:`sweep` removes the directories whose lock is free -- those of runs killed before they could clean
up; one not locked yet only when the process named in it is gone -- and every run calls it when it
starts. The directory is removed on success and on error.

Before the first byte goes to disk the run checks that ``--temp-dir`` has room for what it will spill
(:meth:`Spill.check_room`, from the estimate the pipeline gives: :func:`.budget.spill_need`), and a disk that
fills up anyway (``ENOSPC``, ``EDQUOT``) ends the run with one line naming the directory (:func:`spill_error`);
either way nothing of the run stays there.

Files are read by explicit ``np.fromfile`` calls, never memory-mapped, so the pages read do not stay in
the process's resident set. A file may instead be held in memory (its arrays as appended), while all the files
held stay within ``ram`` bytes: when the budget leaves room, nothing is written to disk (as lmplz keeps its sorted
blocks in RAM when ``-S`` allows); a file that would pass ``ram`` moves to disk and continues there. Either way
a read returns a copy. Every operation below holds at most a window of ``window`` elements:

* :meth:`Spill.gather_sorted`: ``a[idx]`` for non-decreasing ``idx`` -- one pass over the file's range;
* :meth:`Spill.gather`: ``a[idx]`` for any ``idx`` (sort, gather sorted, unsort);
* :meth:`Spill.count_at`: ``a[i] += 1`` for every ``i`` of ``idx`` (counting into an integer file).
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import shutil
import socket
import tempfile

import numpy as np

from ...errors import UserError
from ...memory import gigabytes

PREFIX = "sampledlm-ngram."


@contextlib.contextmanager
def heap_kept(limit: int):
    """Keep freed memory for reuse while bounded estimation runs (glibc only; elsewhere a no-op).

    Every window allocates arrays of tens of MB; glibc serves those by ``mmap`` and hands them back on
    free, so the next window's arrays fault in (and zero) fresh pages: about a tenth of the run's time.
    Here allocations up to ``limit`` bytes come from the heap and freed pages stay mapped, so the
    process's resident set stays at its high-water mark (which the budget bounds anyway) instead of
    being faulted in again per window. The defaults are restored, and the heap trimmed, on exit.
    """
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        mallopt, trim = libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        yield
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    value = int(min(limit, 2**31 - 1))
    changed = [opt for opt in (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD) if mallopt(opt, value)]  # 0: refused, unchanged
    try:
        yield
    finally:
        for opt in changed:
            mallopt(opt, 128 * 1024)  # glibc's defaults
        if changed:
            trim(0)


def _try_lock(path: str):
    """An fd holding an exclusive lock on ``path``, or None when another live process holds it."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _alive(pid: str) -> bool:
    """Whether process ``pid`` (the number in a spill directory's name) still runs on this host."""
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, OverflowError):  # gone, or a number no process has
        return False
    except PermissionError:  # alive, under another user
        return True
    return True


def sweep(parent: str) -> list[str]:
    """Remove the spill directories of dead runs under ``parent`` (their lock is free, or, not locked yet, the
    process named in the directory is gone); returns them."""
    host = socket.gethostname().replace(".", "_")
    removed = []
    try:
        names = [n for n in os.listdir(parent) if n.startswith(PREFIX + host + ".")]
    except OSError:
        return removed
    for name in names:
        d = os.path.join(parent, name)
        lock = os.path.join(d, ".lock")
        if not os.path.isdir(d):
            continue
        if os.path.exists(lock):
            fd = _try_lock(lock)
            if fd is None:
                continue  # a live run
        elif _alive(name[len(PREFIX + host) + 1:].split(".", 1)[0]):
            continue  # a run between creating its directory and locking it
        else:
            fd = -1
        try:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
        finally:
            if fd >= 0:
                os.close(fd)
    return removed


def disk_free(path: str) -> int | None:
    """Bytes free to this user on the file system of ``path`` (``shutil.disk_usage``), None when unknown."""
    try:
        return int(shutil.disk_usage(path).free)
    except (OSError, ValueError):
        return None


def no_room(parent: str, need: int, free: int) -> UserError:
    """The one-line refusal of a run whose spill files would not fit in ``--temp-dir`` ``parent``."""
    return UserError(f"--temp-dir {parent}: not enough free space for bounded estimation's temporary files: it "
                     f"needs about {gigabytes(need)} there and {gigabytes(free)} is free; give a --temp-dir "
                     f"on a disk with more room")


def spill_error(parent: str, e: OSError, written: int) -> UserError:
    """The one-line error for a write to the spill directory under ``parent`` that failed with ``e``."""
    reason = (e.strerror or os.strerror(e.errno)) if e.errno else str(e)
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return UserError(f"--temp-dir {parent}: cannot write bounded estimation's temporary files ({reason}) after "
                         f"{gigabytes(written)} written; give a --temp-dir on a disk with more room")
    return UserError(f"--temp-dir {parent}: cannot write bounded estimation's temporary files ({reason}); "
                     f"give a --temp-dir with more room")


def check_temp_dir(parent: str) -> None:
    """A :class:`UserError` unless ``parent`` (``--temp-dir``) is a directory."""
    if not os.path.isdir(parent):
        raise UserError(f"--temp-dir {parent}: " + ("not a directory" if os.path.exists(parent) else "no such directory"))


class Spill:
    """One run's temporary directory of flat arrays (module docstring); use as a context manager."""

    def __init__(self, parent: str | None, window: int, ram: int = 0):
        self.parent = parent = parent or tempfile.gettempdir()
        check_temp_dir(parent)
        sweep(parent)
        host = socket.gethostname().replace(".", "_")
        try:
            self.dir = tempfile.mkdtemp(prefix=f"{PREFIX}{host}.{os.getpid()}.", dir=parent)
            self._fd = _try_lock(os.path.join(self.dir, ".lock"))
        except OSError as e:
            raise UserError(f"--temp-dir {parent}: cannot create a temporary directory there ({e.strerror or e})") from None
        self.window = int(window)
        self.ram = int(ram)  # bytes the files held in memory may take (0: every file on disk)
        self.held = 0  # bytes they take now
        self._mem: dict[str, _MemFile] = {}
        self.dtypes: dict[str, np.dtype] = {}
        self.spilled = 0  # bytes written to disk, for the report
        # () -> bytes the run's files will take at their peak, or None while unknown (:meth:`check_room`)
        self.estimate = None
        self._room_checked = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self._mem.clear()
        self.held = 0
        shutil.rmtree(self.dir, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # --- flat files -------------------------------------------------------------------------------
    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def in_memory(self, name: str) -> bool:
        return name in self._mem

    def _fits(self, nbytes: int) -> bool:
        return self.held + nbytes <= self.ram

    def _forget(self, name: str) -> None:
        f = self._mem.pop(name, None)
        if f is not None and not any(g is f for g in self._mem.values()):  # not also held under another name
            self.held -= f.nbytes
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path(name))

    def _to_disk(self, name: str) -> None:
        """Move a file held in memory to disk (it continues there)."""
        f = self._mem[name]
        for part in f.parts:
            self._write(name, part)
        self._mem.pop(name)
        if not any(g is f for g in self._mem.values()):
            self.held -= f.nbytes

    def on_disk(self) -> int:
        """Bytes this run's files take on disk now (hard links counted once)."""
        seen, total = set(), 0
        with contextlib.suppress(OSError), os.scandir(self.dir) as it:
            for e in it:
                with contextlib.suppress(OSError):
                    st = e.stat()
                    if st.st_ino not in seen:
                        seen.add(st.st_ino)
                        total += st.st_size
        return total

    def check_room(self) -> None:
        """A :class:`UserError` (:func:`no_room`) when the free space of ``--temp-dir`` and what this run has there
        already fall short of :attr:`estimate` less the bytes held in memory (``ram``). Called before the first
        write to disk, and by the pipeline again once the stream's length is known."""
        need = self.estimate() if self.estimate is not None else None
        if need is None:
            return
        self._room_checked = True
        free = disk_free(self.parent)
        have = self.on_disk()
        need = int(need) - self.ram - have
        if free is not None and need > free:
            raise no_room(self.parent, need, free)

    def _open(self, name: str, mode: str):
        if not self._room_checked:
            self.check_room()
        try:
            return open(self.path(name), mode)
        except OSError as e:
            raise spill_error(self.parent, e, self.spilled) from None

    def _write(self, name: str, data: np.ndarray) -> None:
        with self._failing(), self._open(name, "ab") as f:
            f.write(data)  # the array's own buffer: no copy
        self.spilled += data.nbytes

    @contextlib.contextmanager
    def _failing(self):
        """An :class:`OSError` of a write (a full disk, a quota) as the one-line :func:`spill_error`."""
        try:
            yield
        except OSError as e:
            raise spill_error(self.parent, e, self.spilled) from None

    def create(self, name: str, dtype, length: int = 0, fill=0) -> None:
        """A new file of ``length`` elements set to ``fill`` (on disk: written in windows)."""
        self._forget(name)
        self.dtypes[name] = np.dtype(dtype)
        if self._fits(length * self.dtypes[name].itemsize):
            self._mem[name] = f = _MemFile(self.dtypes[name])
            f.append(np.full(length, fill, dtype=dtype))
            self.held += f.nbytes
            return
        with self._failing(), self._open(name, "wb") as f:  # a failing close (flush) too
            block = np.full(min(length, self.window), fill, dtype=dtype)
            left = length
            while left > 0:
                f.write(block[: min(left, len(block))].tobytes())
                left -= min(left, len(block))

    def append(self, name: str, values: np.ndarray) -> None:
        dtype = self.dtypes.setdefault(name, np.asarray(values).dtype)
        data = np.ascontiguousarray(values, dtype=dtype)
        new = name not in self._mem and not os.path.exists(self.path(name))
        if (new or name in self._mem) and self._fits(data.nbytes):
            f = self._mem.setdefault(name, _MemFile(dtype))
            f.append(data.copy() if data is values or data.base is not None else data)  # the caller's keeps no alias
            self.held += data.nbytes
            return
        if name in self._mem:
            self._to_disk(name)
        self._write(name, data)

    def link(self, name: str, new: str) -> None:
        """``new``: the same contents as ``name`` (a hard link; held in memory: the same arrays). Neither is
        written afterwards."""
        self._forget(new)
        self.dtypes[new] = self.dtypes[name]
        if name in self._mem:
            self._mem[new] = self._mem[name]
        else:
            os.link(self.path(name), self.path(new))

    def write_at(self, name: str, start: int, values: np.ndarray) -> None:
        data = np.ascontiguousarray(values, dtype=self.dtypes[name])
        if name in self._mem:
            self._mem[name].write_at(start, data)
            return
        with self._failing(), self._open(name, "r+b") as f:
            f.seek(start * data.itemsize)
            f.write(data)  # the array's own buffer: no copy

    def length(self, name: str) -> int:
        if name in self._mem:
            return len(self._mem[name])
        if not os.path.exists(self.path(name)):
            return 0
        return os.path.getsize(self.path(name)) // self.dtypes[name].itemsize

    def read(self, name: str, start: int = 0, count: int | None = None) -> np.ndarray:
        dtype = self.dtypes[name]
        n = self.length(name) - start if count is None else count
        if n <= 0:
            return np.zeros(0, dtype=dtype)
        if name in self._mem:
            return self._mem[name].read(start, n)
        return np.fromfile(self.path(name), dtype=dtype, count=n, offset=start * dtype.itemsize)

    def chunks(self, name: str, size: int | None = None, start: int = 0, stop: int | None = None):
        """``(offset, array)`` windows of the file, in order."""
        size = size or self.window
        stop = self.length(name) if stop is None else stop
        for s in range(start, stop, size):
            yield s, self.read(name, s, min(size, stop - s))

    def remove(self, *names: str) -> None:
        """Delete files; a later file of the same name takes the dtype of its first write again."""
        for name in names:
            self.dtypes.pop(name, None)
            self._forget(name)

    def writer(self, name: str) -> "_Appender":
        """A binary file object appending to the ``uint8`` file ``name`` (:meth:`append`)."""
        self.create(name, np.uint8)
        return _Appender(self, name)

    def reader(self, name: str) -> "_Reader":
        """A binary file object reading the ``uint8`` file ``name`` forward."""
        return _Reader(self, name)

    # --- windowed gather / scatter --------------------------------------------------------------
    def gather_sorted(self, name: str, idx: np.ndarray, width: int = 1) -> np.ndarray:
        """``a[idx]`` for non-decreasing ``idx`` (``width`` > 1: the file holds rows of that many values)."""
        dtype = self.dtypes[name]
        out = np.empty((len(idx), width) if width > 1 else len(idx), dtype=dtype)
        i, n = 0, len(idx)
        span = max(self.window // width, 1)
        while i < n:
            lo = int(idx[i])
            j = int(np.searchsorted(idx, lo + span, "left"))
            hi = int(idx[j - 1]) + 1
            block = self.read(name, lo * width, (hi - lo) * width)
            if width > 1:
                block = block.reshape(-1, width)
            out[i:j] = block[idx[i:j] - lo]
            i = j
        return out

    def gather(self, name: str, idx: np.ndarray) -> np.ndarray:
        """``a[idx]`` for any ``idx``."""
        order = np.argsort(idx, kind="stable")
        out = np.empty(len(idx), dtype=self.dtypes[name])
        out[order] = self.gather_sorted(name, idx[order])
        return out

    def count_at(self, name: str, idx: np.ndarray) -> None:
        """``a[i] += 1`` for every ``i`` in ``idx`` (an integer file)."""
        uniq, sums = np.unique(idx, return_counts=True)
        i, n = 0, len(uniq)
        while i < n:
            lo = int(uniq[i])
            j = int(np.searchsorted(uniq, lo + self.window, "left"))
            hi = int(uniq[j - 1]) + 1
            block = self.read(name, lo, hi - lo)
            block[uniq[i:j] - lo] += sums[i:j]
            self.write_at(name, lo, block)
            i = j


class _MemFile:
    """A flat file held in memory: the arrays appended, in order (``ends``: the running lengths)."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.parts: list[np.ndarray] = []
        self.ends: list[int] = []

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    @property
    def nbytes(self) -> int:
        return len(self) * self.dtype.itemsize

    def append(self, data: np.ndarray) -> None:
        if len(data):
            self.parts.append(data)
            self.ends.append(len(self) + len(data))

    def _spans(self, start: int, n: int):
        """``(part, lo, hi, out offset)`` covering elements ``start .. start + n - 1``."""
        i = bisect.bisect_right(self.ends, start)
        done = 0
        while done < n and i < len(self.parts):
            lo = start + done - (self.ends[i - 1] if i else 0)
            hi = min(len(self.parts[i]), lo + n - done)
            yield self.parts[i], lo, hi, done
            done += hi - lo
            i += 1

    def read(self, start: int, n: int) -> np.ndarray:
        n = max(0, min(n, len(self) - start))
        out = np.empty(n, self.dtype)
        for part, lo, hi, at in self._spans(start, n):
            out[at : at + hi - lo] = part[lo:hi]
        return out

    def write_at(self, start: int, data: np.ndarray) -> None:
        if start + len(data) > len(self):
            raise ValueError("write past the end of a file held in memory")
        for part, lo, hi, at in self._spans(start, len(data)):
            part[lo:hi] = data[at : at + hi - lo]


class _Appender:
    """``write(bytes)``: appends to a ``uint8`` file of a :class:`Spill`."""

    def __init__(self, sp: Spill, name: str):
        self.sp, self.name = sp, name

    def write(self, data) -> None:
        self.sp.append(self.name, np.frombuffer(data, np.uint8))

    def close(self) -> None:
        pass


class _Reader:
    """``read(n)``: the next bytes of a ``uint8`` file of a :class:`Spill`."""

    def __init__(self, sp: Spill, name: str):
        self.sp, self.name, self.at = sp, name, 0

    def read(self, n: int) -> bytes:
        data = self.sp.read(self.name, self.at, n).tobytes()
        self.at += len(data)
        return data

    def close(self) -> None:
        pass
