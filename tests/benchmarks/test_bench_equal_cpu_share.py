"""The equal-CPU budget checked by step costs measured side by side (benchmarks/equal_cpu_share.py)."""

from __future__ import annotations

import json

import pytest

from benchmarks import equal_cpu, equal_cpu_share, lr_grid


def _row(name, key, epochs, vs, **extra):
    cand = {"curve": [{"epoch": i + 1} for i in range(epochs)], "best_valid": 99.0, "test_ppl": 93.0, **extra}
    return {"name": name, "chosen": key, key: cand, "epochs": epochs, "vs_softmax": vs}


def _ratio(row, ratio, trunk="default", date="2026-12-03 04:28 UTC"):
    return {"row": row, "trunk": trunk, "ratio": ratio, "soft_step_cpu_s": 0.12, "row_step_cpu_s": 0.12 / ratio,
            "date": date}


def test_a_chosen_run_is_checked_by_its_own_trunks_latest_ratio():
    data = {"rows": [_row("gru nce", "narrow", 8, -0.03, hidden=384, embed=304),
                     _row("gru hsm", "drop", 15, +0.03),
                     _row("gru class", "drop", 13, -0.004),
                     _row("gru is", "wide", 8, -0.01, hidden=512, embed=400)]}
    records = [_ratio("gru nce", 3.5), _ratio("gru nce", 2.0, trunk="h 384, d 304"),
               _ratio("gru hsm", 3.0, date="2026-12-02 10:00 UTC"), _ratio("gru hsm", 1.5),
               _ratio("gru class", 1.5)]
    shares = {s["row"]: s for s in equal_cpu_share.check(data, records)}
    nce, hsm, cls, is_ = shares["gru nce"], shares["gru hsm"], shares["gru class"], shares["gru is"]
    assert (nce["trunk"], nce["ratio"], nce["share"]) == ("h 384, d 304", 2.0, pytest.approx(0.5))
    assert hsm["ratio"] == 1.5 and hsm["epochs_allowed"] == 12 and hsm["share"] == pytest.approx(15 / 12)
    assert equal_cpu_share.reading(hsm) == "over its share, and missed"
    assert equal_cpu_share.reading(cls).startswith("over its share: the verdict does not stand")
    assert equal_cpu_share.reading(nce) == "within its share: the verdict stands"
    assert is_["ratio"] is None and equal_cpu_share.reading(is_) == "not measured"


def test_a_missed_row_under_its_share_says_how_many_epochs_more_would_fit():
    s = equal_cpu_share.check({"rows": [_row("gru blackout", "drop", 24, 0.008)]}, [_ratio("gru blackout", 3.2)])[0]
    assert s["epochs_allowed"] == 25
    assert equal_cpu_share.reading(s) == "within its share, missed; its longest run on its own trunk had 24 epochs, " \
        "1 more would fit"
    # the chosen run is the shortest, but a longer run on its own trunk was tried within the share: no room claimed
    x = _row("gru hsm", "equal_epochs", 8, 0.036)
    x["drop"] = {"curve": [{"epoch": i + 1} for i in range(20)]}
    s = equal_cpu_share.check({"rows": [x]}, [_ratio("gru hsm", 2.54)])[0]
    assert (s["longest"], s["epochs_allowed"]) == (20, 20) and equal_cpu_share.reading(s) == "within its share, missed"


def test_no_ratio_records_no_section(tmp_path):
    assert equal_cpu_share.load(str(tmp_path / "absent.jsonl")) == []
    shares = equal_cpu_share.check({"rows": [_row("gru hsm", "drop", 15, 0.03)]}, [])
    assert equal_cpu_share.render(shares, equal_cpu.LABEL) == []


def test_the_section_names_the_method_and_the_measured_steps(tmp_path):
    path = tmp_path / "ratio.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [_ratio("gru hsm", 1.5)]))
    shares = equal_cpu_share.check({"rows": [_row("gru hsm", "drop", 15, 0.03)]}, equal_cpu_share.load(str(path)))
    text = "\n".join(equal_cpu_share.render(shares, equal_cpu.LABEL))
    assert "## The budget checked by step costs measured side by side" in text
    assert "| gru hsm | longer, dropout 0.35 | default | 15 | 0.1200 / 0.0800 | 1.50 | 12 | 1.25 |" in text


def test_a_dropout_run_outside_its_measured_share_is_run_again_with_the_epochs_the_ratio_allows():
    grid = lr_grid.rows(quick=False)
    nce_row = next(r for r in grid if r.name == "gru nce")
    cell = {"epochs": [{"epoch": i + 1} for i in range(8)]}
    entry = {"row": nce_row, "lr": 0.004, "epochs": 24, "epoch_cpu_s": 70.0, "cell": cell, "settled": True}
    first = equal_cpu.drop_entry(entry, [])
    assert equal_cpu.drop_entry(entry, [], [_ratio("gru nce", 2.5)])["epochs"] == 20  # sized by the ratio at once
    ran = {"row": "gru nce", "flags": " ".join(equal_cpu.flags(first)), "version": nce_row.version,
           "epochs": [{"epoch": i + 1} for i in range(24)], "cpu_s": 1700.0, "budget_cpu_s": 1760.0}
    assert equal_cpu.record_of(first, [ran]) is ran
    # by its own day's CPU seconds it fits; by the ratio measured side by side it had 24 / (8 x 2.5) = 1.2: too much
    assert "resized_from" not in equal_cpu.drop_entry(entry, [ran])
    again = equal_cpu.drop_entry(entry, [ran], [_ratio("gru nce", 2.5)])
    assert again["epochs"] == 20 and again["resized_from"] is ran
    assert equal_cpu.drop_done(entry, [ran], [_ratio("gru nce", 2.5)]) is None  # a new run to train
    # within [0.75, 1.05] of its share: the run stands; the 1.5x trunk's ratio does not size a default-trunk run
    assert "resized_from" not in equal_cpu.drop_entry(entry, [ran], [_ratio("gru nce", 3.1)])
    assert "resized_from" not in equal_cpu.drop_entry(entry, [ran], [_ratio("gru nce", 2.5, trunk="h 384, d 304")])


def test_a_candidate_over_its_measured_share_is_not_chosen_and_one_within_it_is_whatever_its_cpu_seconds():
    wide = {"curve": [{"epoch": i + 1} for i in range(8)], "best_valid": 96.0, "test_ppl": 89.8, "cpu_s": 1000.0,
            "hidden": 384, "embed": 304}
    cell = {"curve": [{"epoch": i + 1} for i in range(8)], "best_valid": 98.6, "test_ppl": 92.5, "cpu_s": 1300.0}
    run = {"curve": [{"epoch": i + 1} for i in range(10)], "best_valid": 98.2, "test_ppl": 91.3, "cpu_s": 2000.0}
    x = {"name": "gru adaptive", "equal_epochs": cell, "run": run, "wide": wide}
    assert equal_cpu.choose(x, 1765.0) == "wide"  # by CPU seconds read on their days
    equal_cpu.mark_shares(x, [_ratio("gru adaptive", 0.91, trunk="h 384, d 304"), _ratio("gru adaptive", 1.3)])
    assert wide["share"] == pytest.approx(8 / (8 * 0.91)) and run["share"] == pytest.approx(10 / (8 * 1.3))
    assert equal_cpu.choose(x, 1765.0) == "run"  # the wider trunk costs more a step than the softmax; 10 epochs fit
    assert "over its share" in equal_cpu._cell_text(wide, 1765.0, "") and "over" not in equal_cpu._cell_text(
        run, 1765.0, "")
