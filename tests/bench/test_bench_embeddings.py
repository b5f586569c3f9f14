"""``sampledlm bench embeddings --quick``: the page is written with its sections (gensim's side when installed)."""

from __future__ import annotations

import json

from helpers import bench


def test_embeddings_quick_page(tmp_path, private_cache):
    r = bench("embeddings", "--quick", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    page = (tmp_path / "embeddings.md").read_text()
    data = json.loads((tmp_path / "embeddings.json").read_text())["data"]
    assert (tmp_path / "embeddings.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Speed" in page and "## Quality" in page and "Load average" in page
    sides = {row["side"] for row in data["runs"]}
    assert "ours" in sides
    if data["setup"]["gensim"]:
        assert sides == {"ours", "gensim"}
        assert all(v for f in data["files"].values() for k, v in f.items() if k != "bytes")
    assert {(s["model"], s["objective"]) for s in data["summary"]} == {("skipgram", "neg"), ("cbow", "neg"),
                                                                        ("skipgram", "hs")}
