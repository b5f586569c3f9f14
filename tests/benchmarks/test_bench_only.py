"""`sampledlm bench NAME --only RUNS`: re-train some runs, carry the page's other rows (marked, with their commit)."""

from __future__ import annotations

import json

import pytest

from benchmarks import lmruns
from benchmarks.lmruns import Run
from sampledlm.errors import UserError


def _page(tmp_path, rows):
    path = tmp_path / "exp.json"
    path.write_text(json.dumps({"meta": {"commit": "abc1234"}, "data": {"rows": rows}}))
    return str(tmp_path)


def test_only_carries_the_other_rows_with_their_commit(tmp_path):
    out = _page(tmp_path, [{"name": "a", "test_ppl": 100.0}, {"name": "b", "test_ppl": 200.0}])
    carried, commit = lmruns.carried_rows(out, "exp")
    assert commit == "abc1234" and carried["a"]["carried"] == "abc1234"
    files = {"train": str(tmp_path / "t.txt"), "valid": str(tmp_path / "v.txt")}
    plan = [Run("a", ("--epochs", "1")), Run("b", ("--epochs", "1"))]
    rows = lmruns.run_all(str(tmp_path / "work"), files, plan, None, train_new=False, only={"b"}, carried=carried)
    assert rows["a"]["test_ppl"] == 100.0 and lmruns.label(rows["a"]) == "a†"
    # --no-train trains nothing, and b has saved no model here: the page keeps b's row, marked as carried
    # (a run that has saved a model here is summarised from it instead, partial when unfinished)
    assert list(rows) == ["a", "b"] and lmruns.label(rows["b"]) == "b†"
    assert "commit abc1234" in lmruns.status_note(plan, rows, {})
    with pytest.raises(UserError, match="no run named c"):
        lmruns.run_all(str(tmp_path / "work"), files, plan, None, train_new=False, only={"c"}, carried=carried)


def test_only_needs_the_page_it_keeps_rows_from(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        lmruns.carried_rows(str(tmp_path), "exp")


def test_a_run_version_changes_its_directory(tmp_path):
    files = {"train": "t.txt", "valid": "v.txt"}
    old, new = Run("r", ("--x",)), Run("r", ("--x",), version="per-example")
    assert lmruns.run_dir("w", files, old) != lmruns.run_dir("w", files, new)
    assert lmruns.run_dir("w", files, old) == lmruns.run_dir("w", files, Run("r", ("--x",)))


def test_outputs_only_carries_the_sampled_rows_from_objectives_ptb(tmp_path):
    from benchmarks import outputs

    (tmp_path / "objectives_ptb.json").write_text(json.dumps(
        {"meta": {"commit": "old1"}, "data": {"rows": [{"name": "nce-s250", "test_ppl": 150.0},
                                                        {"name": "softmax", "test_ppl": 154.0}]}}))
    (tmp_path / "outputs.json").write_text(json.dumps(
        {"meta": {"commit": "new2"}, "data": {"ptb": {"rows": [{"name": "softmax", "test_ppl": 153.0}]}}}))
    rows = outputs.carried_ptb_rows(str(tmp_path))
    # this page's own row wins over the other page's row of the same run
    assert rows["softmax"] == {"name": "softmax", "test_ppl": 153.0, "carried": "new2"}
    assert rows["nce-s250"]["carried"] == "old1"


def test_outputs_budget_takes_the_epochs_ended_within_it():
    from benchmarks.outputs import within_budget

    row = {"curve": [{"valid_ppl": 200.0, "wall_s": 100}, {"valid_ppl": 180.0, "wall_s": 250},
                     {"valid_ppl": 185.0, "wall_s": 290}, {"valid_ppl": 170.0, "wall_s": 400}]}
    assert within_budget(row, 50) is None
    assert within_budget(row, 300) == 180.0 and within_budget(row, 400) == 170.0


def test_transformer_only_names_runs_of_its_plan(tmp_path):
    from benchmarks import transformer

    (tmp_path / "transformer.json").write_text(json.dumps(
        {"meta": {"commit": "abc"}, "data": {"rows": [], "reference": {"test_ppl": 228.5}, "speed": None}}))
    assert transformer.committed(str(tmp_path)) == {"reference": {"test_ppl": 228.5, "carried": "abc"}}
    with pytest.raises(UserError, match="no run named nope"):
        transformer.run(False, None, str(tmp_path), train=False, only={"nope"})


def test_no_train_takes_a_finished_run_of_the_same_training_for_a_row(tmp_path, monkeypatch):
    """A row whose own directory is empty but whose :attr:`Run.same_as` run has finished (e.g. the lr grid's cell at
    the row's default rate) is summarised from that run, with --no-train as when training."""
    files = {"train": str(tmp_path / "t.txt"), "valid": str(tmp_path / "v.txt")}
    cell = Run("lr-b-0.004", ("--epochs", "1", "--lr", "0.004"))
    plan = [Run("b", ("--epochs", "1"), same_as=(cell,))]
    work = str(tmp_path / "work")
    done = lmruns.run_dir(work, files, cell)
    monkeypatch.setattr(lmruns, "finished", lambda rd: rd == done)
    monkeypatch.setattr(lmruns, "summary", lambda rd, files, arpa: {"test_ppl": 92.0, "from": rd})
    rows = lmruns.run_all(work, files, plan, None, train_new=False, only={"b"}, carried={"b": {"name": "b"}})
    assert rows["b"]["from"] == done and rows["b"]["dir"] == done and "carried" not in rows["b"]
    assert lmruns.reused_dir(work, files, Run("b", ("--epochs", "1"))) is None
