"""Regression test for a textio defect found by `sampledlm bench faults`: ``-o -`` (standard output) on a full
disk (``> /dev/full``) was an OSError traceback; it is a one-line error like a full disk for a file."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys

import pytest

from sampledlm.data.textio import atomic_write
from sampledlm.errors import UserError


class FullStdout(io.StringIO):
    def write(self, s):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_atomic_write_to_a_full_standard_output(monkeypatch):
    monkeypatch.setattr(sys, "stdout", FullStdout())
    with pytest.raises(UserError, match="standard output: cannot write: No space left on device"):
        with atomic_write("-") as f:
            f.write("x\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_vocab_to_dev_full_is_one_line(tmp_path):
    (tmp_path / "t.txt").write_text("a b c\n" * 5000)
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "sampledlm", "vocab", str(tmp_path / "t.txt"), "-o", "-"],
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=300,
                           env={**os.environ, "SAMPLEDLM_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["sampledlm: error: standard output: cannot write: No space left on device"]


def test_temp_files_of_a_killed_writer_are_swept_by_the_next_write(tmp_path):
    """kill -9 during a write leaves ``.NAME.HOST.PID.XXXX.tmp``; the next write of NAME removes it when PID is
    gone, and leaves the temporary file of a writer that is still running."""
    import subprocess
    import sys

    from sampledlm.data.textio import _temp_prefix, atomic_write

    target = tmp_path / "kn3.arpa"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"{_temp_prefix(str(target))}{int(dead.stdout)}.abcd1234.tmp"
    live = tmp_path / f"{_temp_prefix(str(target))}1.abcd1234.tmp"  # pid 1 is always running
    other = tmp_path / f".other.arpa.{_temp_prefix(str(target)).split('.', 3)[-1]}{int(dead.stdout)}.x.tmp"
    for f in (stale, live, other):
        f.write_text("half a file")
    with atomic_write(str(target)) as f:
        f.write("done\n")
    assert target.read_text() == "done\n"
    assert not stale.exists() and live.exists() and other.exists()
