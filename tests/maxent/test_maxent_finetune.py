"""``sampledlm maxent train --init-from MODEL``: a new run from a trained model's weights (sampledlm.maxent.finetune),
with the same vocabulary or a new one, and the one-line errors of what it refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import assert_one_line_error, fake_model, run_cli, synthetic_sentences, write_corpus

from sampledlm.data.corpus import load_ids
from sampledlm.data.tokenizer import TextOptions
from sampledlm.data.vocab import Vocab
from sampledlm.maxent.features import FeatureSet
from sampledlm.maxent.finetune import Start
from sampledlm.maxent.scorer import MaxEntModel


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """General text, a domain's text (other bigrams, 20 words of its own) and two models of the general text:
    binary Feat-II at negative rate 0.5, softmax bigram+trigram hashed into 300 slots."""
    from sampledlm.cli import main

    d = tmp_path_factory.mktemp("maxent-finetune")
    sents = synthetic_sentences(600, 40, seed=3)
    write_corpus(d / "train.txt", sents[:500])
    write_corpus(d / "valid.txt", sents[500:])
    write_corpus(d / "domain.txt", synthetic_sentences(300, 60, seed=9))
    write_corpus(d / "domain-valid.txt", synthetic_sentences(80, 60, seed=10))
    for name, args in (("binary", ["--features", "feat-ii", "--neg-rate", "0.5", "--trigger-window", "4",
                                   "--trigger-gap", "1", "--trigger-min-count", "1"]),
                       ("hashed", ["--objective", "softmax", "--hash-size", "300"])):
        with pytest.raises(SystemExit) as e:
            main(["maxent", "train", "--train", str(d / "train.txt"), "--valid", str(d / "valid.txt"), "--epochs", "3",
                  "-o", str(d / name), *args])
        assert e.value.code == 0
    return d


def train(capsys, *args):
    code, _, err = run_cli(["maxent", "train", *map(str, args)], capsys)
    return code, err


def ppl(capsys, model, text) -> float:
    code, out, err = run_cli(["eval", str(model), "--test", str(text), "--json"], capsys)
    assert code == 0, err
    return json.loads(out)["ppl"]


def start_model(src, vocab: Vocab, text) -> tuple[MaxEntModel, Vocab, Start]:
    """The new run's model before its first step, built as ``maxent train --init-from`` builds it."""
    source, src_vocab = MaxEntModel.load(str(src))
    start = Start.of(source, src_vocab, vocab, str(src))
    ids = np.asarray(load_ids(str(text), vocab, TextOptions()))
    features = start.features(FeatureSet.build(ids, len(vocab), source.features.spec,
                                               hash_size=source.features.hash_size))
    model = MaxEntModel(features, source.objective, source.alpha)
    model.init_unigram(vocab.counts)
    start.copy_weights(model)
    return model, src_vocab, start


def test_the_same_vocabulary_starts_from_the_source_model(corpus, tmp_path, capsys):
    """Every source pair keeps its weight exactly; the domain's other pairs start at 0; the model scores any text as
    its source does (epoch 0 of the new run), at another --neg-rate too (calibration undone at the new rate)."""
    src = corpus / "binary"
    source, vocab = MaxEntModel.load(str(src))
    model, _, _ = start_model(src, vocab, corpus / "domain.txt")
    pos = np.searchsorted(model.features.pair_keys(), model.features.keys_of(source.features.context_pairs()))
    assert np.array_equal(model.theta[pos], source.theta)  # a copy: exact
    others = np.setdiff1d(np.arange(model.features.num_pairs), pos)
    assert len(others) > 0 and not model.theta[others].any()
    assert model.u + model._shift() == pytest.approx(source.u, rel=1e-12, abs=1e-12)
    ids = np.asarray(load_ids(str(corpus / "domain-valid.txt"), vocab, TextOptions()))
    assert model.perplexity(ids) == pytest.approx(source.perplexity(ids), rel=1e-9)

    code, err = train(capsys, "--init-from", src, "--train", corpus / "domain.txt", "--valid",
                      corpus / "domain-valid.txt", "--epochs", "1", "--neg-rate", "1", "-o", tmp_path / "ft")
    assert code == 0, err
    assert f"starting from {src}: vocabulary same ({len(vocab)} words shared, 0 new)" in err
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["init_from"] == {"run": str(src), "vocabulary": "same", "source_words": len(vocab),
                                   "shared_words": len(vocab), "new_words": 0}
    assert config["training"]["epochs"][0]["valid_ppl"] == pytest.approx(ppl(capsys, src, corpus / "domain-valid.txt"),
                                                                          rel=1e-9)
    assert config["maxent"]["features"] == json.loads((src / "config.json").read_text())["maxent"]["features"]
    assert config["maxent"]["alpha"] == 1.0 and config["train_file"] == str(corpus / "domain.txt")


