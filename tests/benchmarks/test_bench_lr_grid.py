"""The lr-grid experiment without training: its edge-extension rule, the resume from its records, its page."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks import lmruns, lr_grid
from benchmarks.lr_grid import next_rate

BASE = (0.001, 0.002, 0.004, 0.008)


def test_an_interior_best_ends_the_row():
    assert next_rate({0.001: 120, 0.002: 110, 0.004: 100, 0.008: 105}, BASE) is None


def test_a_best_at_an_edge_extends_the_grid_by_a_factor_two():
    assert next_rate({0.001: 120, 0.002: 110, 0.004: 100, 0.008: 95}, BASE) == 0.016
    assert next_rate({0.001: 90, 0.002: 110, 0.004: 100, 0.008: 95}, BASE) == 0.0005
    # the extension goes on until the best is interior
    assert next_rate({0.001: 120, 0.002: 110, 0.004: 100, 0.008: 95, 0.016: 93}, BASE) == 0.032
    assert next_rate({0.001: 120, 0.002: 110, 0.004: 100, 0.008: 95, 0.016: 97}, BASE) is None
    assert next_rate({0.0005: 85, 0.001: 90, 0.002: 110, 0.004: 100, 0.008: 95}, BASE) == 0.00025


def test_a_diverged_top_rate_is_worst_and_all_diverged_goes_lower():
    assert next_rate({0.001: 120, 0.002: 110, 0.004: 100, 0.008: 95, 0.016: math.inf}, BASE) is None
    assert next_rate({r: math.inf for r in BASE}, BASE) == 0.0005


def test_an_incomplete_grid_extends_only_past_its_own_edge_against_a_tried_neighbour():
    assert next_rate({0.004: 100, 0.008: 95}, BASE) == 0.016  # the softmax's first two cells
    assert next_rate({0.008: 95}, BASE) is None  # one cell says nothing
    assert next_rate({0.002: 100, 0.008: 95}, BASE) is None  # 0.004, between them, not yet tried
    assert next_rate({0.004: 95, 0.008: 100}, BASE) is None  # best at 0.004, but 0.002 and 0.001 not yet tried
    assert next_rate({0.004: math.inf, 0.008: math.inf}, BASE) is None


def test_at_most_max_extensions_beyond_the_grid():
    valid = {0.001: 120, 0.002: 110, 0.004: 100, 0.008: 95, 0.016: 93}
    assert next_rate(valid, BASE, max_extensions=1) is None
    assert next_rate({0.004: 100, 0.008: 95}, (0.004, 0.008), max_extensions=0) is None


def _record(row: lr_grid.Row, lr: float, valid: float, test: float = None) -> dict:
    return {"row": row.name, "lr": lr, "flags": row.cell_flags(lr), "version": row.version, "data": "PTB",
            "commit": "abc1234", "date": "2026-11-28 07:00 UTC", "machine": "test",
            "epochs": [{"epoch": 1, "valid_ppl": valid + 10, "cpu_s": 50.0}, {"epoch": 2, "valid_ppl": valid,
                                                                               "cpu_s": 100.0}],
            "best_valid": valid, "best_epoch": 2, "test_ppl": test or valid - 5, "cpu_s": 100.0,
            "words_per_cpu_s": 9000.0}


def test_the_grid_starts_with_the_softmax_above_its_default_and_ends_with_the_transformer():
    grid = lr_grid.rows(quick=False)
    order = [(r.name, lr) for r, lr in lr_grid.base_order(grid)]
    assert order[0] == ("gru softmax", 0.008)  # above its default (0.004), then the other rows
    assert len(order) == len(set(order)) == 4 * len(grid)
    assert order[-1][0] == "transformer softmax" and order[-5][0] == "ffnn softmax"
    by = {r.name: r for r in grid}
    assert by["gru nce"].default_lr == 0.004 and by["gru softmax"].default_lr == 0.004
    assert by["gru is"].default_lr == 0.004 and by["gru css-is"].default_lr == 0.008
    assert by["gru blackout"].default_lr == 0.008 and by["ffnn softmax"].default_lr == 0.001
    assert by["transformer softmax"].default_lr == 0.001


def test_a_start_skips_the_cells_its_records_hold(tmp_path):
    grid = lr_grid.rows(quick=False)
    soft, nce = grid[0], grid[1]
    path = tmp_path / "lr-grid.jsonl"
    lr_grid.append_record(str(path), _record(soft, 0.004, 98.0))
    with open(path, "a") as f:
        f.write('{"row": "gru softmax", "lr": 0.0')  # a torn line: ignored, and the next record stands on its own
    lr_grid.append_record(str(path), _record(nce, 0.008, 104.0))
    other = {**_record(soft, 0.008, 90.0), "flags": soft.cell_flags(0.008) + " --seed 2"}  # other flags: no match
    lr_grid.append_record(str(path), other)
    records = lr_grid.load_records(str(path))
    assert len(records) == 3 and all(line.strip() for line in path.read_text().splitlines())
    todo = [(r.name, lr) for r, lr in lr_grid.pending(grid, records)]
    assert ("gru softmax", 0.004) not in todo and ("gru nce", 0.008) not in todo
    assert todo[0] == ("gru softmax", 0.008) and len(todo) == 4 * len(grid) - 2
    # a finished softmax 0.008 that beats 0.004: its extension, 0.016, runs next
    lr_grid.append_record(str(path), _record(soft, 0.008, 95.0))
    todo = [(r.name, lr) for r, lr in lr_grid.pending(grid, lr_grid.load_records(str(path)))]
    assert todo[0] == ("gru softmax", 0.016) and ("gru softmax", 0.008) not in todo


def test_cells_beside_a_rows_best_train_before_those_beyond_a_rate_that_lost(tmp_path):
    """softmax: 0.004 best, 0.002 and 0.008 lost: its 0.001 cannot move the choice at once, so every cell that
    can (other rows' neighbours of their best, rows with nothing finished) trains first; the grid still runs it."""
    grid = lr_grid.rows(quick=False)
    by = {r.name: r for r in grid}
    path = tmp_path / "lr-grid.jsonl"
    for lr, v in {0.002: 103.7, 0.004: 98.2, 0.008: 99.3}.items():
        lr_grid.append_record(str(path), _record(by["gru softmax"], lr, v))
    lr_grid.append_record(str(path), _record(by["gru nce"], 0.008, 99.5))
    todo = [(r.name, lr) for r, lr in lr_grid.pending(grid, lr_grid.load_records(str(path)))]
    assert len(todo) == 4 * len(grid) - 4
    # rows with nothing finished: their default rate and its neighbours first (the Transformer's default is 0.001,
    # the grid's lowest rate), the rest with the other rows' far cells
    assert todo.index(("gru softmax", 0.001)) > todo.index(("transformer softmax", 0.001))
    assert todo.index(("gru softmax", 0.001)) > todo.index(("transformer softmax", 0.002))
    # a row with nothing finished whose default is 0.004: its neighbours first (0.008 then 0.002), its default
    # (quality-cpu's run, the same training) next, 0.001 with the far cells
    mid = next(r.name for r in grid if r.name.startswith("gru ") and r.name not in ("gru softmax", "gru nce")
               and r.default_lr == 0.004)
    assert todo.index((mid, 0.001)) > todo.index((mid, 0.004)) > todo.index((mid, 0.002)) > todo.index((mid, 0.008))
    assert todo.index(("gru nce", 0.004)) < todo.index(("gru nce", 0.002)) < todo.index(("gru softmax", 0.001))
    assert todo.index(("gru nce", 0.001)) > todo.index(("ffnn softmax", 0.001))
    last_near = todo.index(("transformer softmax", 0.001))
    assert all(todo.index(c) > last_near for c in (("gru softmax", 0.001), ("gru nce", 0.002), ("gru nce", 0.001)))


def test_the_page_builds_from_the_records_alone(tmp_path):
    grid = lr_grid.rows(quick=False)
    by = {r.name: r for r in grid}
    path = tmp_path / "lr-grid.jsonl"
    cells = {"gru softmax": {0.001: 110, 0.002: 103.7, 0.004: 98.2, 0.008: 99.0},
             "gru nce": {0.001: 130, 0.002: 110, 0.004: 105.1, 0.008: 101.0},
             "gru hsm": {0.002: 107.5}}
    for name, rates in cells.items():
        for lr, v in rates.items():
            lr_grid.append_record(str(path), _record(by[name], lr, v, test=v - 6.0))
    lr_grid.append_record(str(path), {**_record(by["gru nce"], 0.016, 0),
                                      "best_valid": None, "test_ppl": None, "failed": "training diverged"})
    data = lr_grid.write(str(tmp_path / "out"), grid, str(path), quick=False,
                         meta={"machine": "m", "date": "d", "commit": "c", "python": "3", "torch": "2",
                               "torch_threads": 1, "numpy": "2", "command": "python -m benchmarks lr-grid --no-train"})
    rows = {r["name"]: r for r in data["rows"]}
    assert rows["gru softmax"]["chosen_lr"] == 0.004 and rows["gru softmax"]["complete"]
    assert rows["gru softmax"]["test_ppl"] == pytest.approx(92.2)  # the chosen rate's test only
    assert rows["gru nce"]["chosen_lr"] == 0.008 and rows["gru nce"]["complete"]  # 0.016 diverged: interior
    assert rows["gru nce"]["vs_softmax"] == pytest.approx(95.0 / 92.2 - 1)
    assert rows["gru nce"]["verdict"] == "missed"
    assert not rows["gru hsm"]["complete"] and rows["gru hsm"]["verdict"] == "missed so far"
    assert rows["transformer softmax"]["chosen_lr"] is None
    page = (tmp_path / "out" / "lr-grid.md").read_text()
    assert "not yet run" in page and "transformer softmax at 0.001" in page and "diverged" in page
    assert "Against the issue's targets" in page and "**98.20**" in page
    assert "for the chosen rate only" in page
    for ext in ("json", "png"):
        assert (tmp_path / "out" / f"lr-grid.{ext}").stat().st_size > 0
    doc = json.loads((tmp_path / "out" / "lr-grid.json").read_text())
    assert "test_ppl" not in json.dumps(doc["data"]["rows"][0]["cells"])  # no other rate's test on the page


@pytest.mark.slow
def test_quick_grid_trains_and_keeps_its_records_beside_its_page(tmp_path):
    from helpers import run_quick

    data = run_quick("lr-grid", tmp_path / "out", against="Against the issue's targets")
    assert data and (tmp_path / "out" / "lr-grid.jsonl").stat().st_size > 0  # not benchmarks/notes/


def test_a_default_run_of_an_earlier_default_rate_is_not_taken_as_a_cell(tmp_path):
    """The grid takes quality-cpu's finished run of a row as its cell at the row's default rate only when that run
    trained at that rate: a default rate that changed (BlackOut's 0.004 -> 0.008) leaves a run of the old one under
    the same flags."""
    (tmp_path / "config.json").write_text(json.dumps({"train": {"lr": 0.004}}))
    assert lmruns.trained_lr(str(tmp_path)) == 0.004 != lr_grid.norm(0.008)
    assert lmruns.trained_lr(str(tmp_path / "absent")) is None


def test_the_page_says_what_the_softmaxs_tries_on_its_own_settings_gave(tmp_path):
    page = tmp_path / "quality-cpu.json"
    rows = [{"name": "gru softmax", "test_ppl": 92.01}, {"name": "gru softmax-notie", "test_ppl": 99.12}]
    page.write_text(json.dumps({"data": {"rows": rows}}))
    text = lr_grid.softmax_tries_text(str(page))
    assert "(tied, dropout 0.25: 92.01): untied 99.12 (test); not yet finished: dropout 0.15, dropout 0.35." in text
    assert "none has finished yet" in lr_grid.softmax_tries_text(str(tmp_path / "missing.json"))


def test_the_adamw_grid_judges_each_row_against_the_softmax_trained_with_adamw(tmp_path):
    from benchmarks import lr_grid_adamw, quality_cpu

    grid = lr_grid_adamw.rows(quick=False)
    by = {r.name: r for r in grid}
    n = len(quality_cpu.OBJECTIVES)
    assert [r.objective for r in grid[:n]] == quality_cpu.OBJECTIVES
    for r in grid[:n]:  # the quality page's AdamW runs, so that its finished run is the cell at the default rate
        assert r.flags[-4:] == lr_grid_adamw.ADAMW and r.version == quality_cpu.VERSIONS[r.key]
        assert r.default_run().version == quality_cpu.run_version(r.key)
    for r in grid[n:]:  # a further setting tried: the output's flags and version with it, judged by its target
        o, extra = lr_grid_adamw.TRIES[r.key]
        assert r.objective == o and r.flags[-4 - len(extra):] == (*extra, *lr_grid_adamw.ADAMW)
        assert r.version == quality_cpu.VERSIONS[f"{o}-adamw0.1"] and r.name == f"gru {r.key}"
    path = tmp_path / "records.jsonl"
    for name, rates in {"gru softmax-adamw0.1": {0.002: 99.0, 0.004: 96.0, 0.008: 97.0},
                        "gru nce-adamw0.1": {0.002: 101.0, 0.004: 99.0, 0.008: 100.0}}.items():
        for lr, v in rates.items():
            lr_grid.append_record(str(path), _record(by[name], lr, v, test=v - 6.0))
    data = lr_grid.write(str(tmp_path / "out"), grid, str(path), quick=False, spec=lr_grid_adamw.SPEC,
                         meta={"machine": "m", "date": "d", "commit": "c", "python": "3", "torch": "2",
                               "torch_threads": 1, "numpy": "2", "command": "python -m benchmarks lr-grid-adamw"})
    rows = {r["name"]: r for r in data["rows"]}
    assert rows["gru nce-adamw0.1"]["vs_softmax"] == pytest.approx(93.0 / 90.0 - 1)
    assert rows["gru nce-adamw0.1"]["verdict"] == "missed so far"  # 0.001 of both not yet run
    page = (tmp_path / "out" / "lr-grid-adamw.md").read_text()
    assert "every row trained with AdamW" in page and "(90.00 at 0.004, its grid not complete)" in page


@pytest.mark.slow
def test_quick_adamw_grid_trains_with_adamw_and_keeps_its_records_beside_its_page(tmp_path):
    from helpers import run_quick

    data = run_quick("lr-grid-adamw", tmp_path / "out", against="Against the issue's targets")
    assert [r["name"] for r in data["rows"]] == ["gru softmax-adamw0.1", "gru nce-adamw0.1"]
    assert all("--optimizer adamw --weight-decay 0.1" in r["flags"] for r in data["rows"])
    assert (tmp_path / "out" / "lr-grid-adamw.jsonl").stat().st_size > 0  # not benchmarks/notes/
