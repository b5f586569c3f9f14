"""Stamping and writing benchmark results: every page says where, when, from which commit and how.

Usage from a bench script::

    from _report import stamp, write_results
    meta = stamp()                       # machine, date, commit, command
    write_results("corpus", meta, rows_dict, markdown_body)

writes ``docs/results/<name>.json`` (meta + data) and ``docs/results/<name>.md`` (a header with
the stamp, then ``markdown_body``), both atomically.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "docs", "results")
sys.path.insert(0, os.path.join(REPO, "src"))

from sampledlm.textio import atomic_write  # noqa: E402


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def stamp() -> dict:
    """Machine, date (UTC), git commit (with '+dirty' when the tree has changes) and the command line."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    try:
        import torch

        torch_version = torch.__version__
        threads = torch.get_num_threads()
    except ImportError:
        torch_version, threads = "absent", 0
    return {
        "machine": f"{_cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "torch": torch_version,
        "torch_threads": threads,
        "numpy": np.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "command": "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]]),
    }


def header(title: str, meta: dict) -> str:
    return (
        f"# {title}\n\n"
        f"- machine: {meta['machine']}\n- date: {meta['date']}\n- commit: {meta['commit']}\n"
        f"- software: Python {meta['python']}, torch {meta['torch']} ({meta['torch_threads']} threads), numpy {meta['numpy']}\n"
        f"- command: `{meta['command']}`\n\n"
    )


def write_results(name: str, title: str, meta: dict, data, body: str) -> tuple[str, str]:
    """Write docs/results/<name>.json and .md; returns their paths."""
    os.makedirs(RESULTS, exist_ok=True)
    jpath = os.path.join(RESULTS, f"{name}.json")
    mpath = os.path.join(RESULTS, f"{name}.md")
    with atomic_write(jpath) as f:
        json.dump({"meta": meta, "data": data}, f, indent=2, default=float)
        f.write("\n")
    with atomic_write(mpath) as f:
        f.write(header(title, meta) + body.rstrip() + "\n")
    return mpath, jpath