def test_fine_tuning_scores_the_new_text_better(corpus, tmp_path, capsys):
    code, err = train(capsys, "--init-from", corpus / "binary", "--train", corpus / "domain.txt", "--valid",
                      corpus / "domain-valid.txt", "--epochs", "3", "-o", tmp_path / "ft")
    assert code == 0, err
    before = ppl(capsys, corpus / "binary", corpus / "domain-valid.txt")
    assert ppl(capsys, tmp_path / "ft", corpus / "domain-valid.txt") < 0.8 * before


def test_a_new_vocabulary_keeps_the_shared_words_weights(corpus, tmp_path, capsys):
    src = corpus / "binary"
    code, _, err = run_cli(["vocab", str(corpus / "domain.txt"), "-o", str(tmp_path / "domain.vocab")], capsys)
    assert code == 0, err
    full = Vocab.load(str(tmp_path / "domain.vocab"))  # the general text's words and 20 more: drop 3 of the former
    keep = [i for i, w in enumerate(full.words) if w not in ("w1", "w2", "w5")]
    vocab = Vocab([full.words[i] for i in keep], full.counts[keep])
    vocab.save(str(tmp_path / "vocab.txt"))
    model, src_vocab, start = start_model(src, vocab, corpus / "domain.txt")
    source, _ = MaxEntModel.load(str(src))
    shared = [w for w in vocab.words if w in src_vocab.index]
    assert 0 < len(shared) < len(vocab)
    a = [src_vocab.index[w] for w in shared]
    b = [vocab.index[w] for w in shared]
    assert model.u[b] + model._shift() == pytest.approx(source.u[a], rel=1e-12, abs=1e-12)
    # the bigram pairs, translated by hand word by word (<s>: the vocabulary's size)
    ctx, words = source.features.context_pairs()[0]
    name = [src_vocab.words[int(c)] if c < len(src_vocab) else "<s>" for c in ctx]
    keep = np.array([n in vocab.index or n == "<s>" for n in name]) & \
        np.array([src_vocab.words[int(w)] in vocab.index for w in words])
    new_ctx = [vocab.index[n] if n != "<s>" else len(vocab) for n, k in zip(name, keep) if k]
    new_w = [vocab.index[src_vocab.words[int(w)]] for w, k in zip(words, keep) if k]
    assert 0 < keep.sum() < len(keep)
    pos = np.searchsorted(model.features.pair_keys(), model.features.keys_of([(np.array(new_ctx), np.array(new_w))]))
    assert np.array_equal(model.theta[pos], source.theta[:len(words)][keep])

    code, err = train(capsys, "--init-from", src, "--vocab", tmp_path / "vocab.txt", "--train", corpus / "domain.txt",
                      "--valid", corpus / "domain-valid.txt", "--epochs", "1", "-o", tmp_path / "ft")
    assert code == 0, err
    info = json.loads((tmp_path / "ft" / "config.json").read_text())["init_from"]
    assert info == {**start.origin, "vocabulary": "mapped", "source_words": len(src_vocab),
                    "shared_words": len(shared), "new_words": len(vocab) - len(shared)}
    assert f"vocabulary mapped ({len(shared)} words shared, {len(vocab) - len(shared)} new)" in err


