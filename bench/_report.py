"""Stamping and writing benchmark results for the scripts in bench/: a thin layer over
:mod:`sampledlm.bench.report` (the same code stamps ``sampledlm bench`` pages).

Usage from a bench script::

    from _report import stamp, write_results
    meta = stamp()                       # machine, date, commit, command
    write_results("corpus", "Title", meta, data, markdown_body)

writes ``docs/results/<name>.json`` (meta + data) and ``docs/results/<name>.md`` (a header with
the stamp, then ``markdown_body``), both atomically.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "docs", "results")
sys.path.insert(0, os.path.join(REPO, "src"))

from sampledlm.bench import report  # noqa: E402


def stamp() -> dict:
    """Machine, date (UTC), git commit ('+dirty' when the tree has changes) and the command line."""
    report.set_command(["python", os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]])
    return report.stamp()


def header(title: str, meta: dict) -> str:
    return report.header(title, meta)


def write_results(name: str, title: str, meta: dict, data, body: str) -> tuple[str, str]:
    """Write docs/results/<name>.json and .md; returns their paths."""
    paths = report.write_page(RESULTS, name, title, meta, data, body)
    return paths["md"], paths["json"]
