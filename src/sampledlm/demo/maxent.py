"""The maxent step of ``sampledlm demo``: a binary MELM with Feat-I (unigram, bigram, trigram features;
Xu, Gunawardana & Khudanpur 2011), trained in two sittings: stopped after its fourth epoch, then resumed from the
epoch checkpoint (:mod:`sampledlm.maxent.checkpoint`), as ``maxent train --resume`` goes on with a killed run."""

from __future__ import annotations

import os
import time

from .common import DemoData, Result
from ..maxent.checkpoint import Checkpointer
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
    saved = Checkpointer(os.path.join(data.directory, "maxent-run"))
    first = train(model, data.ids["train"], data.ids["valid"], TrainConfig(objective="binary", epochs=4,
                                                                          seed=data.seed), checkpoint=saved)
    # a new process would rebuild the same model from the text; the state after epoch 4 is the checkpoint's
    model = MaxEntModel(feats, "binary", alpha=1.0)
    model.init_unigram(data.vocab.counts)
    log = train(model, data.ids["train"], data.ids["valid"], TrainConfig(objective="binary", epochs=8,
                                                                        seed=data.seed), checkpoint=saved)
    model.calibrate()
    note = (f"{feats.pair_counts()['total']:,} features; stopped after epoch {first[-1]['epoch']}, resumed to "
            f"epoch {log[-1]['epoch']}")
    return [Result("maxent binary Feat-I", model.perplexity(data.ids["valid"]), model.perplexity(data.ids["test"]),
                   time.perf_counter() - t0, note)]
