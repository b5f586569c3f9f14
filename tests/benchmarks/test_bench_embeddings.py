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


def _row(name, which, ws, sl, add):
    return {"name": name, "title": name, "which": which, "ws353": ws, "simlex": sl, "add": add, "short": True}


def test_nnlm_conclusion_reads_each_model_against_word2vec_on_the_same_text():
    from benchmarks.embeddings import conclusion

    res = {"ptb_word2vec": {"ws353": 0.20, "simlex": 0.12, "add": 0.02},
           "summary": [{"ours_ws353": (0.27, 0.01)}],
           "nnlm": [_row("ffnn3", "input", 0.19, 0.03, 0.005), _row("ffnn3", "output", 0.10, 0.08, 0.006),
                    _row("gru", "input", 0.21, 0.125, 0.021), _row("gru", "output", 0.21, 0.125, 0.021)]}
    text = conclusion(res)
    assert "ffnn3, its input vectors" in text and "gru, its one tied table" in text
    assert "gru: the projections are embeddings as far as similarity goes" in text
    assert "ffnn3: related words (WS-353) end up as close" in text
    assert "as often as with word2vec for gru only" in text
    assert "0.270, against 0.200 on PTB alone" in text


def test_one_thread_note_compares_the_sides_from_the_run():
    from benchmarks.embeddings import one_thread_note

    two = [{"side": s, "model": "skipgram", "objective": "neg", "cpu_seconds": 4.0, "seconds": 8.0} for s in ("ours", "gensim")]
    one = [{"side": s, "seed": 1, "ws353": 0.27, "simlex": 0.18, "words_per_s": w, "cpu_seconds": 3.0, "seconds": 6.0,
            "load": 4.0} for s, w in (("ours", 300_000), ("gensim", 150_000))]
    res = {"summary": [{"model": "skipgram", "objective": "neg", "ours_ws353": (0.28, 0.02), "ours_simlex": (0.18, 0.01),
                        "ours_words_per_s": (280_000, 0), "gensim_ws353": (0.20, 0.01), "gensim_simlex": (0.18, 0.01),
                        "gensim_words_per_s": (140_000, 0)}], "runs": two, "one_thread": one}
    text = one_thread_note(res)
    assert "ours: WS-353 0.280 on two threads against 0.270 on one (within the seeds' spread, 0.020)" in text
    assert "gensim: WS-353 0.200 on two threads against 0.270 on one (outside" in text
    assert "280,000 words/s on two threads against 300,000 on one (x0.93)" in text
    assert "buys little or nothing here" in text  # the process got no more CPU time per second on two threads
