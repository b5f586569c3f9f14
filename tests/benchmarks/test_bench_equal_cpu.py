"""The equal-CPU experiment without training: its plan from the lr-grid records, its resume, its page."""

from __future__ import annotations

import json

import pytest

from benchmarks import equal_cpu, lr_grid


def _cell(row, lr, valid, cpu_s, epochs=8, test=None):
    return {"row": row.name, "lr": lr, "flags": row.cell_flags(lr), "version": row.version, "data": "PTB",
            "epochs": [{"epoch": i + 1, "valid_ppl": valid + 8 - i, "cpu_s": cpu_s * (i + 1) / epochs}
                       for i in range(epochs)],
            "best_valid": valid, "best_epoch": epochs, "test_ppl": test or valid - 6, "cpu_s": cpu_s}


def _grid_records(grid):
    by = {r.name: r for r in grid}
    return [_cell(by["gru softmax"], 0.004, 98.1, 1760.0), _cell(by["gru softmax"], 0.008, 99.3, 1800.0),
            _cell(by["gru nce"], 0.008, 99.5, 570.0), _cell(by["gru nce"], 0.002, 106.2, 530.0),
            _cell(by["gru hsm"], 0.004, 105.3, 960.0),
            {**_cell(by["gru is"], 0.016, 0, 100.0), "best_valid": None, "failed": "training diverged"}]


def test_each_row_gets_the_epochs_that_fit_the_softmaxs_cpu_seconds_at_its_chosen_rate():
    grid = lr_grid.rows(quick=False)
    soft, entries = equal_cpu.plan(grid, _grid_records(grid))
    assert soft["lr"] == 0.004 and soft["cpu_s"] == 1760.0
    got = {e["row"].name: (e["lr"], e["epochs"]) for e in entries}
    # nce: 71.25 CPU s an epoch -> 24 epochs in 1,760; hsm: 120 -> 14; a diverged-only row has no chosen rate
    assert got == {"gru nce": (0.008, 24), "gru hsm": (0.004, 14)}
    assert equal_cpu.flags(entries[0])[-4:] == ("--lr", "0.008", "--epochs", "24")
    # nce's 0.008 sits at the grid's top with 0.004 beside it not yet tried: not settled; the softmax's is
    assert [e["settled"] for e in entries] == [False, False]


def test_a_longer_run_that_spent_little_of_the_budget_is_resized_by_its_own_epochs():
    """hsm's cell took 120 CPU s an epoch (14 epochs planned); its longer run took 60 here: 29 epochs fit."""
    grid = lr_grid.rows(quick=False)
    records = _grid_records(grid)
    soft, entries = equal_cpu.plan(grid, records)
    hsm = next(e for e in entries if e["row"].name == "gru hsm")
    first = {"row": "gru hsm", "flags": " ".join(equal_cpu.flags(hsm)), "version": hsm["row"].version,
             "epochs": [{"epoch": i + 1, "valid_ppl": 100.0, "cpu_s": 60.0 * (i + 1)} for i in range(14)],
             "best_valid": 100.0, "test_ppl": 95.0, "cpu_s": 840.0}
    _, again = equal_cpu.plan(grid, records, [first])
    hsm2 = next(e for e in again if e["row"].name == "gru hsm")
    assert (hsm["epochs"], hsm2["epochs"]) == (14, 29) and hsm2["resized_from"] is first
    assert equal_cpu.record_of(hsm2, [first]) is None  # a new run to train
    # a run that spent most of the budget stays as it was
    _, same = equal_cpu.plan(grid, records, [{**first, "cpu_s": 1500.0}])
    assert next(e for e in same if e["row"].name == "gru hsm")["epochs"] == 14


def test_a_row_slower_than_the_softmax_keeps_its_default_epochs():
    grid = lr_grid.rows(quick=False)
    by = {r.name: r for r in grid}
    recs = [_cell(by["gru softmax"], 0.004, 98.1, 1000.0), _cell(by["gru adaptive"], 0.004, 98.6, 1300.0)]
    _, entries = equal_cpu.plan(grid, recs)
    assert [(e["row"].name, e["epochs"]) for e in entries] == [("gru adaptive", 8)]


def test_no_softmax_cell_no_budget_and_the_page_says_so(tmp_path):
    grid = lr_grid.rows(quick=False)
    assert equal_cpu.plan(grid, []) == (None, [])
    data = equal_cpu.summarise(grid, [], [])
    assert "no budget" in equal_cpu.render(data)


def test_the_page_reads_a_finished_row_and_judges_it_against_the_tuned_softmax(tmp_path):
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    _, entries = equal_cpu.plan(grid, grid_recs)
    nce = next(e for e in entries if e["row"].name == "gru nce")
    path = tmp_path / "equal-cpu.jsonl"
    rec = {"row": "gru nce", "lr": 0.008, "flags": " ".join(equal_cpu.flags(nce)), "version": nce["row"].version,
           "epochs": [{"epoch": 24, "valid_ppl": 95.0, "cpu_s": 1700.0}], "best_valid": 95.0, "best_epoch": 24,
           "cpu_s": 1700.0, "test_ppl": 90.0}
    lr_grid.append_record(str(path), {**rec, "flags": rec["flags"].replace("24", "23")})  # another plan: ignored
    lr_grid.append_record(str(path), rec)
    records = lr_grid.load_records(str(path))
    assert equal_cpu.record_of(nce, records)["test_ppl"] == 90.0
    data = equal_cpu.summarise(grid, grid_recs, records)
    row = next(x for x in data["rows"] if x["name"] == "gru nce")
    assert row["vs_softmax"] == pytest.approx(90.0 / 92.1 - 1)
    assert row["chosen"] == "run"  # valid 95.0 beats its grid cell's 99.5
    page = equal_cpu.render(data)
    assert "1,760 CPU s" in page and "| gru nce | 0.008 |" in page and "95.00 / 90.00 (1,700 s) [24 ep]" in page
    assert "| longer | 90.00 | -2.3 % | met |" in page
    assert "| gru hsm | 0.004 |" in page and "waits for its rate [14 ep]" in page
    equal_cpu.figure(data)


