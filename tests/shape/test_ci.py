"""CI's oldest leg tests the lower bounds that pyproject.toml states: .ci/oldest.txt pins each of them (issue 54)."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


def lower_bounds() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["test"]
    bounds = {}
    for req in reqs:
        if ";" in req and "python_version < " in req:  # a backport this Python does not install
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(\[[^\]]*\])?>=([0-9.]+)", req.split(";")[0].strip())
        if m:
            bounds[m.group(1).lower()] = m.group(3)
    return bounds


def pins() -> dict[str, str]:
    out = {}
    for line in (REPO / ".ci" / "oldest.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[name.strip().lower()] = version.strip()
    return out


def test_the_oldest_leg_pins_every_lower_bound_and_nothing_else():
    from packaging.version import Version  # pytest's own dependency

    bounds, pinned = lower_bounds(), pins()
    assert bounds and {n: Version(v) for n, v in bounds.items()} == {n: Version(v) for n, v in pinned.items()}, \
        (bounds, pinned)


def test_ci_makes_a_new_venv_for_each_leg():
    run = (REPO / ".ci" / "run").read_text()
    assert '.ci/venv "$tmp/newest"' in run and '.ci/venv "$tmp/oldest" oldest' in run
    assert 'PIP_CONSTRAINT="$PWD/.ci/oldest.txt"' in run
    assert 'rm -rf "$dir"' in (REPO / ".ci" / "venv").read_text()
