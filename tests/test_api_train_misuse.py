"""train_maxent checks its arguments as the flags do, before it writes anything, and a failed train_lm call leaves
no half-made run directory behind (a user's own files in it stay)."""

from __future__ import annotations

import pytest
from helpers import synthetic_sentences, write_corpus

import sampledlm
from sampledlm.errors import UserError



@pytest.fixture
def corpus(tmp_path, private_cache):
    sents = synthetic_sentences(300, seed=3)
    return write_corpus(tmp_path / "train.txt", sents[:250]), write_corpus(tmp_path / "valid.txt", sents[250:])


def test_train_maxent_checks_its_arguments_before_it_writes(tmp_path, corpus):
    train, valid = map(str, corpus)
    for kwargs, words in (({"ranks": 0}, "ranks 0"), ({"ranks": "2"}, "ranks '2'"), ({"epochs": -1}, "epochs"),
                          ({"alpha": 0}, "alpha=0.0: must be > 0"), ({"epochs": "3"}, "integer"), ({"ranks": 10_000}, "1024")):
        with pytest.raises(UserError, match=words):
            sampledlm.train_maxent(train, valid, tmp_path / "m", **kwargs)
        assert not (tmp_path / "m").exists(), kwargs
    with pytest.raises(UserError, match="at most one rank a word"):
        sampledlm.train_maxent([["a", "b"]] * 20, [["a", "b"]], tmp_path / "m", ranks=8, epochs=1)
    assert not (tmp_path / "m").exists()
    assert sampledlm.train_maxent(train, valid, tmp_path / "m", epochs=1).perplexity(corpus[1]) > 1  # a retry trains


def test_a_failed_train_lm_call_leaves_no_directory_behind(tmp_path, corpus):
    sents = [line.split() for line in corpus[0].read_text().splitlines()]
    for kwargs in ({"device": "tpu"}, {"epochs": 0}, {"model": "rnn"}):
        with pytest.raises(UserError):
            sampledlm.train_lm(sents, sents[:20], tmp_path / "r", **kwargs)
        assert not (tmp_path / "r").exists(), kwargs
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's own file\n")
    with pytest.raises(UserError):
        sampledlm.train_lm(sents, sents[:20], tmp_path / "mine", epochs=0)
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]


def test_arguments_of_the_wrong_kind_are_refused_in_one_line_not_by_a_bare_type_error(tmp_path, corpus):
    train, valid = map(str, corpus)
    for call, words in ((lambda: sampledlm.train_lm(42, valid, tmp_path / "r"), "iterable of sentences"),
                        (lambda: sampledlm.train_lm(train, valid, None), "output should be a path"),
                        (lambda: sampledlm.train_lm(train, valid, tmp_path / "r", threads=-3), "threads -3"),
                        (lambda: sampledlm.resume_lm(None), "run_dir should be a path"),
                        (lambda: sampledlm.train_maxent(train, valid, 5), "output should be a path"),
                        (lambda: sampledlm.load(5), "not int")):
        with pytest.raises(UserError, match=words):
            call()
    assert not (tmp_path / "r").exists()


def test_messages_name_the_keyword_arguments_not_the_commands_flags(tmp_path, corpus):
    """train_lm(epochs=0) said "--epochs 0: must be >= 1", a flag the caller never wrote."""
    train, valid = map(str, corpus)
    for call, words in ((lambda: sampledlm.train_lm(train, valid, tmp_path / "r", epochs=0), "epochs=0: must be >= 1"),
                        (lambda: sampledlm.train_lm(train, valid, tmp_path / "r", objective="nce", samples=0),
                         "samples=0: must be >= 1"),
                        (lambda: sampledlm.train_lm(train, valid, tmp_path / "r", model="ffnn", bptt=7),
                         "bptt do not apply to model 'ffnn'"),
                        (lambda: sampledlm.train_embeddings(train, tmp_path / "v", dim=0), "dim=0: must be >= 1"),
                        (lambda: sampledlm.train_lm(train, valid, tmp_path / "r", exclude_true=False),
                         "exclude_true applies to objective neg, blackout, ranking only"),
                        (lambda: sampledlm.train_lm(train, valid, tmp_path / "r", objective="nce", samples=10**6),
                         r"samples=1000000: must be smaller than .* use objective='softmax'"),
                        (lambda: sampledlm.train_lm(train, valid, tmp_path / "r", model="gru", momentum=0.9),
                         "momentum applies to optimizer='sgd' only"),
                        (lambda: sampledlm.train_lm(train, valid, tmp_path / "r", objective="hsm", arity=3),
                         "arity=3: a power of two"),
                        (lambda: sampledlm.train_lm(train, valid, tmp_path / "r", min_count=0),
                         "min_count=0: give a whole number >= 1")):
        with pytest.raises(UserError, match=words) as e:
            call()
        assert "--" not in str(e.value)
    with pytest.raises(UserError, match="^--epochs 0: must be >= 1$"):  # outside the API the flags are named
        from sampledlm.config import check_value

        check_value("epochs", 0, {"min": 1})


def test_what_a_slip_would_turn_into_another_training_is_refused_before_any_work(tmp_path, corpus):
    """A misspelt file in a list of files (read as two sentences of file names), a file name given as ``log`` (found
    an epoch in, the epoch lost), the command's ``prune`` string (read one character at a time), ``hidden=[]`` (the
    default trained): each a UserError before anything is written."""
    train, valid = map(str, corpus)
    with pytest.raises(UserError, match="nope.txt: no such file"):
        sampledlm.train_embeddings([train, str(tmp_path / "nope.txt")], tmp_path / "v", dim=8, epochs=1)
    for kwargs, words in (({"log": "progress.log"}, "log: 'progress.log' is not a function"),
                          ({"hidden": []}, r"hidden=\[\]: give at least one value"),
                          ({"epoch": 1}, r"epoch \(did you mean epochs\?\)")):
        with pytest.raises(UserError, match=words):
            sampledlm.train_lm(train, valid, tmp_path / "r", **kwargs)
    with pytest.raises(UserError, match="the Python name of --neg-rate is alpha"):
        sampledlm.train_maxent(train, valid, tmp_path / "m", neg_rate=0.2)
    assert not any((tmp_path / d).exists() for d in ("v", "r", "m"))
    lines = corpus[0].read_text().splitlines()[:5]
    flag = sampledlm.train_ngram(train, order=3, prune="0,0,1").logprobs(lines)
    assert flag == sampledlm.train_ngram(train, order=3, prune=(0, 0, 1)).logprobs(lines)
    assert flag != sampledlm.train_ngram(train, order=3).logprobs(lines)
    for bad in (3, [0, "x"]):
        with pytest.raises(UserError, match="prune .*: give one count threshold per order"):
            sampledlm.train_ngram(train, order=3, prune=bad)
    with pytest.raises(UserError, match="train_ngram: output should be a path"):
        sampledlm.train_ngram(train, 5, order=2)


def test_init_from_refuses_a_model_named_even_the_default_and_resume_maxent_names_a_neural_run(tmp_path, corpus):
    train, valid = map(str, corpus)
    sampledlm.train_lm(train, valid, tmp_path / "gru", model="gru", hidden=[8], embed_dim=8, epochs=1)
    with pytest.raises(UserError, match="come from that run"):
        sampledlm.train_lm(train, valid, tmp_path / "x", init_from=tmp_path / "gru", model="ffnn", epochs=1)
    assert not (tmp_path / "x").exists()
    with pytest.raises(UserError, match="holds a neural model, not a maxent run .*resume_lm"):
        sampledlm.resume_maxent(tmp_path / "gru")
