"""`sampledlm bench ngram-scale --quick`: bounded vs in-memory estimation, binary loading, pruning, on small corpora."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import bench, run_quick

pytestmark = pytest.mark.usefixtures("private_cache")


def test_ngram_scale_quick(tmp_path):
    data = run_quick("ngram-scale", tmp_path / "out", against="Against the issue")
    rows = [{k: v for k, v in r.items() if k != "arpa"} for r in data["scaling"]]
    assert all(r["identical"] for r in rows), ("bounded estimation writes the in-memory bytes", rows)
    assert all(r["bounded"]["peak_mb"] > 0 for r in data["scaling"]), data["scaling"]
    # The binary's load time is measured, not asserted (a wall-clock time depends on the machine and its load);
    # the page says whether it met its target.
    assert data["binary"]["speedup"] > 0, data["binary"]
    methods = {r["method"] for r in data["pruning"]["rows"] if not r.get("diagnosis")}
    assert methods == {"none", "count", "entropy", "entropy, Katz P(h)"}, data["pruning"]["rows"]
    assert all(r["method"].endswith(" only") for r in data["pruning"]["rows"] if r.get("diagnosis"))
    if importlib.util.find_spec("distributed") is not None:  # the test extra has Dask; without it the bench says so
        assert all(r["identical"] for r in data["dask"]["runs"]), ("Dask counting with --memory: the one-process "
                                                                   "bytes", data["dask"])
    else:
        assert "Dask is not installed" in data["dask"]["skipped"], data["dask"]
    bb = data["binary"]["bounded"]  # the largest model written as a binary directory by bounded estimation
    assert bb["build"]["rc"] == 0, bb["build"]
    assert bb["load"] and bb["ppl"] > 1 and bb["arpa_mb"] > 0, {k: v for k, v in bb.items() if k != "build"}
    if importlib.util.find_spec("kenlm") is not None:  # the test extra has it; the cross-check needs it
        assert f"{bb['ppl']:.4g}" == f"{bb['arpa_ppl']:.4g}"
        assert bb["kenlm_load"], "KenLM loads the same model's ARPA file beside the binary"


def test_ngram_scale_no_train_rebuilds_the_page_from_its_json(tmp_path, monkeypatch):
    """--no-train writes the page again from the JSON in --out: the same figures, the measuring run named.
    This run is made without KenLM (as on a machine without the test extra): the page is whole all the same."""
    import json
    import sys

    monkeypatch.setitem(sys.modules, "kenlm", None)  # `import kenlm` raises ImportError
    out = tmp_path / "out"
    data = run_quick("ngram-scale", out, against="Against the issue")
    bb = data["binary"]["bounded"]
    assert bb["arpa_mb"] > 0 and bb["ppl"] > 1 and not bb["kenlm_load"], bb
    measured = json.loads((out / "ngram-scale.json").read_text())["meta"]
    r = bench("ngram-scale", "--no-train", "--out", str(out))
    assert r.exit_code == 0, r.output + repr(r.exception)
    doc = json.loads((out / "ngram-scale.json").read_text())
    assert doc["data"] == data and doc["meta"]["measured"]["commit"] == measured["commit"]
    assert f"Figures measured at commit {measured['commit']}" in (out / "ngram-scale.md").read_text()
    assert bench("ngram-scale", "--no-train", "--out", str(out)).exit_code == 0  # rebuilt twice: still that run
    assert json.loads((out / "ngram-scale.json").read_text())["meta"]["measured"]["command"] == measured["command"]
    r = bench("ngram-scale", "--no-train", "--out", str(tmp_path / "empty"))
    assert r.exit_code != 0 and "run the bench first" in str(r.exception)
