"""`python -m benchmarks onnx --quick`: the exported GRU agrees with `sampledlm score` and the page is written."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from benchmarks.__main__ import bench

pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
pytest.importorskip("onnx", reason="the onnx extra is not installed")


def test_onnx_quick_agrees_and_writes_the_page(tmp_path, private_cache):
    r = CliRunner().invoke(bench, ["onnx", "--quick", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output + repr(r.exception)
    import json

    data = json.loads((tmp_path / "onnx.json").read_text())["data"]
    assert data["agreement"]["max_abs_ln_p_vs_score"] < 1e-4
    assert data["tokens_per_s"]["onnxruntime"] > 0 and data["tokens_per_s"]["pytorch"] > 0
    assert (tmp_path / "onnx.md").exists() and (tmp_path / "onnx.png").exists()
