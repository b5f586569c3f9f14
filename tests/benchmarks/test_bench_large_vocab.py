"""The large-vocab experiment: a tiny corpus of generated ``<doc>`` files through the recipe, KN5 (ours; lmplz only
where it is installed), the neural step (two rows under a budget of seconds, the softmax's projection, KN5 + the
best interpolated) and the page, never into docs/results or the committed records; and the neural step's parts
(data subsets, plans, skips, the memory watchdog, the page's section) on their own."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys

import pytest
from helpers import run_quick

from benchmarks import large_vocab as lv
from benchmarks import large_vocab_neural as ln
from benchmarks import large_vocab_neural_page as lvpage


@pytest.mark.slow
def test_quick_large_vocab_builds_a_corpus_and_its_page(tmp_path):
    data = run_quick("large-vocab", tmp_path / "out", against="Against the issue's targets")
    rows = data["rows"]
    nce = rows["neural/nce"]
    assert nce["rc"] == 0 and nce["epochs"] == 2 and len(nce["curve"]) == 2
    assert all(c["cpu_s"] > 0 and c["valid_ppl"] > 1 for c in nce["curve"])
    assert nce["test"]["ppl"] > 1 and nce["test"]["predictions"] > 0 and nce["peak_mb"] > 0
    last = nce["invocations"][-1]  # the race's stop may reach a tiny run that has just finished
    assert "--max-time 20 --time-clock cpu" in nce["command"] and (last["rc"] == 0 or last["finished_before_stop"])
    # its rate raced: the default and half of it, each through epoch 1; the winner is the row's rate
    race = nce["lr_race"]
    assert [c["lr"] for c in race] == [0.004, 0.002] and nce["lr_race_max_halvings"] == 1
    assert all(c["epoch1_valid"] > 1 and c["process_cpu_s"] > 0 for c in race)
    assert nce["lr"] == min(race, key=lambda c: c["epoch1_valid"])["lr"]
    assert nce["curve"][0]["valid_ppl"] == pytest.approx(min(c["epoch1_valid"] for c in race))
    assert nce["tuning_process_cpu_s"] > 0
    assert rows["neural/transformer"]["objective"] == "nce"  # the best finished GRU row's output
    assert rows["neural/softmax"]["projected"] and rows["neural/softmax"]["words_per_cpu_s"] > 0
    mix = rows["neural-interp"]
    assert mix["rc"] == 0 and 0 < mix["weight_neural"] < 1
    page = (tmp_path / "out" / "large-vocab.md").read_text()
    assert "## Neural rows at V =" in page and "projected" in page
    assert re.search(r"KN5 \+ GRU, NCE \([\d,]+ shared\) interpolated", page)  # the row's draws in its name
    assert "Learning rates, chosen on validation the same way for every row" in page
    assert "Learning-rate race" in page and "| lr 0.004 | lr 0.002 |" in page
    # our ARPA file through the bounded conversion scores as the directory `ngram train --binary` writes
    conv = next(v for k, v in rows.items() if k.startswith("kn5/ours-converted/"))
    binary = next(v for k, v in rows.items() if k.startswith("kn5/ours-binary/"))
    assert conv["rc"] == 0 and conv["eval"]["ppl"] == binary["eval"]["ppl"] and "--memory" in conv["convert"]["command"]
    assert "Our ARPA file scored by `ngram eval` after the bounded conversion" in page


def test_strided_subset_is_every_kth_line_in_order(tmp_path):
    src = tmp_path / "valid.txt"
    src.write_text("".join(f"w{i} x y z\n" for i in range(100)))  # 400 tokens
    dst = tmp_path / "sub.txt"
    ln.strided_file(str(src), str(dst), 40)
    lines = dst.read_text().splitlines()
    assert lines == [f"w{i} x y z" for i in range(0, 100, 10)]
    assert ln.count_predictions(str(dst)) == 50  # 40 tokens + 10 </s>


def test_prefix_is_whole_lines_up_to_the_count(tmp_path):
    src = tmp_path / "train.txt"
    src.write_text("a b c\nd e\nf g h i\nj\n")
    dst = tmp_path / "p.txt"
    ln.prefix_file(str(src), str(dst), 4)
    assert dst.read_text() == "a b c\nd e\n"


def test_a_row_killed_for_memory_in_its_speed_run_is_skipped():
    rows = {"speed/adaptive/full": {"rc": -9, "tokens": 304345, "process": {"peak_mb": 22762.4}},
            "speed/hsm/full": {"rc": 0, "process": {"peak_mb": 12740.5}},
            "speed/class/full": {"rc": 0, "process": {"peak_mb": 15000.0}}}
    assert "killed by the kernel for memory" in ln.skip_reason("adaptive", rows, 14000)
    assert ln.skip_reason("hsm", rows, 14000) is None
    assert "above the 14,000 MB cap" in ln.skip_reason("class", rows, 14000)
    assert ln.skip_reason("transformer", rows, 14000) is None and ln.skip_reason("nce", rows, 14000) is None


def _files(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("".join("a b c d e f g h i\n" for _ in range(2000)))  # 9 tokens a line
    valid = tmp_path / "valid.txt"
    valid.write_text("a b c\n" * 10)
    return {"train": str(train), "valid": str(valid), "test": str(valid), "vocab": "v.txt", "valid_sub": str(valid)}


def test_a_plan_sizes_the_epochs_from_the_measured_speed_and_is_kept(tmp_path):
    files = _files(tmp_path)
    rows = {"speed/nce/full": {"rc": 0, "words_per_cpu_s": 100.0}}
    work = str(tmp_path / "work")
    os.makedirs(os.path.join(work, "neural", "data"))
    plan = ln.make_plan("nce", rows, str(tmp_path / "rows.jsonl"), work, files, budget=100.0, epochs=2,
                        cap_mb=14000, quick=False)
    valid_cost = 2 * 40 * ln.EVAL_CPU_S_PER_TOKEN
    assert plan["epoch_tokens_planned"] == int(100.0 * (100.0 - valid_cost) * ln.SAFETY / 2)
    assert plan["speed_source"] == "speed/nce/full" and plan["valid_predictions"] == 40
    assert "--max-time" in plan["options"] and plan["options"][plan["options"].index("--max-time") + 1] == "100"
    with open(plan["train"]) as f:
        assert sum(len(line.split()) for line in f) >= plan["epoch_tokens_planned"]
    # a second start reads the plan it began with, whatever the speed rows say now
    rows["speed/nce/full"]["words_per_cpu_s"] = 1e6
    again = ln.make_plan("nce", rows, "unused", work, files, 100.0, 2, 14000, False)
    assert again == json.loads(json.dumps(plan))
    with pytest.raises(SystemExit, match="--budget 100"):
        ln.make_plan("nce", rows, "unused", work, files, 200.0, 2, 14000, False)


def test_a_two_thread_row_measures_its_own_speed_and_takes_its_one_thread_rows_rate(tmp_path):
    files = _files(tmp_path)
    rows = {"speed/nce/full": {"rc": 0, "words_per_cpu_s": 100.0},  # one thread's: not this row's speed
            "neural-pilot/nce-2t": {"objective": "nce", "tokens": 100_000, "words_per_cpu_s": 60.0},
            "neural/nce": {"rc": 0, "lr": 0.004, "test": {"ppl": 150.0}}}
    work = str(tmp_path / "work")
    os.makedirs(os.path.join(work, "neural", "data"))
    plan = ln.make_plan("nce-2t", rows, str(tmp_path / "rows.jsonl"), work, files, budget=100.0, epochs=2,
                        cap_mb=14000, quick=False)
    assert plan["objective"] == "nce" and plan["speed_source"] == "neural-pilot/nce-2t"
    assert plan["words_per_cpu_s_planned"] == 60.0
    opts = plan["options"]
    assert opts[opts.index("--threads") + 1] == "2" and opts[opts.index("--lr") + 1] == "0.004"
    assert plan["lr_from"] == "neural/nce"
    # before its one-thread row is recorded: the objective's default (no --lr), and never a race of its own
    other = str(tmp_path / "other")
    os.makedirs(os.path.join(other, "neural", "data"))
    del rows["neural/nce"]
    assert "--lr" not in ln.make_plan("nce-2t", rows, "unused", other, files, 100.0, 2, 14000, False)["options"]


def test_a_one_pass_row_reads_its_rows_text_times_four_once_validated_as_often_at_its_rate(tmp_path):
    """css-is-1p: the steps its row trained (its row's calibrated speed, the same budget) over text it reads once,
    one epoch validated every quarter (--valid-every), at the rate its row's race chose, no race of its own."""
    files = _files(tmp_path)
    rows = {"speed/css-is/full": {"rc": 0, "words_per_cpu_s": 50.0},  # the short runs' speed: not this row's
            "neural/css-is": {"rc": 0, "lr": 0.002, "test": {"ppl": 142.0},
                              "plan": {"calibration": {"words_per_cpu_s": 80.0}}}}
    work = str(tmp_path / "work")
    os.makedirs(os.path.join(work, "neural", "data"))
    plan = ln.make_plan("css-is-1p", rows, str(tmp_path / "rows.jsonl"), work, files, budget=100.0, epochs=4,
                        cap_mb=14000, quick=False)
    valid_cost = 4 * 40 * ln.EVAL_CPU_S_PER_TOKEN  # validated as often as the 4-epoch row
    assert plan["objective"] == "css-is" and plan["epochs"] == 1 and plan["passes"] == 4
    assert plan["words_per_cpu_s_planned"] == 80.0 and plan["speed_source"].startswith("neural/css-is")
    assert plan["epoch_tokens_planned"] == int(80.0 * (100.0 - valid_cost) * ln.SAFETY)
    opts = plan["options"]
    assert opts[opts.index("--epochs") + 1] == "1" and opts[opts.index("--lr") + 1] == "0.002"
    steps = ln.batches_of(plan["epoch_predictions"], "gru")
    every = int(opts[opts.index("--valid-every") + 1])
    assert every == plan["valid_every"] and 3 * every < steps <= 4 * every  # 3 points within, then the end
    # its row's own plan, for comparison: a quarter of the text, four epochs, no points
    four = ln.make_plan("nce", {"speed/nce/full": {"rc": 0, "words_per_cpu_s": 80.0}}, "unused", work, files, 100.0,
                        4, 14000, False)
    assert plan["calibration"]["inherited_from"] == "neural/css-is"  # its row's speed: not measured again
    assert four["epochs"] == 4 and "--valid-every" not in four["options"]
    assert four["epoch_tokens_planned"] == plan["epoch_tokens_planned"] // 4


def test_a_bf16_one_pass_row_plans_on_its_rows_speed_times_bf16s_alternated_pilots(tmp_path, monkeypatch):
    """css-is-1p-bf16: the one-pass row under --precision bf16, its text what its row's calibrated speed times the
    speed-up of bf16 pilots alternated with fp32 ones buys; the ratio recorded once and reused."""
    files = _files(tmp_path)
    rows = {"neural/css-is": {"rc": 0, "lr": 0.002, "test": {"ppl": 142.0},
                              "plan": {"calibration": {"words_per_cpu_s": 80.0}}}}
    work = str(tmp_path / "work")
    os.makedirs(os.path.join(work, "neural", "data"))
    calls = []

    def fake_pilot(row, objective, work, files, tokens, cap_mb, precision=None, extra=()):
        calls.append(precision)
        return {"rc": 0, "words_per_cpu_s": {"fp32": 100.0, "bf16": 125.0}[precision], "train_cpu_s": 1.0,
                "process": {}}

    monkeypatch.setattr(ln, "pilot", fake_pilot)
    notes = str(tmp_path / "rows.jsonl")
    plan = ln.make_plan("css-is-1p-bf16", rows, notes, work, files, budget=100.0, epochs=4, cap_mb=14000,
                        quick=False)
    assert calls == ["fp32", "bf16", "fp32", "bf16"]
    assert rows["neural-pilot/css-is-1p-bf16"]["ratio"] == 1.25
    assert plan["objective"] == "css-is" and plan["epochs"] == 1 and plan["passes"] == 4
    assert plan["words_per_cpu_s_planned"] == 100.0 and plan["calibration"]["words_per_cpu_s"] == 100.0
    valid_cost = 4 * 40 * ln.EVAL_CPU_S_PER_TOKEN
    assert plan["epoch_tokens_planned"] == int(100.0 * (100.0 - valid_cost) * ln.SAFETY)
    opts = plan["options"]
    assert opts[opts.index("--precision") + 1] == "bf16" and opts[opts.index("--lr") + 1] == "0.002"
    os.makedirs(os.path.join(tmp_path, "w2", "neural", "data"))
    fp32 = ln.make_plan("css-is-1p", rows, notes, str(tmp_path / "w2"), files, 100.0, 4, 14000, False)
    assert "--precision" not in fp32["options"] and fp32["words_per_cpu_s_planned"] == 80.0
    # the ratio is taken from the notes on another machine: no pilot again
    calls.clear()
    other = str(tmp_path / "other")
    os.makedirs(os.path.join(other, "neural", "data"))
    again = ln.make_plan("css-is-1p-bf16", ln.read_rows(notes) | rows, notes, other, files, 100.0, 4, 14000, False)
    assert calls == [] and again["words_per_cpu_s_planned"] == 100.0
    # a pilot that fails: the row is not planned, and says which pilot
    monkeypatch.setattr(ln, "pilot", lambda *a, **k: {"rc": -9, "process": {"killed_for_memory": True,
                                                                            "killed_at_mb": 14000.0}})
    third = str(tmp_path / "third")
    os.makedirs(os.path.join(third, "neural", "data"))
    fresh = {"neural/css-is": rows["neural/css-is"]}
    failed = ln.make_plan("css-is-1p-bf16", fresh, str(tmp_path / "r3.jsonl"), third, files, 100.0, 4, 14000, False)
    assert "neural-pilot/css-is-1p-bf16" in failed["failed"] and "killed at 14,000 MB" in failed["failed"]


def test_a_batch_row_changes_only_its_parents_batch_and_plans_on_its_parents_run(tmp_path, monkeypatch):
    """css-is-1p-bf16-b64: the bf16 one-pass row's flags (precision, its resolved sample count, its rate) with 64
    BPTT rows a step; its text from the speed its parent planned on times the speed-up of pilots alternating
    the two batches; it waits while the parent has not finished."""
    files = _files(tmp_path)
    css = {"rc": 0, "lr": 0.002, "test": {"ppl": 142.0}, "plan": {"calibration": {"words_per_cpu_s": 80.0}}}
    rows = {"neural/css-is": css}
    work = str(tmp_path / "work")
    os.makedirs(os.path.join(work, "neural", "data"))
    notes = str(tmp_path / "rows.jsonl")
    waiting = ln.make_plan("css-is-1p-bf16-b64", rows, notes, work, files, 100.0, 4, 14000, False)
    assert "css-is-1p-bf16" in waiting["wait"]
    rows["neural/css-is-1p-bf16"] = {"rc": 0, "lr": 0.003, "words_per_cpu_s": 70.0, "test": {"ppl": 98.0},
                                     "plan": {"words_per_cpu_s_planned": 90.0},
                                     "objective_options": {"samples": 1000, "sample_mode": "shared"}}
    calls = []

    def fake_pilot(row, objective, work, files, tokens, cap_mb, precision=None, extra=()):
        calls.append((precision, extra))
        b = extra[extra.index("--batch-size") + 1]
        return {"rc": 0, "words_per_cpu_s": {"32": 100.0, "64": 150.0}[b], "train_cpu_s": 1.0, "process": {}}

    monkeypatch.setattr(ln, "pilot", fake_pilot)
    plan = ln.make_plan("css-is-1p-bf16-b64", rows, notes, work, files, 100.0, 4, 14000, False)
    small, big = ("--samples", "1000", "--batch-size", "32"), ("--samples", "1000", "--batch-size", "64")
    assert calls == [("bf16", small), ("bf16", big), ("bf16", small), ("bf16", big)]
    assert rows["neural-pilot/css-is-1p-bf16-b64"]["ratio"] == 1.5
    assert plan["objective"] == "css-is" and plan["epochs"] == 1 and plan["passes"] == 4
    assert plan["words_per_cpu_s_planned"] == 135.0 and plan["calibration"] == {
        "words_per_cpu_s": 135.0, "discarded": False, "inherited_from": "neural/css-is-1p-bf16"}
    opts = plan["options"]
    assert opts[opts.index("--batch-size") + 1] == "64" and opts[opts.index("--samples") + 1] == "1000"
    assert opts[opts.index("--precision") + 1] == "bf16" and opts[opts.index("--lr") + 1] == "0.003"
    assert plan["lr_from"] == "neural/css-is-1p-bf16"
    assert plan["valid_every"] == math.ceil(math.ceil(plan["epoch_predictions"] / (64 * 35)) / 4)
    assert ln.row_objective("css-is-1p-bf16-b64") == "css-is" and ln.batch_predictions("gru", "css-is-1p") == 32 * 35



def test_a_dropout_row_changes_only_its_parents_dropout(tmp_path, monkeypatch):
    """css-is-1p-bf16-d0: the bf16 one-pass row's flags with dropout 0; pilots alternate the parent's 0.25 with 0;
    the batch (and so the validation interval) stays the parent's."""
    files = _files(tmp_path)
    rows = {"neural/css-is": {"rc": 0, "lr": 0.002, "test": {"ppl": 142.0},
                              "plan": {"calibration": {"words_per_cpu_s": 80.0}}},
            "neural/css-is-1p-bf16": {"rc": 0, "lr": 0.002, "test": {"ppl": 98.0},
                                      "plan": {"words_per_cpu_s_planned": 90.0},
                                      "objective_options": {"samples": 1000, "sample_mode": "shared"}}}
    work = str(tmp_path / "work")
    os.makedirs(os.path.join(work, "neural", "data"))
    calls = []

    def fake_pilot(row, objective, work, files, tokens, cap_mb, precision=None, extra=()):
        calls.append((precision, extra))
        return {"rc": 0, "words_per_cpu_s": {"0.25": 100.0, "0": 104.0}[extra[extra.index("--dropout") + 1]],
                "train_cpu_s": 1.0, "process": {}}

    monkeypatch.setattr(ln, "pilot", fake_pilot)
    plan = ln.make_plan("css-is-1p-bf16-d0", rows, str(tmp_path / "rows.jsonl"), work, files, 100.0, 4, 14000, False)
    ref, row = ("--samples", "1000", "--dropout", "0.25"), ("--samples", "1000", "--dropout", "0")
    assert calls == [("bf16", ref), ("bf16", row), ("bf16", ref), ("bf16", row)]
    assert [r["precision"] for r in rows["neural-pilot/css-is-1p-bf16-d0"]["runs"]] == ["d0.25", "d0", "d0.25", "d0"]
    assert plan["words_per_cpu_s_planned"] == 90.0 * 1.04 and "dropout 0 pilots" in plan["speed_source"]
    opts = plan["options"]
    given = [opts[i + 1] for i, o in enumerate(opts) if o == "--dropout"]  # the last one given wins
    assert given == ["0.25", "0"] and "--batch-size" not in opts  # the GRU rows' 0.25, then the row's own
    assert opts[opts.index("--lr") + 1] == "0.002" and plan["lr_from"] == "neural/css-is-1p-bf16"
    assert plan["valid_every"] == math.ceil(math.ceil(plan["epoch_predictions"] / (32 * 35)) / 4)
    assert ln.row_objective("css-is-1p-bf16-d0") == "css-is"

def test_the_race_reads_an_epochs_end_not_a_point_within_it(tmp_path):
    from benchmarks import large_vocab_race as race

    rd = tmp_path / "run"
    rd.mkdir()
    (rd / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "valid_ppl": 300.0, "epoch_fraction": 0.25}) + "\n")
    assert race.first_epoch_valid(str(rd)) is None
    with open(rd / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"epoch": 1, "valid_ppl": 250.0}) + "\n" + json.dumps({"epoch": 2, "valid_ppl": 9.0}) + "\n")
    assert race.first_epoch_valid(str(rd)) == 250.0


