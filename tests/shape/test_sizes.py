"""Files that each do one job: no module of the package over 500 lines, no function over 80, unless a comment on
the function's first line says why (``# long: REASON``)."""

from __future__ import annotations

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "sampledlm"
MAX_FILE, MAX_FUNCTION = 500, 80


def test_no_module_over_500_lines():
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE}
    assert long == {}


def test_no_function_over_80_lines_without_its_reason():
    long = []
    for p in SRC.rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION and "# long:" not in lines[node.lineno - 1]:
                    long.append(f"{p.relative_to(SRC)}:{node.lineno} {node.name} ({size} lines)")
    assert long == []
