"""``LanguageModel.context_length``: how many previous words a model's probabilities depend on, one answer per
family (lattice rescoring is exact over histories of that many words; None asks for an approximation's k)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sampledlm.data.vocab import EOS, UNK, Vocab
from sampledlm.lm import LanguageModel, Mixture
from sampledlm.loader import load_model
from sampledlm.neural.lm import NeuralLM
from sampledlm.neural.registry import build_model, complete_spec, model_spec
from sampledlm.objectives import make_objective

V = 12


def tiny_neural(kind: str, **options) -> NeuralLM:
    """An untrained neural LM of ``kind`` (its context length depends on its shape, not on its weights)."""
    spec = complete_spec(model_spec(kind, embed_dim=8, dropout=0.0, **options), {"bptt": 6})
    torch.manual_seed(0)
    model = build_model(spec, V)
    obj = make_objective("softmax")
    obj.bind(model)
    return NeuralLM(model, obj, Vocab([EOS, UNK] + [f"w{i}" for i in range(V - 2)], np.ones(V, dtype=np.int64)))


def test_the_default_is_the_whole_history():
    class Unigrams(LanguageModel):
        def logprobs(self, ids, *, independent=False):
            return np.zeros(len(ids))

    assert Unigrams().context_length is None


def test_an_ngram_model_reads_order_minus_one_words(four_models):
    lm = load_model(str(four_models / "kn3.arpa"))
    assert lm.order == 3 and lm.context_length == 2


@pytest.mark.parametrize("order", [2, 5])
def test_a_feed_forward_model_reads_its_window(order):
    assert tiny_neural("ffnn", order=order, hidden=[8]).context_length == order - 1


def test_trained_feed_forward_and_recurrent_models(four_models):
    assert load_model(str(four_models / "ffnn3")).context_length == 2
    assert load_model(str(four_models / "gru")).context_length is None


@pytest.mark.parametrize("kind,options", [("gru", {"hidden": 8}), ("lstm", {"hidden": 8}),
                                          ("transformer", {"layers": 1, "heads": 2})])
def test_recurrent_and_transformer_models_read_the_whole_history(kind, options):
    assert tiny_neural(kind, **options).context_length is None


def test_a_maxent_model_reads_as_far_as_its_features(four_models, tmp_path):
    """Feat-I looks back two words, so a lattice is expanded exactly for it as for a trigram (it was said to read
    the whole history, and lattice rescoring asked for --k); trigger features read further: None."""
    import sampledlm

    lm = load_model(str(four_models / "melm"))
    assert lm.family == "maxent" and lm.context_length == 2
    words = (four_models / "train.txt").read_text().split()[:6]
    model = sampledlm.load(four_models / "melm")
    one, two = model.word_scores(words[:5]), model.word_scores(words[5:6] + words[1:5])
    assert one[-1].logprob == two[-1].logprob and one[-2].logprob == two[-2].logprob  # the same last two words
    sents = [line.split() for line in (four_models / "train.txt").read_text().splitlines()]
    triggers = sampledlm.train_maxent(sents, sents[:20], tmp_path / "feat2", features="feat-ii", epochs=1)
    assert load_model(str(tmp_path / "feat2")).context_length is None and triggers.context_length is None


def test_a_mixture_reads_as_far_as_its_farthest_model(four_models):
    kn3, ffnn3, gru = (load_model(str(four_models / n)) for n in ("kn3.arpa", "ffnn3", "gru"))
    assert Mixture([ffnn3, kn3]).context_length == 2
    assert Mixture([kn3, gru]).context_length is None
    assert Mixture([Mixture([ffnn3, kn3]), kn3]).context_length == 2