def test_the_transformer_waits_for_a_finished_gru_row(tmp_path):
    files = _files(tmp_path)
    assert "wait" in ln.make_plan("transformer", {}, "x", str(tmp_path), files, 10.0, 2, 14000, True)
    rows = {"neural/nce": {"rc": 0, "model": "gru", "objective": "nce", "test": {"ppl": 150.0}},
            "neural/is": {"rc": 0, "model": "gru", "objective": "is", "test": {"ppl": 140.0}},
            "neural/class": {"rc": 1, "model": "gru", "objective": "class"}}
    assert ln.best_gru_row(rows) == "is"


def test_the_watchdog_kills_a_process_over_the_memory_cap(tmp_path):
    grow = "import time\nx = []\nfor _ in range(400):\n    x.append(bytearray(8 << 20)); time.sleep(0.02)\n"
    r = ln.run_watched([sys.executable, "-c", grow], str(tmp_path / "log"), cap_mb=300)
    assert r["killed_for_memory"] and r["rc"] == -9 and r["killed_at_mb"] > 300
    ok = ln.run_watched([sys.executable, "-c", "print('hi')"], str(tmp_path / "log"), cap_mb=300)
    assert ok["rc"] == 0 and not ok["killed_for_memory"] and ok["cpu_s"] >= 0 and ok["peak_mb"] > 0
    assert "print('hi')" in (tmp_path / "log").read_text()


