"""The n-gram package's two sides: the query side (ARPA reading, binary directories, lookups, the LM) imports
nothing of the build side (``sampledlm/ngram/build/``), so a model is used without the estimator's code."""

from __future__ import annotations

import ast
import pathlib

NGRAM = pathlib.Path(__file__).resolve().parents[2] / "src" / "sampledlm" / "ngram"


def imported_modules(path: pathlib.Path) -> set[str]:
    """Absolute names of what ``path`` (a module of sampledlm.ngram) imports, at any depth of the file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ["sampledlm", "ngram"][: 2 - (node.level - 1)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return out


def test_the_query_side_imports_nothing_of_the_build_side():
    query = [p for p in NGRAM.glob("*.py") if p.name != "__init__.py"]  # the package facade exports both
    assert {"arpa.py", "lm.py", "mapped.py", "model.py"} <= {p.name for p in query}
    found = {p.name: sorted(m for m in imported_modules(p) if m.startswith("sampledlm.ngram.build"))
             for p in query}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_build_side_is_one_folder():
    build = {p.stem for p in (NGRAM / "build").glob("*.py")}
    assert {"config", "pipeline", "counts", "estimate", "kneser_ney", "external", "spill", "distributed"} <= build
    assert not {"counts", "estimate", "external", "spill"} & {p.stem for p in NGRAM.glob("*.py")}
