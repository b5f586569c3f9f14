"""Exact evaluation, interpolation, run directories (load, corruption, mismatch) and the train/eval CLI."""

import json
import math
import shutil

import numpy as np
import pytest
import torch

from sampledlm.neural import rundir as runs
from sampledlm.cli import main
from sampledlm.errors import UserError
from sampledlm.lm import em_weight, interpolate, sentence_scores
from sampledlm.neural.lm import (perplexity, score_sentences,
                                stream_logprobs)
from sampledlm.neural.registry import FFNN, RNNLM
from sampledlm.objectives import make_objective

from test_train import WORDS, write_corpus  # noqa: F401  (one synthetic corpus for the trainer's tests)


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny trained FFNN run directory shared by the tests below (built through the CLI)."""
    d = tmp_path_factory.mktemp("ev")
    for name, n, seed in (("train", 80, 1), ("valid", 20, 2), ("test", 20, 3)):
        write_corpus(d / f"{name}.txt", n, seed)
    try:
        main(["train", "--train", str(d / "train.txt"), "--valid", str(d / "valid.txt"), "-o", str(d / "run"),
              "--order", "3", "-d", "6", "--hidden", "8", "--epochs", "2", "--batch-size", "16", "--lr", "0.5"])
    except SystemExit as e:
        assert e.code == 0
    return d


def test_stream_logprobs_match_a_direct_computation():
    torch.manual_seed(0)
    V = 7
    m = FFNN(V, order=2, embed_dim=3, hidden=(4,))
    obj = make_objective("softmax")
    ids = np.array([2, 3, 0, 4, 0], dtype=np.int32)
    lp = stream_logprobs(m, obj, ids, batch_size=2)
    hist = torch.tensor([[V], [2], [3], [V], [4]])  # <s> at each sentence start
    want = torch.log_softmax(m.score_all(m(hist)), -1)[torch.arange(5), torch.tensor([2, 3, 0, 4, 0])]
    np.testing.assert_allclose(lp, want.detach().double().numpy(), rtol=1e-6)
    assert perplexity(m, obj, ids) == pytest.approx(math.exp(-lp.mean()))


def test_rnn_stream_logprobs_independent_of_segment_length():
    torch.manual_seed(0)
    m = RNNLM(9, embed_dim=4, hidden=5)
    obj = make_objective("softmax")
    ids = np.array([2, 3, 0, 4, 5, 6, 0, 7, 0], dtype=np.int32)
    a = stream_logprobs(m, obj, ids, bptt=2)
    b = stream_logprobs(m, obj, ids, bptt=100)
    np.testing.assert_allclose(a, b, rtol=1e-5)
    assert len(stream_logprobs(m, obj, ids, batch_size=3)) == len(ids)


def test_sentence_scores_and_score_sentences(trained):
    model, objective, vocab, _ = runs.load_run(str(trained / "run"))
    ids = np.array(vocab.encode(["the", "cat"]) + [0] + vocab.encode(["a"]) + [0], dtype=np.int32)
    lp = stream_logprobs(model, objective, ids)
    tot, cnt = sentence_scores(lp, ids)
    assert cnt.tolist() == [3, 2] and tot.sum() == pytest.approx(lp.sum())
    s = score_sentences(model, objective, vocab, [["the", "cat"], ["a"]])
    assert s == pytest.approx(tot.tolist(), rel=1e-6)  # the FFNN's history never crosses a sentence


def test_interpolation_and_em():
    rng = np.random.default_rng(0)
    a = np.log(rng.uniform(0.01, 1, 500))
    b = np.log(rng.uniform(0.01, 1, 500))
    np.testing.assert_allclose(interpolate(a, b, 0.3), np.log(0.3 * np.exp(a) + 0.7 * np.exp(b)))
    w = em_weight(a, b)
    ll = lambda x: interpolate(a, b, x).sum()  # noqa: E731
    assert ll(w) >= max(ll(x) for x in np.linspace(0.01, 0.99, 99)) - 1e-6
    assert em_weight(a, a - 5.0) > 0.95  # the much better model takes nearly all the weight


def write_uniform_arpa(path, vocab) -> str:
    """A unigram ARPA model giving every word of ``vocab`` (and </s>) probability 1/V."""
    lp = -math.log10(len(vocab))
    lines = ["\\data\\", f"ngram 1={len(vocab) + 1}", "", "\\1-grams:", "-99\t<s>"]
    lines += [f"{lp:.7f}\t{w}" for w in vocab.words]
    path.write_text("\n".join(lines + ["", "\\end\\", ""]), encoding="utf-8")
    return str(path)


def test_eval_cli_exact_interpolated_and_per_sentence(trained, capsys, monkeypatch):
    run = str(trained / "run")
    code, out, err = run_cli(["eval", run, "--test", str(trained / "test.txt"), "--json"], capsys)
    assert code == 0
    res = json.loads(out)
    model, objective, vocab, _ = runs.load_run(run)
    from sampledlm.data.corpus import load_ids

    ids = load_ids(str(trained / "test.txt"), vocab)
    assert res["predictions"] == len(ids) and res["ppl"] == pytest.approx(perplexity(model, objective, ids))

    arpa = write_uniform_arpa(trained / "uniform.arpa", vocab)
    code, out, err = run_cli(["eval", run, "--test", str(trained / "test.txt"), "--interpolate", arpa,
                              "--weights", "auto", "--json"], capsys)
    res2 = json.loads(out)
    assert res2["component_ppl"][1] == pytest.approx(len(vocab))
    assert 0 < res2["weights"][0] < 1 and res2["interpolated_ppl"] <= res["ppl"] + 1e-6
    code, out, err = run_cli(["eval", run, "--test", str(trained / "test.txt"), "--interpolate", arpa,
                              "--weight", "1.0", "--json"], capsys)
    assert json.loads(out)["interpolated_ppl"] == pytest.approx(res["ppl"])

    code, out, err = run_cli(["eval", run, "--test", str(trained / "test.txt"), "--per-sentence"], capsys)
    lines = out.strip().split("\n")
    assert lines[0].startswith("ln_prob") and len(lines) == 21
    total = sum(float(ln.split("\t")[0]) for ln in lines[1:])
    assert math.exp(-total / len(ids)) == pytest.approx(res["ppl"], rel=1e-4)


def test_run_dir_refuses_damage_and_mismatch(trained, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(trained / "run", run)
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
    code, _, err = run_cli(["eval", str(run), "--test", str(trained / "test.txt")], capsys)
    assert code == 1 and err.startswith("sampledlm: error:") and "Traceback" not in err
    shutil.copy(trained / "run" / "model.safetensors", w)

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
    with pytest.raises(UserError, match="unknown keys"):
        runs.load_run(str(run))
    (run / "config.json").write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        runs.load_run(str(run))


def test_train_cli_errors(trained, capsys):
    t = str(trained / "train.txt")
    code, _, err = run_cli(["train", "--train", t, "--valid", t, "-o", str(trained / "run")], capsys)
    assert code == 1 and "--resume" in err
    code, _, err = run_cli(["train", "--resume", str(trained / "run"), "--hidden", "5"], capsys)
    assert code == 1 and "only --epochs" in err
    code, _, err = run_cli(["train", "--train", t, "--valid", t, "-o", str(trained / "x"), "--model", "gru",
                            "--direct"], capsys)
    assert code == 1 and "direct" in err
    code, _, err = run_cli(["train", "--train", t, "--valid", t, "-o", str(trained / "y"), "--samples", "5"], capsys)
    assert code == 1 and "--samples" in err
    code, _, err = run_cli(["train", "--resume", str(trained / "run")], capsys)
    assert code == 1 and "already finished" in err
