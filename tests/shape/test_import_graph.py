"""The package's imports run one way and form no cycle (computed from the code with ``ast``).

Layers, top to bottom (a module may import its own layer's siblings and anything below):
cli, demo, api and api_train (the word-level Python API and its training functions) -> loader, use, serve, states ->
neural, ngram, maxent, embed -> objectives, lm, store, config, provenance -> data, outputs -> errors, progress.
"""

from __future__ import annotations

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "sampledlm"
LAYERS = [
    {"cli", "demo", "__main__", "api", "api_train"},
    {"loader", "use", "serve", "states"},
    {"neural", "ngram", "maxent", "embed"},
    {"objectives", "lm", "store", "config", "provenance"},
    {"data", "outputs"},
    {"errors", "progress", "memory"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path) -> set[str]:
    """Every sampledlm module a file imports (at any depth of the file: lazy imports count too)."""
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("sampledlm"):
                for a in node.names:  # "from . import x" may name a submodule
                    sub = f"{target}.{a.name}"
                    out.add(sub if (SRC.parent / sub.replace(".", "/")).with_suffix(".py").exists()
                            or (SRC.parent / sub.replace(".", "/")).is_dir() else target)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("sampledlm")}
    return out - {mod}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in SRC.rglob("*.py")}


def top(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_no_import_cycles():
    g = graph()
    # a package's __init__ re-exporting its own modules is its face, not a dependency of theirs
    edges = {m: {t for t in ts if not (m.endswith(t) or t in g and t == m.rsplit(".", 1)[0])} for m, ts in g.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        for t in sorted(edges.get(m, ())):
            if t not in edges:
                continue
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_no_upward_imports():
    upward = []
    for mod, targets in graph().items():
        if mod == "sampledlm":
            continue
        for t in targets:
            a, b = top(mod), top(t)
            if b == "__init__" or a == b:
                continue
            if a in RANK and b in RANK and RANK[b] < RANK[a]:
                upward.append(f"{mod} -> {t}")
    assert upward == []


def test_every_top_level_module_has_a_layer():
    names = {p.stem if p.suffix == ".py" else p.name for p in SRC.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())}
    assert names - set(RANK) == set()


def test_the_package_never_imports_the_lab():
    """benchmarks/ and tests/ (the campaigns) import sampledlm; nothing in sampledlm imports them, lazily or not."""
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in {"benchmarks", "tests", "helpers"}]
    assert found == []
