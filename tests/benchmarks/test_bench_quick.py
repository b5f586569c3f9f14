"""`python -m benchmarks NAME --quick` without --out never writes over the committed pages; the benchmarks live
outside the installed package."""

from __future__ import annotations

import hashlib
import os
import pathlib

from click.testing import CliRunner

from benchmarks.__main__ import bench

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
    r = CliRunner().invoke(bench, ["css-estimates", "--quick"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert snapshot(RESULTS) == before
    written = [p for p in tmp_path.iterdir() if p.name.startswith("sampledlm-bench-css-estimates-")]
    assert len(written) == 1 and (written[0] / "css-estimates.md").exists()
    assert str(written[0]) in r.output  # it says where
    assert "--out" not in (written[0] / "css-estimates.md").read_text().split("- command:")[1].splitlines()[0]


def test_library_never_switches_the_matplotlib_backend():
    for path in [*(REPO / "benchmarks").glob("*.py"), *(REPO / "src" / "sampledlm").rglob("*.py")]:
        text = path.read_text()
        assert "matplotlib.use(" not in text and "import matplotlib.pyplot" not in text, path


def test_the_benchmarks_are_outside_the_package_and_no_command_of_it():
    assert (REPO / "benchmarks" / "__main__.py").is_file()
    assert not (REPO / "src" / "sampledlm" / "bench").exists()
    from sampledlm.cli import cli

    r = CliRunner().invoke(cli, ["bench", "outputs"])
    assert r.exit_code == 2 and "No such command 'bench'" in r.output


def test_python_m_benchmarks_lists_the_experiments_from_any_directory(tmp_path):
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--list"], cwd=tmp_path, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert {"neural", "ngram-scale", "outputs", "faults", "crashes", "maxent"} <= set(names)
    r = subprocess.run([sys.executable, "-m", "benchmarks", "nosuch"], cwd=tmp_path, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 1 and r.stderr.startswith("sampledlm: error: unknown experiment") and "Traceback" not in r.stderr

