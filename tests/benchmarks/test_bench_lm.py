"""`sampledlm bench xu-nnlm | nce-samples | css-gru --quick`: the neural-LM reproductions on the
built-in corpus (small models, 2 epochs), and the shared run cache."""

from __future__ import annotations

import json
import math

from helpers import bench, run_quick, write_word_corpus

from benchmarks import EXPERIMENTS, lmruns


def by_name(data):
    rows = {r["name"]: r for r in data["rows"]}
    for r in rows.values():
        assert math.isfinite(r["test_ppl"]) and r["test_ppl"] > 1, r
    return rows


def check_headline(data):
    assert data["headline"]
    for h in data["headline"]:
        assert h["method"] and h["test_ppl"] > 1
        assert h["relative_cost"] is None or h["relative_cost"] > 0


def test_xu_nnlm_quick(module_cache, tmp_path):
    data = run_quick("xu-nnlm", tmp_path)
    rows = by_name(data)
    assert set(rows) == {"softmax", "binary-0.1-variable", "standard-0.1-variable"} and not data.get("failures")
    # Xu et al. 2011's point: subsampling negatives (binary) costs far less quality than subsampling the data
    assert rows["binary-0.1-variable"]["test_ppl"] < rows["standard-0.1-variable"]["test_ppl"]
    for r in rows.values():  # EM picks the weight on valid; on test the mixture is still no worse than KN3 by much
        assert r["test_ppl_interp"] < 1.05 * min(r["test_ppl"], data["kn3_test_ppl"])
    check_headline(data)
    assert "Table 7" in (tmp_path / "xu-nnlm.md").read_text()


def test_nce_samples_quick(module_cache, tmp_path):
    data = run_quick("nce-samples", tmp_path)
    rows = by_name(data)
    assert set(rows) == {"softmax", "nce-k5", "nce-k25"}
    assert rows["nce-k25"]["test_ppl"] < rows["nce-k5"]["test_ppl"]  # more noise samples, a better model
    check_headline(data)


def test_css_gru_quick(module_cache, tmp_path):
    data = run_quick("css-gru", tmp_path)
    rows = by_name(data)
    assert set(rows) == {"softmax", "css-is-a0.75", "neg-a0.75"}
    for r in rows.values():
        assert [c["epoch"] for c in r["curve"]] == [1, 2] and all(c["train_ppl"] > 1 for c in r["curve"])
    soft = rows["softmax"]["curve"]
    assert soft[1]["train_ppl"] < soft[0]["train_ppl"]  # the exact training likelihood rises
    # CSS-IS estimates the softmax's gradient; negative sampling optimises another objective (Botev et al. 2017 fig. 3)
    assert rows["css-is-a0.75"]["curve"][-1]["train_ppl"] < rows["neg-a0.75"]["curve"][-1]["train_ppl"]
    check_headline(data)


def test_runs_are_reused_and_failures_recorded(module_cache, tmp_path):
    """A run whose options the trainer refuses is recorded as failed and the others go on; a
    finished run is reused, not retrained."""
    import os

    from benchmarks import report, xu_nnlm

    work = report.work_dir("lm-runs", quick=True)
    files, _ = report.lm_data(None, True, os.path.join(work, "data"))
    soft = xu_nnlm.plan(True)[0]
    bad = lmruns.Run("bad", (*soft.options, "--objective", "nope"))
    failures: dict = {}
    rows = lmruns.run_all(work, files, [bad, soft], None, failures=failures)
    assert list(rows) == ["softmax"] and "nope" in failures["bad"]
    model = os.path.join(lmruns.run_dir(work, files, soft), "model.safetensors")
    assert lmruns.finished(os.path.dirname(model))
    stamp = os.stat(model).st_mtime_ns
    assert lmruns.run_all(work, files, [soft], None)["softmax"]["test_ppl"] == rows["softmax"]["test_ppl"]
    assert os.stat(model).st_mtime_ns == stamp