def _nce_entry(grid, grid_recs):
    _, entries = equal_cpu.plan(grid, grid_recs)
    return next(e for e in entries if e["row"].name == "gru nce")


def test_the_candidate_chosen_is_the_lowest_validation_within_the_budget():
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = _nce_entry(grid, grid_recs)
    longer = {"row": "gru nce", "lr": 0.008, "flags": " ".join(equal_cpu.flags(nce)), "version": nce["row"].version,
              "epochs": [], "best_valid": 101.0, "best_epoch": 20, "cpu_s": 1700.0, "test_ppl": 95.0}
    wide = {**longer, "kind": "wide", "hidden": 512, "embed": 400, "epochs_planned": 8, "flags": "x",
            "best_valid": 96.0, "test_ppl": 91.0, "cpu_s": 1750.0}
    row = lambda recs: next(x for x in equal_cpu.summarise(grid, grid_recs, recs)["rows"] if x["name"] == "gru nce")
    # the longer run is worse than the grid's own cell (99.5): the cell is chosen, and the row judged on it
    got = row([longer])
    assert got["chosen"] == "equal_epochs" and got["vs_softmax"] == pytest.approx(93.5 / 92.1 - 1)
    got = row([longer, wide])
    assert got["chosen"] == "wide" and got["wide"]["hidden"] == 512
    assert "| wider | 91.00 | -1.2 % | met |" in equal_cpu.render(equal_cpu.summarise(grid, grid_recs, [longer, wide]))
    # a wider run far over the budget is shown but not chosen
    got = row([longer, {**wide, "cpu_s": 2000.0}])
    assert got["chosen"] == "equal_epochs"
    assert "over budget" in equal_cpu.render(equal_cpu.summarise(grid, grid_recs, [longer, {**wide, "cpu_s": 2000.0}]))
    # probes that find no width: the row is judged on its longer run and its cell
    none = {"row": "gru nce", "lr": 0.008, "version": nce["row"].version, "kind": "wide", "none_fits": True}
    assert row([none])["chosen"] is None and row([longer, none])["chosen"] == "equal_epochs"
    assert "no wider trunk fits" in equal_cpu.render(equal_cpu.summarise(grid, grid_recs, [longer, none]))


def test_wider_trunks_scale_hidden_and_embedding_and_replace_the_rows_own():
    grid = lr_grid.rows(quick=False)
    nce = _nce_entry(grid, _grid_records(grid))
    assert equal_cpu.own_width(nce["row"]) == (256, 200)
    assert equal_cpu.widths(nce["row"]) == [(384, 304), (512, 400), (768, 600)]
    f = equal_cpu.wide_flags(nce, (512, 400))
    assert f[-6:] == ("--hidden", "512", "--embed-dim", "400", "--lr", "0.008") and f.count("--hidden") == 1
    quick = lr_grid.rows(quick=True)[1]
    assert equal_cpu.own_width(quick) == (32, 16)
    f = equal_cpu.wide_flags({"row": quick, "lr": 0.004}, (48, 24))
    assert f.count("--hidden") == 1 and f.count("-d") == 0 and "--epochs" in f


def test_the_widest_trunk_that_fits_is_chosen_from_the_probes(monkeypatch):
    grid = lr_grid.rows(quick=False)
    nce = _nce_entry(grid, _grid_records(grid))
    cost = {384: 150.0, 512: 210.0, 768: 400.0}  # CPU s an epoch; 8 epochs against a budget of 1,760
    seen = []

    def fake_probe(st, entry, width, tokens):
        seen.append(width[0])
        return {"hidden": width[0], "embed": width[1], "epoch_cpu_s": cost[width[0]]}

    monkeypatch.setattr(equal_cpu, "probe", fake_probe)
    found, probes = equal_cpu.choose_width(None, nce, 1760.0, 929589)
    assert found["hidden"] == 512 and seen == [384, 512, 768] and probes[-1]["run_cpu_s"] == 3200.0
    seen.clear()
    found, probes = equal_cpu.choose_width(None, nce, 1000.0, 929589)
    assert found is None and seen == [384]  # stops at the first that does not fit


@pytest.mark.slow
def test_quick_equal_cpu_runs_its_own_grid_then_its_rows(tmp_path):
    from helpers import run_quick

    data = run_quick("equal-cpu", tmp_path / "out", against="At the softmax's CPU seconds")
    run = data["rows"][0]["run"] if data["softmax"] and data["rows"] else None
    # the longer run trained and was scored, or (at the quick grid's high rate, on some machines' arithmetic) the
    # trainer stopped it as diverged, and that is recorded
    assert run is not None and ((run["test_ppl"] or 0) > 1 or "diverged" in run.get("failed", "")), data["rows"]
    assert (tmp_path / "out" / "equal-cpu.jsonl").stat().st_size > 0 and (tmp_path / "out" / "lr-grid.jsonl").exists()


def test_the_transformer_spends_its_own_three_hours_at_its_chosen_rate_with_a_cosine_decay(tmp_path):
    grid = lr_grid.rows(quick=False)
    by = {r.name: r for r in grid}
    t_row = by["transformer softmax"]
    grid_recs = _grid_records(grid) + [_cell(t_row, 0.001, 104.0, 2000.0, epochs=10, test=97.0),
                                       _cell(t_row, 0.002, 108.0, 2100.0, epochs=10)]
    assert equal_cpu.transformer_entry(grid, _grid_records(grid)) is None  # no cell of its own yet
    t = equal_cpu.transformer_entry(grid, grid_recs)
    # 200 CPU s an epoch -> 54 epochs in 10,800; 0.0005 beside 0.001 not yet tried: not settled
    assert (t["lr"], t["epochs"], t["settled"]) == (0.001, 54, False)
    assert equal_cpu.flags(t)[-6:] == ("--lr", "0.001", "--epochs", "54", "--lr-schedule", "cosine")
    page = equal_cpu.render(equal_cpu.summarise(grid, grid_recs, []))
    assert "## The Transformer within 3 CPU-hours" in page and "waits for its rate [54 ep, cosine]" in page
    grid_recs.append(_cell(t_row, 0.0005, 110.0, 1900.0, epochs=10))
    t = equal_cpu.transformer_entry(grid, grid_recs)
    assert t["settled"]
    rec = {"row": t_row.name, "lr": 0.001, "flags": " ".join(equal_cpu.flags(t)), "version": "",
           "epochs": [{"epoch": i + 1, "valid_ppl": 150.0 - i, "cpu_s": 200.0 * (i + 1)} for i in range(54)],
           "best_valid": 97.0, "best_epoch": 54, "cpu_s": 10_800.0, "test_ppl": 91.5}
    data = equal_cpu.summarise(grid, grid_recs, [rec])
    x = data["transformer"]
    assert x["chosen"] == "run" and x["vs_softmax"] == pytest.approx(91.5 / 92.1 - 1)
    page = equal_cpu.render(data)
    assert "| budget run | 91.50 | -0.7 % | met |" in page
    over = {**rec, "cpu_s": 12_000.0, "best_valid": 90.0}  # past 1.05x the budget: shown, not chosen
    assert equal_cpu.summarise(grid, grid_recs, [over])["transformer"]["chosen"] == "grid_cell"
    equal_cpu.figure(data)


