"""Samplers: noise distribution, alias / multinomial draws, Bernoulli inclusion, S + S' exclusion."""

import numpy as np
import pytest
import torch

from sampledlm.objectives.sampling import (AliasSampler, BernoulliSampler, MultinomialSampler, bernoulli_probs, first_k_not,
                                noise_distribution)


def chi2_ok(observed, expected, slack=4.0):
    """Pearson chi-square within ``df + slack * sqrt(2 df)`` (about 4 sd: fails ~1e-4 of the time)."""
    observed, expected = np.asarray(observed, float), np.asarray(expected, float)
    m = expected > 0
    assert observed[~m].sum() == 0, "drew a word of probability 0"
    stat = ((observed[m] - expected[m]) ** 2 / expected[m]).sum()
    df = m.sum() - 1
    assert stat < df + slack * np.sqrt(2 * df) + 5, (stat, df)


def test_noise_distribution_power_and_uniform():
    counts = np.array([100, 10, 1, 0])
    q = noise_distribution(counts, 0.5)
    w = np.array([10.0, np.sqrt(10), 1.0, 1.0])  # zero count floored at 1
    assert np.allclose(q.numpy(), w / w.sum())
    assert np.allclose(noise_distribution(counts, 0.0).numpy(), 0.25)
    assert np.allclose(noise_distribution(None, 1.0, num_words=5).numpy(), 0.2)
    assert float(noise_distribution(counts, 1.0).sum()) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        noise_distribution(counts, -1)


@pytest.mark.parametrize("cls", [AliasSampler, MultinomialSampler])
@pytest.mark.parametrize("power", [0.0, 0.75, 1.0])
def test_sampler_frequencies_match_unigram_power(cls, power):
    torch.manual_seed(1)
    counts = np.array([500, 200, 90, 40, 10, 5, 2, 1])
    q = noise_distribution(counts, power)
    n = 200_000
    draws = cls(q).draw((n // 100, 100))
    assert draws.shape == (n // 100, 100) and draws.dtype == torch.long
    chi2_ok(np.bincount(draws.flatten().numpy(), minlength=len(counts)), n * q.numpy())


def test_alias_handles_zero_probability_and_single_word():
    q = torch.tensor([0.0, 0.7, 0.0, 0.3], dtype=torch.float64)
    d = AliasSampler(q).draw((10_000,))
    assert set(d.tolist()) <= {1, 3}
    assert AliasSampler(torch.tensor([1.0])).draw((5,)).tolist() == [0] * 5


def test_draws_reproducible_from_the_global_seed():
    q = noise_distribution(np.arange(1, 50), 0.75)
    torch.manual_seed(7)
    a = AliasSampler(q).draw((100,))
    torch.manual_seed(7)
    assert torch.equal(a, AliasSampler(q).draw((100,)))


def test_bernoulli_probs_sum_to_expected_and_clip():
    q = noise_distribution(np.array([1000, 100, 50, 10, 5, 3, 2, 1, 1, 1]), 1.0)
    b = bernoulli_probs(q, 4.0)
    assert float(b.sum()) == pytest.approx(4.0)
    assert float(b.max()) <= 1.0 and float(b[0]) == 1.0  # the big word is clipped
    free = b < 1
    ratio = (b[free] / q[free]).numpy()
    assert np.allclose(ratio, ratio[0])  # the rest stays proportional to q
    assert torch.equal(bernoulli_probs(q, 10.0), torch.ones(10, dtype=torch.float64))


@pytest.mark.parametrize("spare_sd,spare", [(6.0, 16), (0.0, 1)])  # (0, 1): buckets run short, exact refill
def test_bernoulli_sampler_inclusion_frequencies(spare_sd, spare):
    torch.manual_seed(3)
    b = torch.tensor([1.0, 0.0, 0.9, 0.5, 0.45, 0.3, 0.1, 0.05, 0.02, 0.02, 0.001, 0.6] + [0.07] * 40)
    sampler = BernoulliSampler(b, spare_sd=spare_sd, spare=spare)
    n = 8_000
    hits = torch.zeros(len(b))
    sizes = []
    for _ in range(n):
        d = sampler.draw()
        assert len(torch.unique(d)) == len(d)  # no repeats
        hits[d] += 1
        sizes.append(len(d))
    freq = hits / n
    sd = torch.sqrt(b * (1 - b) / n)
    assert torch.all((freq - b).abs() <= 5 * sd + 1e-9), (freq, b)
    assert np.mean(sizes) == pytest.approx(float(b.sum()), rel=0.02)


def test_bernoulli_sampler_uniform_rate():
    torch.manual_seed(4)
    s = BernoulliSampler(torch.full((10_000,), 0.05))
    sizes = [len(s.draw()) for _ in range(200)]
    assert np.mean(sizes) == pytest.approx(500, rel=0.02)


def test_first_k_not_excludes_the_true_word():
    words = torch.tensor([3, 1, 3, 2, 4, 1])
    keep = first_k_not(words, torch.tensor([3, 1, 0]), 3)
    assert keep.tolist() == [
        [False, True, False, True, True, False],
        [True, False, True, True, False, False],
        [True, True, True, False, False, False],
    ]
    each = first_k_not(torch.tensor([[0, 0, 1], [2, 1, 1]]), torch.tensor([0, 1]), 1)
    assert each.tolist() == [[False, False, True], [True, False, False]]
