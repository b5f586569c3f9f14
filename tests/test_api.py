"""The word-level Python API (sampledlm.load, sampledlm.Model, sampledlm.train_ngram) gives the commands' numbers."""

from __future__ import annotations

import json
import math
import pathlib

import pytest
from helpers import run_cli

import sampledlm
from sampledlm.errors import UserError

MODELS = ["kn3.arpa", "ffnn3", "gru", "melm"]
# neural models score in float32, and a sentence scored alone is a batch of another shape than in the command's
# bunches: the last bits differ (3e-8 relative seen); n-gram and maxent scores are float64 and equal to 1e-12
REL = 1e-6


def cli_scores(capsys, model: list[str], text: pathlib.Path) -> tuple[list[dict], dict]:
    """``sampledlm score MODEL... TEXT --jsonl --per-word``: the sentences' objects and the file totals."""
    code, out, err = run_cli(["score", *model, str(text), "--jsonl", "--per-word"], capsys)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()], json.loads(err.strip().splitlines()[-1])


@pytest.mark.parametrize("name", MODELS)
def test_scores_and_perplexity_equal_the_score_command(four_models, capsys, name):
    test = four_models / "test.txt"
    rows, totals = cli_scores(capsys, [str(four_models / name)], test)
    lm = sampledlm.load(four_models / name)
    lines = test.read_text().splitlines()
    assert [lm.score(line) for line in lines] == pytest.approx([r["log10"] for r in rows], rel=REL, abs=1e-12)
    assert [(s.word, s.log10_prob) for s in lm.word_scores(lines[0])] == \
        [(w["word"], pytest.approx(w["log10"], rel=REL)) for w in rows[0]["per_word"]]
    assert lm.perplexity(lines) == pytest.approx(totals["ppl"], rel=REL)
    assert lm.perplexity(test) == pytest.approx(totals["ppl"], rel=REL)  # a pathlib.Path is a file
    assert lm.score(lines[0].split()) == pytest.approx(rows[0]["log10"], rel=REL)  # a list of words alike


def test_a_mixture_equals_the_command_with_mix_and_weights(four_models, capsys):
    test = four_models / "test.txt"
    rows, totals = cli_scores(capsys, [str(four_models / "gru"), "--mix", str(four_models / "kn3.arpa"),
                                       "--weights", "0.7,0.3"], test)
    lm = sampledlm.load([four_models / "gru", four_models / "kn3.arpa"], weights=[0.7, 0.3])
    lines = test.read_text().splitlines()
    assert [lm.score(line) for line in lines] == pytest.approx([r["log10"] for r in rows], rel=REL, abs=1e-12)
    assert lm.perplexity(lines) == pytest.approx(totals["ppl"], rel=REL)


def test_a_mixture_fitted_on_held_out_text_equals_the_command(four_models, capsys):
    args = [str(four_models / "ffnn3"), "--mix", str(four_models / "kn3.arpa"), "--interp-valid",
            str(four_models / "valid.txt")]
    _, totals = cli_scores(capsys, args, four_models / "test.txt")
    lm = sampledlm.load([four_models / "ffnn3", four_models / "kn3.arpa"], valid=str(four_models / "valid.txt"))
    assert lm.perplexity(four_models / "test.txt") == pytest.approx(totals["ppl"], rel=REL)


def test_next_logprobs_are_a_normalised_distribution_over_words(four_models):
    lm = sampledlm.load(four_models / "gru")
    first = (four_models / "test.txt").read_text().split()[:2]
    dist = lm.next_logprobs(first)
    assert len(dist) == len(lm.vocab) and math.fsum(math.exp(v) for v in dist.values()) == pytest.approx(1, abs=1e-5)
    top = lm.next_logprobs(" ".join(first), top_k=3)
    assert list(top) == list(dist)[:3] and list(top.values()) == sorted(top.values(), reverse=True)
    for k in (1, 17, len(dist) - 1, len(dist)):  # the k best found without sorting all V: the same words, in order
        assert list(lm.next_logprobs(first, top_k=k).items()) == list(dist.items())[:k]
    # the next word's entry is what word_scores gives it (ln vs log10)
    sentence = (four_models / "test.txt").read_text().splitlines()[0].split()
    w, ln = lm.word_scores(sentence)[2][:2]
    assert lm.next_logprobs(sentence[:2])[w] == pytest.approx(ln, rel=1e-6)


def test_generate_equals_the_generate_command(four_models, capsys):
    code, out, err = run_cli(["generate", str(four_models / "kn3.arpa"), "-n", "3", "--seed", "7"], capsys)
    assert code == 0, err
    assert sampledlm.load(four_models / "kn3.arpa").generate(3, seed=7) == out.splitlines()