def _finished(row, ppl, objective=None):
    return {"key": f"neural/{row}", "row": row, "model": "gru", "objective": objective or row, "rc": 0,
            "plan": {"budget": 7200.0, "epochs": 4, "valid_predictions": 10956, "epoch_predictions": 1000},
            "curve": [{"epoch": 1, "cpu_s": 100.0, "valid_ppl": 2 * ppl},
                      {"epoch": 2, "cpu_s": 200.0, "valid_ppl": ppl}],
            "epochs": 2, "valid_ppl": ppl, "train_cpu_s": 200.0, "process_cpu_s": 230.0, "words_per_cpu_s": 10.0,
            "peak_mb": 4000.0, "test": {"ppl": ppl, "predictions": 227332, "cpu_s": 1500.0, "wall_s": 1600.0},
            "invocations": [{"rc": 0}]}


def test_the_section_and_the_target_from_recorded_rows():
    recorded = {k: v for k, v in lv.read_rows().items() if not k.startswith("neural")}  # corpus, KN5, speed
    kn5 = {"rc": 0, "query": {"ppl": 128.66}, "train_tokens": 165471322, "ngrams": [1], "arpa_mb": 1.0,
           "train": {"rc": 0, "wall_s": 1.0, "cpu_s": 1.0, "peak_mb": 1.0, "stderr": ""}}
    rows = {**recorded, "kn5/ours/all": recorded.get("kn5/ours/all") or kn5,
            "neural/nce": _finished("nce", 120.0), "neural/class": _finished("class", 90.0),
            "neural/adaptive": {"key": "neural/adaptive", "row": "adaptive", "rc": None, "skipped": "too big"}}
    text, missing = lvpage.section(rows)
    assert "2 CPU-hours each" in text and "| GRU, class |" in text and "-30.0 %" in text
    assert "**GRU, adaptive: skipped**: too big." in text
    assert any("is, blackout, css-is, hsm, transformer, softmax" in m for m in missing)
    assert any("Learning rates raced on validation (the protocol above) for: nce, class" in m for m in missing)
    line = lvpage.target_line(rows)
    assert "2 one-thread rows finished, 0 with their rates raced on validation" in line
    rows["neural/class"] = {**rows["neural/class"], "lr": 0.004, "tuning_process_cpu_s": 1800.0,
                            "lr_race": [{"lr": 0.008, "diverged": "rose"}, {"lr": 0.004, "epoch1_valid": 300.0},
                                        {"lr": 0.002, "epoch1_valid": 310.0}]}
    text, missing = lvpage.section(rows)
    assert "| GRU, class | diverged | **300.00** | 310.00 | 0.004 | 1,800 |" in text
    assert any("Learning rates raced on validation (the protocol above) for: nce (" in m for m in missing)
    assert "GRU, class 90.00" in line and "30.0 % lower: met" in line and "interpolated: not yet run" in line
    # nce's race run after its row was recorded: the race so far is shown, and nce is no longer listed as unraced
    for lr, v in ((0.004, 250.0), (0.002, 235.0)):
        rows[f"neural-race/nce/lr{lr:g}"] = {"key": f"neural-race/nce/lr{lr:g}", "row": "nce", "lr": lr,
                                             "default": lr == 0.004, "epoch1_valid": v, "process_cpu_s": 1770.0}
    text, missing = lvpage.section(rows)
    assert any(m.startswith("Learning-rate race of nce (its row above trained before the race") and
               "lr 0.004 (default): 250.00, 1,770 CPU s; lr 0.002: 235.00" in m for m in missing)
    assert not any(m.startswith("Learning rates raced on validation") for m in missing)
    rows["neural-interp"] = {"rc": 0, "row": "class", "ppl": 85.0, "neural_ppl": 90.0, "weight_neural": 0.6,
                             "cpu_s": 10.0}
    assert "85.00: met" in lvpage.target_line(rows)
    page = lv.markdown(rows, quick=False)
    assert "## Neural rows at V =" in page and "KN5 + GRU, class interpolated" in page
    assert "## Not yet run\n\n- " in page
    fig = lv.plot(rows)
    assert len(fig.axes) == 3


