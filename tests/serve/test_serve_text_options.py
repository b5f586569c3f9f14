"""A token list sent to the server is read as the Python API reads one: each token normalised as the model's text
was. Only strings were; with a --lowercase model an upper-case token in a list, a history or a /next candidate
was scored as <unk>, without a word."""

from __future__ import annotations

import pytest
from helpers import run_cli

pytest.importorskip("aiohttp")

import sampledlm  # noqa: E402
from sampledlm.loader import load_model  # noqa: E402
from sampledlm.serve.app import Server  # noqa: E402
from sampledlm.serve.client import Client  # noqa: E402


def test_token_lists_are_normalised_as_the_models_text_was(tiny_corpus, tmp_path, capsys):
    run = tmp_path / "lc"
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "-d", "8", "--hidden", "8", "--epochs", "1", "--threads", "1", "--lowercase", "-o",
                            str(run)], capsys)
    assert code == 0, err
    words = tiny_corpus["test"].read_text().split()[:3]
    upper = [w.upper() for w in words]
    lm = sampledlm.load(run)
    server = Server(load_model(str(run))).start()
    try:
        c = Client(server.url)
        got = c.score([" ".join(upper), upper])["sentences"]
        assert got[0]["oovs"] == got[1]["oovs"] == 0
        assert got[1]["ln"] == pytest.approx(got[0]["ln"], abs=1e-5)
        assert got[1]["ln"] == pytest.approx(lm.logprob(" ".join(words)), abs=1e-4)
        after = c.next_words([(upper[:2], [upper[2], words[2]]), (" ".join(upper[:2]), [upper[2]])])
        assert after[0][0] == pytest.approx(after[0][1], abs=1e-6) and after[1][0] == pytest.approx(after[0][1], abs=1e-5)
    finally:
        server.close(timeout=30)
