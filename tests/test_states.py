"""Word by word with a carried state (sampledlm.states, Model.begin_sentence/advance): the numbers of
whole-sentence scoring for every family, branching from one state, and a mixture."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sampledlm
from sampledlm import states


def _by_advance(lm, sentence: str) -> float:
    state, total = lm.begin_sentence(), 0.0
    for word in lm.words(sentence) + ["</s>"]:
        logp, state = lm.advance(state, word)
        total += logp
    return total


def _sentences(four_models) -> list[str]:
    lines = (four_models / "test.txt").read_text().splitlines()
    return lines[:6] + ["", "zzz unknown words w1"]  # an empty hypothesis; out-of-vocabulary words


@pytest.fixture(scope="module")
def transformer(four_models, tmp_path_factory):
    out = tmp_path_factory.mktemp("tf") / "tf"
    from sampledlm.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAMPLEDLM_CACHE", str(out.parent / "cache"))
        try:
            main(["train", "--train", str(four_models / "train.txt"), "--valid", str(four_models / "valid.txt"),
                  "--model", "transformer", "-d", "16", "--epochs", "1", "--threads", "1", "-o", str(out)])
        except SystemExit as e:
            assert e.code == 0
    return out


@pytest.mark.parametrize("name", ["kn3.arpa", "ffnn3", "gru", "melm"])
def test_advancing_word_by_word_gives_the_whole_sentence_numbers(four_models, name):
    lm = sampledlm.load(four_models / name)
    for sentence in _sentences(four_models):
        assert _by_advance(lm, sentence) == pytest.approx(lm.logprob(sentence), rel=1e-5, abs=1e-5), sentence


def test_a_transformer_and_a_mixture_too(four_models, transformer):
    for lm in (sampledlm.load(transformer),
               sampledlm.load([four_models / "gru", four_models / "kn3.arpa"], weights=[0.6, 0.4]),
               sampledlm.load([four_models / "ffnn3", transformer, four_models / "melm"])):
        for sentence in _sentences(four_models):
            assert _by_advance(lm, sentence) == pytest.approx(lm.logprob(sentence), rel=1e-5, abs=1e-5), sentence


@pytest.mark.parametrize("name", ["kn3.arpa", "gru"])
def test_a_state_is_a_value_one_can_branch_from_and_many_advance_at_once(four_models, name):
    lm = sampledlm.load(four_models / name)
    words = lm.words((four_models / "test.txt").read_text().splitlines()[0])
    start = lm.begin_sentence()
    _, after_first = lm.advance(start, words[0])
    branches = [words[1], words[2], "</s>", "zzz"]
    batched, _ = lm.advance_many([after_first] * len(branches), branches)
    one_by_one = [lm.advance(after_first, w)[0] for w in branches]  # the same state, used again
    assert batched == pytest.approx(one_by_one, rel=1e-6)
    expected = [lm.word_scores([words[0], w])[1].logprob for w in branches[:2]]  # ln P(w | <s> words[0])
    assert batched[:2] == pytest.approx(expected, rel=1e-5)
    # </s> ends the sentence: the probability that it ends there, and the start state again
    assert batched[2] == pytest.approx(lm.word_scores([words[0]])[1].logprob, rel=1e-5) and lm.advance(start, words[0])[0] == \
        pytest.approx(lm.word_scores(words[:1])[0].logprob, rel=1e-5)


def test_equal_states_compare_equal_and_merge_as_dictionary_keys(four_models):
    """A decoder recombines hypotheses whose LM states are equal: a recurrent model's and a mixture's states too
    (== on them raised torch's "Boolean value of Tensor ... is ambiguous", and they hashed by identity)."""
    for lm in (sampledlm.load(four_models / "gru"),
               sampledlm.load([four_models / "gru", four_models / "kn3.arpa"], weights=[0.5, 0.5])):
        words = lm.words((four_models / "test.txt").read_text().splitlines()[0])
        a = lm.advance(lm.begin_sentence(), words[0])[1]
        b = lm.advance(lm.begin_sentence(), words[0])[1]
        other = lm.advance(lm.begin_sentence(), words[1])[1]
        assert a == b and not (a != b) and a != other and {a: "merged"}[b] == "merged"
        assert len({a, b, other}) == 2


def test_the_state_of_an_ngram_keeps_only_its_context(four_models):
    lm = sampledlm.load(four_models / "kn3.arpa")
    state = lm.begin_sentence()
    for w in lm.words((four_models / "test.txt").read_text().splitlines()[0])[:5]:
        _, state = lm.advance(state, w)
    assert isinstance(state, states.HistoryState) and len(state.ids) == 2  # a trigram reads two words


def test_a_recurrent_state_runs_one_step_per_word(four_models, monkeypatch):
    lm = sampledlm.load(four_models / "gru")
    model = lm.lm.model
    steps = []
    forward = type(model).forward

    def counted(self, x, state=None):
        steps.append(x.shape[1])
        return forward(self, x, state)

    monkeypatch.setattr(type(model), "forward", counted)
    state = lm.begin_sentence()
    for w in ["w1"] * 30:
        _, state = lm.advance(state, w)
    assert set(steps) == {1} and len(steps) <= 31  # one input per call, whatever the history's length


def test_word_scores_give_both_bases_the_oov_flag_and_the_ngram_order(four_models):
    lm = sampledlm.load(four_models / "kn3.arpa")
    first = (four_models / "test.txt").read_text().splitlines()[0].split()[:2]
    scores = lm.word_scores(first + ["zzz"])
    assert [s.word for s in scores] == first + ["zzz", "</s>"]
    assert [s.oov for s in scores] == [False, False, True, False]
    assert all(s.log10_prob == pytest.approx(s.logprob / math.log(10)) for s in scores)
    assert scores[0].order in (1, 2) and all(1 <= s.order <= 3 for s in scores)
    assert sum(s.logprob for s in scores) == pytest.approx(lm.logprob(first + ["zzz"]))
    gru = sampledlm.load(four_models / "gru").word_scores(first)
    assert [s.order for s in gru] == [None] * 3


def test_batched_logprobs_and_streamed_perplexity(four_models, tmp_path):
    lm = sampledlm.load(four_models / "gru")
    lines = (four_models / "test.txt").read_text().splitlines()
    assert lm.logprobs(lines) == pytest.approx([lm.logprob(s) for s in lines], rel=1e-5)
    assert lm.log10_prob(lines[0]) == pytest.approx(lm.logprob(lines[0]) / math.log(10))
    assert lm.score(lines[0]) == lm.log10_prob(lines[0])  # KenLM's name, base 10
    assert lm.perplexity(line for line in lines) == pytest.approx(lm.perplexity(lines))  # a generator streams
    with pytest.raises(sampledlm.UserError, match="give a list of sentences"):
        lm.logprobs("one sentence")


def test_literal_markers_are_dropped_from_a_list_as_from_a_string(four_models):
    lm = sampledlm.load(four_models / "kn3.arpa")
    words = (four_models / "test.txt").read_text().splitlines()[0].split()[:3]
    assert lm.logprob(["<s>", *words, "</s>"]) == lm.logprob(" ".join(["<s>", *words, "</s>"])) == lm.logprob(words)


def test_a_file_name_given_as_a_sentence_is_refused_with_the_way_out(four_models, monkeypatch):
    lm = sampledlm.load(four_models / "kn3.arpa")
    monkeypatch.chdir(four_models)
    with pytest.raises(sampledlm.UserError, match=r"pathlib.Path\('test.txt'\)"):
        lm.perplexity("test.txt")
    assert lm.perplexity(["test.txt"]) > 0  # the one-word sentence, when that is what is meant


def test_generate_draws_fresh_sentences_unless_given_a_seed(four_models):
    lm = sampledlm.load(four_models / "kn3.arpa")
    assert lm.generate(5, seed=3) == lm.generate(5, seed=3)
    draws = {tuple(lm.generate(5)) for _ in range(4)}
    assert len(draws) > 1


def test_states_of_different_vocabularies_are_refused_by_length(four_models):
    lm = sampledlm.load(four_models / "kn3.arpa")
    with pytest.raises(ValueError):
        states.advance(lm.lm, [lm.begin_sentence()], [1, 2])
    assert states.advance(lm.lm, [], [])[0].shape == (0,)
    assert isinstance(np.asarray(lm.advance_many([lm.begin_sentence()], ["w1"])[0]), np.ndarray)


@pytest.mark.parametrize("name", ["kn3.arpa", "ffnn3", "gru", "melm"])
def test_a_state_of_another_model_of_the_same_kind_and_shape_is_refused(four_models, name):
    """Two loads of one model have the same vocabulary and shapes; a decoder that mixes up its two LMs' states
    must hear of it rather than score the wrong history."""
    a, b = sampledlm.load(four_models / name), sampledlm.load(four_models / name)
    word = a.words((four_models / "test.txt").read_text().splitlines()[0])[0]
    after_a = a.advance(a.begin_sentence(), word)[1]
    for state in (after_a, a.begin_sentence()):
        with pytest.raises(sampledlm.UserError, match="not a state of this model"):
            b.advance(state, word)
    assert a.advance(after_a, word)[0] == pytest.approx(b.advance(b.advance(b.begin_sentence(), word)[1], word)[0],
                                                        rel=1e-5, abs=1e-6)


def test_the_use_functions_take_what_load_returns(four_models):
    from sampledlm.use.generate import generate
    from sampledlm.use.nbest import Hypothesis, NBest, add_lm_scores
    from sampledlm.use.score import score_sentences

    lm = sampledlm.load(four_models / "kn3.arpa")
    line = (four_models / "test.txt").read_text().splitlines()[0]
    assert score_sentences(lm, [line])[0].ln_prob == pytest.approx(lm.logprob(line))  # a string, read as words
    assert score_sentences(lm.lm, [line.split()])[0].ln_prob == pytest.approx(lm.logprob(line))
    with pytest.raises(sampledlm.UserError, match="list of words"):
        score_sentences(lm.lm, [line])  # not a list of characters
    lists = [NBest("u1", [Hypothesis(line.split(), 0.0, 0.0)])]
    add_lm_scores(lm, lists)
    assert lists[0].hyps[0].lm_new == pytest.approx(lm.logprob(line))
    assert generate(lm, [], n=2, seed=1) == generate(lm.lm, [], n=2, seed=1)


def test_lattice_rescoring_takes_what_load_returns(four_models, tmp_path):
    from sampledlm.use.lattice import expand, rescore_all
    from sampledlm.use.slf import Lattice, Link

    model = sampledlm.load(four_models / "kn3.arpa")
    words = (four_models / "test.txt").read_text().splitlines()[0].split()[:3]
    lat = Lattice("u", 4, [Link(i, i + 1, w, -1.0, 0.0) for i, w in enumerate(words)])
    assert model.context_length == 2
    best = rescore_all([lat], model)[0]  # exact for an n-gram: its own context length, no k to give
    assert best.words == words and best.lm_new == pytest.approx(model.logprob(words))
    assert len(expand(lat, model).links) == len(lat.links)


def test_a_server_serves_what_load_returns(four_models):
    pytest.importorskip("aiohttp", reason="the serve extra is not installed")
    from sampledlm.serve.app import Server
    from sampledlm.serve.client import Client

    model = sampledlm.load(four_models / "kn3.arpa")
    server = Server(model)  # 127.0.0.1 on a free port
    server.start()
    try:
        line = (four_models / "test.txt").read_text().splitlines()[0]
        got = Client(server.url).score([line])
        assert got["sentences"][0]["ln"] == pytest.approx(model.logprob(line), rel=1e-9)
    finally:
        server.stop()


def test_onnx_export_takes_what_load_returns(four_models, tmp_path):
    pytest.importorskip("onnx", reason="the onnx extra is not installed")
    from sampledlm.neural.onnx_export import export_onnx

    model = sampledlm.load(four_models / "gru", device="cpu")
    from_model = export_onnx(model, str(tmp_path / "a.onnx"))
    from_dir = export_onnx(str(four_models / "gru"), str(tmp_path / "b.onnx"))
    assert from_model["vocab"] == from_dir["vocab"] and (tmp_path / "a.onnx").stat().st_size > 0
    with pytest.raises(sampledlm.UserError, match="neural model"):
        export_onnx(sampledlm.load(four_models / "kn3.arpa"), str(tmp_path / "c.onnx"))