def test_the_protocol_names_the_rows_the_budget_stopped_short():
    whole = _finished("nce", 120.0)
    whole["curve"] += [{"epoch": 3, "cpu_s": 300.0, "valid_ppl": 110.0},
                       {"epoch": 4, "cpu_s": 400.0, "valid_ppl": 100.0}]
    assert lvpage.budget_stops({"nce": whole}) == "no row so far has reached it: each ended after its epochs"
    one = {**_finished("css-is-1p", 108.0, "css-is"), "plan": {"epochs": 1}}
    one["curve"] = [{"epoch": 1, "step": 100, "epoch_fraction": 0.5, "valid_ppl": 200.0},
                    {"epoch": 1, "step": 181, "epoch_fraction": 0.905, "valid_ppl": 150.0}]
    said = lvpage.budget_stops({"nce": whole, "css-is-1p": one})
    assert said.startswith("it stopped GRU, CSS-IS") and ", stopped at" not in said
    assert "at 90.5 % of its planned steps (step 181); every other row ended after its epochs" in said
    assert lvpage.passes_done(whole) == 4 and lvpage.passes_done({"curve": []}) is None


def _checkpoint(rd, epoch, step, predictions, cpu_s):
    ck = rd / "checkpoints" / f"ckpt-{step:09d}"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_text(json.dumps({"epoch": epoch, "step": step, "epoch_tokens": predictions,
                                                       "cpu_seconds": cpu_s}))
    (rd / "checkpoint.json").write_text(json.dumps({"path": f"checkpoints/ckpt-{step:09d}"}))


def test_a_row_off_its_planned_speed_starts_again_sized_from_its_first_stretch(tmp_path):
    files = _files(tmp_path)
    work = tmp_path / "work"
    (work / "neural" / "data").mkdir(parents=True)
    rows = {"speed/nce/full": {"rc": 0, "words_per_cpu_s": 100.0}}
    plan = ln.make_plan("nce", rows, "unused", str(work), files, 100.0, 2, 14000, False)
    d = work / "neural" / "nce"
    (d / "invocations.jsonl").write_text(json.dumps({"cpu_s": 7.0, "wall_s": 9.0}) + "\n")
    _checkpoint(d / "run", 0, 300, 1300, 10.0)  # 130 words per CPU second: 1.3x the plan
    notes = str(tmp_path / "notes.jsonl")
    new = ln.calibrate(plan, str(work), files, rows, notes, 14000, False)
    assert new["calibration"]["discarded"] and new["calibration"]["ratio"] == 1.3
    assert new["calibration"]["discarded_process_cpu_s"] == 7.0
    assert new["words_per_cpu_s_planned"] == 130.0 and "its own first 300 steps" in new["speed_source"]
    assert new["epoch_tokens_planned"] == int(130.0 * (100.0 - 2 * 40 * ln.EVAL_CPU_S_PER_TOKEN) * ln.SAFETY / 2)
    assert not (d / "run").exists() and (d / "plan-discarded.json").exists()
    assert (d / "invocations-discarded.jsonl").exists() and not (d / "invocations.jsonl").exists()
    assert json.loads((d / "plan.json").read_text())["calibration"]["discarded"]
    # within the tolerance the run goes on, its calibration noted
    _checkpoint(d / "run", 0, 300, 1350, 10.0)
    kept = ln.calibrate(new, str(work), files, rows, notes, 14000, False)
    assert not kept["calibration"]["discarded"] and (d / "run").exists()
    # the calibrated plan is in the notes: a new machine's work directory plans the same epochs from it
    recorded = {**rows, **ln.read_rows(notes)}
    assert recorded["neural-plan/nce"]["epoch_predictions"] == kept["epoch_predictions"]
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "neural" / "data").mkdir(parents=True)
    there = ln.make_plan("nce", recorded, notes, str(elsewhere), files, 100.0, 2, 14000, False)
    assert there["epoch_predictions"] == kept["epoch_predictions"]
    assert there["calibration"] == kept["calibration"] and there["plan_recorded"]
    # past the first epoch (validation in its CPU seconds) nothing is measured
    assert ln.first_stretch(str(d / "run")) is not None
    _checkpoint(d / "run", 1, 600, 10, 20.0)
    assert ln.first_stretch(str(d / "run")) is None