def test_every_experiment_has_a_quick_test():
    import pathlib

    text = "".join(p.read_text() for p in pathlib.Path(__file__).parent.glob("test_bench*.py"))
    for name in EXPERIMENTS:
        assert f'run_quick("{name}"' in text, f"no --quick test for experiment {name}"


def test_no_train_rebuilds_the_page_from_finished_runs_only(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))
    for name, n, seed in (("train", 60, 1), ("valid", 15, 2), ("test", 15, 3)):
        write_word_corpus(tmp_path / f"{name}.txt", n, seed)
    r = bench("nce-samples", "--no-train", "--data", str(tmp_path), "--out", str(tmp_path / "out"))
    assert r.exit_code == 0, r.output + repr(r.exception)
    page = (tmp_path / "out" / "nce-samples.md").read_text()
    assert "Runs not finished when this page was written: softmax, nce-k5" in page
    assert not list((tmp_path / "cache" / "bench" / "lm-runs").glob("softmax-*"))  # nothing trained
    r = bench("css-estimates", "--no-train", "--out", str(tmp_path / "out"))
    assert r.exit_code != 0 and "not available" in str(r.exception)
    r = bench("nce-samples", "--no-train", "--quick", "--out", str(tmp_path / "out"))
    assert r.exit_code != 0 and "--quick" in str(r.exception)


def test_transformer_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))
    data = run_quick("transformer", tmp_path / "out", against="Against the issue's targets")
    assert data["reference"]["test_ppl"] > 1 and data["speed"]["tokens_per_s"]["theirs"] > 0
    names = {r["name"] for r in data["rows"]}
    assert names == {"ours-softmax", "ours-css-is", "best"}
    assert all(r["test_ppl"] > 1 for r in data["rows"])


def test_a_stopped_runner_lets_its_training_checkpoint_before_it_ends(tmp_path):
    """SIGTERM is an interrupt in `python -m benchmarks` (the command line raises it); subprocess.run then killed the
    `sampledlm train` child outright (SIGKILL), losing the training since its last checkpoint. The child is now
    asked to stop (SIGTERM) and waited for."""
    import os
    import signal
    import sys
    import threading

    import pytest

    marker = tmp_path / "saved"
    child = ("import signal, sys, time\n"
             f"def stop(*a):\n    open({str(marker)!r}, 'w').write('checkpoint'); sys.exit(143)\n"
             "signal.signal(signal.SIGTERM, stop)\nprint('ready', flush=True)\ntime.sleep(60)\n")
    def interrupt(signum, frame):  # as ^C would (a pytest-xdist worker ignores SIGINT itself)
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGUSR1))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            lmruns._run_to_end([sys.executable, "-c", child], stderr=None)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, old)
    assert marker.read_text() == "checkpoint"


def test_a_cached_evaluation_still_says_what_it_cost(tmp_path, monkeypatch):
    rd = tmp_path / "run"
    rd.mkdir()
    (rd / "model.safetensors").write_bytes(b"weights")
    files = {"test": str(tmp_path / "test.txt"), "valid": str(tmp_path / "valid.txt")}
    calls = []

    def fake_cli(*args, log=None):
        calls.append(args)
        return json.dumps({"ppl": 123.0}) + "\n"

    monkeypatch.setattr(lmruns, "cli", fake_cli)
    got, cost, cached = lmruns.evaluate_with_cost(str(rd), files, None)
    assert got == {"ppl": 123.0} and not cached and set(cost) == {"cpu_s", "wall_s"}
    again, cost2, cached2 = lmruns.evaluate_with_cost(str(rd), files, None)
    assert len(calls) == 1 and cached2 and again == got and cost2 == cost
    assert lmruns.evaluate(str(rd), files, None) == got and len(calls) == 1
    # a cache written before the cost was kept: the result, and no cost rather than a zero
    cache = json.loads((rd / "bench_eval.json").read_text())
    del cache["cost"]
    (rd / "bench_eval.json").write_text(json.dumps(cache))
    assert lmruns.evaluate_with_cost(str(rd), files, None) == (got, None, True)