def test_ngram_train_from_sentences_equals_the_train_command(tmp_path, capsys):
    sents = ["the cat sat on the mat", "the dog sat on the log", "a cat ran to the dog"]
    (tmp_path / "train.txt").write_text("\n".join(sents) + "\n")
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "2", "-o",
                            str(tmp_path / "cli.arpa")], capsys)
    assert code == 0, err
    lm = sampledlm.train_ngram(sents, tmp_path / "api.arpa", order=2)
    assert (tmp_path / "api.arpa").read_bytes() == (tmp_path / "cli.arpa").read_bytes()
    in_memory = sampledlm.train_ngram(tmp_path / "train.txt", order=2)  # a path; nothing written
    assert in_memory.perplexity(sents) == lm.perplexity(sents) > 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["api.arpa", "cli.arpa", "train.txt"]


def test_bad_calls_are_one_line_errors(four_models, tmp_path):
    with pytest.raises(UserError, match="no such model"):
        sampledlm.load(tmp_path / "nope")
    with pytest.raises(UserError, match="second model"):
        sampledlm.load(four_models / "kn3.arpa", weights=[1.0])
    lm = sampledlm.load(four_models / "kn3.arpa")
    with pytest.raises(UserError, match="list of words"):
        lm.score(["the", 3])
    with pytest.raises(UserError, match="no sentences"):
        lm.perplexity([])
    with pytest.raises(UserError, match="top_k"):
        lm.next_logprobs("the", top_k=0)
    with pytest.raises(UserError, match="smoothing"):
        sampledlm.train_ngram(["a b"], smoothing="nope")
    with pytest.raises(UserError, match="whole number"):
        lm.generate("2")
    with pytest.raises(UserError, match="^train: no sentences"):  # not a temporary file's name
        sampledlm.train_ngram(["", "  "])
    with pytest.raises(UserError, match="unknown objective 'nope'"):
        sampledlm.train_lm(["a b"], ["a b"], tmp_path / "x", objective="nope")
    assert not (tmp_path / "x").exists()


def test_a_blank_sentence_counts_as_a_files_blank_line(four_models, tmp_path, capsys):
    """The API's perplexity of a list with blank sentences equals the commands' of the file with blank lines."""
    lines = (four_models / "test.txt").read_text().splitlines()
    blank = tmp_path / "blank.txt"
    blank.write_text("\n".join(lines[:3] + ["", "   "] + lines[3:]) + "\n")
    _, totals = cli_scores(capsys, [str(four_models / "kn3.arpa")], blank)
    lm = sampledlm.load(four_models / "kn3.arpa")
    assert lm.perplexity(blank.read_text().splitlines()) == pytest.approx(totals["ppl"], rel=1e-12)
    assert lm.perplexity(lines) == pytest.approx(totals["ppl"], rel=1e-12)
    assert lm.score("") == lm.word_scores("")[0].log10_prob  # an empty hypothesis: </s> alone


