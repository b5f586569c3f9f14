"""``sampledlm bench embeddings --quick``: the page is written with its sections (gensim's side when installed)."""

from __future__ import annotations

import pytest
from helpers import run_quick

from sampledlm.embed.evaluate import default_eval_file

NEEDS_EVAL = pytest.mark.skipif(
    not all(default_eval_file(f) for f in ("wordsim353.tsv", "simlex999.txt", "questions-words.txt")),
    reason="needs WS-353, SimLex-999 and questions-words.txt in ../shared/data/eval (or $SAMPLEDLM_EVAL)")


@NEEDS_EVAL
def test_embeddings_quick_page(tmp_path, private_cache):
    data = run_quick("embeddings", tmp_path, against="## Quality")
    page = (tmp_path / "embeddings.md").read_text()
    assert (tmp_path / "embeddings.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Speed" in page and "## Quality" in page and "Load average" in page
    sides = {row["side"] for row in data["runs"]}
    assert "ours" in sides
    if data["setup"]["gensim"]:
        assert sides == {"ours", "gensim"}
        assert all(v for f in data["files"].values() for k, v in f.items() if k != "bytes")
    assert {(s["model"], s["objective"]) for s in data["summary"]} == {("skipgram", "neg"), ("cbow", "neg"),
                                                                        ("skipgram", "hs")}
