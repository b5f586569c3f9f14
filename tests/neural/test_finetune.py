"""Training further and starting from another run: --resume of a finished run with more epochs, --init-from RUN
(same vocabulary or a mapped one), and what is refused."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file
from helpers import run_cli, synthetic_sentences, write_corpus

from sampledlm.neural.rundir import load_run

SMALL = ["-d", "8", "--hidden", "16", "--threads", "1"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("finetune")
    sents = synthetic_sentences(300, 40, seed=3)
    write_corpus(d / "train.txt", sents[:200])
    write_corpus(d / "valid.txt", sents[200:240])
    write_corpus(d / "domain.txt", synthetic_sentences(120, 60, seed=9))  # a vocabulary of its own, in part
    write_corpus(d / "domain-valid.txt", synthetic_sentences(40, 60, seed=10))
    return d


def train(capsys, *args):
    code, out, err = run_cli(["train", *map(str, args)], capsys)
    return code, err


def ppl(capsys, run, test) -> float:
    code, out, err = run_cli(["eval", str(run), "--test", str(test), "--json"], capsys)
    assert code == 0, err
    return json.loads(out)["ppl"]


@pytest.mark.parametrize("objective", [[], ["--objective", "binary", "--neg-rate", "0.2"]], ids=["softmax", "binary"])
def test_a_finished_run_trains_further_with_more_epochs(corpus, tmp_path, capsys, private_cache, objective):
    run = tmp_path / "run"
    code, err = train(capsys, "--train", corpus / "train.txt", "--valid", corpus / "valid.txt", "--epochs", "1",
                      *SMALL, *objective, "-o", run)
    assert code == 0, err
    first = (run / "metrics.jsonl").read_text().splitlines()
    code, err = train(capsys, "--resume", run, "--epochs", "1")
    assert code == 1 and "already finished after 1 epoch " in err and "--epochs" in err and "--init-from" in err
    code, err = train(capsys, "--resume", run, "--epochs", "2")
    assert code == 0, err
    metrics = (run / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 2 and metrics[0] == first[0]
    assert json.loads(metrics[1])["valid_ppl"] < json.loads(first[0])["valid_ppl"]  # it went on learning
    assert json.loads((run / "config.json").read_text())["train"]["epochs"] == 2


@pytest.mark.parametrize("objective", [[], ["--objective", "binary", "--neg-rate", "0.2"]], ids=["softmax", "binary"])
def test_init_from_starts_from_the_source_weights(corpus, tmp_path, capsys, private_cache, objective):
    """With a learning rate too small to move a float32 weight, the new run's model is its source's: the same
    perplexity on any text (binary: its calibration undone for training and done again at the end)."""
    src = tmp_path / "src"
    code, err = train(capsys, "--train", corpus / "train.txt", "--valid", corpus / "valid.txt", "--epochs", "1",
                      *SMALL, *objective, "-o", src)
    assert code == 0, err
    code, err = train(capsys, "--init-from", src, "--train", corpus / "domain.txt", "--valid",
                      corpus / "domain-valid.txt", "--epochs", "1", "--lr", "1e-30", "--threads", "1", "-o",
                      tmp_path / "ft")
    assert code == 0, err
    assert "vocabulary same" in err
    for test in ("valid.txt", "domain-valid.txt"):
        assert ppl(capsys, tmp_path / "ft", corpus / test) == pytest.approx(ppl(capsys, src, corpus / test), rel=1e-9)
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["data"]["init_from"]["run"] == str(src) and config["data"]["init_from"]["vocabulary"] == "same"
    assert config["model"] == json.loads((src / "config.json").read_text())["model"]
    assert config["train"]["lr"] == 1e-30 and config["data"]["train"] == str(corpus / "domain.txt")


def test_init_from_with_a_new_vocabulary_keeps_the_shared_words_rows(corpus, tmp_path, capsys, private_cache):
    src = tmp_path / "src"
    assert train(capsys, "--train", corpus / "train.txt", "--valid", corpus / "valid.txt", "--epochs", "1", *SMALL,
                 "-o", src)[0] == 0
    code, err = train(capsys, "--init-from", src, "--train", corpus / "domain.txt", "--valid",
                      corpus / "domain-valid.txt", "--epochs", "1", "--lr", "1e-30", "--min-count", "1",
                      "--threads", "1", "-o", tmp_path / "ft")
    assert code == 0, err
    a_model, _, a_vocab, _ = load_run(str(src))
    b_model, _, b_vocab, config = load_run(str(tmp_path / "ft"))
    info = config["data"]["init_from"]
    shared = [w for w in b_vocab.words if w in a_vocab.index]
    assert info["vocabulary"] == "mapped" and info["shared_words"] == len(shared) and info["new_words"] > 0
    assert f"{info['shared_words']:,} words shared" in err
    a, b = a_model.state_dict(), b_model.state_dict()
    table = next(k for k, t in a.items() if t.dim() == 2 and t.shape[0] == len(a_vocab))  # the tied word table
    rows_a = torch.stack([a[table][a_vocab.index[w]] for w in shared])
    rows_b = torch.stack([b[table][b_vocab.index[w]] for w in shared])
    assert torch.equal(rows_a, rows_b) and b[table].shape[0] == len(b_vocab)


@pytest.mark.parametrize("args, words", [
    (["--hidden", "8"], "got --hidden"),
    (["--objective", "nce"], "got --objective"),
    (["--lowercase"], "got --lowercase"),
    (["--resume", "{src}"], "give one of them"),
])
def test_init_from_refuses_what_would_change_the_model(corpus, tmp_path, capsys, private_cache, args, words):
    src = tmp_path / "src"
    assert train(capsys, "--train", corpus / "train.txt", "--valid", corpus / "valid.txt", "--epochs", "1", *SMALL,
                 "-o", src)[0] == 0
    code, err = train(capsys, "--init-from", src, "--train", corpus / "domain.txt", "--valid",
                      corpus / "domain-valid.txt", *[a.format(src=src) for a in args], "-o", tmp_path / "ft")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and words in lines[0], err
    assert not (tmp_path / "ft").exists()
    code, err = train(capsys, "--init-from", tmp_path / "nope", "--train", corpus / "domain.txt", "--valid",
                      corpus / "domain-valid.txt", "-o", tmp_path / "ft")
    assert code == 1 and "no such run directory" in err


@pytest.mark.parametrize("objective", ["class", "hsm", "adaptive"])
def test_init_from_a_structured_output_refuses_a_new_vocabulary_up_front(corpus, tmp_path, capsys, private_cache,
                                                                         objective, monkeypatch):
    """Its classes, tree or bands are the vocabulary's: a new one failed on a tensor's shape, or named a flag the
    user never gave; its own vocabulary still works."""
    src = tmp_path / "src"
    code, err = train(capsys, "--train", corpus / "train.txt", "--valid", corpus / "valid.txt", "--epochs", "1",
                      "--model", "gru", "-d", "8", "--hidden", "8", "--objective", objective, "-o", src)
    assert code == 0, err
    base = ["--init-from", src, "--train", corpus / "domain.txt", "--valid", corpus / "domain-valid.txt", "--epochs",
            "1", "--threads", "1"]
    code, err = train(capsys, *base, "--min-count", "1", "-o", tmp_path / "ft")
    assert code == 1 and f"its output ({objective}" in err and "a new vocabulary" in err, err
    assert not (tmp_path / "ft").exists()
    from sampledlm.data import clusters

    def no_clustering(*args, **kwargs):  # hsm's tree came out otherwise on the new text: a refusal, minutes at large V
        raise AssertionError("the new text was clustered again")

    monkeypatch.setattr(clusters, "cached_exchange_classes", no_clustering)
    code, err = train(capsys, *base, "-o", tmp_path / "same")
    assert code == 0, err
    if objective in ("class", "hsm"):  # the source's classes or tree, with its weights
        names = ("parent", "side", "heads") if objective == "hsm" else ("word_class",)
        theirs, ours = (load_file(d / "model.safetensors") for d in (src, tmp_path / "same"))
        for name in names:
            key = next(k for k in theirs if k.split("/")[-1] == name)
            assert torch.equal(theirs[key], ours[key]), key
