"""`sampledlm ngram train|eval`: the happy path on tiny files, and one-line errors with nothing half-written."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from helpers import synthetic_sentences, write_corpus

pytestmark = pytest.mark.usefixtures("private_cache")  # parsed-ARPA and corpus caches: not the user's


def assert_one_line_error(r, *fragments):
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sampledlm: error:"), r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_train_then_eval(tiny_corpus, run_in_process):
    d = tiny_corpus["train"].parent
    r = run_in_process("ngram", "train", "--train", "train.txt", "--order", "3", "-o", "kn3.arpa",
                       "--valid", "valid.txt", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "modified Kneser-Ney" in r.stderr and "valid perplexity" in r.stderr
    r = run_in_process("ngram", "eval", "kn3.arpa", "--test", "test.txt", "--json", cwd=d)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    n_words = sum(len(line.split()) for line in (d / "test.txt").read_text().splitlines())
    assert s["predictions"] == n_words + 60 and s["sentences"] == 60 and s["oov"] == 0
    assert 1 < s["ppl"] < 60
    assert 10 ** (-s["log10_prob"] / s["predictions"]) == pytest.approx(s["ppl"], rel=1e-6)
    r = run_in_process("ngram", "eval", "kn3.arpa", "--test", "test.txt", "--per-sentence", cwd=d)
    header, *rows = r.stdout.splitlines()  # eval's layout: ln_prob, predictions, ppl, sentence
    assert header.split("\t") == ["ln_prob", "predictions", "ppl", "sentence"] and len(rows) == 60
    ln = [float(row.split("\t")[0]) for row in rows]
    assert sum(int(row.split("\t")[1]) for row in rows) == s["predictions"]
    assert math.exp(-sum(ln) / s["predictions"]) == pytest.approx(s["ppl"], rel=1e-4)  # rows print 4 decimals
    assert "ppl" in r.stderr
    same = run_in_process("eval", "kn3.arpa", "--test", "test.txt", "--per-sentence", cwd=d)
    assert (same.stdout, same.stderr) == (r.stdout, r.stderr)  # ngram eval is eval


def test_every_smoothing_from_the_command_line(tiny_corpus, run_in_process):
    d = tiny_corpus["train"].parent
    ppl = {}
    for sm in ("mkn", "kn", "wb", "jm", "katz", "addk"):
        r = run_in_process("ngram", "train", "--train", "train.txt", "--order", "2", "--smoothing", sm,
                           "--valid", "valid.txt", "-o", f"{sm}.arpa", cwd=d)
        assert r.returncode == 0, r.stderr
        r = run_in_process("ngram", "eval", f"{sm}.arpa", "--test", "test.txt", "--json", cwd=d)
        ppl[sm] = json.loads(r.stdout)["ppl"]
    assert all(math.isfinite(x) for x in ppl.values())
    assert ppl["mkn"] < ppl["addk"]


def test_oov_words_are_counted_and_scored_as_unk(tmp_path, run_in_process):
    (tmp_path / "train.txt").write_text("a b c\nb c a\n" * 20)
    (tmp_path / "test.txt").write_text("a zzz c\n")
    (tmp_path / "vocab.txt").write_text("a\t1\nb\t1\nc\t1\n")
    r = run_in_process("ngram", "train", "--train", "train.txt", "--vocab", "vocab.txt", "-o", "m.arpa", cwd=tmp_path)
    assert r.returncode == 0
    s = json.loads(run_in_process("ngram", "eval", "m.arpa", "--test", "test.txt", "--json", cwd=tmp_path).stdout)
    assert s["oov"] == 1 and s["predictions"] == 4 and math.isfinite(s["ppl"])


def test_errors_are_one_line_and_leave_no_file(tmp_path, run_in_process):
    (tmp_path / "train.txt").write_text("a b\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "bad.arpa").write_text("\n\\data\\\nngram 1=2\n\n\\1-grams:\n-1\t</s>\nnope\t<s>\n\n\\end\\\n")
    cases = [
        (["train", "--train", "missing.txt", "-o", "m.arpa"], ["missing.txt", "no such file"]),
        (["train", "--train", "empty.txt", "-o", "m.arpa"], ["empty.txt"]),
        (["train", "--train", "train.txt", "--smoothing", "jm", "-o", "m.arpa"], ["--valid"]),
        (["train", "--train", "train.txt", "--smoothing", "addk", "--k", "0", "-o", "m.arpa"], ["--k"]),
        (["train", "--train", "train.txt", "-o", "no-dir/m.arpa"], ["no-dir"]),
        (["train", "--train", "train.txt", "--vocab", "missing-vocab.txt", "-o", "m.arpa"], ["missing-vocab.txt"]),
        (["eval", "missing.arpa", "--test", "train.txt"], ["missing.arpa", "no such model file"]),
        (["eval", "bad.arpa", "--test", "train.txt"], ["bad.arpa:7:", "not a number"]),
        (["eval", "train.txt", "--test", "train.txt"], ["train.txt", "\\data\\"]),
    ]
    for args, fragments in cases:
        assert_one_line_error(run_in_process("ngram", *args, cwd=tmp_path), *fragments)
    assert not (tmp_path / "m.arpa").exists()
    r = run_in_process("ngram", "train", "--train", "train.txt", "--order", "0", "-o", "m.arpa", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_console_entry_point(tiny_corpus):
    d = tiny_corpus["train"].parent
    r = subprocess.run([sys.executable, "-m", "sampledlm", "ngram", "train", "--train", "train.txt", "--order", "2",
                        "-o", "m.arpa"], capture_output=True, text=True, cwd=d, timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "sampledlm", "ngram", "eval", "m.arpa", "--test", "nope.txt"],
                       capture_output=True, text=True, cwd=d, timeout=300)
    assert r.returncode == 1 and r.stderr.strip().startswith("sampledlm: error:") and "Traceback" not in r.stderr


def test_every_smoothing_is_offered_and_described_once():
    """A new smoothing is its function and one entry in estimate.py: the command line offers what SMOOTHINGS holds."""
    from click.testing import CliRunner

    from sampledlm.cli import cli
    from sampledlm.ngram.build.estimate import DESCRIPTIONS, SMOOTHINGS

    assert list(DESCRIPTIONS) == list(SMOOTHINGS)
    out = CliRunner().invoke(cli, ["ngram", "train", "--help"], terminal_width=200).output
    assert "[" + "|".join(SMOOTHINGS) + "]" in out
    assert all(f"{k}: {DESCRIPTIONS[k]}" in " ".join(out.split()) for k in SMOOTHINGS)


def test_fallback_discounts_are_said(tmp_path, run_in_process):
    """Where modified Kneser-Ney's discounts are out of range (small text), KenLM's fallback (0.5, 1, 1.5) is used,
    as lmplz --discount_fallback does; it was used silently, so a user comparing with lmplz could not know."""
    write_corpus(tmp_path / "tiny.txt", synthetic_sentences(12, seed=4))
    r = run_in_process("ngram", "train", "--train", "tiny.txt", "--order", "5", "-o", "tiny.arpa", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    warning = [x for x in r.stderr.splitlines() if "fallback discounts" in x]
    assert len(warning) == 1 and warning[0].startswith("sampledlm: warning: the Kneser-Ney discounts of order(s) ")
    ids = np.random.default_rng(0).zipf(1.3, 40_000) % 5_000  # a Zipfian vocabulary: healthy counts of counts
    (tmp_path / "zipf.txt").write_text("".join(" ".join(f"w{i}" for i in ids[k : k + 20]) + "\n"
                                               for k in range(0, len(ids), 20)))
    r = run_in_process("ngram", "train", "--train", "zipf.txt", "--order", "2", "-o", "zipf.arpa", cwd=tmp_path)
    assert r.returncode == 0 and "fallback" not in r.stderr, r.stderr
