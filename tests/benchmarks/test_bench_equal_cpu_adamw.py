"""The equal-CPU page's AdamW candidate: the chosen Adam run again under AdamW (benchmarks/equal_cpu_adamw.py)."""

from __future__ import annotations

import pytest

from benchmarks import equal_cpu, equal_cpu_adamw, lr_grid


def _cell(row, lr, valid, cpu_s, epochs=8):
    return {"row": row.name, "lr": lr, "flags": row.cell_flags(lr), "version": row.version, "data": "PTB",
            "epochs": [{"epoch": i + 1, "valid_ppl": valid + 8 - i, "cpu_s": cpu_s * (i + 1) / epochs}
                       for i in range(epochs)],
            "best_valid": valid, "best_epoch": epochs, "test_ppl": valid - 6, "cpu_s": cpu_s}


def _grid_records(grid):
    by = {r.name: r for r in grid}
    return [_cell(by["gru softmax"], 0.004, 98.1, 1760.0), _cell(by["gru nce"], 0.008, 99.5, 570.0)]


def _nce_entry(grid, grid_recs):
    _, entries = equal_cpu.plan(grid, grid_recs)
    return next(e for e in entries if e["row"].name == "gru nce")


def _row(name):
    return next(r for r in lr_grid.rows(quick=False) if r.name == name)


def _ran(flags, valid, test, cpu_s=1700.0, kind=None, **extra):
    rec = {"row": "gru nce", "lr": 0.008, "flags": flags, "version": _row("gru nce").version,
           "epochs": [{"epoch": i + 1, "valid_ppl": valid + 3 - i, "cpu_s": cpu_s * (i + 1) / 4} for i in range(4)],
           "best_valid": valid, "best_epoch": 4, "cpu_s": cpu_s, "test_ppl": test, **extra}
    return rec if kind is None else {**rec, "kind": kind}


def test_the_flags_keep_everything_but_the_optimiser():
    got = equal_cpu_adamw.adamw_flags("--model gru --optimizer adam --lr 0.004 --weight-decay 0 --epochs 14")
    assert got == ("--model", "gru", "--lr", "0.004", "--epochs", "14", *equal_cpu_adamw.FLAGS)


def test_it_waits_for_the_rows_adam_runs_then_repeats_the_chosen_one_under_adamw(monkeypatch):
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = _nce_entry(grid, grid_recs)
    longer = _ran(" ".join(equal_cpu.flags(nce)), 96.0, 91.0)
    nce = {**nce, "settled": True}
    budget = 1760.0
    # its wider runs have not trained: nothing to do yet, and train refuses
    assert equal_cpu_adamw.done(nce, [longer], budget=budget) is None
    with pytest.raises(Exception, match="nothing to train yet"):
        equal_cpu_adamw.train(None, nce, budget, 1, [longer])
    monkeypatch.setattr(equal_cpu, "adam_finished", lambda e, records, ratios=None: True)
    assert equal_cpu_adamw.done(nce, [longer], budget=budget) is None  # now it has to train
    names = []
    monkeypatch.setattr(equal_cpu, "_record",
                        lambda st, entry, run, b, tk, extra: names.append((run.name, run.options, extra)) or {})
    equal_cpu_adamw.train(None, nce, budget, 1, [longer])
    name, options, extra = names[0]
    assert name == "eq-nce-0.008-run-adamw0.1" and extra["kind"] == "adamw" and extra["base"] == "run"
    assert options == (*equal_cpu.flags(nce), *equal_cpu_adamw.FLAGS)
    adamw = _ran(" ".join(options), 93.0, 88.0, kind="adamw", base="run")
    assert equal_cpu_adamw.done(nce, [longer, adamw], budget=budget) is adamw
    # the page: chosen on validation among all candidates, judged against the tuned softmax (the quality page's)
    soft_try = {"name": f"gru {lr_grid.SOFTMAX_TRANSFORMER_TRIES[0][0]}", "test_ppl": 90.0,
                "curve": [{"valid_ppl": 95.0}]}
    data = equal_cpu.summarise(grid, grid_recs, [longer, adamw], quality=[soft_try])
    row = next(x for x in data["rows"] if x["name"] == "gru nce")
    assert (row["adam_chosen"], row["chosen"]) == ("run", "adamw")
    assert row["vs_softmax"] == pytest.approx(88.0 / 90.0 - 1) and data["baseline"]["test_ppl"] == 90.0
    page = equal_cpu.render(data)
    assert "93.00 / 88.00 (1,700 s) [longer, 4 ep]" in page and "tuned softmax (90.00)" in page
    assert "| its chosen run, AdamW 0.1 | 88.00 | -2.2 % | met |" in page
    # an AdamW run worse on validation is shown and not chosen
    worse = {**adamw, "best_valid": 97.0}
    row = next(x for x in equal_cpu.summarise(grid, grid_recs, [longer, worse])["rows"] if x["name"] == "gru nce")
    assert row["chosen"] == "run" and row["adamw"]["test_ppl"] == 88.0


