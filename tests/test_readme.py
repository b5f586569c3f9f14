"""The README cannot drift from the tool: its command blocks run as written, its test command is CI's, its results
table is generated from the results pages, its links resolve, and it stays short (250 lines of 120 characters).

The blocks run as those of the docs pages do (tests/test_docs.py, helpers.run_blocks): in order, in a fresh
directory holding train.txt, valid.txt and test.txt; ``<!-- skip-test: REASON -->`` before a block leaves it out
(the set-up commands, which .ci/run runs)."""

import re

import pytest
from helpers import REPO, code_blocks, run_blocks, write_docs_corpus

README = REPO / "README.md"


def section(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(name)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"README has no '## {name}' section"
    return m.group(1)


@pytest.mark.slow
def test_readme_blocks_run_as_written(tmp_path):
    blocks = code_blocks(README)
    quick = [b for b in blocks if b.lang == "sh" and b.skip is None]
    assert quick and all(ln.startswith("sampledlm ") for b in quick for ln in b.code.splitlines() if ln.strip())
    assert run_blocks(blocks, write_docs_corpus(tmp_path))


def test_ci_runs_the_readme_test_command():
    install, tests = re.findall(r"```sh\n(.*?)```", section("Set up"), re.S)[:2]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.strip() in ci.splitlines()
    assert "sampledlm demo" in install
    assert "torch" not in install, "the set-up command must leave the user's torch alone"


def test_the_results_tables_are_generated_from_the_results():
    from benchmarks import headline

    rows = headline.collect(str(REPO / "docs" / "results"))
    assert rows and all(r["test_ppl"] > 1 for r in rows)
    assert headline.main(["--check", "--readme", str(README), "--results", str(REPO / "docs" / "results")]) == 0
    table = section("Results")
    assert table.count("\n| ") == len(rows) + 1  # the header and one line per row
    assert "+dirty" not in table and not re.search(r"\b[0-9a-f]{7}\b", table), "the README names no commit"


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250
    long = [i + 1 for i, ln in enumerate(lines) if len(ln) > 120]
    assert long == [], f"README lines over 120 characters: {long}"


def test_readme_links_resolve():
    text = README.read_text(encoding="utf-8")
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if "://" in link:
            continue
        assert (REPO / link.split("#")[0]).exists(), f"README links to {link}, which is not there"


def test_readme_installs_and_runs_tests_with_the_two_commands_only():
    blocks = [b for b in code_blocks(README) if b.skip is not None]
    assert [b.code.strip() for b in blocks] == ["pip install -e . && sampledlm demo",
                                                "pip install -e '.[test]' && python -m pytest -q"]


def test_the_layout_section_names_the_tree():
    """Each folder and file the README's layout names is there (indented names: inside src/sampledlm), and it names
    every package of src/sampledlm (the top-level modules it names are the main ones, not all)."""
    block = re.search(r"```text\n(.*?)```", section("Layout"), re.S).group(1)
    src = REPO / "src" / "sampledlm"
    named = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if indent > 2 or not line.strip():  # a description's continuation
            continue
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split()
        named += [(src if indent == 2 else REPO) / n for n in names]
    assert [str(p) for p in named if not p.exists()] == []
    packages = {p.name for p in src.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages - {p.name for p in named if p.parent == src} == set()
