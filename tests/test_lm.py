"""Interpolation of language models and its EM weight (sampledlm.lm)."""

import numpy as np
import pytest

from sampledlm.lm import em_weight, interpolate


def test_interpolation_and_em():
    rng = np.random.default_rng(0)
    a = np.log(rng.uniform(0.01, 1, 500))
    b = np.log(rng.uniform(0.01, 1, 500))
    np.testing.assert_allclose(interpolate(a, b, 0.3), np.log(0.3 * np.exp(a) + 0.7 * np.exp(b)))
    w = em_weight(a, b)
    ll = lambda x: interpolate(a, b, x).sum()  # noqa: E731
    assert ll(w) >= max(ll(x) for x in np.linspace(0.01, 0.99, 99)) - 1e-6
    assert em_weight(a, a - 5.0) > 0.95  # the much better model takes nearly all the weight


def test_perplexity_never_raises_on_a_diverged_models_log_probabilities():
    """A diverged model's log probabilities can be huge but finite (-1.6e30 on AVX-512 CPUs): inf, not OverflowError."""
    import math

    import numpy as np

    from sampledlm.lm import perplexity_from_nll, perplexity_of

    assert perplexity_of(np.array([-1.6e30, -1.0])) == math.inf
    assert perplexity_of(np.array([-800.0])) == math.inf
    assert perplexity_of(np.array([-np.inf])) == math.inf
    assert math.isnan(perplexity_of(np.array([np.nan])))
    assert math.isnan(perplexity_of(np.array([])))
    assert perplexity_of(np.log(np.array([0.5, 0.5]))) == pytest.approx(2.0)
    assert perplexity_from_nll(708.0) == pytest.approx(math.exp(708.0))
    assert perplexity_from_nll(1e30) == math.inf
