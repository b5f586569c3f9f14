"""The checks every writer makes of its output, in one place for the command line and the Python API: an output
is none of the inputs and replaces an existing file only when asked (``force``); a directory being written is
locked, and removed again when the writer that created it fails."""

from __future__ import annotations

import contextlib


def refuse_existing(path: str, force: bool, inputs=()) -> None:
    """The one check of every writer's output: it is none of the command's ``inputs`` (files or model directories)
    nor an existing file inside one, even with ``--force`` (``embed export RUN -o RUN/model.safetensors --force`` had destroyed the
    run it read); and an existing file is replaced only with ``--force``."""
    import os

    from .errors import UserError

    if path != "-":
        out = os.path.realpath(path)
        for given in inputs:
            if not given or given == "-":
                continue
            src = os.path.realpath(given)
            # a new file beside a model's is harmless; replacing one of its files is not
            if out == src or (os.path.isdir(src) and out.startswith(src + os.sep) and os.path.exists(out)):
                raise UserError(f"{path}: is {'inside ' if out != src else ''}the input {given}; write elsewhere")
    if path != "-" and os.path.isfile(path) and not force:
        raise UserError(f"{path}: already exists; give --force (in Python: "
                        "force=True) to replace it, or choose another -o")


@contextlib.contextmanager
def writing_directory(path: str, lock):
    """Write into the directory ``path`` under ``lock(path)`` (held to the end: a second writer stops at once); a
    directory this command created is removed again when the command fails (it then holds at most the lock file),
    so a failed or interrupted writer leaves nothing half-made behind."""
    import os

    created = not os.path.exists(path)
    try:
        with lock(path):
            yield
    except BaseException:
        if created:
            remove_if_empty(path)
        raise


def remove_if_empty(out_dir: str) -> None:
    """Undo the directory a command created (it holds at most the lock file) after a failure."""
    import os
    import shutil

    try:
        if set(os.listdir(out_dir)) <= {".lock"}:
            shutil.rmtree(out_dir)
    except OSError:
        pass


@contextlib.contextmanager
def replaced_directory(path: str):
    """Yield a scratch folder beside ``path`` to write a directory output into (n-best lists, lattices); when the
    block ends well it takes ``path``'s place whole, so nothing of an earlier output (``--force``) stays beside the
    new files; when it fails (or is killed: the next writer of ``path`` sweeps it) it goes and ``path`` is as it
    was."""
    import os
    import shutil
    import tempfile

    from .data.writing import _umask, sweep_dead_temps, temp_prefix

    parent = os.path.dirname(os.path.abspath(path))
    sweep_dead_temps(parent)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f"{temp_prefix(path)}{os.getpid()}.", suffix=".tmp")
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's folder is the owner's alone
        if os.path.isdir(path) and not os.path.islink(path):
            old = tmp[: -len(".tmp")] + ".old.tmp"
            os.rename(path, old)
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            if os.path.lexists(path):  # a file given --force
                os.unlink(path)
            os.rename(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def lock_directory(path: str, sweep: tuple[str, ...] = ("",), remove_created: bool = True, busy_hint: str = ""):
    """An exclusive OS lock on ``path/.lock`` while writing into ``path`` (created if missing); a second writer
    stops at once with a clear message instead of interleaving its files with the first one's.

    The lock file is removed when the block ends (while still held), so a finished directory holds no ``.lock``; a
    writer that finds its lock on a file no longer at that path (the holder before it removed it between our open and
    lock) opens the new one. A killed writer leaves its ``.lock``: the next one takes it. ``sweep``: folders under
    ``path`` ("" itself) whose dead temporaries (a killed writer's) are removed once the lock is held;
    ``remove_created``: a directory this created is removed again, when empty, if the block fails."""
    import fcntl
    import os

    from .data.textio import sweep_dead_temps
    from .errors import UserError

    if path == "-":
        raise UserError("-o -: this command writes a model directory, not a stream; give -o DIR")
    lock = os.path.join(path, ".lock")
    created = not os.path.isdir(path)
    while True:
        try:
            os.makedirs(path, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as e:
            raise UserError(f"{path}: cannot create or lock this directory ({e.strerror or e})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UserError(f"{path}: another sampledlm process is writing into this directory{busy_hint}") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.path.samestat(os.fstat(fd), os.stat(lock))
        except OSError:
            current = False
        if current:
            break
        os.close(fd)  # locked a .lock its holder removed when done: not the lock of the directory
    ok = False
    try:
        for d in sweep:
            sweep_dead_temps(os.path.join(path, d) if d else path)
        yield
        ok = True
    finally:
        with contextlib.suppress(OSError):
            os.remove(lock)  # still held: whoever opened it meanwhile finds it gone (above) and opens a new one
        os.close(fd)
        if created and not ok and remove_created:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only when empty
