"""The docs site cannot drift from the tool: every command and Python block of its pages runs as written on a
small corpus, every page is in the site's navigation, every results page shows the figures written beside it.

The blocks of a page run in order in one fresh directory holding train.txt, valid.txt, test.txt and book.txt
(helpers.write_docs_corpus); ``<!-- skip-test: REASON -->`` on the line before a block leaves it out (several
machines, PTB, a GPU), ``<!-- test: background -->`` runs it in the background until the page is done (a
server), and port 8080 in a page becomes a free port (helpers.run_blocks). docs/results/ holds records of what
was run, not instructions: its blocks are not run. ``mkdocs build --strict`` itself runs in .ci/run.
"""

from __future__ import annotations

import re

import pytest
from helpers import REPO, RUN_LANGS, code_blocks, run_blocks, write_docs_corpus

DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md"))
RESULTS = DOCS / "results"


@pytest.mark.slow
@pytest.mark.parametrize("page", [p.name for p in PAGES])
def test_page_blocks_run_as_written(page, tmp_path):
    readme = {b.code for b in code_blocks(REPO / "README.md")}
    blocks = [b for b in code_blocks(DOCS / page) if b.code not in readme]  # the quick start runs in test_readme
    ran = run_blocks(blocks, write_docs_corpus(tmp_path))
    if any(b.lang in RUN_LANGS and b.skip is None for b in blocks):
        assert ran


def test_every_command_block_is_run_or_says_why_not():
    """A block of commands with no language (or another one) would be skipped silently: label it sh."""
    for path in [REPO / "README.md", *PAGES]:
        for b in code_blocks(path):
            if b.lang not in RUN_LANGS:
                starts = [ln.split()[0] for ln in b.code.splitlines() if ln.strip() and not ln.startswith(" ")]
                assert not {"sampledlm", "python", "pip", "torchrun"} & set(starts), \
                    f"{path.name}:{b.line}: a command block labelled {b.lang!r}: make it sh (or python)"
            if b.skip is not None:
                assert len(b.skip) > 5, f"{path.name}:{b.line}: say why the block is skipped"


def test_the_pytorch_module_example_runs_as_written():
    """The SampledOutput example of docs/neural.md trains a step and gives normalised probabilities."""
    block = next(b for b in code_blocks(DOCS / "neural.md") if b.lang == "python" and "SampledOutput" in b.code)
    scope: dict = {}
    exec(compile(block.code, "docs/neural.md", "exec"), scope)
    import torch

    assert torch.allclose(scope["logp"].exp().sum(1), torch.ones(4), atol=1e-4)
    hidden = scope["trunk"](scope["x"])[0].reshape(-1, 256)
    scope["out"](hidden, scope["target"]).backward()
    scope["opt"].step()  # dense gradients: plain Adam over the model takes them


def nav_pages() -> set[str]:
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    return set(re.findall(r"^\s*- (?:[^:\n]+: )?([\w/.-]+\.md)\s*$", text, re.M))


def test_every_page_is_in_the_navigation():
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - nav_pages() == set(), "add the pages to mkdocs.yml's nav"
    assert nav_pages() - pages == set(), "mkdocs.yml names pages that do not exist"


def image_links(text: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)


def test_every_results_page_shows_its_figures():
    """A PNG beside the pages belongs to the page of its name (NAME.png, NAME-*.png) and is shown there."""
    pages = {p.stem: p.read_text(encoding="utf-8") for p in RESULTS.glob("*.md")}
    for png in sorted(RESULTS.glob("*.png")):
        owner = max((n for n in pages if png.stem == n or png.stem.startswith(n + "-")), key=len, default=None)
        assert owner, f"{png.name}: no page of its name"
        assert png.name in image_links(pages[owner]), f"{owner}.md does not show {png.name}"
    for name, text in pages.items():
        for link in image_links(text):
            assert (RESULTS / link).is_file(), f"{name}.md shows {link}, which is not there"

