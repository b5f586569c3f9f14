"""``LanguageModel.next_logprobs``: every family's one-pass distribution after a history equals the generic
one (scoring every continuation as a sentence) and sums to one; a mixture's too."""

from __future__ import annotations

import numpy as np
import pytest

from sampledlm.lm import LanguageModel, Mixture
from sampledlm.loader import load_model


@pytest.mark.parametrize("name", ["kn3.arpa", "ffnn3", "gru", "melm"])
def test_next_logprobs_equal_the_generic_rule(four_models, name):
    lm = load_model(str(four_models / name))
    for history in ([], lm.vocab.encode(["w1"]), lm.vocab.encode(["w3", "w1", "w0", "w7"])):
        got = lm.next_logprobs(history)
        assert got.shape == (len(lm.vocab),)
        np.testing.assert_allclose(got, LanguageModel.next_logprobs(lm, history), rtol=1e-5, atol=1e-6)
        assert np.exp(got).sum() == pytest.approx(1.0, abs=1e-4)


def test_mixture_next_logprobs(four_models):
    mix = Mixture([load_model(str(four_models / "gru")), load_model(str(four_models / "kn3.arpa"))], [0.3, 0.7])
    h = mix.vocab.encode(["w2", "w5"])
    np.testing.assert_allclose(mix.next_logprobs(h), LanguageModel.next_logprobs(mix, h), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["kn3.arpa", "ffnn3", "gru", "mix"])
def test_logprobs_at_equal_the_full_stream(four_models, name):
    lm = (Mixture([load_model(str(four_models / "gru")), load_model(str(four_models / "ffnn3"))], [0.5, 0.5])
          if name == "mix" else load_model(str(four_models / name)))
    ids = np.array(lm.vocab.encode("w1 w2 w3".split()) + [0] + lm.vocab.encode("w4 w1".split()) + [0] * 2)
    at = np.array([1, 4, 5, 7])
    np.testing.assert_allclose(lm.logprobs_at(ids, at), lm.logprobs(ids, independent=True)[at], rtol=1e-5)
