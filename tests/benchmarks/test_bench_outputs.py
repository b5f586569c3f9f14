"""`sampledlm bench outputs --quick`: training cost of every objective against V, a decoder's scoring cost,
and the PTB part (softmax and short-list on the built-in corpus); `--no-train` marks the PTB runs not run."""

from __future__ import annotations

import math

import pytest
from helpers import bench, run_quick, write_word_corpus

from sampledlm.objectives import OBJECTIVES

pytestmark = pytest.mark.usefixtures("private_cache")


def test_outputs_quick(tmp_path):
    data = run_quick("outputs", tmp_path / "out")
    sizes = data["setup"]["sizes"]
    assert {(r["objective"], r["V"]) for r in data["training"]} == {(n, v) for n in OBJECTIVES for v in sizes}
    for r in data["training"]:
        assert r["tokens_per_s"] > 0 and math.isfinite(r["speedup"])
        if r["objective"] == "softmax":
            assert r["speedup"] == 1.0
    rules = {r["rule"].split(" ")[0] for r in data["inference"]}
    assert {"softmax", "selfnorm", "class", "hsm", "adaptive"} <= rules
    assert len(data["criteria"]) == 4 and all(isinstance(c["pass"], bool) for c in data["criteria"].values())
    rows = {r["name"]: r for r in data["ptb"]["rows"]}
    assert set(rows) == {"softmax", "shortlist-2000"} and not data["ptb"]["failures"]
    for r in rows.values():
        assert r["test_ppl"] > 1 and r["test_ppl_interp"] > 1
    page = (tmp_path / "out" / "outputs.md").read_text()
    assert "## (a)" in page and "## (b)" in page and "## (c)" in page


def test_outputs_no_train_marks_the_ptb_runs_not_run(tmp_path, monkeypatch):
    from benchmarks import outputs

    monkeypatch.setattr(outputs, "training_cost", lambda sizes, rounds: [
        {"V": v, "objective": n, "options": {}, "sec_per_step": 1.0, "tokens_per_s": 128.0, "speedup": 1.0}
        for v in sizes for n in OBJECTIVES])
    monkeypatch.setattr(outputs, "inference_cost", lambda V, rounds: [
        {"V": V, "rule": f"{n} (x)", "us_per_request": 1.0, "speedup": 1.0} for n in ("softmax", "selfnorm")])
    for name, n, seed in (("train", 40, 1), ("valid", 10, 2), ("test", 10, 3)):
        write_word_corpus(tmp_path / f"{name}.txt", n, seed)
    r = bench("outputs", "--no-train", "--data", str(tmp_path), "--out", str(tmp_path / "out"))
    assert r.exit_code == 0, r.output + repr(r.exception)
    page = (tmp_path / "out" / "outputs.md").read_text()
    assert "Not run yet" in page and "`python -m benchmarks outputs` trains" in page
    assert "shortlist-2000" in page and "adaptive" in page


def test_chen_budget_files_and_section(tmp_path):
    """The larger-vocabulary leg: the novel keeps every word (PTB-like otherwise) and is split 18/1/1 into
    the joined files; the section ranks objectives by the best validation perplexity within each CPU budget."""
    from benchmarks import chen_budget

    novel = tmp_path / "novel.txt"
    body = "\n\n".join(f"Prince Andrei met {i} officers, quietly; he said nothing at all." for i in range(40))
    novel.write_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\n" + body + "\n*** END OF THE PROJECT GUTENBERG")
    ptb = {}
    for k in ("train", "valid", "test"):
        (tmp_path / f"ptb.{k}.txt").write_text("the cat sat\n")
        ptb[k] = str(tmp_path / f"ptb.{k}.txt")
    files = chen_budget.joined_files(str(tmp_path), ptb, str(novel))
    lines = {k: open(p).read().splitlines() for k, p in files.items()}
    assert lines["train"][0] == "the cat sat" and len(lines["train"]) == 1 + 36
    assert len(lines["valid"]) == len(lines["test"]) == 1 + 2
    assert lines["valid"][1] == "prince andrei met N officers quietly he said nothing at all"
    curve = [{"valid_ppl": 300.0, "cpu_s": 100}, {"valid_ppl": 250.0, "cpu_s": 200}, {"valid_ppl": 240.0, "cpu_s": 500}]
    from benchmarks.outputs import within_budget

    row = {"curve": curve}
    assert within_budget(row, 120, "cpu_s") == 300.0 and within_budget(row, 360, "cpu_s") == 250.0
    d = {"vocabulary": 30000, "train_tokens": 10, "budgets": [120, 360],
         "rows": [{"name": "softmax", "tokens_per_s": 100, "epochs": 3, "test_ppl": 260.0,
                   "budget_ppl": {"120": None, "360": 280.0}},
                  {"name": "nce", "tokens_per_s": 900, "epochs": 9, "test_ppl": 250.0,
                   "budget_ppl": {"120": 300.0, "360": 270.0}}]}
    text = chen_budget.markdown(d)
    assert "within 360 CPU-s: **nce** (270.0), then softmax (280.0)" in text
    assert "within 120 CPU-s: **nce** (300.0)\n" in text and "| softmax | 100 | 3 | - | 280.0 | 260.0 |" in text