def test_only_names_rows_of_the_lr_grid(tmp_path):
    from sampledlm.errors import UserError

    with pytest.raises(UserError, match="no run named gru-nce"):
        equal_cpu.run(quick=False, data_dir=None, out_dir=str(tmp_path), only={"gru-nce"})
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_a_row_missing_on_one_seed_is_judged_again_on_the_quality_pages_seed_means():
    def q(name, ppl, lr=0.008):
        return {"name": name, "test_ppl": ppl, "recorded": {"lr": lr}}

    quality = [q("gru softmax", 92.0, 0.004), q("gru softmax-seed2", 92.8, 0.004), q("gru softmax-seed3", 92.3, 0.004),
               q("gru class", 92.3), q("gru class-seed2", 92.0), q("gru class-seed3", 92.4),
               q("gru hsm", 95.3), q("gru hsm-seed2", 94.0, 0.002)]  # hsm's replicate: other settings

    def row(name, test, chosen="equal_epochs"):
        return {"name": name, "chosen": chosen, "vs_softmax": test / 92.0 - 1, "equal_epochs": {"test_ppl": test}}

    data = {"rows": [row("gru class", 92.3), row("gru hsm", 95.3), row("gru nce", 89.6, chosen="wide"),
                     row("gru is", 93.0)], "baseline": {"test_ppl": 92.0}}  # is: no replicate of it
    got = equal_cpu.seed_means(data, quality)
    assert [r["name"] for r in got] == ["gru class"]
    assert got[0]["mean"] == pytest.approx(92.2333, abs=1e-3)
    assert got[0]["softmax_mean"] == pytest.approx(92.3667, abs=1e-3)
    text = "\n".join(equal_cpu.render_seed_means(got))
    assert "gru class: seeds 92.30, 92.00, 92.40, mean 92.23 against the softmax's 92.37: -0.1 %, **met**" in text
    # a quality row whose seed 1 is not the grid's cell (another test perplexity) is not this training
    assert equal_cpu.seed_means({"rows": [row("gru class", 92.5)], "baseline": {"test_ppl": 92.0}}, quality) == []
    # judged against another softmax run than the replicated one: nothing judged on means
    assert equal_cpu.seed_means({**data, "baseline": {"test_ppl": 90.5}}, quality) == []


def test_a_wider_run_that_diverged_is_trained_again_at_half_its_rate(tmp_path, monkeypatch):
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = _nce_entry(grid, grid_recs)
    curve = [187.3, 9.3e13, 2.1e11, 2.2e6]
    blown = {"row": "gru nce", "lr": 0.008, "version": nce["row"].version, "kind": "wide", "hidden": 512,
             "embed": 400, "epochs_planned": 8, "flags": "x", "best_valid": 187.3, "best_epoch": 1,
             "cpu_s": 1300.0, "test_ppl": 176.2,
             "epochs": [{"epoch": i + 1, "valid_ppl": v, "cpu_s": 160.0 * (i + 1)} for i, v in enumerate(curve)]}
    calm = {**blown, "epochs": [{"epoch": i + 1, "valid_ppl": 120.0 - i, "cpu_s": 160.0 * (i + 1)} for i in range(4)]}
    assert equal_cpu.diverged(blown) and not equal_cpu.diverged(calm)
    # a diverged wider run is not done: its retry waits; a calm one, or the retry itself, is
    assert equal_cpu.wide_done(nce, [blown]) is None
    assert equal_cpu.wide_done(nce, [calm]) is calm
    retry = {**blown, "run_lr": 0.004, "best_valid": 95.0, "test_ppl": 90.0, "cpu_s": 1310.0,
             "epochs": [{"epoch": i + 1, "valid_ppl": 100.0 - i, "cpu_s": 160.0 * (i + 1)} for i in range(4)]}
    assert equal_cpu.wide_done(nce, [blown, retry]) is retry
    # the retry trains the width its probes chose, at half the row's rate
    (tmp_path / "work").mkdir()
    st = type("St", (), {"work": str(tmp_path / "work"), "files": {}, "label": "PTB"})()
    from sampledlm.store import write_json
    # the width its probes chose, as a resumed run finds it
    write_json(str(tmp_path / "work" / f"eq-width-{nce['row'].key}-0.008-{nce['row'].version or 'v0'}.json"),
               [{"hidden": 512, "embed": 400, "epoch_cpu_s": 160.0}, []])
    seen = {}
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, t, extra: seen.update(
        name=run.name, options=run.options, extra=extra) or {})
    equal_cpu.train_wide(st, nce, 1760.0, 929589, [blown])
    assert seen["extra"]["run_lr"] == 0.004 and seen["name"].startswith("eq-nce-0.004-h512")
    assert seen["options"][-2:] == ("--lr", "0.004")
    equal_cpu.train_wide(st, nce, 1760.0, 929589, [calm])
    assert "run_lr" not in seen["extra"] and seen["options"][-2:] == ("--lr", "0.008")
    # the page shows the retry in the wider column and the blown-up run below the table
    page = equal_cpu.render(equal_cpu.summarise(grid, grid_recs, [blown, retry]))
    assert "[h 512, d 400, lr 0.004]" in page and "Wider runs that diverged" in page
    assert "gru nce at 0.008: best validation 187.30 (epoch 1)" in page


