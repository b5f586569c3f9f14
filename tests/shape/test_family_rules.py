"""Family rules live in the family: no code outside an objective's or a model's own module tests its name, and nothing
probes an objective with ``hasattr`` for what it can do (hooks of ``OutputObjective`` and ``NeuralScorer`` say it)."""

from __future__ import annotations

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "sampledlm"


def names(registry: str) -> set[str]:
    tree = ast.parse((SRC / registry).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.AnnAssign, ast.Assign)) and isinstance(node.value, ast.Dict):
            keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(keys) >= 3:
                return keys
    raise AssertionError(f"no registry dict in {registry}")


def comparisons_with(path: pathlib.Path, kinds: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in kinds:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} compares with {side.value!r}")
    return found


def test_no_code_outside_a_family_tests_an_objective_or_a_model_kind():
    objectives, models = names("objectives/registry.py"), names("neural/registry.py")
    assert {"hsm", "nce", "softmax"} <= objectives and {"ffnn", "gru"} <= models
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("objectives/", "demo/", "maxent/", "embed/")) or rel in (
                "neural/registry.py", "neural/rnn.py", "cli/maxent.py", "cli/embed.py"):
            continue  # an objective's and a model's own module may name itself; the demo names what it trains;
            # maxent and word2vec have objectives of their own (binary/softmax, neg/hs), named in their modules
        found += comparisons_with(path, (objectives | models) - {"class"})
    assert found == []


def test_nothing_probes_an_objective_with_hasattr():
    found = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hasattr" and len(node.args) == 2 \
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value in ("set_backoff",
                                                                                          "set_word_classes"):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == []
