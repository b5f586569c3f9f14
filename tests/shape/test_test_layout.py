"""The tests mirror the source tree (tests/README.md), so a test is found where its code is.

tests/<package>/ holds the tests of src/sampledlm/<package>/; tests/test_<module>[_*].py those of a
top-level module (lm.py, store.py, ...); tests/shape/ checks the package as a whole; tests/test_readme.py
the README, tests/test_docs.py the docs site; tests/benchmarks/ the benchmarks/ folder beside the package (the
results pages' code) and tests/campaigns/ (the fault, fuzz and crash campaigns: modules, not tests). The package
and module names are read from src/sampledlm, not listed here.
"""

from __future__ import annotations

import ast
import collections
import pathlib

TESTS = pathlib.Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src" / "sampledlm"
WHOLE_PACKAGE = {"shape"}  # folders whose tests are about the package as a whole, not one part of it
LAB = {"benchmarks"}  # folders of the checkout outside the package, each tested in the tests/ folder of its name
ROOT_FILES = {"test_readme.py", "test_docs.py"}
CAMPAIGNS = TESTS / "campaigns"  # modules run on demand (python -m benchmarks faults|fuzz|crashes), not tests


def source_packages() -> set[str]:
    return {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}


def source_modules() -> set[str]:
    return {p.stem for p in SRC.glob("*.py") if p.stem not in ("__init__", "__main__")}


def all_test_files() -> list[pathlib.Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_every_test_file_lives_where_its_code_does():
    packages, modules = source_packages(), source_modules()
    assert packages and modules
    misplaced = []
    for path in all_test_files():
        rel = path.relative_to(TESTS)
        if len(rel.parts) > 1:
            ok = rel.parts[0] in packages | WHOLE_PACKAGE | LAB
        else:
            ok = rel.name in ROOT_FILES or any(path.stem == f"test_{m}" or path.stem.startswith(f"test_{m}_")
                                               for m in modules)
        if not ok:
            misplaced.append(str(rel))
    assert misplaced == [], (f"test files outside the mirror of src/sampledlm: {misplaced}; a package's tests go in "
                             f"tests/<package>/, a top-level module's in tests/test_<module>*.py")


def test_every_source_package_has_a_test_folder():
    missing = sorted(p for p in source_packages() if not any((TESTS / p).glob("test_*.py")))
    assert missing == []


def test_test_file_names_are_unique():
    """The test folders are not packages: pytest imports each test file by its bare name."""
    names = collections.Counter(p.name for p in all_test_files())
    assert [n for n, k in names.items() if k > 1] == []
    assert not list(TESTS.rglob("__init__.py"))


def test_fixtures_live_in_the_one_conftest_and_no_test_file_imports_another():
    """Fixtures shared or generic go in tests/conftest.py (a conftest.py in a subfolder would shadow it for
    ``from conftest import``); plain helpers are imported from tests/helpers.py, never from a test file."""
    assert sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("conftest.py")) == ["conftest.py"]
    offenders = []
    for path in all_test_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n.split(".")[0].startswith("test_") for n in names):
                offenders.append(str(path.relative_to(TESTS)))
    assert offenders == []


def test_the_campaigns_are_modules_that_pytest_never_collects():
    """tests/campaigns/ holds the fault, fuzz and crash campaigns, imported as ``tests.campaigns.NAME`` (a namespace
    package: no ``__init__.py``) and run by ``python -m benchmarks NAME``; nothing there is a test file or a
    conftest, and the campaigns the runner names are there."""
    from benchmarks import CAMPAIGNS as where, EXPERIMENTS

    modules = {p.stem for p in CAMPAIGNS.glob("*.py")}
    assert modules and where == "tests.campaigns"
    assert [m for m in modules if m.startswith("test_") or m.endswith("_test") or m == "conftest"] == []
    assert not [p for p in CAMPAIGNS.iterdir() if p.is_dir() and p.name != "__pycache__"]
    named = {e.module.removeprefix(where + ".") for e in EXPERIMENTS.values() if e.module.startswith(where + ".")}
    assert named and named <= modules