def test_a_run_the_trainer_stops_as_diverged_is_recorded_and_shown(tmp_path, monkeypatch):
    from sampledlm.errors import UserError

    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = _nce_entry(grid, grid_recs)

    def boom(work, files, run):
        raise UserError("training diverged at epoch 3, step 10 (loss nan); try a lower --lr")

    monkeypatch.setattr(equal_cpu.lmruns, "train", boom)
    st = type("St", (), {"work": str(tmp_path), "files": {}, "label": "PTB"})()
    rec = equal_cpu.train_row(st, nce, 1760.0, 929589)
    assert rec["failed"].startswith("training diverged") and rec["best_valid"] is None and rec["test_ppl"] is None
    assert equal_cpu.record_of(nce, [rec]) is rec  # run: not tried again at the next start
    got = next(x for x in equal_cpu.summarise(grid, grid_recs, [rec])["rows"] if x["name"] == "gru nce")
    assert got["chosen"] == "equal_epochs"  # judged on its grid cell
    assert "diverged (stopped by the trainer)" in equal_cpu.render(equal_cpu.summarise(grid, grid_recs, [rec]))
    # a wider run stopped so is tried again at half the rate
    wide = {**rec, "kind": "wide", "hidden": 512, "embed": 400}
    assert equal_cpu.diverged(wide) and equal_cpu.wide_done(nce, [wide]) is None

    def other(work, files, run):
        raise UserError("not enough free disk space")

    monkeypatch.setattr(equal_cpu.lmruns, "train", other)
    with pytest.raises(UserError):  # any other failure is not a result: tried again at the next start
        equal_cpu.train_row(st, nce, 1760.0, 929589)


def test_the_narrowest_wider_trunk_is_tried_where_the_widest_that_fits_is_wider(tmp_path, monkeypatch):
    """At its rate the widest trunk that fits can go unstable (CSS-IS, BlackOut, hsm at 512): the 1.5x trunk is a
    candidate too, trained after the wider run and only where that run is on a wider trunk and 1.5x fits."""
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = _nce_entry(grid, grid_recs)
    probes = [{"hidden": 384, "embed": 304, "run_cpu_s": 900.0}, {"hidden": 512, "embed": 400, "run_cpu_s": 1400.0}]
    wide = {"row": "gru nce", "lr": 0.008, "version": nce["row"].version, "kind": "wide", "hidden": 512,
            "embed": 400, "epochs_planned": 8, "flags": "x", "best_valid": 113.0, "best_epoch": 7, "cpu_s": 1400.0,
            "test_ppl": 107.0, "budget_cpu_s": 1760.0, "probes": probes,
            "epochs": [{"epoch": i + 1, "valid_ppl": 120.0 - i, "cpu_s": 175.0 * (i + 1)} for i in range(8)]}
    assert equal_cpu.narrow_done(nce, []) is None  # its wider run comes first
    assert equal_cpu.narrow_done(nce, [wide]) is None and equal_cpu.narrow_needed(nce, [wide])
    at_384 = {**wide, "hidden": 384, "embed": 304}
    assert equal_cpu.narrow_done(nce, [at_384]) == {"not_needed": True}  # the wider run is that width
    too_dear = {**wide, "probes": [{**probes[0], "run_cpu_s": 1800.0}, probes[1]]}
    assert not equal_cpu.narrow_needed(nce, [too_dear])
    seen = {}
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, t, extra: seen.update(
        name=run.name, options=run.options, extra=extra) or {**wide, **extra, "best_valid": 97.0, "test_ppl": 91.5})
    with pytest.raises(equal_cpu.UserError, match="wider run has not finished"):
        equal_cpu.train_narrow(None, nce, 1760.0, 929589, [])
    narrow = equal_cpu.train_narrow(None, nce, 1760.0, 929589, [wide])
    assert seen["name"].startswith("eq-nce-0.008-h384") and seen["extra"]["kind"] == "wide-narrow"
    assert ("--hidden", "384") == seen["options"][-6:-4] and seen["options"][-2:] == ("--lr", "0.008")
    assert equal_cpu.narrow_done(nce, [wide, narrow]) is narrow
    data = equal_cpu.summarise(grid, grid_recs, [wide, narrow])
    row = next(x for x in data["rows"] if x["name"] == "gru nce")
    assert row["chosen"] == "narrow" and row["narrow"]["test_ppl"] == 91.5  # the lowest validation wins
    page = equal_cpu.render(data)
    assert "wider, 1.5x" in page and "97.00 / 91.50" in page and "[h 384, d 304]" in page


def test_every_row_tries_the_narrowest_wider_trunk_at_half_its_rate(monkeypatch):
    """A wider trunk trained by Adam wants a smaller rate: each row's 1.5x trunk at half its rate is a candidate of
    its own, whatever its other runs did, recorded apart from them and chosen like them."""
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = _nce_entry(grid, grid_recs)
    assert equal_cpu.half_done(nce, []) is None
    seen = {}
    base = {"row": "gru nce", "lr": 0.008, "version": nce["row"].version, "flags": "x", "best_epoch": 8,
            "cpu_s": 800.0, "budget_cpu_s": 1760.0,
            "epochs": [{"epoch": i + 1, "valid_ppl": 100.0 - i, "cpu_s": 100.0 * (i + 1)} for i in range(8)]}
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, t, extra: seen.update(
        name=run.name, options=run.options, extra=extra) or {**base, **extra, "best_valid": 93.0, "test_ppl": 88.0})
    half = equal_cpu.train_half(None, nce, 1760.0, 929589, [])
    assert seen["name"].startswith("eq-nce-0.004-h384") and seen["extra"]["kind"] == "wide-half"
    assert ("--hidden", "384") == seen["options"][-6:-4] and seen["options"][-2:] == ("--lr", "0.004")
    assert equal_cpu.half_done(nce, [half]) is half
    assert equal_cpu.wide_done(nce, [half]) is None and equal_cpu.narrow_records(nce, [half]) == []
    data = equal_cpu.summarise(grid, grid_recs, [half])
    row = next(x for x in data["rows"] if x["name"] == "gru nce")
    assert row["half"]["lr"] == 0.004 and row["chosen"] is None  # judged once a longer or widest run is in
    wide = {**base, "kind": "wide", "hidden": 512, "embed": 400, "best_valid": 96.0, "test_ppl": 90.0}
    row = next(x for x in equal_cpu.summarise(grid, grid_recs, [wide, half])["rows"] if x["name"] == "gru nce")
    assert row["chosen"] == "half" and row["half"]["test_ppl"] == 88.0
    page = equal_cpu.render(equal_cpu.summarise(grid, grid_recs, [wide, half]))
    assert "1.5x, half rate" in page and "93.00 / 88.00 (800 s) [h 384, lr 0.004]" in page


