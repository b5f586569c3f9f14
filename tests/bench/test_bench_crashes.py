"""`sampledlm bench crashes --quick`: the file writers killed at three moments each leave nothing torn, and the
next run leaves no temporary file and writes the very bytes of an uninterrupted run."""

from __future__ import annotations

from helpers import run_quick


def test_crashes_quick_finds_nothing_torn(tmp_path):
    data = run_quick("crashes", tmp_path, against="Totals")
    t = data["totals"]
    assert t["tried"] == 6, data["kills"]
    assert (t["torn"], t["differs"], t["not recovered"], t["temp left"]) == (0, 0, 0, 0), data["kills"]
    assert t["same"] == 6
