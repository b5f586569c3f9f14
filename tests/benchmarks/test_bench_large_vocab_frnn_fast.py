"""The large-vocabulary page's second faster-rnnlm round: speed-first settings, ratios, verdict, budget plan."""

import json

import pytest

from benchmarks import large_vocab_faster_rnnlm as frnn
from benchmarks import large_vocab_frnn_fast as fast


def _row(tool, obj, threads, wps, ppl=None, rc=0):
    r = {"tool": tool, "objective": obj, "threads": threads, "rc": rc, "words_per_cpu_s": wps,
         "cpu_s": 1_000_018 / wps, "date": "2026-12-04 17:40 UTC",
         "sampledlm_commit": "abc1234" if tool == "sampledlm" else None}
    if ppl:
        r["test"] = {"ppl": ppl, "text": "/w/test-3000.txt"}
    return r


def _write(tmp_path, rows):
    path = tmp_path / "amd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_every_speed_first_row_has_its_flags_and_changes_only_batch_dropout_and_precision():
    base = frnn.OURS_FLAGS["nce20fr"]
    for name in ("nce20frb128", "nce20frb256", "nce20frb128bf16", "nce20frb256bf16"):
        flags = frnn.OURS_FLAGS[name]
        assert flags[:len(base)] == base and "--dropout" in flags and flags[flags.index("--dropout") + 1] == "0"
        assert flags[flags.index("-b") + 1] == name[8:11]
        assert ("--precision" in flags) == name.endswith("bf16")
    hs = frnn.OURS_FLAGS["hsm2fr"]
    assert frnn.OURS_FLAGS["hsm2frb256bf16"][:len(hs)] == hs
    assert {n for n, _, _ in fast.ROWS} <= set(frnn.OURS_FLAGS)


def test_the_verdict_takes_each_pairs_fastest_speed_first_row_and_needs_all_four(tmp_path):
    rows = [_row("faster-rnnlm", "nce", 1, 40_000, 30_000.0), _row("sampledlm", "nce20frb128bf16", 1, 46_000, 580.0),
            _row("sampledlm", "nce20frb256bf16", 1, 52_000, 600.0), _row("sampledlm", "nce", 1, 16_000),
            _row("faster-rnnlm", "hs", 1, 44_000), _row("sampledlm", "hsm2frb128bf16", 1, 50_000)]
    path = _write(tmp_path, rows)
    text = fast.target_part(path)
    assert "NCE at 1 thread 1.30x (NCE-20 per position, 256 rows, bf16, test 600.00 against 30,000.00)" in text
    assert "HS at 1 thread 1.13x" in text  # 1.136: cut, not rounded and "**missed** (1 of 4 pairs at or above 1.2x)" in text
    page = "\n".join(fast.section(path))
    assert "| sampledlm | NCE, our defaults | 1 | 16,000 | 1 | 0.40x |" in page
    assert "| faster-rnnlm | NCE-20 | 1 | 40,000 | 1 | 1.00x |" in page and "test-3000.txt" in page
    more = [_row("sampledlm", "hsm2frb256bf16", 1, 53_000)] + [
        _row(tool, obj, 2, wps * 0.8) for tool, obj, wps in
        (("faster-rnnlm", "nce", 40_000), ("sampledlm", "nce20frb128bf16", 50_000),
         ("faster-rnnlm", "hs", 44_000), ("sampledlm", "hsm2frb128bf16", 54_000))]
    assert fast.target_part(_write(tmp_path, rows + more)).endswith(": met")


def test_each_speed_is_the_median_of_its_runs_and_the_test_the_last_scored(tmp_path):
    rows = [_row("faster-rnnlm", "nce", 1, 42_000), _row("sampledlm", "nce20frb128bf16", 1, 50_000, 580.0),
            _row("faster-rnnlm", "nce", 1, 38_000, 32_000.0), _row("sampledlm", "nce20frb128bf16", 1, 47_000),
            _row("faster-rnnlm", "nce", 1, 40_000), _row("sampledlm", "nce20frb128bf16", 1, 49_000)]
    got = fast.measured(rows)
    theirs, ours = got[("faster-rnnlm", "nce", 1)], got[("sampledlm", "nce20frb128bf16", 1)]
    assert (theirs["words_per_cpu_s"], theirs["n"], theirs["low"], theirs["high"]) == (40_000, 3, 38_000, 42_000)
    assert ours["words_per_cpu_s"] == 49_000 and theirs["test"]["ppl"] == 32_000.0 and ours["test"]["ppl"] == 580.0
    path = _write(tmp_path, rows)
    page = "\n".join(fast.section(path, first_round=_write_first(tmp_path), before=str(tmp_path / "none")))
    assert "| faster-rnnlm | NCE-20 | 1 | 40,000 | 3: 38,000-42,000 | 1.00x |" in page
    assert "| 49,000 | 3: 47,000-50,000 | 1.22x |" in page  # 1.225, cut
    assert "faster-rnnlm nce at 1: 44,000, 40,000 (-9%)" in page
    assert "NCE at 1 thread 1.22x" in fast.target_part(path)


def _write_first(tmp_path):
    path = tmp_path / "first.jsonl"
    path.write_text(json.dumps(_row("faster-rnnlm", "nce", 1, 44_000)) + "\n")
    return str(path)


def test_a_failed_run_is_left_out_and_nothing_is_claimed_before_the_round_ran(tmp_path):
    assert fast.target_part(str(tmp_path / "none.jsonl")) == "" and fast.section(str(tmp_path / "none.jsonl")) == []
    path = _write(tmp_path, [_row("faster-rnnlm", "nce", 1, 40_000),
                             _row("sampledlm", "nce20frb128bf16", 1, 90_000, rc=1)])
    assert fast.target_part(path) == ""