def test_the_transformers_second_budget_run_differs_only_in_its_dropout(tmp_path, monkeypatch):
    grid = lr_grid.rows(quick=False)
    t_row = next(r for r in grid if r.name == "transformer softmax")
    grid_recs = _grid_records(grid) + [_cell(t_row, lr, v, 2000.0, epochs=10) for lr, v in
                                       ((0.0005, 110.0), (0.001, 104.0), (0.002, 108.0))]
    t = equal_cpu.transformer_entry(grid, grid_recs)
    drop = equal_cpu.with_dropout(t)
    assert equal_cpu.flags(drop) == (*equal_cpu.flags(t), "--dropout", str(equal_cpu.TRANSFORMER_DROPOUT))
    seen = {}
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, tk, extra: seen.setdefault("names", []).append(
        run.name) or {})
    for e in (t, drop):
        equal_cpu.train_row(None, e, 10_800.0, 929589)
    assert seen["names"][0] != seen["names"][1] and seen["names"][1].endswith("-drop0.5")

    def rec(entry, valid, test):
        return {"row": t_row.name, "lr": 0.001, "flags": " ".join(equal_cpu.flags(entry)), "version": "",
                "epochs": [{"epoch": 1, "valid_ppl": valid, "cpu_s": 10_000.0}], "best_valid": valid, "best_epoch": 1,
                "cpu_s": 10_000.0, "test_ppl": test}

    only_drop = equal_cpu.summarise(grid, grid_recs, [rec(drop, 101.0, 93.0)])["transformer"]
    assert only_drop["chosen"] == "run_dropout" and only_drop["run"] is None
    data = equal_cpu.summarise(grid, grid_recs, [rec(t, 108.4, 98.7), rec(drop, 101.0, 93.0)])
    assert data["transformer"]["chosen"] == "run_dropout"
    page = equal_cpu.render(data)
    assert "| dropout 0.5 | 93.00 |" in page and "the same with each of `--dropout 0.5`" in page
    equal_cpu.figure(data)


def _transformer_plan(cell_cpu_s: float) -> tuple:
    """The full grid, its Transformer row, grid records with a 10-epoch Transformer cell of ``cell_cpu_s``, and the
    Transformer's budget run planned from them."""
    grid = lr_grid.rows(quick=False)
    t_row = next(r for r in grid if r.name == "transformer softmax")
    grid_recs = _grid_records(grid) + [_cell(t_row, 0.001, 104.0, cell_cpu_s, epochs=10)]
    return grid, t_row, grid_recs, equal_cpu.transformer_entry(grid, grid_recs)


def _try_record(t_row, entry: dict, valid: float, test: float, per_epoch: float) -> dict:
    """A Transformer budget run's record: ``entry``'s epochs at ``per_epoch`` CPU seconds each, flat validation."""
    n = entry["epochs"]
    return {"row": t_row.name, "lr": 0.001, "flags": " ".join(equal_cpu.flags(entry)), "version": "",
            "epochs": [{"epoch": i + 1, "valid_ppl": valid, "cpu_s": per_epoch * (i + 1)} for i in range(n)],
            "best_valid": valid, "best_epoch": n, "cpu_s": per_epoch * n, "test_ppl": test, "budget_cpu_s": 10_800.0}


def test_the_transformers_adamw_budget_run_differs_only_in_its_optimiser_and_is_judged_with_the_others(monkeypatch):
    grid, t_row, grid_recs, t = _transformer_plan(cell_cpu_s=2000.0)
    key, label, extra, tag = equal_cpu.TRANSFORMER_TRIES[1]
    adamw = equal_cpu.with_try(t, extra, tag)
    assert equal_cpu.flags(adamw) == (*equal_cpu.flags(t), "--optimizer", "adamw", "--weight-decay", "0.1")
    names = []
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, tk, extra: names.append(run.name) or {})
    equal_cpu.train_row(None, adamw, 10_800.0, 929589)
    assert names[0].endswith("-adamw0.1")

    def rec(entry, valid, test, cpu_s=10_000.0):
        return _try_record(t_row, entry, valid, test, cpu_s / entry["epochs"])

    drop = equal_cpu.with_dropout(t)
    data = equal_cpu.summarise(grid, grid_recs, [rec(t, 108.4, 98.7), rec(drop, 120.7, 111.1), rec(adamw, 99.0, 91.0)])
    assert data["transformer"]["chosen"] == key and data["transformer"][key]["test_ppl"] == 91.0
    page = equal_cpu.render(data)
    assert f"budget run, {label}" in page and "| AdamW, weight decay 0.1 | 91.00 | -" in page and "| met |" in page
    over = equal_cpu.summarise(grid, grid_recs, [rec(t, 108.4, 98.7), rec(adamw, 99.0, 91.0, cpu_s=12_000.0)])
    assert over["transformer"]["chosen"] == "grid_cell"  # over 1.05x the budget: shown, not chosen


