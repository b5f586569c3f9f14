"""Exact evaluation of neural models (stream and sentence log-probabilities) and run directories (load,
corruption, mismatch)."""

import json
import math
import shutil

import numpy as np
import pytest
import torch
from helpers import run_cli

from sampledlm.errors import UserError
from sampledlm.lm import sentence_scores
from sampledlm.neural import rundir as runs
from sampledlm.neural.lm import perplexity, score_sentences, stream_logprobs
from sampledlm.neural.registry import FFNN, RNNLM
from sampledlm.objectives import make_objective


def test_stream_logprobs_match_a_direct_computation():
    torch.manual_seed(0)
    V = 7
    m = FFNN.build(V, order=2, embed_dim=3, hidden=[4], dropout=0.0)
    obj = make_objective("softmax")
    ids = np.array([2, 3, 0, 4, 0], dtype=np.int32)
    lp = stream_logprobs(m, obj, ids, batch_size=2)
    hist = torch.tensor([[V], [2], [3], [V], [4]])  # <s> at each sentence start
    want = torch.log_softmax(m.score_all(m(hist)), -1)[torch.arange(5), torch.tensor([2, 3, 0, 4, 0])]
    np.testing.assert_allclose(lp, want.detach().double().numpy(), rtol=1e-6)
    assert perplexity(m, obj, ids) == pytest.approx(math.exp(-lp.mean()))


def test_rnn_stream_logprobs_independent_of_segment_length():
    torch.manual_seed(0)
    m = RNNLM.build(9, embed_dim=4, hidden=5, dropout=0.0, tie=False)
    obj = make_objective("softmax")
    ids = np.array([2, 3, 0, 4, 5, 6, 0, 7, 0], dtype=np.int32)
    a = stream_logprobs(m, obj, ids, bptt=2)
    b = stream_logprobs(m, obj, ids, bptt=100)
    np.testing.assert_allclose(a, b, rtol=1e-5)
    assert len(stream_logprobs(m, obj, ids, batch_size=3)) == len(ids)


def test_sentence_scores_and_score_sentences(trained_ffnn):
    model, objective, vocab, _ = runs.load_run(str(trained_ffnn / "run"))
    ids = np.array(vocab.encode(["the", "cat"]) + [0] + vocab.encode(["a"]) + [0], dtype=np.int32)
    lp = stream_logprobs(model, objective, ids)
    tot, cnt = sentence_scores(lp, ids)
    assert cnt.tolist() == [3, 2] and tot.sum() == pytest.approx(lp.sum())
    s = score_sentences(model, objective, vocab, [["the", "cat"], ["a"]])
    assert s == pytest.approx(tot.tolist(), rel=1e-6)  # the FFNN's history never crosses a sentence


def test_run_dir_refuses_damage_and_mismatch(trained_ffnn, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained_ffnn / "run", run)
    runs.load_run(str(run))  # loads as copied: nothing outside the directory is needed

    w = run / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-3] ^= 0xFF
    w.write_bytes(bytes(data))
    with pytest.raises(UserError, match="checksum"):
        runs.load_run(str(run))
    w.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(UserError, match="damaged or truncated"):
        runs.load_run(str(run))
    code, _, err = run_cli(["eval", str(run), "--test", str(trained_ffnn / "test.txt")], capsys)
    assert code == 1 and err.startswith("sampledlm: error:") and "Traceback" not in err
    shutil.copy(trained_ffnn / "run" / "model.safetensors", w)

    vocab_txt = (run / "vocab.txt").read_text()
    (run / "vocab.txt").write_text(vocab_txt.replace("cat", "cow"))
    with pytest.raises(UserError, match="does not match config.json"):
        runs.load_run(str(run))
    (run / "vocab.txt").write_text(vocab_txt)

    cfg = json.loads((run / "config.json").read_text())
    cfg["model"]["hidden"] = [9]
    (run / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match="do not match the model"):
        runs.load_run(str(run))
    cfg["model"]["hidden"] = [8]
    cfg["surprise"] = 1
    (run / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match=r"unknown key\(s\) surprise"):
        runs.load_run(str(run))
    (run / "config.json").write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        runs.load_run(str(run))


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_running_text_perplexity_does_not_depend_on_the_batch_size(cell):
    """A fault campaign's case: eval --batch-size cut the stream into that many rows, each from a fresh state."""
    from sampledlm.neural.lm import perplexity
    from sampledlm.neural.rnn import GRULM, LSTMLM
    from sampledlm.objectives import make_objective

    torch.manual_seed(0)
    model = (GRULM if cell == "gru" else LSTMLM).build(9, embed_dim=6, hidden=7, dropout=0.0, tie=False).eval()
    ids = np.random.default_rng(1).integers(0, 9, size=500)
    ids[np.random.default_rng(2).random(500) < 0.15] = 0  # </s> now and then
    obj = make_objective("softmax")
    ppl = [perplexity(model, obj, ids, batch_size=b) for b in (None, 1, 7, 64, 1000)]
    assert max(ppl) - min(ppl) < 1e-4 * ppl[0], ppl


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_a_long_sentence_is_scored_in_pieces_with_the_same_numbers(cell, monkeypatch):
    """A sentence of 200,000 words had asked for its whole [n, V] score matrix at once (2 GB at V = 1k): scored on
    its own it now goes in pieces of at most SENTENCE_TOKENS tokens, its state carried."""
    from sampledlm.neural import rnn

    torch.manual_seed(0)
    model = (rnn.GRULM if cell == "gru" else rnn.LSTMLM).build(9, embed_dim=6, hidden=7, dropout=0.0, tie=False).eval()
    ids = np.random.default_rng(1).integers(1, 9, size=300)
    ids[[40, 41, 299]] = 0  # sentences of 40, 0 and 257 words
    obj = make_objective("softmax")
    whole = stream_logprobs(model, obj, ids, independent=True)
    calls = []
    real = obj.log_prob_targets

    def counted(scorer, ctx, targets):
        calls.append(len(targets))
        return real(scorer, ctx, targets)

    monkeypatch.setattr(rnn, "SENTENCE_TOKENS", 50)
    monkeypatch.setattr(obj, "log_prob_targets", counted)
    pieces = stream_logprobs(model, obj, ids, independent=True)
    np.testing.assert_allclose(pieces, whole, rtol=1e-5)
    assert calls and max(calls) <= 50 and sum(calls) == len(ids)


def test_running_text_is_refused_where_no_model_crosses_sentences(tmp_path, run_in_process):
    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 20)
    assert run_in_process("ngram", "train", "--train", "t.txt", "--order", "2", "-o", "k.arpa",
                          cwd=tmp_path).returncode == 0
    small = ["--epochs", "1", "-d", "4", "--hidden", "4", "--threads", "1"]
    for model in ("ffnn", "gru"):
        assert run_in_process("train", "--train", "t.txt", "--valid", "t.txt", "--model", model, *small, "-o", model,
                              cwd=tmp_path).returncode == 0
    for args in (["k.arpa"], ["ffnn", "--mix", "k.arpa"]):
        r = run_in_process("eval", *args, "--test", "t.txt", "--running-text", cwd=tmp_path)
        assert r.returncode == 1 and "each sentence on its own" in r.stderr and "Traceback" not in r.stderr, r.stderr
    for args in (["gru"], ["gru", "--mix", "k.arpa"]):
        r = run_in_process("eval", *args, "--test", "t.txt", "--running-text", "--per-sentence", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
