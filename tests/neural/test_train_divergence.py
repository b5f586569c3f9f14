"""A diverging step (its known failure with importance sampling) never writes NaN or inf into the weights."""

import os

import pytest
import torch
from helpers import config_for

from sampledlm.errors import UserError
from sampledlm.neural.registry import build_model
from sampledlm.objectives.softmax import SoftmaxObjective
from sampledlm.neural.trainer import Trainer, TrainOptions


class DivergesAtStep(SoftmaxObjective):
    """The exact softmax loss, but infinite (or with an infinite gradient) from call ``at`` on."""

    def __init__(self, at: int, how: str):
        super().__init__()
        self.at, self.how, self.calls = at, how, 0

    def forward(self, scorer, ctx, targets):
        self.calls += 1
        loss = super().forward(scorer, ctx, targets)
        if self.calls < self.at:
            return loss
        if self.how == "loss":
            return loss * float("inf")
        return loss + torch.sqrt((ctx * 0).sum().abs())  # adds 0 to the loss, but its gradient is not finite


@pytest.mark.parametrize("how,clip", [("loss", 0.0), ("grad", 1.0)])
def test_divergence_stops_with_finite_untouched_weights(words_corpus, how, clip):
    from sampledlm.data.corpus import load_ids

    config, vocab = config_for(words_corpus)
    model = build_model(config["model"], len(vocab))
    ids = load_ids(str(words_corpus / "train.txt"), vocab, cache=False)
    os.makedirs(words_corpus / "div")
    opts = TrainOptions(lr=0.1, batch_size=8, epochs=1, clip=clip)
    trainer = Trainer(str(words_corpus / "div"), model, DivergesAtStep(3, how), ids, ids[:40], opts)
    snapshots = []
    real_step = trainer.step

    def step(batch):
        snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return real_step(batch)

    trainer.step = step
    with pytest.raises(UserError, match="diverged.*no checkpoint had been written"):
        trainer.train()
    after = model.state_dict()
    assert all(torch.isfinite(v).all() for v in after.values())
    assert all(torch.equal(after[k], snapshots[-1][k]) for k in after)  # the diverging step applied nothing
    assert not all(torch.equal(after[k], snapshots[0][k]) for k in after)  # the good steps did train