def test_a_transformer_budget_run_that_spent_too_little_trains_again_for_the_epochs_that_fit(monkeypatch):
    grid, t_row, grid_recs, t = _transformer_plan(cell_cpu_s=4000.0)
    assert t["epochs"] == 27
    key, _, extra, tag = equal_cpu.TRANSFORMER_TRIES[1]

    def rec(entry, valid, test, per_epoch):
        n = entry["epochs"]
        return {"row": t_row.name, "lr": 0.001, "flags": " ".join(equal_cpu.flags(entry)), "version": "",
                "epochs": [{"epoch": i + 1, "valid_ppl": valid + n - i - 1, "cpu_s": per_epoch * (i + 1)}
                           for i in range(n)], "best_valid": valid, "best_epoch": n, "cpu_s": per_epoch * n,
                "test_ppl": test, "budget_cpu_s": 10_800.0}

    first = rec(equal_cpu.with_try(t, extra, tag), 100.0, 93.0, per_epoch=260.0)  # 7,020 CPU s: 65 % of the budget
    again = equal_cpu.try_entry(t, extra, tag, [first])
    assert again["epochs"] == 41 and again["resized_from"] is first
    assert equal_cpu.try_done(equal_cpu.with_try(t, extra, tag), [first]) is None
    trained = []
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, tk, extra: trained.append(run.name) or {})
    equal_cpu.train_try(None, equal_cpu.with_try(t, extra, tag), 10_800.0, 929589, [first])
    assert trained == ["eq-transformer-0.001-e41-adamw0.1"]
    pending = equal_cpu.summarise(grid, grid_recs, [first])["transformer"]
    assert pending[key]["test_ppl"] == 93.0 and pending[key]["resize_to"] == 41 and pending["chosen"] == key
    assert "trains again for 41 epochs" in equal_cpu.render(equal_cpu.summarise(grid, grid_recs, [first]))
    landed = rec(again, 98.0, 90.5, per_epoch=260.0)
    done = equal_cpu.summarise(grid, grid_recs, [first, landed])["transformer"]
    assert done[key]["test_ppl"] == 90.5 and done[key]["epochs"] == 41 and not done[key]["resize_to"]
    # both ran within the budget: the first stays a candidate, and is chosen where its validation is lower
    assert done[f"{key}_first"]["test_ppl"] == 93.0 and done["chosen"] == key
    worse = equal_cpu.summarise(grid, grid_recs, [first, rec(again, 101.0, 90.5, per_epoch=260.0)])
    assert worse["transformer"]["chosen"] == f"{key}_first"
    assert "its first run (27 ep) | 93.00 |" in equal_cpu.render(worse)
    assert equal_cpu.try_done(equal_cpu.with_try(t, extra, tag), [first, landed]) is landed
    full = rec(t, 108.4, 98.7, per_epoch=400.0)  # the first budget run spent 10,800: no re-sizing
    assert equal_cpu.try_entry(t, (), "", [full]) is not None and equal_cpu.try_done(t, [full]) is full


def test_a_stacked_transformer_try_adds_its_setting_to_the_best_adamw_run_once_that_try_is_final(monkeypatch):
    grid, t_row, grid_recs, t = _transformer_plan(cell_cpu_s=4000.0)
    _, _, adamw_extra, adamw_tag = equal_cpu.TRANSFORMER_TRIES[1]
    key, label, extra, tag = equal_cpu.TRANSFORMER_TRIES[2]
    assert equal_cpu.TRANSFORMER_STACKED[tag] == adamw_tag and extra[:len(adamw_extra)] == adamw_extra
    stacked = equal_cpu.with_try(t, extra, tag)
    assert equal_cpu.flags(stacked) == (*equal_cpu.flags(t), *adamw_extra, "--embed-dropout", "0.1")

    def rec(entry, valid, test, per_epoch):
        return _try_record(t_row, entry, valid, test, per_epoch)

    trained = []
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, tk, extra: trained.append(run.name) or {})
    with pytest.raises(equal_cpu.UserError, match="waits"):  # no AdamW run yet
        equal_cpu.train_try(None, stacked, 10_800.0, 929589, [])
    first = rec(equal_cpu.with_try(t, adamw_extra, adamw_tag), 104.6, 95.2, per_epoch=261.0)  # 27 ep: 65 %
    assert equal_cpu.try_entry(t, extra, tag, [first])["epochs"] == 27  # shown as it would train
    with pytest.raises(equal_cpu.UserError, match="waits"):  # AdamW's re-sized run still training
        equal_cpu.train_try(None, stacked, 10_800.0, 929589, [first])
    assert equal_cpu.try_done(stacked, [first]) is None and trained == []
    resized = equal_cpu.try_entry(t, adamw_extra, adamw_tag, [first])
    assert resized["epochs"] == 41
    # the re-sized run validated better: the setting is added to it, with its epochs, and not re-sized again
    landed = rec(resized, 101.0, 93.0, per_epoch=270.0)
    equal_cpu.train_try(None, stacked, 10_800.0, 929589, [first, landed])
    assert trained == ["eq-transformer-0.001-e41-adamw0.1-edrop0.1"]
    mine = rec(equal_cpu.try_entry(t, extra, tag, [first, landed]), 99.5, 91.5, per_epoch=268.0)
    assert equal_cpu.try_done(stacked, [first, landed, mine]) is mine
    data = equal_cpu.summarise(grid, grid_recs, [first, landed, mine])
    assert data["transformer"]["chosen"] == key and data["transformer"][key]["epochs"] == 41
    assert f"| {label} | 91.50 |" in equal_cpu.render(data)
    # the re-sized run validated worse (it overfitted): the setting is added to the first run, with its 27 epochs,
    # even though those spend 65 % of the budget
    worse = rec(resized, 110.6, 100.4, per_epoch=250.0)
    trained.clear()
    equal_cpu.train_try(None, stacked, 10_800.0, 929589, [first, worse])
    assert trained == ["eq-transformer-0.001-e27-adamw0.1-edrop0.1"]
    short = rec(equal_cpu.try_entry(t, extra, tag, [first, worse]), 103.0, 94.0, per_epoch=261.0)
    assert equal_cpu.try_entry(t, extra, tag, [first, worse, short])["epochs"] == 27
    assert equal_cpu.try_done(stacked, [first, worse, short]) is short


