"""Every benchmark module run as a script (``python -m benchmarks.X``) must define all its names before ``main()``
starts: a ``if __name__ == "__main__"`` block above later definitions runs ``main`` while they do not exist yet (the
faster-rnnlm budget run lost its record to a NameError this way, after 2 CPU-hours)."""

from __future__ import annotations

import ast
import glob
import os

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")


def _is_main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.dump(node.test) and "__main__" in ast.dump(node.test)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(BENCH, "*.py"))), ids=os.path.basename)
def test_the_main_guard_is_the_last_statement(path):
    with open(path, encoding="utf-8") as f:
        body = ast.parse(f.read()).body
    guards = [i for i, node in enumerate(body) if _is_main_guard(node)]
    assert not guards or guards == [len(body) - 1], f"{path}: the __main__ block is not the module's last statement"
