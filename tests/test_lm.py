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


def test_models_of_different_vocabularies_mix_over_the_union(tmp_path, capsys):
    """SRILM's -mix-lm: the union of the words; a model gives a word it lacks probability 0, so the mixture is a
    distribution over the union; each model's figure alone is its own."""
    import json
    import math

    import sampledlm
    from helpers import run_cli

    (tmp_path / "a.txt").write_text("the cat sat\nthe dog ran\na cat ran\n" * 5)
    (tmp_path / "b.txt").write_text("the bird flew\nthe fish swam\na bird sat\n" * 5)
    for name in "ab":
        code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / f"{name}.txt"), "--order", "2",
                                "-o", str(tmp_path / f"{name}.arpa")], capsys)
        assert code == 0, err
    mix = sampledlm.load([tmp_path / "a.arpa", tmp_path / "b.arpa"], weights=[0.5, 0.5])
    assert {"cat", "dog", "bird", "fish"} <= set(mix.vocab.words)
    for history in ([], ["the"], ["the", "bird"], ["zzz"]):
        assert math.fsum(math.exp(v) for v in mix.next_logprobs(history).values()) == pytest.approx(1, abs=1e-6)
    alone_a = sampledlm.load(tmp_path / "a.arpa")
    # a word only b knows: a gives it 0, so the mixture gives it half of b's probability
    b = sampledlm.load(tmp_path / "b.arpa")
    assert mix.word_scores("the bird")[1].logprob == pytest.approx(math.log(0.5) + b.word_scores("the bird")[1].logprob)
    code, out, err = run_cli(["eval", str(tmp_path / "a.arpa"), "--mix", str(tmp_path / "b.arpa"), "--test",
                              str(tmp_path / "b.txt"), "--weights", "0.5,0.5", "--json"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["oov"] == 0  # every word is in the union
    assert result["components"][0]["ppl"] == pytest.approx(alone_a.perplexity((tmp_path / "b.txt").read_text()
                                                                             .splitlines()), rel=1e-9)
    assert math.isfinite(result["ppl"])
