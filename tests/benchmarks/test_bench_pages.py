"""`sampledlm bench corpus | ngram | neural | objectives-ptb --quick`: the benchmark pages that used
to be stand-alone scripts, on the built-in corpus; and the experiments' other names."""

from __future__ import annotations

import pytest
from helpers import bench, run_quick

from benchmarks import ALIASES, EXPERIMENTS

pytestmark = pytest.mark.usefixtures("private_cache")


def test_corpus_quick(tmp_path):
    data = run_quick("corpus", tmp_path / "out", against="Against the target")
    assert [r["stage"] for r in data["rows"]][0] == "count (vocab)"
    assert all(r["tokens_per_s"] > 0 for r in data["rows"])


def test_ngram_quick(tmp_path):
    data = run_quick("ngram", tmp_path / "out")
    assert {r["smoothing"] for r in data["table"]} >= {"mkn", "kn", "wb", "jm", "katz", "addk"}
    assert data["timing_5gram"]["peak_rss_mb"] > 0
    assert all(a["lmplz"] is None for a in data["agreement"])  # not PTB: no lmplz figure to compare


def test_neural_quick(tmp_path):
    data = run_quick("neural", tmp_path / "out")
    assert data["kill9_resume"]["identical_weights"]
    assert data["runs"] and data["runs"][0]["test_ppl"] > 1
    assert 0 < data["profile"]["output_share"] < 1


def test_objectives_ptb_quick(tmp_path):
    data = run_quick("objectives-ptb", tmp_path / "out", page="objectives_ptb")
    assert {r["name"] for r in data["rows"]} == {"softmax", "binary-0.05-variable", "css-is-s250"}


def test_aliases_name_experiments():
    assert all(n in EXPERIMENTS for n in ALIASES.values()) and not set(ALIASES) & set(EXPERIMENTS)
    r = bench("--list")
    assert all(a in r.output for a in ALIASES)


def test_a_page_shows_the_figure_it_writes(tmp_path):
    """write_page puts an image link to NAME.png below the stamp unless the body places it itself."""
    from benchmarks.report import new_figure, write_page

    meta = {"machine": "m", "date": "d", "commit": "c", "python": "3", "torch": "t", "torch_threads": 1, "numpy": "n",
            "command": "python -m benchmarks x"}
    write_page(str(tmp_path), "x", "A title", meta, {}, "body text", figure=new_figure()[0])
    text = (tmp_path / "x.md").read_text()
    assert "![A title](x.png)\n\nbody text" in text and (tmp_path / "x.png").is_file()
    write_page(str(tmp_path), "y", "T", meta, {}, "see ![curve](y.png) here", figure=new_figure()[0])
    assert (tmp_path / "y.md").read_text().count("](y.png)") == 1


def test_the_stamp_counts_torch_threads_in_words(tmp_path):
    """The stamp says "1 thread" and "2 threads"."""
    from benchmarks.report import write_page

    for n, words in ((1, "(1 thread)"), (2, "(2 threads)")):
        meta = {"machine": "m", "date": "d", "commit": "c", "python": "3", "torch": "t", "torch_threads": n,
                "numpy": "n", "command": "python -m benchmarks x"}
        write_page(str(tmp_path), f"p{n}", "T", meta, {}, "body")
        assert f"torch t {words}, numpy n" in (tmp_path / f"p{n}.md").read_text()
