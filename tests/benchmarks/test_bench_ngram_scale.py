"""`sampledlm bench ngram-scale --quick`: bounded vs in-memory estimation, binary loading, pruning, on small corpora."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import bench, run_quick

pytestmark = pytest.mark.usefixtures("private_cache")


def test_ngram_scale_quick(tmp_path):
    data = run_quick("ngram-scale", tmp_path / "out", against="Against the issue")
    assert all(r["identical"] for r in data["scaling"]), "bounded estimation writes the in-memory bytes"
    assert all(r["bounded"]["peak_mb"] > 0 for r in data["scaling"])
    assert data["binary"]["speedup"] > 1
    methods = {r["method"] for r in data["pruning"]["rows"] if not r.get("diagnosis")}
    assert methods == {"none", "count", "entropy", "entropy, Katz P(h)"}
    assert all(r["method"].endswith(" only") for r in data["pruning"]["rows"] if r.get("diagnosis"))
    assert all(r["identical"] for r in data["dask"]["runs"]), "Dask counting with --memory: the one-process bytes"
    bb = data["binary"]["bounded"]  # the largest model written as a binary directory by bounded estimation
    assert bb["build"]["rc"] == 0 and bb["load"] and bb["ppl"] > 1 and bb["arpa_mb"] > 0
    if importlib.util.find_spec("kenlm") is not None:  # the test extra has it; the cross-check needs it
        assert f"{bb['ppl']:.4g}" == f"{bb['arpa_ppl']:.4g}"
        assert bb["kenlm_load"], "KenLM loads the same model's ARPA file beside the binary"


def test_ngram_scale_no_train_rebuilds_the_page_from_its_json(tmp_path):
    """--no-train writes the page again from the JSON in --out: the same figures, the measuring run named."""
    import json

    out = tmp_path / "out"
    data = run_quick("ngram-scale", out, against="Against the issue")
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
