"""The large-vocab experiment's smoke test: a tiny corpus of generated ``<doc>`` files through the recipe, KN5 (ours;
lmplz only where it is installed) and the page, never into docs/results or the committed records."""

from __future__ import annotations

import pytest

from helpers import run_quick


@pytest.mark.slow
def test_quick_large_vocab_builds_a_corpus_and_its_page(tmp_path):
    data = run_quick("large-vocab", tmp_path / "out", against="Against the issue's targets")
    assert data