def test_steady_state_speed_is_the_second_epochs_and_its_ratio_to_v_10k():
    from benchmarks import large_vocab_steady as steady

    def row(obj, v, first, second):
        return {"key": f"steady/{obj}/{v}", "objective": obj, "V": v, "rc": 0, "words_per_cpu_s": [first, second]}

    rows = {r["key"]: r for r in (row("nce", "10k", 15000, 18000), row("nce", "full", 10000, 14400),
                                  row("hsm", "10k", 8000, 9000), row("hsm", "full", 4000, 4500),
                                  row("is", "full", 1, 2))}  # no V = 10k row: no ratio
    assert steady.ratios(rows) == {"nce": 0.8, "hsm": 0.5}
    text = "\n".join(steady.lines(rows, "485k"))
    assert "| nce | 18,000 (15,000) | - | 14,400 (10,000) | 0.80 | met |" in text
    assert "| hsm | 9,000 (8,000) | - | 4,500 (4,000) | 0.50 | missed |" in text
    assert steady.lines({}, "485k") == []


def test_steady_rounds_give_medians_and_the_median_of_each_rounds_own_ratio():
    from benchmarks import large_vocab_steady as steady

    def row(v, second, rnd=1, date="2026-12-04 21:00 UTC"):
        key = f"steady/hsm/{v}" + (f"/r{rnd}" if rnd > 1 else "")
        return {"key": key, "objective": "hsm", "V": v, "rc": 0, "words_per_cpu_s": [1000, second], "date": date}

    rows = [row("10k", 10000), row("full", 7200), row("10k", 12000, 2), row("full", 7800, 2),
            row("10k", 11000, 3), row("full", 7000, 3),
            row("10k", 1, 4, date="2026-12-02 01:50 UTC"), row("full", 1, 4, date="2026-12-02 01:52 UTC")]
    rows = {r["key"]: r for r in rows}  # round 4 is an older set's: left out
    assert [sorted(s) for s in steady.rounds(rows)["hsm"]] == [["10k", "full"]] * 3
    assert round(steady.ratios(rows)["hsm"], 4) == 0.65  # rounds 0.72, 0.65, 0.636: not the medians' 7,200 / 11,000
    text = "\n".join(steady.lines(rows, "485k"))
    assert "| hsm | 11,000 (1,000) | - | 7,200 (1,000) | 0.65 (0.64-0.72, 3 rounds) | missed |" in text


def test_a_rising_running_loss_in_epoch_1_counts_as_diverged(tmp_path):
    """IS at lr 0.008 at V = 485k: 5.92 at a third of epoch 1, then 6.63, 11.75, 20.7."""
    from benchmarks import large_vocab_race as race

    log = tmp_path / "train.log"
    log.write_text("# start\nepoch 1: 1%  loss 6.81  3000 tok/s\nepoch 1: 33%  loss 5.92  3000 tok/s\n"
                   "epoch 1: 42%  loss 6.63  2900 tok/s\n")
    assert race.diverged(str(log)) is None  # 0.7 nats up: noise, not divergence
    with open(log, "a") as f:
        f.write("epoch 1: 47%  loss 11.75  2900 tok/s\nepoch 1: 57%  loss 20.73  2800 tok/s\n")
    assert race.diverged(str(log)) == "running training loss rose from 5.92 to 20.73 in epoch 1"
    later = tmp_path / "later.log"  # epoch 2's lines are not the race's business
    later.write_text("epoch 1: 90%  loss 5.1\nepoch 2: 10%  loss 9.0\n")
    assert race.diverged(str(later)) is None
    bad = tmp_path / "nan.log"
    bad.write_text("epoch 1: 5%  loss nan  3000 tok/s\n")
    assert "nan" in race.diverged(str(bad))


def test_the_race_halves_the_rate_while_the_lowest_is_best_and_picks_the_best_epoch_1(tmp_path):
    from benchmarks import large_vocab_race as race

    d = str(tmp_path)
    st = race.load(d)
    assert [c["dir"] for c in st["candidates"]] == ["run"]
    assert race.extend(st)["candidates"][1:] == []  # the default's rate is not known yet
    st = race.set_default(st, 0.008)
    assert race.extend(st)["candidates"][1:] == []  # the default has not finished its epoch
    st["candidates"][0]["diverged"] = "running training loss rose"
    st = race.extend(st)
    assert [(c["lr"], c["dir"], c["log"], c["explicit"]) for c in st["candidates"]] == [
        (0.008, "run", "train.log", False), (0.004, "run-lr0.004", "train-lr0.004.log", True)]
    assert race.choose(st) is None
    st["candidates"][1]["epoch1_valid"] = 250.0  # the lowest is the best: half again
    assert [c["lr"] for c in race.extend(st)["candidates"]] == [0.008, 0.004, 0.002]
    st["candidates"][2]["epoch1_valid"] = 260.0  # worse: the race ends at 0.004
    assert len(race.extend(st)["candidates"]) == 3 and race.choose(st)["lr"] == 0.004
    assert all(race.settled(c) for c in st["candidates"])
    race.save(d, st)
    assert race.load(d) == st  # a stopped race resumes where it was
    assert race.summary(st)[0] == {"lr": 0.008, "diverged": "running training loss rose"}
    st["candidates"][2]["epoch1_valid"] = 240.0  # better: on, but never below 1/2^3 of the default
    for lr in (0.001,):
        assert race.extend(st)["candidates"][-1]["lr"] == lr
        st["candidates"][-1]["epoch1_valid"] = 230.0
    assert race.extend(st)["candidates"][-1]["lr"] == 0.001  # 0.0005 would be 1/16 of the default


def test_a_race_state_of_the_first_version_is_carried_on(tmp_path):
    """The first version listed fixed candidates (``factors``); its state goes on under the halving rule."""
    import json

    from benchmarks import large_vocab_race as race

    old = {"factors": [1.0, 0.5, 0.25], "default_lr": 0.008, "chosen": None,
           "candidates": [dict(race.candidate(0.008, True), diverged="rose"), race.candidate(0.004, False),
                          race.candidate(0.002, False)]}
    (tmp_path / "lr-race.json").write_text(json.dumps(old))
    st = race.load(str(tmp_path))
    assert "factors" not in st and st["max_halvings"] == race.MAX_HALVINGS and len(st["candidates"]) == 3


FRNN_LOG = ("Read the vocabulary: 485176 words\nInitial entropy (bits) valid: 18.88082\n"
            "\rEpoch  1  lr: 1.00e-02/1.00e-01  progress:  50.00%  29.71 Kwords/sec  "
            "\rEpoch  1  lr: 1.00e-02/1.00e-01  progress:  99.90%  29.70 Kwords/sec  entropy (bits) valid:  8.51234"
            "  elapsed: 20.3m+1.0m\n")


def test_faster_rnnlm_budget_reads_its_log_and_stops_only_once_the_next_epoch_began():
    from benchmarks import large_vocab_frnn_budget as fb

    assert fb.epochs_done(FRNN_LOG) == [8.51234] and fb.epoch_running(FRNN_LOG) == 1
    assert not fb.should_stop(FRNN_LOG, [8000], budget=7200, epochs=4)  # ended past the budget, but still saving
    nxt = FRNN_LOG + "\rEpoch  2  lr: 1.00e-02/1.00e-01  progress:   0.10%  29.70 Kwords/sec  "
    assert fb.should_stop(nxt, [8000], budget=7200, epochs=4)
    assert not fb.should_stop(nxt, [1300], budget=7200, epochs=4)  # the epoch ended within the budget: on, even
    assert not fb.should_stop(nxt + "progress: 99%", [1300], budget=7200, epochs=4)  # when the next passes it
    assert fb.should_stop(nxt, [1300], budget=7200, epochs=1)  # the epochs are done
    assert fb.epochs_done("Initial entropy (bits) valid: 18.9\n... valid: -nan  elapsed\n")[0] != 0  # nan kept


