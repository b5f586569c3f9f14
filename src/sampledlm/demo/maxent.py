"""The maxent step of ``sampledlm demo``: a binary MELM with Feat-I (unigram, bigram, trigram features;
Xu, Gunawardana & Khudanpur 2011)."""

from __future__ import annotations

import time

from .common import DemoData, Result
from ..maxent.features import FeatureSet, FeatureSpec
from ..maxent.scorer import MaxEntModel
from ..maxent.train import TrainConfig, train


def maxent_step(data: DemoData) -> list[Result]:
    """Binary MELM, Feat-I, all negatives, SGD with lr halving on the validation perplexity."""
    t0 = time.perf_counter()
    V = len(data.vocab)
    feats = FeatureSet.build(data.ids["train"], V, FeatureSpec.parse("feat-i"))
    model = MaxEntModel(feats, "binary", alpha=1.0)
    model.init_unigram(data.vocab.counts)
    train(model, data.ids["train"], data.ids["valid"], TrainConfig(objective="binary", epochs=8, seed=data.seed))
    model.calibrate()
    note = f"{feats.pair_counts()['total']:,} features"
    return [Result("maxent binary Feat-I", model.perplexity(data.ids["valid"]), model.perplexity(data.ids["test"]),
                   time.perf_counter() - t0, note)]
