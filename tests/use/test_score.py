"""``sampledlm score``: its totals are eval's perplexity for every family and for a mixture; n-gram
per-word probabilities and orders are KenLM's; bunching changes no number."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

FAMILIES = [("kn3.arpa", False), ("ffnn3", False), ("gru", True), ("melm", False)]


def eval_ppl(run, d, *args):
    r = run("eval", *args, "--test", "test.txt", "--json", cwd=d)
    assert r.returncode == 0, r.stderr
    line = r.stderr if "--per-sentence" in args else r.stdout
    doc = json.loads(line.strip().splitlines()[-1])
    return doc["ppl"]


def score_totals(run, d, *args):
    r = run("score", *args, "--jsonl", cwd=d)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    return rows, json.loads(r.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("model,recurrent", FAMILIES)
def test_score_totals_equal_eval(four_models, run_in_process, model, recurrent):
    rows, tot = score_totals(run_in_process, four_models, model, "test.txt")
    # a recurrent model's eval reads running text by default; score reads each sentence on its own
    ppl = eval_ppl(run_in_process, four_models, model, *(["--per-sentence"] if recurrent else []))
    assert tot["ppl"] == pytest.approx(ppl, rel=1e-6)
    assert tot["sentences"] == len(rows) == 40
    assert tot["predictions"] == tot["words"] + tot["sentences"]
    assert sum(r["ln"] for r in rows) == pytest.approx(tot["ln"], rel=1e-9)
    assert tot["log10"] == pytest.approx(tot["ln"] / math.log(10), rel=1e-12)


def test_score_mixture_equals_eval(four_models, run_in_process):
    args = ("gru", "--interpolate", "kn3.arpa", "--interpolate", "ffnn3", "--weights", "0.5,0.3,0.2", "--per-sentence")
    ppl = eval_ppl(run_in_process, four_models, *args)
    _, tot = score_totals(run_in_process, four_models, "gru", "test.txt", "--mix", "kn3.arpa", "--mix", "ffnn3",
                          "--weights", "0.5,0.3,0.2")
    assert tot["ppl"] == pytest.approx(ppl, rel=1e-6)


def test_score_mixture_auto_weights_use_validation(four_models, run_in_process):
    _, auto = score_totals(run_in_process, four_models, "ffnn3", "test.txt", "--mix", "kn3.arpa")
    ppl = eval_ppl(run_in_process, four_models, "ffnn3", "--interpolate", "kn3.arpa", "--weights", "auto")
    assert auto["ppl"] == pytest.approx(ppl, rel=1e-6)


def test_a_maxent_model_first_in_a_mixture_gives_its_validation_file(four_models, run_in_process):
    """--weights auto reads the first model's validation text: a maxent model records it too (it said none was)."""
    _, auto = score_totals(run_in_process, four_models, "melm", "test.txt", "--mix", "kn3.arpa")
    given = eval_ppl(run_in_process, four_models, "melm", "--interpolate", "kn3.arpa", "--weights", "auto",
                     "--interp-valid", str(four_models / "valid.txt"))
    assert auto["ppl"] == pytest.approx(given, rel=1e-6)


def test_ngram_per_word_equals_kenlm_full_scores(four_models, run_in_process):
    kenlm = pytest.importorskip("kenlm", reason="KenLM's Python module is the cross-check")
    rows, _ = score_totals(run_in_process, four_models, "kn3.arpa", "test.txt", "--per-word")
    k = kenlm.Model(str(four_models / "kn3.arpa"))
    for row in rows:
        full = list(k.full_scores(row["text"]))
        assert len(full) == len(row["per_word"]) == row["words"] + 1
        for (p10, length, _), w in zip(full, row["per_word"]):
            assert w["log10"] == pytest.approx(p10, abs=1e-5)
            assert w["order"] == length
        assert row["log10"] == pytest.approx(k.score(row["text"]), abs=1e-4)


def test_plain_output_is_srilm_like(four_models, run_in_process):
    r = run_in_process("score", "kn3.arpa", "test.txt", "--per-word", cwd=four_models)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "\tp( </s> | " in out and "gram] " in out and "1 sentences, " in out
    assert out.rstrip().splitlines()[-2].startswith("file test.txt: 40 sentences, ")


def test_bunching_changes_no_number(four_models, run_in_process):
    one, _ = score_totals(run_in_process, four_models, "gru", "test.txt", "--bunch", "1")
    many, _ = score_totals(run_in_process, four_models, "gru", "test.txt", "--bunch", "64")
    np.testing.assert_allclose([r["ln"] for r in one], [r["ln"] for r in many], rtol=1e-5)