def test_a_signal_stops_faster_rnnlm_too_and_reports_its_cpu(tmp_path):
    """The session's end (SIGTERM) must not leave faster-rnnlm running as an orphan: it is stopped, waited for, and
    its CPU seconds come back with the exception (run_one records them as discarded)."""
    import signal
    import threading

    from benchmarks import large_vocab_frnn_budget as fb

    child = [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 60: pass"]
    old = signal.signal(signal.SIGTERM, fb._on_signal)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        timer.start()
        with pytest.raises(fb.Stopped) as got:
            fb.train_watched(child, str(tmp_path / "train.log"), 1, budget=7200, epochs=4)
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, old)
    assert 0 < got.value.cpu_s < 30  # the busy child's CPU, and it was stopped long before its minute


def test_the_page_shows_faster_rnnlm_under_the_budget_beside_our_row():
    from benchmarks import large_vocab_frnn_budget as fb

    rows = {"neural/nce": _finished("nce", 148.07),
            "frnn-budget/nce-1": {"key": "frnn-budget/nce-1", "rc": 0, "objective": "nce", "threads": 1,
                                  "epoch_tokens": 50_000_000, "epochs": 4, "process_cpu_s": 7300.0,
                                  "valid_ppl": [300.0, 250.0], "test": {"ppl": 160.5},
                                  "ours_on_subset": {"ppl": 150.25}}}
    text = "\n".join(fb.section(rows))
    assert "| nce | 1 | 50,000,000 x 4 | 7,300 | 250.00 | 160.50 | 150.25 |" in text
    assert fb.target_part(rows) == "nce at 1 thread ours 150.25 against 160.50 (test subset): met"
    assert fb.section({}) == [] and fb.target_part({}) == "not yet run"
    # at two threads our two-thread row is the one compared, never the one-thread best row
    rows["frnn-budget/nce-2"] = {**rows["frnn-budget/nce-1"], "key": "frnn-budget/nce-2", "threads": 2,
                                 "ours_on_subset": None, "ours_best_on_subset": {"row": "neural/is", "ppl": 140.0}}
    text = "\n".join(fb.section(rows))
    assert "| nce | 2 | 50,000,000 x 4 | 7,300 | 250.00 | 160.50 | nce-2t's row not trained yet |" in text
    assert fb.target_part(rows) == ("nce at 1 thread ours 150.25 against 160.50 (test subset): met; nce at 2 threads "
                                    "faster-rnnlm 160.50, our nce-2t row not yet finished")
    rows["frnn-budget/nce-2"]["ours_on_subset"] = {"ppl": 170.0}
    assert fb.target_part(rows).endswith("nce at 2 threads ours 170.00 against 160.50 (test subset): **missed**")


def test_a_race_carried_on_another_machine_takes_in_the_recorded_candidates(tmp_path):
    from benchmarks import large_vocab_race as race

    plan = {"row": "is", "epoch_predictions": 1000}
    old = race.load(str(tmp_path / "old"))
    old = race.set_default(old, 0.008)
    old["candidates"][0].update(diverged="running training loss rose", process_cpu_s=600.0)
    old = race.extend(old)
    old["candidates"][1].update(epoch1_valid=250.0, process_cpu_s=1800.0)
    rows = {r["key"]: {**r, "date": "then"} for r in (race.as_record("is", plan, c) for c in old["candidates"])}
    rows["neural-race/is/lr0.001"] = {**race.as_record("is", {"epoch_predictions": 999}, race.candidate(0.001, False)),
                                      "epoch1_valid": 1.0}  # another plan's: not this race's
    new = race.merge_recorded(race.load(str(tmp_path / "new")), rows, "is", plan)
    assert new["default_lr"] == 0.008
    assert [(c["lr"], c["dir"], c.get("diverged"), c.get("epoch1_valid")) for c in new["candidates"]] == [
        (0.008, "run", "running training loss rose", None), (0.004, "run-lr0.004", None, 250.0)]
    assert all(race.settled(c) for c in new["candidates"])
    assert [c["lr"] for c in race.extend(new)["candidates"]] == [0.008, 0.004, 0.002]  # the race goes on from there
    here = race.load(str(tmp_path / "here"))  # a candidate this machine settled itself stays as it is
    here = race.set_default(here, 0.008)
    here["candidates"][0]["epoch1_valid"] = 300.0
    assert race.merge_recorded(here, rows, "is", plan)["candidates"][0].get("diverged") is None


def test_a_revised_rows_old_race_and_plan_are_set_aside(monkeypatch):
    """A row whose training code changed (REVISIONS) neither takes in the race candidates nor the plan recorded with
    the earlier code: its speed changed, so its plan (and with it the race's text) must be made again."""
    from benchmarks import large_vocab_neural as neural
    from benchmarks import large_vocab_race as race

    old_plan, plan = {"row": "hsm", "epoch_predictions": 1000}, {"row": "hsm", "epoch_predictions": 1000, "revision": 2}
    cand = {**race.candidate(0.004, False), "epoch1_valid": 250.0, "process_cpu_s": 1800.0}
    rows = {race.record_key("hsm", 0.004): race.as_record("hsm", old_plan, cand)}
    assert rows[race.record_key("hsm", 0.004)]["revision"] == 1
    assert race.merge_recorded(race.load("/nonexistent"), rows, "hsm", old_plan)["candidates"][-1]["epoch1_valid"] == 250
    fresh = race.merge_recorded(race.load("/nonexistent"), rows, "hsm", plan)
    assert not any(race.settled(c) for c in fresh["candidates"])
    assert neural.revision("hsm") == neural.revision("hsm-2t") == neural.REVISIONS["hsm"] >= 2
    assert neural.revision("nce") == 1
    monkeypatch.setattr(neural, "REVISIONS", {})
    assert neural.revision("hsm") == 1


def test_the_mixture_follows_the_best_finished_row(tmp_path, monkeypatch):
    """KN5 + the best row is mixed again when another row takes the lead, and not again while it keeps it."""
    notes = str(tmp_path / "rows.jsonl")
    append = ln.append_row
    append({"key": "neural/nce", "row": "nce", "rc": 0, "test": {"ppl": 148.0}, "run_dir": "nce-run"}, notes)
    append({"key": "neural-interp", "row": "nce", "rc": 0, "ppl": 86.0}, notes)
    append({"key": "neural/is", "row": "is", "rc": 0, "test": {"ppl": 144.0}, "run_dir": "is-run"}, notes)
    mixed = []
    monkeypatch.setattr(ln, "kn5_for_mixing", lambda data, work: "kn5.bin")

    def evaluate(rd, files, kn5):
        mixed.append(rd)
        ev = {"ppl": 80.0, "weights": [0.6, 0.4], "components": [{"ppl": 144.0}, {"ppl": 128.0}]}  # eval --json
        return ev, {"cpu_s": 700.0, "wall_s": 900.0}, len(mixed) > 1

    monkeypatch.setattr(ln.lmruns, "evaluate_with_cost", evaluate)
    files = {"test": "test.txt", "valid_sub": "valid.txt"}
    assert ln.interp_step("data", str(tmp_path), notes, files) is True
    mix = ln.read_rows(notes)["neural-interp"]
    assert mixed == ["is-run"] and mix["row"] == "is" and mix["ppl"] == 80.0 and mix["neural_ppl"] == 144.0
    assert mix["cpu_s"] == 700.0 and mix["cached"] is False
    assert ln.interp_step("data", str(tmp_path), notes, files) is False and mixed == ["is-run"]