def test_a_rate_try_trains_the_embedding_dropout_run_at_its_multiple_of_the_rate_with_that_runs_epochs(monkeypatch):
    """A rate try that ran to its end, twice the rate (half the rate was stopped: only shown)."""
    grid, t_row, grid_recs, t = _transformer_plan(cell_cpu_s=4000.0)
    runs = {tag: (key, extra) for key, _, extra, tag in equal_cpu.TRANSFORMER_TRIES}
    key, extra = runs["-adamw0.1-edrop0.1-lr2x"]
    base_key, base_extra = runs["-adamw0.1-edrop0.1"]
    assert equal_cpu.TRANSFORMER_STACKED["-adamw0.1-edrop0.1-lr2x"] == "-adamw0.1-edrop0.1" and extra == base_extra
    rate = equal_cpu.with_try(t, extra, "-adamw0.1-edrop0.1-lr2x")
    assert rate["lr"] == 2 * t["lr"] and equal_cpu.flags(rate)[equal_cpu.flags(rate).index("--lr") + 1] == "0.002"
    assert equal_cpu.flags(rate).count("--lr") == 1
    adamw = _try_record(t_row, equal_cpu.with_try(t, runs["-adamw0.1"][1], "-adamw0.1"), 104.6, 95.2, 420.0)
    edrop = _try_record(t_row, equal_cpu.try_entry(t, base_extra, "-adamw0.1-edrop0.1", [adamw]), 101.5, 92.9, 410.0)
    trained = []
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, tk, extra: trained.append(run.name) or {})
    equal_cpu.train_try(None, rate, 10_800.0, 929589, [adamw, edrop])
    assert trained == [f"eq-transformer-0.002-e{t['epochs']}-adamw0.1-edrop0.1-lr2x"]  # the base run's epochs
    mine = _try_record(t_row, equal_cpu.try_entry(t, extra, "-adamw0.1-edrop0.1-lr2x", [adamw, edrop]), 99.0, 90.0,
                       415.0)
    data = equal_cpu.summarise(grid, grid_recs, [adamw, edrop, mine])
    assert data["transformer"]["chosen"] == key
    assert "`--optimizer adamw --weight-decay 0.1 --embed-dropout 0.1 --lr 0.002`" in equal_cpu.render(data)
    row, = equal_cpu.headline(data)  # the README's row: the chosen run, its label, no cost ratio
    assert row["test_ppl"] == 90.0 and row["relative_cost"] is None
    assert row["method"] == "Transformer, full softmax, 3 CPU-hours"
    assert row["note"].startswith(f"equal-cpu: AdamW 0.1, embedding dropout 0.1, twice the rate, {t['epochs']} epochs")


def test_a_stopped_try_is_recorded_from_its_run_directory_shown_beside_its_base_and_never_chosen(tmp_path,
                                                                                                 monkeypatch):
    grid, t_row, grid_recs, t = _transformer_plan(cell_cpu_s=4000.0)
    runs = {tag: (key, label, extra) for key, label, extra, tag in equal_cpu.TRANSFORMER_TRIES}
    tag = next(iter(equal_cpu.TRANSFORMER_STOPPED))
    key, label, extra = runs[tag]
    base_tag = equal_cpu.TRANSFORMER_STACKED[tag]
    base = _try_record(t_row, equal_cpu.with_try(t, runs[base_tag][2], base_tag), 120.0, 95.0, 420.0)
    rd = tmp_path / "run"
    rd.mkdir()
    (rd / "metrics.jsonl").write_text("".join(
        json.dumps({"epoch": i + 1, "valid_ppl": v, "cpu_s": 430.0 * (i + 1)}) + "\n"
        for i, v in enumerate((150.0, 110.0, 132.0))), encoding="utf-8")
    monkeypatch.setattr(equal_cpu.lmruns, "run_dir", lambda work, files, run: str(rd))
    monkeypatch.setattr(equal_cpu, "_record", lambda *a: pytest.fail("a stopped try must not train"))
    st = type("St", (), {"work": str(tmp_path), "files": {}, "label": "PTB"})()
    rec = equal_cpu.train_try(st, equal_cpu.with_try(t, extra, tag), 10_800.0, 929589, [base])
    assert rec["stopped"] == equal_cpu.TRANSFORMER_STOPPED[tag] and rec["test_ppl"] is None
    assert [m["valid_ppl"] for m in rec["epochs"]] == [150.0, 110.0, 132.0] and rec["best_valid"] == 110.0
    assert equal_cpu.try_done(equal_cpu.with_try(t, extra, tag), [base, rec]) is rec  # not trained again
    data = equal_cpu.summarise(grid, grid_recs, [base, rec])
    assert data["transformer"]["chosen"] != key  # its 110.0 is below the base's 120.0, yet it is not chosen
    page = equal_cpu.render(data)
    assert f"stopped after epoch 3 of {t['epochs']}: validation 132.00 against its base run's 120.00 at that epoch " \
           "(+10.0 %; -8.3 % to +25.0 % over its epochs)" in page
    assert f"{label}: {equal_cpu.TRANSFORMER_STOPPED[tag]}." in page