def test_a_shard_gets_its_own_words_weights(corpus):
    """A rank of --ranks R trains a shard of the dictionary: the weights it starts from are the full model's."""
    src = corpus / "binary"
    _, vocab = MaxEntModel.load(str(src))
    full, _, start = start_model(src, vocab, corpus / "domain.txt")
    owned = np.arange(len(vocab)) % 2 == 1
    shard = MaxEntModel(full.features.restrict(owned), full.objective, full.alpha)
    shard.init_unigram(vocab.counts)
    start.copy_weights(shard)
    assert np.array_equal(shard.theta, full.theta[owned[full.features.gword]])
    assert np.array_equal(shard.u, full.u)


def test_a_hashed_model_starts_from_its_table(corpus, tmp_path, capsys):
    """On the source's own text the dictionary is the source's, so is every slot: the run starts as the source."""
    src = corpus / "hashed"
    code, err = train(capsys, "--init-from", src, "--train", corpus / "train.txt", "--valid", corpus / "valid.txt",
                      "--epochs", "1", "-o", tmp_path / "ft")
    assert code == 0, err
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["maxent"]["hash_size"] == 300 and config["maxent"]["objective"] == "softmax"
    assert config["training"]["epochs"][0]["valid_ppl"] == pytest.approx(ppl(capsys, src, corpus / "valid.txt"),
                                                                          rel=1e-9)


def test_init_from_reads_from_a_settings_file(corpus, tmp_path, capsys):
    (tmp_path / "ft.toml").write_text(f'init_from = "{corpus / "binary"}"\ntrain = "{corpus / "domain.txt"}"\n'
                                      f'valid = "{corpus / "domain-valid.txt"}"\nepochs = 1\n')
    code, err = train(capsys, "--config", tmp_path / "ft.toml", "-o", tmp_path / "ft")
    assert code == 0, err
    assert json.loads((tmp_path / "ft" / "config.json").read_text())["init_from"]["run"] == str(corpus / "binary")


@pytest.mark.parametrize("source, args, words", [
    ("hashed", ["--hash-size", "100"], "(--hash-size 300 there, 100 here); leave --hash-size out"),
    ("hashed", ["--features", "bigram"], "leave --features out"),
    ("binary", ["--objective", "softmax"], "(--objective binary there, softmax here)"),
    ("binary", ["--trigger-window", "5"], "leave --trigger-window out"),
    ("binary", ["--lowercase"], "(--lowercase false there, true here)"),
    ("nope", [], "--init-from {d}/nope: no such run directory"),
    ("train.txt", [], "--init-from {d}/train.txt: is a file, not a run directory"),
    ("neural", [], "--init-from {d}/neural: holds a model of family neural, not a maxent model"),
])
def test_bad_uses_are_one_line_errors(corpus, tmp_path, capsys, source, args, words):
    fake_model(corpus / "neural", "neural")
    code, err = train(capsys, "--init-from", corpus / source, "--train", corpus / "domain.txt", "--valid",
                      corpus / "domain-valid.txt", *args, "-o", tmp_path / "ft")
    assert_one_line_error(code, err, words.format(d=corpus), tmp_path / "ft")


def test_the_source_settings_given_again_are_accepted(corpus, tmp_path, capsys):
    code, err = train(capsys, "--init-from", corpus / "hashed", "--train", corpus / "domain.txt", "--valid",
                      corpus / "domain-valid.txt", "--hash-size", "300", "--objective", "softmax", "--features",
                      "feat-i", "--epochs", "1", "-o", tmp_path / "ft")
    assert code == 0, err