def test_faster_rnnlm_speed_ratios_pair_the_latest_round_of_each_side(tmp_path, monkeypatch):
    def row(tool, obj, threads, wps, date):
        return {"tool": tool, "objective": obj, "threads": threads, "rc": 0, "words_per_cpu_s": wps,
                "words_per_wall_s": wps, "peak_mb": 1000, "date": date}

    rows = [row("faster-rnnlm", "nce", 1, 38000, "2026-11-29 16:13 UTC"), row("sampledlm", "nce", 1, 16000, "d1"),
            row("faster-rnnlm", "nce", 1, 36000, "2026-11-30 00:01 UTC"), row("sampledlm", "nce", 1, 18000, "d2"),
            row("sampledlm", "ncebf16", 1, 27000, "d2")]
    path = tmp_path / "quiet.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setattr(lv, "FASTER_RNNLM_QUIET", str(path))
    got = {(name, t): o["words_per_cpu_s"] / th["words_per_cpu_s"] for name, t, o, th in lv._pairs()}
    assert got == {("NCE", 1): 0.5, ("NCE, bf16", 1): 0.75}
    text = "\n".join(lv.faster_rnnlm_lines())
    # each (tool, output, threads) once: the earlier round's rows give way to the later's
    assert text.count("| faster-rnnlm | nce | 1 |") == 1 and "36,000" in text and "38,000" not in text
    assert "| sampledlm | ncebf16 | 1 | 27,000 |" in text and "NCE, bf16 1: 0.75x" in text


def test_gpu_rows_are_read_from_a_device_calls_output_and_shown_against_the_softmax(tmp_path):
    from benchmarks import large_vocab_gpu as gpu

    def run(name, model, obj, lr, valid, test):
        d = tmp_path / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"model": {"type": model}, "objective": {"name": obj, "options": {}},
                                                   "train": {"lr": lr}}))
        (d / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "step": 90, "valid_ppl": valid, "tokens_per_s": 9.0,
                                                     "wall_s": 300.0}) + "\n")
        (tmp_path / f"{name}.eval.json").write_text(json.dumps({"ppl": test, "predictions": 50, "seconds_score": 1.0}))
        (tmp_path / f"{name}.log").write_text("done\nTRAIN_RC=0 wall=310\nEVAL_RC=0 wall=320\n")

    run("g-softmax", "gru", "softmax", 0.004, 330.0, 270.0)
    run("g-is", "gru", "is", 0.004, 310.0, 243.0)
    run("g-nce", "gru", "nce", 0.004, 340.0, 297.0)
    (tmp_path / "g-class.log").write_text("--word-classes auto: the training text's words go into 1393 classes by "
                                          "the exchange algorithm\nTRAIN_RC=124 wall=470\n")
    notes = tmp_path / "lv.jsonl"
    rows = gpu.ingest(str(tmp_path), "2026-11-29 22:13 UTC", "abc1234", "a GPU machine", 6000, str(notes))
    assert {r["key"] for r in rows} == {"gpu/g-softmax", "gpu/g-is", "gpu/g-nce", "gpu/g-class"}
    got = {r["key"]: r for r in map(json.loads, notes.read_text().splitlines())}
    assert got["gpu/g-class"]["train_rc"] == 124 and "1393 word classes" in got["gpu/g-class"]["why"]
    assert got["gpu/g-is"]["test"]["ppl"] == 243.0 and got["gpu/g-is"]["machine"] == "a GPU machine"
    text = "\n".join(gpu.section(got))
    assert "| GRU, IS | 0.004 | 310.00 | **243.00** | -10.0 % | 300 |" in text
    assert "| GRU, NCE | 0.004 | 340.00 | **297.00** | +10.0 % | 300 |" in text
    assert "softmax GRU scores 270.00; IS below it; NCE above" in text
    assert gpu.section({}) == []
    # a later call trains the class row with its classes clustered beforehand: that row says so, the others not
    later = tmp_path / "later"
    later.mkdir()
    (later / "g-class").mkdir()
    (later / "g-class" / "config.json").write_text(json.dumps({
        "model": {"type": "gru"}, "objective": {"name": "class", "options": {"word_classes": "/tmp/gd/classes.txt"}},
        "train": {"lr": 0.008}}))
    (later / "g-class" / "metrics.jsonl").write_text(json.dumps({"epoch": 1, "step": 90, "valid_ppl": 320.0,
                                                                 "tokens_per_s": 9.0, "wall_s": 200.0}) + "\n")
    (later / "g-class.eval.json").write_text(json.dumps({"ppl": 260.0, "predictions": 50, "seconds_score": 1.0}))
    (later / "g-class.log").write_text("TRAIN_RC=0 wall=210\nEVAL_RC=0 wall=220\n")
    gpu.ingest(str(later), "2026-12-01 10:00 UTC", "def5678", "a GPU machine", 6000, str(notes))
    got = {r["key"]: r for r in map(json.loads, notes.read_text().splitlines())}
    text = "\n".join(gpu.section(got))
    assert ("| GRU, class (call of 2026-12-01 10:00 UTC, commit def5678; its `--word-classes auto` classes clustered "
            "beforehand and given as a file) | 0.008 | 320.00 | **260.00** | -3.7 % | 200 |") in text
    assert "| GRU, IS | 0.004 |" in text and "not finished within the call" not in text
    # its wall seconds shared the GPU with fewer rows: its own speed is given instead, the first call's rows' not
    assert "their epochs' tokens a second: class 9." in text and "IS 9" not in text
    # a call whose time ran out within the row's epoch: how far it got and how fast, its checkpoint's score aside
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "g-hsm").mkdir()
    (cut / "g-hsm.log").write_text("epoch 1: 15%  loss 6.3950  3031 tok/s  05:00 elapsed, ETA epoch 27:58\n"
                                   "epoch 1: 19%  loss 6.3090  3221 tok/s  06:00 elapsed, ETA epoch 25:02\n"
                                   "TRAIN_RC=124 wall=445\nEVAL_RC=0 wall=517\n")
    (cut / "g-hsm.eval.json").write_text(json.dumps({"ppl": 499.7, "predictions": 50, "seconds_score": 1.0}))
    gpu.ingest(str(cut), "2026-12-04 12:30 UTC", "9d6950a", "a GPU machine", 6000, str(notes))
    got = {r["key"]: r for r in map(json.loads, notes.read_text().splitlines())}
    assert "test" not in got["gpu/g-hsm"] and got["gpu/g-hsm"]["partial_test"]["ppl"] == 499.7
    text = "\n".join(gpu.section(got))
    assert ("| GRU, hsm (call of 2026-12-04 12:30 UTC, commit 9d6950a) | — | — | — | — | not finished within the "
            "call: 19 % of its epoch after 06:00 of training, at 3,221 tokens a second (its last progress line); its "
            "last checkpoint scores 499.70 on the test text |") in text
    assert "Cut within their epoch: GRU, hsm. On a GPU" in text


