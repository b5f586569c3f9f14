"""``LanguageModel.logprobs_after`` (a decoder's query: these words after these histories) and
``next_logprobs_many``: every family's batched answer equals scoring each word inside its own sentence,
and a feed-forward model's history cache changes no number."""

from __future__ import annotations

import numpy as np
import pytest

from sampledlm.data.vocab import EOS_ID, UNK_ID
from sampledlm.lm import LanguageModel, Mixture
from sampledlm.loader import load_model


def queries(lm, seed=0):
    V = len(lm.vocab)
    rng = np.random.default_rng(seed)
    hists = [[], [3], list(rng.integers(2, V, 5)), list(rng.integers(2, V, 12)), [3], list(rng.integers(2, V, 2))]
    words = [[EOS_ID, 5, UNK_ID], [7], list(rng.integers(0, V, 4)), [EOS_ID, 9], [7, 8], []]
    return hists, words


def one_by_one(lm, hists, words):
    """Each word scored inside its own sentence ``<s> history w </s>`` by ``logprobs``."""
    out = []
    for h, ws in zip(hists, words):
        row = []
        for w in ws:
            s = np.array(list(h) + ([EOS_ID] if w == EOS_ID else [w, EOS_ID]), dtype=np.int64)
            row.append(lm.logprobs(s, independent=True)[len(h)])
        out.append(np.array(row))
    return out


def open_lm(d, name):
    if name == "mix":
        return Mixture([load_model(str(d / "gru")), load_model(str(d / "kn3.arpa"))], [0.4, 0.6])
    return load_model(str(d / name))


@pytest.mark.parametrize("name", ["kn3.arpa", "ffnn3", "gru", "melm", "mix"])
def test_logprobs_after_equal_each_word_in_its_sentence(four_models, name):
    lm = open_lm(four_models, name)
    hists, words = queries(lm)
    got = lm.logprobs_after(hists, words)
    want = one_by_one(lm, hists, words)
    assert [len(g) for g in got] == [len(w) for w in words]
    exact = name in ("kn3.arpa", "melm")  # no float32 arithmetic whose rounding depends on the batch's shape
    for g, w in zip(got, want):
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=0, atol=2e-6)
    generic = LanguageModel.logprobs_after(lm, hists, words)
    for g, w in zip(generic, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=2e-6)


@pytest.mark.parametrize("name", ["kn3.arpa", "ffnn3", "gru", "mix"])
def test_next_logprobs_many_equal_one_at_a_time(four_models, name):
    lm = open_lm(four_models, name)
    hists, _ = queries(lm, seed=1)
    many = lm.next_logprobs_many(hists)
    assert many.shape == (len(hists), len(lm.vocab))
    for row, h in zip(many, hists):
        np.testing.assert_allclose(row, lm.next_logprobs(h), rtol=0, atol=2e-6)
    np.testing.assert_allclose(np.exp(many).sum(1), 1.0, atol=1e-4)


def test_ffnn_history_cache_keys_on_the_last_words_and_changes_nothing(four_models):
    lm = load_model(str(four_models / "ffnn3"))
    hists, words = queries(lm)
    plain = lm.logprobs_after(hists, words)
    assert lm.enable_history_cache(3)
    first = lm.logprobs_after(hists, words)
    again = lm.logprobs_after(hists, words)
    # Equal to float32 rounding, not bit for bit: a cached history's state was computed in another batch than the
    # misses', and a BLAS may round a row differently with the batch's size (seen with the generic SSE kernels:
    # ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2, a difference of 2.4e-7).
    for a, b, c in zip(plain, first, again):
        np.testing.assert_allclose(b, a, rtol=0, atol=2e-6)
        np.testing.assert_allclose(c, a, rtol=0, atol=2e-6)
    cache = lm.history_cache
    assert len(cache) == 3  # bounded: 5 distinct (n-1)-word keys among the 6 histories, 3 kept
    assert cache.hits > 0 and cache.misses >= 5
    # histories that end in the same two words share one entry: no new miss
    misses = cache.misses
    lm.logprobs_after([[9, 9, 9] + hists[5][-2:]], [[1]])  # hists[5] was among the last stored
    assert cache.misses == misses


def test_recurrent_models_keep_no_history_cache(four_models):
    lm = load_model(str(four_models / "gru"))
    assert not lm.enable_history_cache(100)
    assert lm.history_cache is None
