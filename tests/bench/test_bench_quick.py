"""`sampledlm bench NAME --quick` without --out never writes over the committed pages."""

from __future__ import annotations

import hashlib
import os
import pathlib

from click.testing import CliRunner

from sampledlm.cli import cli

REPO = pathlib.Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results"


def snapshot(folder: pathlib.Path) -> dict:
    return {p.name: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def test_quick_without_out_leaves_docs_results_untouched(tmp_path, monkeypatch):
    before = snapshot(RESULTS)
    monkeypatch.chdir(REPO)  # where the default --out docs/results would land
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # mkdtemp follows $TMPDIR
    r = CliRunner().invoke(cli, ["bench", "css-estimates", "--quick"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert snapshot(RESULTS) == before
    written = [p for p in tmp_path.iterdir() if p.name.startswith("sampledlm-bench-css-estimates-")]
    assert len(written) == 1 and (written[0] / "css-estimates.md").exists()
    assert str(written[0]) in r.output  # it says where
    assert "--out" not in (written[0] / "css-estimates.md").read_text().split("- command:")[1].splitlines()[0]


def test_library_never_switches_the_matplotlib_backend():
    src = REPO / "src" / "sampledlm" / "bench"
    for path in src.glob("*.py"):
        text = path.read_text()
        assert "matplotlib.use(" not in text and "import matplotlib.pyplot" not in text, path
    assert not (REPO / "bench").exists()  # one home for the pages: sampledlm.bench
    assert os.path.isdir(src)
