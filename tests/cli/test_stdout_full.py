"""A full disk behind standard output is a one-line error, not a traceback (issue 21, item 19)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_results_to_a_full_stdout_are_a_one_line_error(tiny_corpus):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "sampledlm", "stats", str(tiny_corpus["test"])], stdout=full,
                           stderr=subprocess.PIPE, text=True)
    assert r.returncode == 1
    assert r.stderr.strip() == "sampledlm: error: standard output: cannot write: No space left on device"