def test_every_row_tries_its_longer_run_again_at_more_dropout_within_the_budget(monkeypatch):
    """The longer runs validated worse than the default epochs at dropout 0.25: each row's longer run is tried again
    at :data:`LONGER_DROPOUT`, fitted to the budget where its longer run went over it, and chosen like the others."""
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = _nce_entry(grid, grid_recs)
    drop = equal_cpu.drop_entry(nce, [])
    assert equal_cpu.flags(drop) == (*equal_cpu.flags(nce), "--dropout", f"{equal_cpu.LONGER_DROPOUT:g}")
    assert equal_cpu.drop_done(nce, []) is None
    # a longer run of nce's epochs that took 1.5x the budget: the dropout run gets the epochs that fit
    longer = {"row": "gru nce", "lr": nce["lr"], "version": nce["row"].version, "flags": " ".join(equal_cpu.flags(nce)),
              "cpu_s": 2640.0, "budget_cpu_s": 1760.0, "best_valid": 99.0, "best_epoch": 8, "test_ppl": 93.0,
              "epochs": [{"epoch": i + 1, "valid_ppl": 99.0 + i, "cpu_s": 2640.0 * (i + 1) / nce["epochs"]}
                         for i in range(nce["epochs"])]}
    fitted = equal_cpu.drop_entry(nce, [longer])
    assert fitted["epochs"] == int(1760.0 // (2640.0 / nce["epochs"])) < nce["epochs"]
    seen = {}
    monkeypatch.setattr(equal_cpu, "_record", lambda st, entry, run, b, t, extra: seen.update(
        name=run.name, options=run.options) or {**longer, "flags": " ".join(run.options), "cpu_s": 1700.0,
                                                 "best_valid": 96.0, "test_ppl": 90.5})
    rec = equal_cpu.train_drop(None, nce, 1760.0, 929589, [longer])
    assert seen["name"].endswith(f"-e{fitted['epochs']}-drop{equal_cpu.LONGER_DROPOUT:g}")
    assert equal_cpu.drop_done(nce, [longer, rec]) is rec and equal_cpu.record_of(nce, [longer, rec]) is longer
    data = equal_cpu.summarise(grid, grid_recs, [longer, rec])
    row = next(x for x in data["rows"] if x["name"] == "gru nce")
    assert row["chosen"] == "drop" and row["drop"]["test_ppl"] == 90.5  # the longer run is over the budget
    page = equal_cpu.render(data)
    assert f"longer, dropout {equal_cpu.LONGER_DROPOUT:g}" in page
    assert f"96.00 / 90.50 (1,700 s) [{fitted['epochs']} ep]" in page
    equal_cpu.figure(data)


def test_a_dropout_run_far_from_the_budget_is_run_again_sized_by_its_own_epochs():
    """BlackOut's dropout run took 72.6 % of the budget (18 epochs in 1,282 s): 24 epochs fit at its own CPU seconds
    an epoch; hsm's took 2,379 s for 21 (over the budget, under load): 15 fit. One within the band stays."""
    grid = lr_grid.rows(quick=False)
    grid_recs = _grid_records(grid)
    nce = _nce_entry(grid, grid_recs)
    first_drop = equal_cpu.drop_entry(nce, [])

    def ran(cpu_s: float, epochs: int) -> dict:
        return {"row": "gru nce", "lr": nce["lr"], "version": nce["row"].version,
                "flags": " ".join(equal_cpu.flags(first_drop)), "cpu_s": cpu_s, "budget_cpu_s": 1760.0,
                "best_valid": 97.0, "best_epoch": epochs, "test_ppl": 92.5,
                "epochs": [{"epoch": i + 1, "valid_ppl": 97.0, "cpu_s": cpu_s * (i + 1) / epochs}
                           for i in range(epochs)]}
    short = ran(0.6 * 1760.0, first_drop["epochs"])
    again = equal_cpu.drop_entry(nce, [short])
    assert again["epochs"] == int(1760.0 // (short["cpu_s"] / first_drop["epochs"])) > first_drop["epochs"]
    assert again["resized_from"] is short and equal_cpu.drop_done(nce, [short]) is None  # a new run to train
    over = ran(1.4 * 1760.0, first_drop["epochs"])
    assert first_drop["epochs"] > equal_cpu.drop_entry(nce, [over])["epochs"] >= 8
    assert equal_cpu.drop_entry(nce, [ran(0.9 * 1760.0, first_drop["epochs"])])["epochs"] == first_drop["epochs"]
    # the first run stays the row's candidate until the re-sized one lands, and the page says which is which
    data = equal_cpu.summarise(grid, grid_recs, [short])
    row = next(x for x in data["rows"] if x["name"] == "gru nce")
    assert row["drop"]["test_ppl"] == 92.5
    page = equal_cpu.render(data)
    assert f"[{first_drop['epochs']} ep; re-sized to {again['epochs']} ep: not yet run]" in page
    done = {**ran(1700.0, again["epochs"]), "flags": " ".join(equal_cpu.flags(again)), "test_ppl": 91.0}
    assert equal_cpu.drop_done(nce, [short, done]) is done
    row = next(x for x in equal_cpu.summarise(grid, grid_recs, [short, done])["rows"] if x["name"] == "gru nce")
    assert row["drop"]["test_ppl"] == 91.0 and row["drop_resize_pending"] is None


def test_the_transformer_is_judged_against_the_softmax_gru_given_its_own_tries():
    """The softmax GRU's runs with the Transformer's AdamW and embedding-dropout tries (quality page rows) compete
    with its lr-grid run on validation; the Transformer's verdict is against the one chosen."""
    soft = {"test_ppl": 92.0, "best_valid": 98.0}
    name, what = lr_grid.SOFTMAX_TRANSFORMER_TRIES[0]
    row = {"name": f"gru {name}", "test_ppl": 90.0, "curve": [{"valid_ppl": 99.0}, {"valid_ppl": 97.0}]}
    base = equal_cpu.softmax_baseline(soft, [row])
    assert base["test_ppl"] == 90.0 and base["name"] == what and base["best_valid"] == 97.0
    assert base["pending"] == [lr_grid.SOFTMAX_TRANSFORMER_TRIES[1][1]] and len(base["tried"]) == 2
    worse = equal_cpu.softmax_baseline(soft, [{**row, "curve": [{"valid_ppl": 99.0}]}])
    assert worse["test_ppl"] == 92.0  # chosen on validation, not on test
    assert equal_cpu.softmax_baseline(soft, [])["pending"] == [w for _, w in lr_grid.SOFTMAX_TRANSFORMER_TRIES]
    grid, t_row, grid_recs, t = _transformer_plan(cell_cpu_s=4000.0)
    records = [_try_record(t_row, t, 100.0, 91.0, per_epoch=400.0)]
    data = equal_cpu.summarise(grid, grid_recs, records, quality=[row])
    assert data["transformer"]["vs_softmax"] == 91.0 / 90.0 - 1
    page = equal_cpu.render(data)
    assert "| missed |" in page and f"{what} 97.00 / 90.00" in page and "not yet finished" in page
