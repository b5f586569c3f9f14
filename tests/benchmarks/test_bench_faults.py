"""`sampledlm bench faults --quick`: the fault campaign's smoke test (one case per category, one kill point)."""

from __future__ import annotations

from helpers import run_quick

from tests.campaigns import faults


def test_faults_quick_writes_the_page_and_finds_no_defect(tmp_path, monkeypatch):
    monkeypatch.delenv(faults.ENV_BEFORE, raising=False)  # --quick: no before column unless asked for
    monkeypatch.delenv(faults.ENV_ONLY, raising=False)
    data = run_quick("faults", tmp_path, against="Must be 0 now")
    page = (tmp_path / "faults.md").read_text()
    assert "## Summary" in page and "## Kill -9 and resume" in page and "## Cases" in page
    assert data["setup"]["sides"] == ["now"] and data["cases"] and data["kills"]
    now = data["counts"]["now"]
    bad = [(r["id"], r["now"]) for r in data["cases"] if r["now"]["category"] in faults.MUST_BE_ZERO]
    assert {c: now[c] for c in faults.MUST_BE_ZERO} == {c: 0 for c in faults.MUST_BE_ZERO}, bad
    assert now["ok"] + now["clean error"] >= 1
    assert all(k["now"]["verdict"] == "same" for k in data["kills"]), data["kills"]
