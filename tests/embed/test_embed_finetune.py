"""``sampledlm embed train --init-from RUN``: word vectors started from a trained run's (sampledlm.embed.finetune),
with the same vocabulary or a new one, and the one-line errors of what it refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import assert_one_line_error, fake_model, run_cli

from sampledlm.data.tokenizer import TextOptions
from sampledlm.embed.finetune import source_run, start_vectors
from sampledlm.embed.formats import read_model
from sampledlm.embed.train import Word2VecConfig, initial_vectors
from sampledlm.embed.vocab import read_corpus

SMALL = ["--dim", "12", "--epochs", "3", "--sample", "0", "--threads", "1"]
A, B, C = ([f"{p}{i}" for i in range(8)] for p in "abc")


def write_topics(path, groups, n, seed):
    """``n`` sentences of 8 words, each drawn from one of ``groups`` in turn."""
    rng = np.random.default_rng(seed)
    lines = [" ".join(groups[s % len(groups)][j] for j in rng.integers(0, len(groups[s % len(groups)]), size=8))
             for s in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """General text of two topics (a*, b*); a domain's text whose topics mix them the other way (a0-3 with b0-3, a4-7
    with b4-7), with and without 8 words of its own (c*); vectors of the general text, negative sampling and hs."""
    from sampledlm.cli import main

    d = tmp_path_factory.mktemp("embed-finetune")
    write_topics(d / "general.txt", [A, B], 800, seed=0)
    domain = [A[:4] + B[:4], A[4:] + B[4:]]
    write_topics(d / "domain.txt", domain, 800, seed=1)
    write_topics(d / "domain-valid.txt", domain, 100, seed=2)
    write_topics(d / "domain-new.txt", domain + [C], 600, seed=3)
    for name, args in (("neg", ["--model", "skipgram"]), ("hs", ["--objective", "hs"])):
        with pytest.raises(SystemExit) as e:
            main(["embed", "train", str(d / "general.txt"), "-o", str(d / name), "--min-count", "1", *SMALL, *args])
        assert e.value.code == 0
    return d


def train(capsys, *args):
    code, _, err = run_cli(["embed", "train", *map(str, args)], capsys)
    return code, err


def sgns_loss(path, text, window: int = 2, negatives: int = 5) -> float:
    """Mean negative-sampling loss of the vectors in ``path`` on the (word, context) pairs of ``text``, with the
    same uniform negatives for every model (seeded)."""
    _, vocab, t = read_model(str(path))
    w_in, w_out = t["input"].astype(np.float64), t["output"].astype(np.float64)
    ids = [[vocab.index[w] for w in line.split()] for line in text.read_text().splitlines()]
    pairs = np.array([(s[i], s[j]) for s in ids for i in range(len(s))
                      for j in range(max(0, i - window), min(len(s), i + window + 1)) if j != i])
    neg = np.random.default_rng(0).integers(0, len(vocab), size=(len(pairs), negatives))
    pos = np.einsum("nd,nd->n", w_in[pairs[:, 0]], w_out[pairs[:, 1]])
    negs = np.einsum("nd,nkd->nk", w_in[pairs[:, 0]], w_out[neg])
    return float(np.mean(np.logaddexp(0, -pos) + np.logaddexp(0, negs).sum(axis=1)))


def test_the_same_vocabulary_starts_from_the_source_vectors(corpus, tmp_path, capsys):
    source = source_run(str(corpus / "neg"))
    cfg = Word2VecConfig(model="skipgram", dim=12, seed=5)
    vocab, _ = read_corpus([(str(corpus / "domain.txt"), TextOptions())], words=source.vocab.words)
    w_in, w_out, origin = start_vectors(source, vocab, cfg)
    assert np.array_equal(w_in, source.tensors["input"]) and np.array_equal(w_out, source.tensors["output"])
    assert origin == {"run": str(corpus / "neg"), "vocabulary": "same", "source_words": 16, "shared_words": 16,
                      "new_words": 0, "output": "copied"}

    # a learning rate too small to move a float32: the run's vectors are its source's
    code, err = train(capsys, corpus / "domain.txt", "--init-from", corpus / "neg", "--epochs", "1", "--alpha",
                      "1e-30", "--threads", "1", "-o", tmp_path / "ft")
    assert code == 0, err
    assert f"starting from {corpus / 'neg'}: vocabulary same (16 words shared, 0 new)" in err
    _, vocab, tensors = read_model(str(tmp_path / "ft"))
    assert vocab.words == source.vocab.words
    for name in ("input", "output"):
        np.testing.assert_allclose(tensors[name], source.tensors[name], rtol=1e-6, atol=1e-20)
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["data"]["init_from"] == origin
    assert (config["word2vec"]["model"], config["word2vec"]["dim"], config["word2vec"]["epochs"]) == ("skipgram", 12, 1)
    assert config["word2vec"]["min_count"] == 1  # the source's, which made the words (the default 5 was recorded)


def test_fine_tuning_scores_the_new_text_better(corpus, tmp_path, capsys):
    code, err = train(capsys, corpus / "domain.txt", "--init-from", corpus / "neg", "--epochs", "3", "--sample", "0",
                      "--threads", "1", "-o", tmp_path / "ft")
    assert code == 0, err
    before = sgns_loss(corpus / "neg", corpus / "domain-valid.txt")
    assert sgns_loss(tmp_path / "ft", corpus / "domain-valid.txt") < 0.8 * before


def test_a_new_vocabulary_keeps_the_shared_words_vectors(corpus, tmp_path, capsys):
    source = source_run(str(corpus / "neg"))
    cfg = Word2VecConfig(model="skipgram", dim=12, min_count=1, seed=3)
    vocab, _ = read_corpus([(str(corpus / "domain-new.txt"), TextOptions())], min_count=1)
    w_in, w_out, origin = start_vectors(source, vocab, cfg)
    new = [vocab.index[w] for w in C]
    for w in A + B:
        assert np.array_equal(w_in[vocab.index[w]], source.tensors["input"][source.vocab.index[w]])
        assert np.array_equal(w_out[vocab.index[w]], source.tensors["output"][source.vocab.index[w]])
    assert np.array_equal(w_in[new], initial_vectors(len(vocab), cfg)[new]) and not w_out[new].any()
    assert (origin["vocabulary"], origin["shared_words"], origin["new_words"]) == ("mapped", 16, 8)

    code, err = train(capsys, corpus / "domain-new.txt", "--init-from", corpus / "neg", "--min-count", "1",
                      "--epochs", "1", "--threads", "1", "-o", tmp_path / "ft")
    assert code == 0, err
    assert "vocabulary mapped (16 words shared, 8 new)" in err
    info = json.loads((tmp_path / "ft" / "config.json").read_text())["data"]["init_from"]
    assert info == {**origin, "run": str(corpus / "neg")}


def test_hierarchical_softmax_keeps_its_nodes_only_for_the_same_tree(corpus):
    source = source_run(str(corpus / "hs"))
    cfg = Word2VecConfig(objective="hs", dim=12)
    vocab, _ = read_corpus([(str(corpus / "general.txt"), TextOptions())], words=source.vocab.words)
    _, nodes, origin = start_vectors(source, vocab, cfg)
    assert origin["output"] == "copied" and np.array_equal(nodes, source.tensors["nodes"])
    vocab, _ = read_corpus([(str(corpus / "domain-new.txt"), TextOptions())], min_count=1)
    w_in, nodes, origin = start_vectors(source, vocab, cfg)
    assert origin["output"] == "restarted" and nodes.shape == (len(vocab) - 1, 12) and not nodes.any()
    assert np.array_equal(w_in[vocab.index["a3"]], source.tensors["input"][source.vocab.index["a3"]])


def test_init_from_reads_from_a_settings_file(corpus, tmp_path, capsys):
    (tmp_path / "ft.toml").write_text(f'init_from = "{corpus / "neg"}"\nepochs = 1\nthreads = 1\n')
    code, err = train(capsys, corpus / "domain.txt", "--config", tmp_path / "ft.toml", "-o", tmp_path / "ft")
    assert code == 0, err
    assert json.loads((tmp_path / "ft" / "config.json").read_text())["data"]["init_from"]["run"] == str(corpus / "neg")


@pytest.mark.parametrize("source, args, words", [
    ("neg", ["--dim", "10"], "(--dim 12 there, 10 here); leave --dim out"),
    ("neg", ["--model", "cbow"], "(--model skipgram there, cbow here); leave --model out"),
    ("neg", ["--objective", "hs"], "leave --objective out"),
    ("neg", ["--lowercase"], "(--lowercase false there, true here)"),
    ("nope", [], "--init-from {d}/nope: no such run directory"),
    ("empty", [], "--init-from {d}/empty: a directory, but no model in it (no config.json)"),
    ("domain.txt", [], "--init-from {d}/domain.txt: is a file, not a run directory"),
    ("maxent", [], "--init-from {d}/maxent: holds a model of family maxent, not word embeddings"),
])
def test_bad_uses_are_one_line_errors(corpus, tmp_path, capsys, source, args, words):
    fake_model(corpus / "maxent", "maxent")
    (corpus / "empty").mkdir(exist_ok=True)
    code, err = train(capsys, corpus / "domain.txt", "--init-from", corpus / source, *args, "-o", tmp_path / "ft")
    assert_one_line_error(code, err, words.format(d=corpus), tmp_path / "ft")
