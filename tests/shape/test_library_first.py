"""The library does not lean on its command line (issue 57): only ``cli/`` imports click, and the Python API runs
no command and imports nothing of ``cli/``."""

from __future__ import annotations

import ast

from conftest import REPO

PACKAGE = REPO / "src" / "sampledlm"


def imported_modules(path) -> set[str]:
    """Every module a file imports, anywhere in it (function-level imports too), resolved to absolute names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parts = path.relative_to(REPO / "src").with_suffix("").parts
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                out.add(".".join([*base, *([node.module] if node.module else [])]))
            else:
                out.add(node.module)
    return out


def test_only_the_command_line_imports_click():
    offenders = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                       if "cli" not in p.relative_to(PACKAGE).parts[:1]
                       and any(m == "click" or m.startswith("click.") for m in imported_modules(p)))
    assert offenders == []


def test_the_python_api_imports_nothing_of_the_command_line_and_runs_no_argv():
    api = PACKAGE / "api.py"
    assert not [m for m in imported_modules(api) if m.startswith("sampledlm.cli")]
    source = api.read_text(encoding="utf-8")
    assert ".main(" not in source and "argv" not in source


def test_the_demo_calls_the_library_not_the_command_line():
    offenders = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "demo").rglob("*.py")
                       if any(m.startswith("sampledlm.cli") for m in imported_modules(p)))
    assert offenders == []
