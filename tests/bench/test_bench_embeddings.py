"""``sampledlm bench embeddings --quick``: the page is written with its sections (gensim's side when installed)."""

from __future__ import annotations


from helpers import run_quick


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
