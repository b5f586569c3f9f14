"""`sampledlm bench ngram-scale --quick`: bounded vs in-memory estimation, binary loading, pruning, on small corpora."""

from __future__ import annotations

import pytest
from helpers import run_quick

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
    assert bb["build"]["rc"] == 0 and bb["load"] and f"{bb['ppl']:.4g}" == f"{bb['arpa_ppl']:.4g}"
