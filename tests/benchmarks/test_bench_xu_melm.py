"""`sampledlm bench xu-melm --quick`: Xu et al. 2011 table 1 / fig. 2 on the built-in corpus, and its run cache."""

from __future__ import annotations

import json
import math

from helpers import run_quick

from benchmarks import melm_runs, xu_melm


def test_xu_melm_quick(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))
    data = run_quick("xu-melm", tmp_path)
    runs = {r["id"]: r for r in data["runs"]}
    assert {"kn3", "standard", "binary", "binary-feat2", "binary-a0.01", "standard-a0.01"} <= set(runs)
    for r in runs.values():
        assert "error" not in r and r.get("status") != "not run", r
        assert math.isfinite(r["test_ppl"]) and math.isfinite(r["valid_ppl"]) and r["test_ppl"] > 1, r
        assert r["wall_s"] > 0 and r["peak_rss_mb"] > 0
    kn, std, bi = (runs[k]["test_ppl"] for k in ("kn3", "standard", "binary"))
    # binary and standard MELM with the same features are comparable models; both in KN3's league
    assert 1 / 1.5 < bi / std < 1.5 and 1 / 2 < bi / kn < 2
    # training on 1 % of the positions hurts the standard MELM far more than 1 % of the negatives hurts the binary one
    assert runs["standard-a0.01"]["test_ppl"] / std > runs["binary-a0.01"]["test_ppl"] / bi
    head = {h["method"]: h for h in data["headline"]}
    assert len(head) == 5 and head["KN3 (interpolated modified Kneser-Ney)"]["relative_cost"] is None
    assert head["standard MELM, Feat-I"]["relative_cost"] == 1.0
    for h in data["headline"]:
        assert isinstance(h["note"], str) and math.isfinite(h["test_ppl"])
    # sharded training: 1 and 2 ranks give the same model; the page reports the speed-up
    assert runs["speed-1"]["weights_checksum"] == runs["speed-2"]["weights_checksum"]
    assert data["sharding"]["identical"] is True and data["sharding"]["speedup_wall"] > 0
    # every finished run is cached under its spec's key, and a cached row is reused without training
    measured = ("valid_ppl", "test_ppl", "wall_s", "peak_rss_mb", "reused")
    spec = {k: v for k, v in runs["kn3"].items() if k not in measured}
    cache = tmp_path / "cache" / "bench" / "xu-melm-quick"
    assert json.loads((cache / f"{melm_runs.spec_key(spec)}.json").read_text())["test_ppl"] == kn
    assert melm_runs.run_child(spec, cache=str(cache))["test_ppl"] == kn


def test_page_with_unfinished_runs(tmp_path):
    files = {k: str(tmp_path / f"{k}.txt") for k in ("train", "valid", "test")}
    specs = xu_melm.plan(False, files, str(tmp_path / "vocab.txt"))
    assert [s["alpha"] for s in specs if s["id"].startswith("standard-a")] == [0.1, 0.05, 0.02, 0.01]
    meta = {"machine": "m", "date": "d", "commit": "c", "python": "3", "torch": "t", "torch_threads": 1, "numpy": "n",
            "command": "python -m benchmarks xu-melm"}
    rows = {"kn3": {**specs[0], "valid_ppl": 160.0, "test_ppl": 150.0, "wall_s": 5.0, "peak_rss_mb": 100.0}}
    data = xu_melm.write(str(tmp_path), meta, "PTB", False, specs, rows)
    md = (tmp_path / "xu-melm.md").read_text()
    assert "not run" in md and "Against the paper" in md and (tmp_path / "xu-melm.png").stat().st_size > 0
    assert [h["method"] for h in data["headline"]] == ["KN3 (interpolated modified Kneser-Ney)"]


def test_a_run_stopped_by_its_rule_counts_for_a_higher_cap(tmp_path):
    """Training is deterministic, so a run that stopped by the halving rule before its epoch cap is
    also the run with a higher cap; a run that reached its cap is not."""
    spec = {"id": "b", "objective": "binary", "alpha": 1.0, "lr": 1.0, "epochs": 8, "features": "feat-i"}
    row = {**spec, "valid_ppl": 10.0, "test_ppl": 11.0, "epochs_run": 6, "wall_s": 1.0, "peak_rss_mb": 1.0}
    (tmp_path / f"{melm_runs.spec_key(spec)}.json").write_text(json.dumps(row))
    higher = {**spec, "epochs": 20}
    assert melm_runs.cached(higher, str(tmp_path))["test_ppl"] == 11.0
    assert melm_runs.cached(higher, str(tmp_path))["epochs"] == 20
    assert melm_runs.cached({**higher, "l2": 0.1}, str(tmp_path)) is None  # another spec
    assert melm_runs.cached({**higher, "min_gain": -1.0}, str(tmp_path)) is None  # no rule to stop it
    capped = {**spec, "id": "c"}
    (tmp_path / f"{melm_runs.spec_key(capped)}.json").write_text(json.dumps({**row, **capped, "epochs_run": 8}))
    assert melm_runs.cached({**capped, "epochs": 20}, str(tmp_path)) is None


def test_averaged_runs_on_the_page(tmp_path):
    """The averaged-weights section pairs each run with its last-iterate twin; the targets use both."""
    files = {k: str(tmp_path / f"{k}.txt") for k in ("train", "valid", "test")}
    specs = {s["id"]: s for s in xu_melm.plan(False, files, str(tmp_path / "vocab.txt"))}
    log = [{"epoch": 0, "valid_ppl": 300.0}, {"epoch": 1, "valid_ppl": 200.0}, {"epoch": 2, "valid_ppl": 199.9}]

    def row(key, valid, test):
        return {**specs[key], "valid_ppl": valid, "test_ppl": test, "wall_s": 1.0, "peak_rss_mb": 1.0,
                "epochs_run": 2, "epoch_log": log}

    by = {"kn3": row("kn3", 160.0, 150.0), "binary": row("binary", 170.0, 160.0),
          "avg-run-binary": row("avg-run-binary", 168.0, 158.0), "binary-a0.01": row("binary-a0.01", 180.0, 170.0),
          "avg-run-binary-a0.01": row("avg-run-binary-a0.01", 170.0, 160.0),
          "standard": row("standard", 165.0, 155.0), "avg-run-standard": row("avg-run-standard", 166.0, 156.0)}
    text = xu_melm.averaging(by)
    assert "| binary MELM, Feat-I | run | 168.00 | 158.00 | -1.25 | 2 |" in text
    assert "standard MELM, Feat-I, averaging run: worse than the last iterate (+0.65 %)" in text
    lines = xu_melm.targets(by)
    assert "- the same with averaged weights (run) for both: +1.27 % (160.00 vs 158.00): met" in lines
    assert "- binary MELM at 1 % of the negatives within 2 % of its own 100 %: +6.25 % (170.00 vs 160.00): NOT met" \
        in lines
    assert xu_melm.best_binary(by) == "avg-run-binary"
    assert any(line.startswith("- binary MELM, Feat-I, averaged weights (run) (the binary Feat-I run with the best")
               for line in lines)