def test_train_ngram_refuses_to_replace_a_file_as_the_command_does(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("the cat sat\nthe dog sat\n")
    with pytest.raises(UserError, match="is the input"):
        sampledlm.train_ngram(train, train, order=2, force=True)
    assert train.read_text() == "the cat sat\nthe dog sat\n"
    sampledlm.train_ngram(train, tmp_path / "kn.arpa", order=2)
    before = (tmp_path / "kn.arpa").read_bytes()
    with pytest.raises(UserError, match="already exists; give --force"):
        sampledlm.train_ngram(train, tmp_path / "kn.arpa", order=3)
    assert (tmp_path / "kn.arpa").read_bytes() == before
    sampledlm.train_ngram(train, tmp_path / "kn.arpa", order=3, force=True)
    assert (tmp_path / "kn.arpa").read_bytes() != before
    sampledlm.train_ngram(train, tmp_path / "kn.bin", order=2, binary=True)
    with pytest.raises(UserError, match="already holds a binary n-gram model"):
        sampledlm.train_ngram(train, tmp_path / "kn.bin", order=2, binary=True)


def test_train_lm_equals_the_train_command(tmp_path, capsys, private_cache):
    from helpers import synthetic_sentences, write_corpus

    sents = synthetic_sentences(200, 30, seed=5)
    write_corpus(tmp_path / "train.txt", sents[:160])
    write_corpus(tmp_path / "valid.txt", sents[160:])
    args = ["--model", "gru", "-d", "8", "--hidden", "16", "--epochs", "2", "--threads", "1"]
    code, _, err = run_cli(["train", "--train", str(tmp_path / "train.txt"), "--valid", str(tmp_path / "valid.txt"),
                            *args, "-o", str(tmp_path / "cli")], capsys)
    assert code == 0, err
    lm = sampledlm.train_lm(tmp_path / "train.txt", tmp_path / "valid.txt", tmp_path / "api", model="gru",
                            embed_dim=8, hidden=[16], epochs=2, threads=1)
    def valid(run):
        return [json.loads(line)["valid_ppl"] for line in (run / "metrics.jsonl").read_text().splitlines()]

    assert valid(tmp_path / "api") == valid(tmp_path / "cli") and len(valid(tmp_path / "api")) == 2
    assert lm.perplexity(tmp_path / "valid.txt") == sampledlm.load(tmp_path / "cli").perplexity(tmp_path / "valid.txt")
    with pytest.raises(UserError, match="unknown setting"):
        sampledlm.train_lm(tmp_path / "train.txt", tmp_path / "valid.txt", tmp_path / "x", hiden=[3])
    from_lists = sampledlm.train_lm([" ".join(s) for s in sents[:160]], [s for s in sents[160:]], tmp_path / "lists",
                                    model="gru", embed_dim=8, hidden=[16], epochs=2, threads=1)
    assert valid(tmp_path / "lists") == valid(tmp_path / "cli")
    assert from_lists.perplexity(tmp_path / "valid.txt") == lm.perplexity(tmp_path / "valid.txt")


def test_train_maxent_equals_the_maxent_train_command(tmp_path, capsys):
    from helpers import synthetic_sentences, write_corpus

    sents = synthetic_sentences(200, 30, seed=6)
    write_corpus(tmp_path / "train.txt", sents[:160])
    write_corpus(tmp_path / "valid.txt", sents[160:])
    code, _, err = run_cli(["maxent", "train", "--train", str(tmp_path / "train.txt"), "--valid",
                            str(tmp_path / "valid.txt"), "--epochs", "2", "--neg-rate", "0.2", "-o",
                            str(tmp_path / "cli")], capsys)
    assert code == 0, err
    lm = sampledlm.train_maxent(tmp_path / "train.txt", [" ".join(s) if not isinstance(s, str) else s
                                                         for s in sents[160:]], tmp_path / "api", epochs=2, alpha=0.2)
    ref = sampledlm.load(tmp_path / "cli")
    assert lm.perplexity(tmp_path / "valid.txt") == pytest.approx(ref.perplexity(tmp_path / "valid.txt"), rel=1e-12)
    with pytest.raises(UserError, match="already holds a maxent model"):
        sampledlm.train_maxent(tmp_path / "train.txt", tmp_path / "valid.txt", tmp_path / "api", epochs=2)
    with pytest.raises(UserError, match="unknown setting"):
        sampledlm.train_maxent(tmp_path / "train.txt", tmp_path / "valid.txt", tmp_path / "x", epoch=2)


def test_train_embeddings_equals_the_embed_train_command(tmp_path, capsys):
    from helpers import synthetic_sentences, write_corpus

    sents = synthetic_sentences(300, 40, seed=7)
    write_corpus(tmp_path / "corpus.txt", sents)
    args = ["--dim", "16", "--threads", "1", "--seed", "3", "--min-count", "1", "--epochs", "2"]
    code, _, err = run_cli(["embed", "train", str(tmp_path / "corpus.txt"), "-o", str(tmp_path / "cli"), *args],
                           capsys)
    assert code == 0, err
    wv = sampledlm.train_embeddings(tmp_path / "corpus.txt", tmp_path / "api", dim=16, threads=1, seed=3,
                                    min_count=1, epochs=2)
    from sampledlm.embed.formats import load_vectors

    ref = load_vectors(str(tmp_path / "cli"))
    assert wv.words == ref.words and (wv.vectors == ref.vectors).all() and wv.dim == 16
    from_sentences = sampledlm.train_embeddings(sents, tmp_path / "api2", dim=16, threads=1, seed=3, min_count=1,
                                                epochs=2)
    assert (from_sentences.vectors == ref.vectors).all()
    # the sentences went through a temporary file, gone now: the directory says what the corpus was instead
    config = json.loads((tmp_path / "api2" / "config.json").read_text())
    assert config["data"]["corpus"] == ["sentences given to train_embeddings"]
    assert "sampledlm-text-" not in (tmp_path / "api2" / "provenance.json").read_text()
