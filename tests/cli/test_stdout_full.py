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


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [["score", "{model}", "{text}", "--per-word"], ["generate", "{model}", "-n", "300"],
                                  ["eval", "{model}", "--test", "{text}", "--per-sentence"]])
def test_no_second_error_at_exit_whatever_is_still_buffered(tiny_corpus, tmp_path, args):
    model = tmp_path / "k2.arpa"
    subprocess.run([sys.executable, "-m", "sampledlm", "ngram", "train", "--train", str(tiny_corpus["train"]),
                    "--order", "2", "-o", str(model)], check=True, capture_output=True)
    argv = [a.format(model=model, text=tiny_corpus["train"]) for a in args]
    for env in ({}, {"PYTHONUNBUFFERED": "1"}):
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "sampledlm", *argv], stdout=full, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, **env})
        assert r.returncode == 1, r.stderr
        assert r.stderr.strip() == "sampledlm: error: standard output: cannot write: No space left on device"
