"""The equal-CPU page's 1.5x trunk trained for the epochs its share allows (benchmarks/equal_cpu_fit.py)."""

from __future__ import annotations

import pytest

from benchmarks import equal_cpu, equal_cpu_fit, lr_grid

WIDE = "h 384, d 304"


def _entry(name="gru nce", lr=0.004):
    row = next(r for r in lr_grid.rows(quick=False) if r.name == name)
    cell = {"epochs": [{"epoch": i + 1} for i in range(8)]}
    return {"row": row, "lr": lr, "epochs": 20, "epoch_cpu_s": 70.0, "cell": cell, "settled": True}


def _ratio(row, ratio, trunk=WIDE):
    return {"row": row, "trunk": trunk, "ratio": ratio, "soft_step_cpu_s": 0.11, "row_step_cpu_s": 0.11 / ratio}


def _run(entry, kind, valid, run_lr=None, hidden=384, embed=304):
    rec = {"row": entry["row"].name, "lr": entry["lr"], "version": entry["row"].version, "kind": kind,
           "hidden": hidden, "embed": embed, "best_valid": valid,
           "epochs": [{"epoch": 1, "valid_ppl": valid + 5}, {"epoch": 2, "valid_ppl": valid}]}
    return rec if run_lr is None else {**rec, "run_lr": run_lr}


def test_nothing_to_train_without_the_wider_trunks_ratio_or_before_its_runs():
    e = _entry()
    assert equal_cpu_fit.fit_entry(e, [], []) == {"state": "no ratio"}
    assert equal_cpu_fit.fit_done(e, [], []) == {"not_needed": "no ratio"}
    assert equal_cpu_fit.fit_entry(e, [], [_ratio("gru nce", 1.8)]) == {"state": "waits"}
    assert equal_cpu_fit.fit_done(e, [], [_ratio("gru nce", 1.8)]) is None


def test_more_epochs_than_the_default_train_at_the_longer_dropout_at_the_better_rate():
    e = _entry()
    records = [_run(e, "wide-narrow", 93.5), _run(e, "wide-half", 95.8, run_lr=0.002),
               _run(e, "wide", 94.3, hidden=512, embed=400)]  # another width: not this trunk's run
    f = equal_cpu_fit.fit_entry(e, records, [_ratio("gru nce", 1.82)])
    assert (f["epochs"], f["lr"], f["dropout"]) == (14, 0.004, 0.35)
    assert f["flags"][-6:] == ("--lr", "0.004", "--epochs", "14", "--dropout", "0.35")
    assert f["flags"].count("--epochs") == 1 and "--hidden" in f["flags"]
    # the half rate wins where its validation is lower
    records.append(_run(e, "wide-half", 92.0, run_lr=0.002))
    assert equal_cpu_fit.fit_entry(e, records, [_ratio("gru nce", 1.82)])["lr"] == 0.002


def test_a_trunk_dearer_than_the_softmax_trains_fewer_epochs_at_the_default_dropout():
    e = _entry("gru adaptive")
    records = [_run(e, "wide", 96.38)]
    f = equal_cpu_fit.fit_entry(e, records, [_ratio("gru adaptive", 0.906)])
    assert (f["epochs"], f["dropout"]) == (7, None) and "--dropout" not in f["flags"]
    # its half-rate run at the default epochs would be over the share: not trained, the page says why
    assert equal_cpu.half_done(e, records, [_ratio("gru adaptive", 0.906)]) == {"over_share": pytest.approx(8 / 7.248)}
    assert equal_cpu.half_done(e, records, [_ratio("gru adaptive", 1.2)]) is None


def test_a_blown_up_run_does_not_choose_the_rate_and_the_default_epochs_are_not_repeated():
    e = _entry()
    blown = _run(e, "wide-narrow", 90.0)
    blown["epochs"] = [{"epoch": 1, "valid_ppl": 90.0}, {"epoch": 2, "valid_ppl": 5000.0}]
    records = [blown, _run(e, "wide-half", 95.8, run_lr=0.002)]
    assert equal_cpu_fit.fit_entry(e, records, [_ratio("gru nce", 1.82)])["lr"] == 0.002
    assert equal_cpu_fit.fit_entry(e, records, [_ratio("gru nce", 1.1)]) == {"state": "same", "ratio": 1.1}


def test_its_record_is_found_by_its_flags_and_shown_with_its_share():
    e = _entry()
    ratios = [_ratio("gru nce", 1.82)]
    records = [_run(e, "wide-narrow", 93.5)]
    f = equal_cpu_fit.fit_entry(e, records, ratios)
    done = {**_run(e, equal_cpu_fit.KIND, 92.0, run_lr=0.004), "flags": " ".join(f["flags"]), "epochs_planned": 14,
            "dropout": 0.35, "test_ppl": 88.0, "cpu_s": 900.0,
            "epochs": [{"epoch": i + 1, "valid_ppl": 100.0 - i, "cpu_s": 60.0 * (i + 1)} for i in range(14)]}
    assert equal_cpu_fit.fit_done(e, records + [done], ratios) is done
    cand, text = equal_cpu_fit.summary(e, records + [done], ratios)
    assert text == "" and (cand["epochs"], cand["lr"], cand["test_ppl"]) == (14, 0.004, 88.0)
    x = {"name": "gru nce", "fit": cand}
    equal_cpu.mark_shares(x, ratios)
    assert x["fit"]["share"] == pytest.approx(14 / (8 * 1.82))
    assert "[h 384, lr 0.004, 14 ep, dropout 0.35]" in equal_cpu._fit_text(x, 1765.0)