def test_oovs_are_counted_and_scored(four_models, run_in_process, tmp_path):
    (tmp_path / "oov.txt").write_text("w1 never-seen-word w2\n\n", encoding="utf-8")
    rows, tot = score_totals(run_in_process, four_models, str(four_models / "kn3.arpa"), str(tmp_path / "oov.txt"))
    assert tot["oovs"] == 1 and tot["words"] == 3 and tot["sentences"] == 1 and math.isfinite(tot["ln"])
    (tmp_path / "oov.txt").write_text("w1 never-seen-word <unk> w2\n", encoding="utf-8")
    rows, _ = score_totals(run_in_process, four_models, str(four_models / "kn3.arpa"), str(tmp_path / "oov.txt"),
                           "--per-word")
    # the word outside the vocabulary is flagged; <unk> written in the text is the vocabulary's own word, and </s> too
    assert [(w["word"], w["oov"]) for w in rows[0]["per_word"]] == [
        ("w1", False), ("never-seen-word", True), ("<unk>", False), ("w2", False), ("</s>", False)]


def test_empty_file_and_missing_model_are_one_line_errors(four_models, run_in_process, tmp_path):
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    r = run_in_process("score", str(four_models / "kn3.arpa"), "empty.txt", cwd=tmp_path)
    assert r.returncode == 1 and "empty.txt: no sentences to score" in r.stderr and "Traceback" not in r.stderr
    r = run_in_process("score", "nope", "empty.txt", cwd=tmp_path)
    assert r.returncode == 1 and "nope: no such model" in r.stderr
    r = run_in_process("score", "kn3.arpa", "test.txt", "--weights", "0.5", cwd=four_models)
    assert r.returncode == 1 and "need a second model" in r.stderr


def test_the_plain_layout_is_srilms(four_models, capsys):
    """SRILM's ngram -ppl -debug 1 lines, as its scripts parse them: 'N sentences, N words, N OOVs' then
    'N zeroprobs, logprob= X ppl= Y ppl1= Z' (ppl over words and </s>, ppl1 over the words alone)."""
    import math
    import re

    from helpers import run_cli

    code, out, err = run_cli(["score", str(four_models / "kn3.arpa"), str(four_models / "test.txt")], capsys)
    assert code == 0, err
    counts = re.findall(r"^1 sentences, (\d+) words, (\d+) OOVs$", out, re.M)
    stats = re.findall(r"^0 zeroprobs, logprob= (\S+) ppl= (\S+) ppl1= (\S+)", out, re.M)[:-1]  # last: the file's
    assert len(counts) == len(stats) == len((four_models / "test.txt").read_text().splitlines())
    for (words, _), (logprob, ppl, ppl1) in zip(counts, stats):
        w, lp = int(words), float(logprob)
        assert float(ppl) == pytest.approx(10 ** (-lp / (w + 1)), rel=1e-4)
        assert float(ppl1) == pytest.approx(10 ** (-lp / w), rel=1e-4)
    total = re.search(r"^file \S+: (\d+) sentences, (\d+) words, (\d+) OOVs\n0 zeroprobs, logprob= (\S+) ppl= (\S+) "
                      r"ppl1= (\S+)", out, re.M)
    s, w, lp = int(total.group(1)), int(total.group(2)), float(total.group(4))
    assert float(total.group(5)) == pytest.approx(10 ** (-lp / (w + s)), rel=1e-4)
    assert float(total.group(6)) == pytest.approx(math.pow(10, -lp / w), rel=1e-4)


@pytest.mark.parametrize("command", [["score", "kn3.arpa", "test.txt"], ["generate", "kn3.arpa", "-n", "1"]])
def test_a_mixture_says_the_weights_em_chose(four_models, run_in_process, command):
    """score and generate with --mix never said which weights EM chose (eval does), so an output's mixture was
    unknown."""
    r = run_in_process(*command, "--mix", "ffnn3", "--interp-valid", "valid.txt", cwd=four_models)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stderr.splitlines() if x.startswith("interpolation weights by EM on valid.txt: "))
    weights = [float(w.split()[-1]) for w in line.split(": ", 1)[1].split(", ")]
    assert len(weights) == 2 and sum(weights) == pytest.approx(1, abs=2e-3)
    r = run_in_process(*command, "--mix", "ffnn3", "--weights", "0.5,0.5", cwd=four_models)
    assert "interpolation weights" not in r.stderr  # given, not chosen