def test_a_row_chosen_at_its_grid_cell_gets_no_run_here():
    x = {"adam_chosen": "equal_epochs", "equal_epochs": {"test_ppl": 90.0}}
    assert equal_cpu_adamw.plan(x) == {"state": "grid cell"}
    assert equal_cpu_adamw.plan({"adam_chosen": None}) == {"state": "waits"}
    assert equal_cpu_adamw.summary({}, [], x) == (None, "— (its grid cell: the quality page's AdamW row)")


def _adamw_grid(rates: dict[str, dict[float, float]]) -> list[dict]:
    from benchmarks import lr_grid_adamw

    by = {r.name: r for r in lr_grid_adamw.rows(False)}
    return [_cell(by[name], lr, v, 760.0) for name, cells in rates.items() for lr, v in cells.items()]


def test_the_tuned_candidate_scales_the_chosen_runs_rate_by_the_adamw_grids_once_it_settles(monkeypatch):
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = {**_nce_entry(grid, grid_recs), "settled": True}
    longer = _ran(" ".join(equal_cpu.flags(nce)), 96.0, 91.0)
    adamw = _ran(" ".join((*equal_cpu.flags(nce), *equal_cpu_adamw.FLAGS)), 93.0, 88.0, kind="adamw", base="run")
    monkeypatch.setattr(equal_cpu, "adam_finished", lambda e, records, ratios=None: True)
    x = equal_cpu.summary_row(nce, [longer, adamw], None, 1760.0)
    unsettled = _adamw_grid({"gru nce-adamw0.1": {0.008: 95.0, 0.016: 94.0}})
    assert equal_cpu_adamw.tuned_plan(nce, x, unsettled) == {"state": "waits for the AdamW grid"}
    same = _adamw_grid({"gru nce-adamw0.1": {0.004: 96.0, 0.008: 94.0, 0.016: 95.0}})
    assert equal_cpu_adamw.tuned_plan(nce, x, same) == {"state": "same rate"}
    moved = _adamw_grid({"gru nce-adamw0.1": {0.008: 95.0, 0.016: 93.0, 0.032: 99.0}})
    p = equal_cpu_adamw.tuned_plan(nce, x, moved)
    assert p["factor"] == 2 and p["flags"][p["flags"].index("--lr") + 1] == "0.016"
    assert [f for f in p["flags"] if f != "0.016"] == [f for f in adamw["flags"].split() if f != "0.008"]
    tuned = {**_ran(" ".join(p["flags"]), 91.0, 86.0, kind="adamw-tuned", base="run"), "grid_lr": 0.016}
    soft = _adamw_grid({"gru softmax-adamw0.1": {0.004: 95.1, 0.008: 91.8, 0.016: 92.5}})
    data = equal_cpu.summarise(grid, grid_recs, [longer, adamw, tuned], adamw_grid=moved + soft)
    row = next(r for r in data["rows"] if r["name"] == "gru nce")
    assert row["chosen"] == "adamw_tuned" and data["baseline"]["best_valid"] == 91.8
    assert data["baseline"]["name"] == "AdamW 0.1 at the AdamW grid's rate 0.008"
    assert row["vs_softmax"] == pytest.approx(86.0 / 85.8 - 1)
    assert "91.00 / 86.00 (1,700 s) [longer, 4 ep, lr x 2]" in equal_cpu.render(data)