def test_the_budget_run_is_sized_to_faster_rnnlms_cpu_seconds_at_the_measured_speed():
    speed = [_row("faster-rnnlm", "nce", 1, 40_000), _row("sampledlm", "nce20frb128bf16", 1, 44_800),
             _row("sampledlm", "nce20frb256bf16", 1, 50_000)]
    notes = {"frnn-budget/nce-1": {"rc": 0, "process_cpu_s": 6_000.0, "test": {"ppl": 339.6}}}
    assert fast.budget_plan("nce", 1, {}, speed, 165_000_000) is None
    assert fast.budget_plan("hs", 1, notes, speed, 165_000_000) is None
    plan = fast.budget_plan("nce", 1, notes, speed, 165_000_000)
    steps = int(fast.SAFETY * 6_000.0 * 50_000 // (256 * 35))
    assert plan["row"] == "nce20frb256bf16" and plan["steps"] == steps
    assert plan["epochs"] == 2 and plan["theirs_test_ppl"] == 339.6  # 270M words: two passes of 165M
    assert plan["flags"] == frnn.OURS_FLAGS["nce20frb256bf16"]


@pytest.mark.parametrize("cpu_s", [5_100.0])
def test_the_budget_row_shows_beside_faster_rnnlms_run(tmp_path, cpu_s):
    speed = [_row("faster-rnnlm", "nce", 1, 40_000, 30_000.0), _row("sampledlm", "nce20frb256bf16", 1, 50_000, 600.0)]
    budget = {"kind": "budget", "tool": "sampledlm", "row": "nce20frb256bf16", "threads": 1, "steps": 60_000,
              "cpu_s": cpu_s, "process_cpu_s": 5_300.0, "test": {"ppl": 150.0}, "theirs_key": "frnn-budget/nce-1",
              "theirs_cpu_s": 6_121.0,
              "theirs_test_ppl": 339.64, "date": "2026-12-05 10:00 UTC"}
    path = _write(tmp_path, [*speed, budget])
    page = "\n".join(fast.section(path))
    assert "| NCE-20 per position, 256 rows, bf16 | 1 | 60,000 | 5,100 (5,300) | 150.00 | 6,121 (83% of it) | 339.64 |" \
        in page
    assert "in 5,300 process CPU s: test 150.00 against faster-rnnlm's 339.64 in 6,121" in fast.target_part(path)
    # stopped and resumed: the last process saw only its last stretch, so the loop's CPU seconds are what is shown
    path = _write(tmp_path, [*speed, {**budget, "process_cpu_s": 3_000.0}])
    page = "\n".join(fast.section(path))
    assert "| 60,000 | 5,100 (resumed: no one process) | 150.00 |" in page
    assert "in 5,100 CPU s of its training loop (resumed, so no process total): test 150.00" in fast.target_part(path)


def test_the_runs_before_huge_pages_are_summed_up_in_one_sentence(tmp_path):
    before = tmp_path / "before.jsonl"
    before.write_text("".join(json.dumps(r) + "\n" for r in (
        _row("faster-rnnlm", "hs", 1, 40_000), _row("sampledlm", "hsm2frb256bf16", 1, 44_000))))
    now = _write(tmp_path, [_row("faster-rnnlm", "hs", 1, 40_000), _row("sampledlm", "hsm2frb256bf16", 1, 52_000)])
    page = "\n".join(fast.section(now, first_round=str(tmp_path / "none"), before=str(before)))
    assert "(`before.jsonl`, 2 runs, 4 KB pages), the fastest speed-first row against faster-rnnlm read: HS at 1: " \
           "1.10x." in page
    assert "| 52,000 | 1 | 1.30x |" in page


def test_our_runs_are_scored_by_sampledlm_eval_and_a_failure_is_reported_not_raised(monkeypatch):
    import subprocess

    seen = []

    def fake(cmd, **kw):
        seen.append(cmd)
        ok = "broken" not in cmd[4]
        return subprocess.CompletedProcess(cmd, 0 if ok else 1, stdout='{"ppl": 123.4, "predictions": 3197}\n',
                                           stderr="" if ok else "sampledlm: error: no model there")

    monkeypatch.setattr(frnn.subprocess, "run", fake)
    got = frnn.eval_ours("/runs/a", "/w/test-3000.txt")
    assert got["ppl"] == 123.4 and got["predictions"] == 3197 and got["text"] == "/w/test-3000.txt"
    assert seen[0][3:] == ["eval", "/runs/a", "--test", "/w/test-3000.txt", "--json", "--threads", "1"]
    assert frnn.eval_ours("/runs/broken", "/w/t.txt") == {"failed": "sampledlm: error: no model there"}


def test_faster_rnnlms_vocabulary_lists_each_word_once_though_ours_lists_the_end_of_sentence_too(tmp_path):
    # faster-rnnlm adds every line of its vocabulary file as a word, repeated or not: a second </s> (our vocabulary
    # files list it) or two words alike in their first 99 bytes would be output rows no text maps to
    long = "x" * 120
    path = tmp_path / "model"
    written = frnn.frnn_vocab(str(path), ["</s>", "<unk>", "the", long, long[:99] + "y"],
                              {"</s>": 7, "<unk>": 3, "the": 5, long: 2})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines == ["</s> 7", "<unk> 3", "the 5", "x" * 99 + " 2"]
    assert written == len(lines)
