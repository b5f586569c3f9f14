"""`python -m benchmarks decoder-state --quick`: the page is written, word-by-word scores equal the re-read
history's, and every measured position has both timings (no time is asserted: benchmarks are not tests)."""

from __future__ import annotations

from helpers import run_quick


def test_decoder_state_quick_writes_the_page_and_agrees(tmp_path, private_cache):
    data = run_quick("decoder-state", tmp_path, against="whole history")
    assert data["max_abs_ln_p_difference"] < 1e-4
    assert data["rows"] and all(r["advance_ms"] > 0 and r["history_ms"] > 0 for r in data["rows"])
    assert [r["words"][0] for r in data["rows"]] == sorted(r["words"][0] for r in data["rows"])
