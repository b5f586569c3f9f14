"""`python -m benchmarks onnx --quick` and `quality-cpu --quick`: the pages are written; the exported GRU agrees
with `sampledlm score`; every row of the quality page has its CPU seconds and words per CPU second."""

from __future__ import annotations

import pytest
from helpers import run_quick


def test_onnx_quick_agrees_and_writes_the_page(tmp_path, private_cache):
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    pytest.importorskip("onnx", reason="the onnx extra is not installed")
    data = run_quick("onnx", tmp_path, against="## Agreement")
    assert data["agreement"]["max_abs_ln_p_vs_score"] < 1e-4
    assert data["tokens_per_s"]["onnxruntime"] > 0 and data["tokens_per_s"]["pytorch"] > 0


def test_quality_cpu_quick_writes_every_row(tmp_path, private_cache):
    data = run_quick("quality-cpu", tmp_path, against="words/CPU-s")
    names = [r["name"] for r in data["rows"]]
    assert names and "gru softmax" in names and not data["failures"]
    assert all(r["cpu_s"] > 0 and r["words_per_cpu_s"] > 0 and r["curve"] for r in data["rows"])
