"""The Python API refuses what it cannot do right with one clear error (never a wrong answer), and a run started from
sentences in memory resumes as a run from files does."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli

import sampledlm
from sampledlm.errors import UserError

SENTS = ["The Cat sat", "the dog sat", "a Cat ran"]


def test_an_ngram_model_reads_text_with_the_options_it_was_trained_with(tmp_path):
    lm = sampledlm.train_ngram(SENTS, order=2, text_options={"lowercase": True})
    assert [s.oov for s in lm.word_scores("The CAT sat")] == [False, False, False, False]
    by_name = sampledlm.train_ngram(SENTS, order=2, lowercase=True)  # as train_lm and train_maxent take them
    assert by_name.logprob("The CAT sat") == lm.logprob("the cat sat")
    binary = sampledlm.train_ngram(SENTS, tmp_path / "lc", binary=True, order=2, text_options={"lowercase": True})
    assert binary.logprob("The CAT sat") == lm.logprob("the cat sat")
    # the binary directory records them; an ARPA file does not (as KenLM's and SRILM's do not): load takes them
    assert not sampledlm.load(tmp_path / "lc").word_scores("Cat")[0].oov
    again = sampledlm.load(tmp_path / "lc", text_options={"lowercase": True})
    assert again.logprob("The CAT sat") == lm.logprob("the cat sat")
    sampledlm.train_ngram(SENTS, tmp_path / "lc.arpa", order=2, text_options={"lowercase": True})
    assert sampledlm.load(tmp_path / "lc.arpa").word_scores("Cat")[0].oov
    again = sampledlm.load(tmp_path / "lc.arpa", text_options={"lowercase": True})
    assert again.logprob("The CAT sat") == lm.logprob("the cat sat")
    with pytest.raises(UserError, match="unknown setting"):
        sampledlm.train_ngram(SENTS, order=2, lowercas=True)
    with pytest.raises(UserError, match="text_options is a dict"):
        sampledlm.train_ngram(SENTS, order=2, text_options="lowercase")


def test_load_refuses_weights_it_cannot_read_and_a_model_whose_own_text_options_differ(four_models):
    kn = four_models / "kn3.arpa"
    with pytest.raises(UserError, match="a list of numbers"):
        sampledlm.load([kn, kn], weights="0.5,0.5")
    with pytest.raises(UserError, match="not both"):
        sampledlm.load([kn, kn], weights=[0.5, 0.5], valid=str(four_models / "valid.txt"))
    with pytest.raises(UserError, match="give a model's path"):
        sampledlm.load(None)
    with pytest.raises(UserError, match="holds no config.json, so it is not a model directory"):  # it said "config.json: no such file"
        sampledlm.load(four_models)
    with pytest.raises(UserError, match="recorded when it was trained"):
        sampledlm.load(four_models / "gru", text_options={"lowercase": True})


@pytest.mark.parametrize("name", ["kn3.arpa", "gru"])
def test_advance_refuses_what_is_not_one_word_or_not_a_state_of_the_model(four_models, name):
    lm = sampledlm.load(four_models / name)
    start = lm.begin_sentence()
    for word in (None, 5, "", "<s>", "two words", " padded"):
        with pytest.raises(UserError, match="give one word"):
            lm.advance(start, word)
    other = sampledlm.load(four_models / ("gru" if name == "kn3.arpa" else "kn3.arpa")).begin_sentence()
    for state in (None, (1, 2), other):
        with pytest.raises(UserError, match="not a state of this model"):
            lm.advance(state, "the")
    with pytest.raises(UserError, match="give a list of states"):
        lm.advance_many(start, ["the"])
    with pytest.raises(UserError, match="2 states and 1 words"):
        lm.advance_many([start, start], ["the"])
    word = lm.vocab.words[5]
    logp, after = lm.advance(start, word)  # and what is right still works
    assert logp == pytest.approx(lm.logprob([word]) - lm.advance(after, "</s>")[0], rel=1e-6)
    import numpy as np

    assert lm.advance_many([start, start], np.array([word, "</s>"]))[0].tolist() == pytest.approx(  # a word array
        lm.advance_many([start, start], [word, "</s>"])[0].tolist())
    if name == "gru":  # a file of a model directory names the directory to load
        with pytest.raises(UserError, match="a file of the model directory .*; load the directory"):
            sampledlm.load(four_models / name / "model.safetensors")


def test_the_service_client_refuses_a_bare_string_it_would_send_letter_by_letter():
    from sampledlm.serve.client import Client

    c = Client("http://127.0.0.1:9")  # never reached: refused before any request
    for call in (lambda: c.score("the cat"), lambda: c.top_k("the cat"), lambda: c.next_words("the cat")):
        with pytest.raises(TypeError, match="not a single string"):
            call()


def test_train_maxent_is_silent_unless_given_log(tmp_path, capfd):
    lines: list[str] = []
    sampledlm.train_maxent(SENTS * 10, SENTS, tmp_path / "m1", epochs=2)
    sampledlm.train_maxent(SENTS * 10, SENTS, tmp_path / "m2", epochs=2, log=lines.append)
    assert capfd.readouterr().err == ""
    assert any("epoch 1" in line for line in lines) and any("best valid ppl" in line for line in lines)


def test_a_run_from_sentences_in_memory_resumes_as_the_commands_run_does(tmp_path, capsys, private_cache):
    from helpers import synthetic_sentences, write_corpus

    words = synthetic_sentences(200, 30, seed=7)
    write_corpus(tmp_path / "train.txt", words[:160])
    write_corpus(tmp_path / "valid.txt", words[160:])
    sents = [" ".join(s) for s in words]
    cli = ["--model", "gru", "-d", "8", "--hidden", "16", "--threads", "1"]
    code, _, err = run_cli(["train", "--train", str(tmp_path / "train.txt"), "--valid", str(tmp_path / "valid.txt"),
                            *cli, "--epochs", "1", "-o", str(tmp_path / "cli")], capsys)
    assert code == 0, err
    code, _, err = run_cli(["train", "--resume", str(tmp_path / "cli"), "--epochs", "2"], capsys)
    assert code == 0, err
    sampledlm.train_lm(sents[:160], sents[160:], tmp_path / "api", model="gru", embed_dim=8, hidden=[16], epochs=1,
                       threads=1)
    assert sorted(p.name for p in (tmp_path / "api" / "texts").iterdir()) == ["train.txt", "valid.txt"]
    with pytest.raises(UserError, match=r"sampledlm\.resume_lm"):
        sampledlm.train_lm(sents[:160], sents[160:], tmp_path / "api", model="gru", epochs=1)
    with pytest.raises(UserError, match="already finished"):
        sampledlm.resume_lm(tmp_path / "api")
    lm = sampledlm.resume_lm(tmp_path / "api", epochs=2, threads=1)

    def valid(run):
        return [json.loads(line)["valid_ppl"] for line in (run / "metrics.jsonl").read_text().splitlines()]

    assert valid(tmp_path / "api") == valid(tmp_path / "cli") and len(valid(tmp_path / "api")) == 2
    assert lm.perplexity(tmp_path / "valid.txt") == sampledlm.load(tmp_path / "cli").perplexity(tmp_path / "valid.txt")


def test_sentences_and_generation_settings_that_are_not_what_they_say_are_refused(tmp_path):
    import pathlib

    lm = sampledlm.train_ngram(SENTS, order=2)
    for bad in (None, 123, pathlib.Path("t.txt")):
        with pytest.raises(UserError, match="a sentence is a string or a list of words"):
            lm.logprob(bad)
        with pytest.raises(UserError, match="logprobs: give a list of sentences"):
            lm.logprobs(bad)
    for bad in (None, 123, 2.5):
        with pytest.raises(UserError, match="perplexity: give a sentence, an iterable"):
            lm.perplexity(bad)
    with pytest.raises(UserError, match="'new york', which is not one word"):
        lm.logprob(["the", "new york"])
    for kw, what in ((dict(temperature=float("nan")), "temperature"), (dict(top_k=-1), "top_k"),
                     (dict(top_k="3"), "top_k"), (dict(max_words=-3), "max_words")):
        with pytest.raises(UserError, match=f"generate: {what}"):
            lm.generate(1, **kw)
    for bad in ("3", 2.5, 0):
        with pytest.raises(UserError, match="top_k .*: give a whole number >= 1"):
            lm.next_logprobs("the", top_k=bad)
    with pytest.raises(UserError, match="load: device 'gpu0'"):
        sampledlm.load(tmp_path / "x.arpa", device="gpu0")  # refused for an n-gram model as for a neural one
    with pytest.raises(UserError, match="generate: seed 'x'"):
        lm.generate(1, seed="x")
    # a prefix word outside the vocabulary: conditioned on as <unk>, returned as typed (as sampledlm generate prints)
    assert all(s.startswith("the zzzqqq") for s in lm.generate(3, prefix="the zzzqqq", seed=1))
    for text, why in (([["the", "new york"]], "each a non-empty string without spaces"), (["a b\nc d"], "line break"),
                      (["caf\udce9"], "not valid text")):
        with pytest.raises(UserError, match=why):
            sampledlm.train_ngram(text, tmp_path / "x.arpa", order=2)
        assert not (tmp_path / "x.arpa").exists()


def test_a_damaged_vocabulary_record_blames_config_json_and_a_checkpoint_in_use_is_said(four_models, tmp_path,
                                                                                        capfd):
    import shutil

    run = tmp_path / "gru"
    shutil.copytree(four_models / "gru", run)
    config = json.loads((run / "config.json").read_text())
    good = config["vocab"]
    (run / "config.json").write_text(json.dumps({**config, "vocab": {**good, "size": "x"}}))
    with pytest.raises(UserError, match=r"config\.json: vocab: expected a size"):
        sampledlm.load(run)
    (run / "config.json").write_text(json.dumps(config))
    if not any((run / "checkpoints").iterdir()):
        pytest.skip("the tiny run kept no checkpoint")
    (run / "model.safetensors").unlink()
    capfd.readouterr()
    sampledlm.load(run).logprob("")
    assert "using the latest checkpoint's weights" in capfd.readouterr().err
