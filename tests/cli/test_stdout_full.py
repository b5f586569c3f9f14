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
                                  ["eval", "{model}", "--test", "{text}", "--per-sentence"],
                                  ["ngram", "train", "--train", "{text}", "--order", "3", "-o", "-"],
                                  ["ngram", "train", "--train", "{text}", "--order", "3", "--smoothing", "wb", "-o", "-"],
                                  ["ngram", "train", "--train", "{text}", "--valid", "{text}", "-o", "-"]])
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


@pytest.mark.skipif(not hasattr(__import__("resource"), "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
def test_a_failed_write_of_numbas_cache_is_not_blamed_on_standard_output(tiny_corpus, tmp_path):
    # issue 34: under a file-size limit `classes` said "standard output: cannot write" when numba's first call
    # failed to write its cache of compiled code (an empty NUMBA_CACHE_DIR makes the first call compile and write)
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (4000, 4000)); "
            "from sampledlm.cli import main; main(sys.argv[1:])")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", code, "classes", str(tiny_corpus["train"]), "--classes", "4", "-o",
                        str(tmp_path / "classes.txt")], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "numba's cache of compiled code" in r.stderr and "standard output" not in r.stderr, r.stderr
    assert not (tmp_path / "classes.txt").exists()


def test_an_os_error_that_names_its_file_is_reported_with_that_name():
    import errno

    from sampledlm.cli import _failed_write_target

    assert _failed_write_target(OSError(errno.ENOSPC, "No space left on device", "/x/out.arpa")) == "/x/out.arpa"
    assert _failed_write_target(OSError(errno.ENOSPC, "No space left on device")) == "standard output"
