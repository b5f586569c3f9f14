"""The n-gram package's two sides: the query side (ARPA reading, binary directories, lookups, the LM) imports
nothing of the build side (``sampledlm/ngram/build/``), so a model is used without the estimator's code."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

NGRAM = pathlib.Path(__file__).resolve().parents[2] / "src" / "sampledlm" / "ngram"
SRC = NGRAM.parent.parent
# the query side: reading and writing ARPA files, binary directories, lookups, the LM
QUERY = ("arpa", "arpa_lines", "backoff", "binary", "lm", "mapped", "model", "tables", "trie_kernels")


def imported_modules(path: pathlib.Path) -> set[str]:
    """Absolute names of what ``path`` (a module of sampledlm) imports, at any depth of the file."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    pkg = parts[:-1]  # a module's package; a package's __init__: the package itself
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - (node.level - 1)] if node.level else []
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


def _module_file(name: str) -> pathlib.Path | None:
    path = SRC / name.replace(".", "/")
    return path.with_suffix(".py") if path.with_suffix(".py").exists() else \
        (path / "__init__.py" if (path / "__init__.py").exists() else None)


def _sampledlm_imports(name: str) -> set[str]:
    """The sampledlm modules (or packages) module ``name`` imports, at any depth of its file."""
    out = set()
    for m in imported_modules(_module_file(name)):
        while m and _module_file(m) is None:  # "pkg.module.attr" -> "pkg.module"
            m = m.rpartition(".")[0]
        if m.startswith("sampledlm"):
            out.add(m)
    return out - {name}


def test_the_query_side_reaches_nothing_of_the_build_side():
    """Followed through every module it imports (lazy imports too), the query side never reaches ngram/build;
    nor does it import the package facade sampledlm.ngram, which exports both sides."""
    assert {p.stem for p in NGRAM.glob("*.py")} - {"__init__"} == set(QUERY), "a new module: which side is it?"
    reached = {}
    for start in QUERY:
        seen, todo = set(), [f"sampledlm.ngram.{start}"]
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            todo += [n for n in _sampledlm_imports(m) if n != "sampledlm.ngram"]
            if "sampledlm.ngram" in _sampledlm_imports(m) and m.startswith("sampledlm.ngram."):
                seen.add("sampledlm.ngram (the facade)")
        bad = sorted(m for m in seen if m.startswith("sampledlm.ngram.build") or m.endswith("(the facade)"))
        if bad:
            reached[start] = bad
    assert reached == {}


def test_importing_the_query_side_loads_no_build_module():
    """At run time: with the facade's __init__ left out, importing every query module loads nothing of build/."""
    probe = f"""
import importlib, sys, types
pkg = types.ModuleType("sampledlm.ngram")
pkg.__path__ = [{str(NGRAM)!r}]
import sampledlm
sys.modules["sampledlm.ngram"] = pkg
for name in {QUERY!r}:
    importlib.import_module("sampledlm.ngram." + name)
print(sorted(m for m in sys.modules if m.startswith("sampledlm.ngram.build")))
"""
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "[]"


ARPA = """\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-1.0\t<unk>\t0
-0.5\t</s>
-99\t<s>\t-0.3
-0.4\tthe\t-0.2

\\2-grams:
-0.2\t<s> the
-0.1\tthe </s>

\\end\\
"""


def test_importing_the_package_and_scoring_an_arpa_file_loads_no_build_module(tmp_path):
    """With the facade itself: `import sampledlm.ngram`, reading an ARPA file and scoring with it (through the
    package and through sampledlm.load) load nothing of build/; the estimator's names come on first use."""
    (tmp_path / "m.arpa").write_text(ARPA, encoding="utf-8")
    probe = f"""
import math, sys
import numpy as np
build = lambda: sorted(m for m in sys.modules if m.startswith("sampledlm.ngram.build"))
import sampledlm.ngram as ngram
print(build())
lm = ngram.ArpaLM(ngram.read_arpa({str(tmp_path / "m.arpa")!r}, cache=False))
ids = np.array([lm.vocab.index["the"], lm.vocab.index["</s>"]])
print(round(float(lm.logprobs(ids).sum() / math.log(10)), 6), build())
import sampledlm
model = sampledlm.load({str(tmp_path / "m.arpa")!r})
print(round(model.score("the"), 6), build())
print(callable(ngram.train_ngram), "sampledlm.ngram.build.estimate" in build())
"""
    env = dict(os.environ, SAMPLEDLM_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(SRC))
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-4:] == ["[]", "-0.3 []", "-0.3 []", "True True"]
