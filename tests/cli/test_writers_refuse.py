"""Every writer refuses to replace a user's file without --force (issue 21, item 11); --k is range-checked (item 9)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("args", [("ngram", "train", "--train", "train.txt", "--order", "2", "-o", "out.txt"),
                                  ("vocab", "train.txt", "-o", "out.txt")])
def test_an_existing_output_needs_force(args, tiny_corpus, run_in_process):
    d = tiny_corpus["train"].parent
    (d / "out.txt").write_text("my own file\n")
    r = run_in_process(*args, cwd=d)
    assert r.returncode == 1 and "already exists; give --force" in r.stderr and "Traceback" not in r.stderr
    assert (d / "out.txt").read_text() == "my own file\n"
    r = run_in_process(*args, "--force", cwd=d)
    assert r.returncode == 0, r.stderr
    assert (d / "out.txt").read_text() != "my own file\n"


@pytest.mark.parametrize("k", ["nan", "inf", "-1", "0"])
def test_add_k_must_be_finite_and_positive(k, tiny_corpus, run_in_process):
    d = tiny_corpus["train"].parent
    r = run_in_process("ngram", "train", "--train", "train.txt", "--smoothing", "addk", "--k", k, "-o", "k.arpa", cwd=d)
    if k in ("nan", "inf"):  # refused by the flag's type (FiniteFloat): click's usage error, before anything is read
        assert r.returncode == 2 and "Invalid value for '--k'" in r.stderr and "Traceback" not in r.stderr
    else:
        assert r.returncode == 1 and r.stderr.strip().startswith("sampledlm: error: --k") and "\n" not in r.stderr.strip()
    assert not (d / "k.arpa").exists()
