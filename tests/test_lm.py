"""Interpolation of language models and its EM weight (sampledlm.lm)."""

import numpy as np

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
