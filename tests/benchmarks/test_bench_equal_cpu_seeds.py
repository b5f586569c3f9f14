"""The equal-CPU page's seed replicates of its chosen runs nearest the line (benchmarks/equal_cpu_seeds.py): which
rows are replicated, which runs are still to train, and the judgement on the means, from made-up records."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks import equal_cpu
from benchmarks import equal_cpu_seeds as seeds

SOFT = {1: 92.0, 2: 92.8, 3: 92.3}
FLAGS = "--model gru --objective blackout --hidden 384 --epochs 10"


def _row(name, test, chosen="fit", flags=FLAGS):
    return {"name": name, "chosen": chosen, "vs_softmax": test / 92.0 - 1, chosen: {"test_ppl": test, "flags": flags}}


def _data():
    return {"softmax": {"test_ppl": 92.0},
            "rows": [_row("gru hsm", 95.0), _row("gru blackout", 92.4), _row("gru class", 91.2, chosen="drop"),
                     _row("gru nce", 88.0), _row("gru old", 92.1, flags=None)]}


def _rec(name, seed, ppl, flags=FLAGS, **extra):
    return {"kind": seeds.KIND, "row": name, "seed": seed, "flags": f"{flags} --seed {seed}", "test_ppl": ppl,
            **extra}


def test_the_rows_within_the_band_either_side_are_replicated_nearest_first():
    data = _data()
    # hsm (+3.3 %) and nce (-4.3 %) are beyond the band; an old record without flags cannot be repeated
    assert [x["name"] for x in seeds.near_line(data)] == ["gru blackout", "gru class"]
    entries = [{"row": SimpleNamespace(name=n)} for n in ("gru blackout", "gru class", "gru hsm")]
    todo = seeds.jobs(data, entries, [_rec("gru blackout", 2, 92.9)])
    assert [(e["row"].name, c, s) for e, c, s, _ in todo] == [("gru blackout", "fit", 3), ("gru class", "drop", 2),
                                                             ("gru class", "drop", 3)]
    assert todo[0][3] == FLAGS + " --seed 3"
    # a replicate of another run (other flags: the chosen run changed) does not count
    assert len(seeds.jobs(data, entries, [_rec("gru blackout", 2, 92.9, flags="--lr 0.004")])) == 4


def test_a_row_is_judged_on_its_mean_over_the_seeds_against_the_softmaxs():
    data = _data()
    recs = [_rec("gru blackout", 2, 92.9), _rec("gru blackout", 3, 92.2), _rec("gru class", 2, 92.0)]
    got = {r["name"]: r for r in seeds.means(data, recs, SOFT)}
    b = got["gru blackout"]
    assert b["mean"] == pytest.approx((92.4 + 92.9 + 92.2) / 3)
    assert b["softmax_mean"] == pytest.approx((92.0 + 92.8 + 92.3) / 3)
    assert b["vs_softmax_mean"] == pytest.approx(b["mean"] / b["softmax_mean"] - 1)
    assert b["vs_softmax_mean"] > 0 and seeds.verdict(b) == "missed"
    assert got["gru class"]["mean"] is None and seeds.verdict(got["gru class"]) == "seeds still to train"
    # below the softmax's mean: met
    better = seeds.means(data, [_rec("gru blackout", 2, 92.0), _rec("gru blackout", 3, 92.0)], SOFT)[0]
    assert better["vs_softmax_mean"] < 0 and seeds.verdict(better) == "met"
    # a seed stopped by the trainer as diverged is a miss, whatever the others
    blown = seeds.means(data, [_rec("gru blackout", 2, None, failed="diverged"), _rec("gru blackout", 3, 90.0)],
                        SOFT)[0]
    assert seeds.verdict(blown) == "missed (seed 2 diverged)"
    # softmax replicates whose seed 1 is not the page's softmax are another training: nothing is judged
    assert seeds.means(data, recs, {**SOFT, 1: 93.0}) == []
    text = "\n".join(seeds.render(seeds.means(data, recs, SOFT), SOFT, equal_cpu.LABEL))
    assert "| gru blackout | wider, 1.5x, its share's epochs | 92.40 | 92.90 | 92.20 | 92.50 | 92.37 | +0.14 % |" in text
    assert "| gru class | longer, dropout 0.35 | 91.20 | 92.00 | — | — | — | — | — | -0.9 % | seeds still to train |" \
        in text


def test_the_softmaxs_replicates_are_those_of_the_run_it_is_judged_by():
    q = [{"name": n, "test_ppl": v, "recorded": "same"} for n, v in (
        ("gru softmax", 92.0), ("gru softmax-seed2", 92.8), ("gru softmax-adamw0.1", 90.2),
        ("gru softmax-adamw0.1-seed2", 90.6), ("gru softmax-adamw0.1-seed3", 90.7))]
    assert equal_cpu.softmax_seeds(q) == {1: 92.0, 2: 92.8}
    assert equal_cpu.softmax_seeds(q, {"run": "softmax-adamw0.1"}) == {1: 90.2, 2: 90.6, 3: 90.7}


def test_with_no_row_near_the_line_the_page_says_why_one_seed_each_suffices():
    data = {"rows": [_row("gru hsm", 88.0), _row("gru nce", 84.0), {"name": "gru x", "vs_softmax": None}]}
    text = "\n".join(seeds.render_none(data, {1: 90.0, 2: 90.9}))
    assert "none is trained again" in text and "gru hsm, is -4.3 %" in text and "spread by 1.0 %" in text
    assert seeds.render_none({"rows": []}, {1: 90.0}) == []


def test_the_adamw_grid_cell_takes_its_replicates_from_that_grids_records():
    from benchmarks import lr_grid_seeds

    base = {"run": "softmax-adamw0.1@0.008", "test_ppl": 86.46}
    recs = [{"kind": lr_grid_seeds.KIND, "row": "gru softmax-adamw0.1", "lr": 0.008, "seed": 2, "test_ppl": 86.9},
            {"kind": lr_grid_seeds.KIND, "row": "gru softmax-adamw0.1", "lr": 0.004, "seed": 3, "test_ppl": 90.0},
            {"kind": lr_grid_seeds.KIND, "row": "gru nce-adamw0.1", "lr": 0.008, "seed": 3, "test_ppl": 88.0}]
    assert equal_cpu.softmax_seeds([], base, recs) == {1: 86.46, 2: 86.9}  # another rate, another row: not these
    assert equal_cpu.softmax_seeds([], base, []) == {}
