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