def test_our_row_whose_model_is_not_here_is_reported_not_scored(tmp_path):
    import argparse

    from benchmarks import large_vocab_frnn_budget as fb

    notes = tmp_path / "lv.jsonl"
    notes.write_text(json.dumps({"key": "neural/nce", "rc": 0, "run_dir": str(tmp_path / "gone"),
                                 "test": {"ppl": 148.07}}) + "\n")
    got = fb.ours_on(argparse.Namespace(ours_notes=str(notes), test="t.txt"), "nce", 1)
    assert "is not on this machine" in got["failed"]
    assert fb.ours_on(argparse.Namespace(ours_notes=str(notes), test="t.txt"), "hs", 1) is None  # no hsm row yet
    assert fb.ours_on(argparse.Namespace(ours_notes=str(notes), test="t.txt"), "nce", 2) is None  # nor nce-2t


def test_the_budget_section_shows_our_best_row_where_the_matching_models_file_is_gone():
    from benchmarks import large_vocab_frnn_budget as fb

    row = {"objective": "nce", "threads": 1, "rc": 0, "epoch_tokens": 49_000_000, "epochs": 4, "process_cpu_s": 6121,
           "valid_ppl": [676.0, 440.1], "test": {"ppl": 300.0}, "cpu_estimated": "ps read 3,739 CPU s at 22:53",
           "ours_on_subset": {"failed": "its model (/x) is not on this machine"},
           "ours_best_on_subset": {"row": "neural/is", "ppl": 162.96}}
    rows = {"neural/nce": {"rc": 0, "run_dir": "/x"}, "frnn-budget/nce-1": row}
    text = "\n".join(fb.section(rows))
    assert "| nce | 1 | 49,000,000 x 4 | 6,121 | 440.10 | 300.00 | nce's model not on this machine; is (the best " \
           "row) 162.96 |" in text
    assert "Process CPU estimated" in text and "ps read 3,739 CPU s" in text
    assert "our nce's model is not on this machine, and our best row (is) scores 162.96 there: met for it" \
        in fb.target_part(rows)
    # a later run whose own output's row is not trained yet shows the best row's score measured for the first
    rows["frnn-budget/hs-1"] = {"objective": "hs", "threads": 1, "rc": 0, "epoch_tokens": 60_000_000, "epochs": 4,
                                "process_cpu_s": 7000, "valid_ppl": [500.0], "test": {"ppl": 400.0}}
    text = "\n".join(fb.section(rows))
    assert "| hs | 1 | 60,000,000 x 4 | 7,000 | 500.00 | 400.00 | hsm's row not trained yet; is (the best row) " \
           "162.96 |" in text
    assert "hs at 1 thread faster-rnnlm 400.00 (test subset); our hsm row is not trained yet, and our best row (is) " \
           "scores 162.96 there: met for it" in fb.target_part(rows)


def test_the_readme_rows_are_kn5_the_best_one_thread_row_and_their_mixture():
    from benchmarks import headline

    kn5 = {"rc": 0, "query": {"ppl": 128.66}}
    rows = {"kn5/ours/all": kn5, "neural/nce": _finished("nce", 148.0), "neural/is": _finished("is", 144.0),
            "neural/nce-2t": _finished("nce-2t", 140.0, "nce"),  # two threads: not the one-thread target's row
            "neural/softmax": {"row": "softmax", "rc": 0, "projected": True, "words_per_cpu_s": 0.05}}
    got = lvpage.headline(rows)
    assert [r["test_ppl"] for r in got] == [128.66, 144.0]  # no mixture recorded yet
    assert got[1]["method"] == "GRU 256, IS, 2 CPU-hours (V = 485k)" and got[1]["relative_cost"] == 0.05 / 10.0
    assert headline._cost(got[1]) == "0.005" and headline._cost(got[0]) == "n/a"
    rows["neural-interp"] = {"rc": 0, "row": "nce", "ppl": 90.0, "neural_ppl": 148.0, "weight_neural": 0.6}
    assert len(lvpage.headline(rows)) == 2  # a mixture of another row than the best is not the best's
    rows["neural-interp"] = {**rows["neural-interp"], "row": "is", "neural_ppl": 144.0}
    assert lvpage.headline(rows)[2]["test_ppl"] == 90.0
    assert lvpage.headline({"kn5/ours/all": kn5}) == []


def test_scoring_our_row_on_faster_rnnlms_subset_needs_no_faster_rnnlm_build(tmp_path, monkeypatch):
    """A recorded faster-rnnlm run whose comparison lacks our row's score: the step scores ours (``ours_on``) and
    records it without building faster-rnnlm (its sources may not be on this machine)."""
    from benchmarks import large_vocab_frnn_budget as fb

    data = tmp_path / "data"
    data.mkdir()
    for name in ("valid.txt", "test.txt"):
        (data / name).write_text("a b c\nd e f\n" * 10, encoding="utf-8")
    notes = tmp_path / "rows.jsonl"
    notes.write_text(json.dumps({"key": "frnn-budget/hs-1", "rc": 0, "objective": "hs", "threads": 1}) + "\n",
                     encoding="utf-8")

    def no_build(*a, **k):
        raise AssertionError("faster-rnnlm built for a run already recorded")

    monkeypatch.setattr(fb.frnn, "build", no_build)
    monkeypatch.setattr(fb, "ours_on", lambda a, objective, threads: {"row": "neural/hsm", "ppl": 188.0})
    before = signal.getsignal(signal.SIGTERM)
    fb.main(["--runs", "hs-1", "--data", str(data), "--valid", str(tmp_path / "v.txt"), "--test",
             str(tmp_path / "t.txt"), "--notes", str(notes), "--ours-notes", str(notes)])
    # its handler of the session's end is the step's own: the process that called it gets its own back
    assert signal.getsignal(signal.SIGTERM) is before
    last = json.loads(notes.read_text(encoding="utf-8").splitlines()[-1])
    assert last["key"] == "frnn-budget/hs-1" and last["ours_on_subset"] == {"row": "neural/hsm", "ppl": 188.0}


def test_a_training_stopped_by_a_signal_to_it_alone_is_no_failure(tmp_path, monkeypatch):
    """A SIGTERM that reaches the training process but not the step (rc 143 after its checkpoint) stops the step
    for a resume, as a signal to the step does; before, the row was recorded as failed and never resumed."""
    work = tmp_path / "work"
    (work / "neural" / "nce").mkdir(parents=True)
    plan = {"row": "nce", "train": "t.txt", "valid": "v.txt", "options": []}
    codes = iter([143])
    monkeypatch.setattr(ln, "run_watched", lambda argv, log, cap_mb, poll=None: {"rc": next(codes), "argv": argv})
    with pytest.raises(ln.Stopped):
        ln.train_row(plan, str(work), 14000)
    # any other exit status is still the row's failure
    monkeypatch.setattr(ln, "run_watched", lambda argv, log, cap_mb, poll=None: {"rc": 1, "argv": argv})
    assert ln.train_row(plan, str(work), 14000)["rc"] == 1


def test_a_page_with_nothing_left_to_run_has_no_empty_not_yet_run_section(monkeypatch):
    from benchmarks import large_vocab_neural_page as lvpage
    monkeypatch.setattr(lv, "corpus_section", lambda rows: ("corpus", []))
    monkeypatch.setattr(lv, "kn_section", lambda rows: ("kn", []))
    monkeypatch.setattr(lv, "speed_section", lambda rows: ("speed", []))
    monkeypatch.setattr(lv, "targets", lambda rows: ["- targets"])
    monkeypatch.setattr(lv, "neural_todo", lambda rows: [])
    monkeypatch.setattr(lvpage, "section", lambda rows: ("neural", []))
    done = {f"datapath/{k}": {"rc": 0} for k in ("cold", "warm")}
    assert "Not yet run" not in lv.markdown(done, quick=False)
    assert "## Not yet run\n\n- The data path" in lv.markdown({}, quick=False)
