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
        if self.how == "nan":
            return loss * float("nan")
        if self.how == "huge":  # what AVX-512 CPUs give for a huge learning rate: finite, absurd
            return loss + 1.6e30
        return loss + torch.sqrt((ctx * 0).sum().abs())  # adds 0 to the loss, but its gradient is not finite


@pytest.mark.parametrize("how,clip", [("loss", 0.0), ("grad", 1.0), ("nan", 0.0), ("huge", 0.0)])
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


def test_a_validation_perplexity_that_overflows_stops_as_diverged(words_corpus):
    """Finite training losses, yet validation log probabilities so low that exp overflows: a diverged run."""
    from sampledlm.data.corpus import load_ids

    config, vocab = config_for(words_corpus)
    model = build_model(config["model"], len(vocab))
    ids = load_ids(str(words_corpus / "train.txt"), vocab, cache=False)
    os.makedirs(words_corpus / "div")
    trainer = Trainer(str(words_corpus / "div"), model, SoftmaxObjective(), ids, ids[:40],
                      TrainOptions(lr=0.1, batch_size=8, epochs=2))
    trainer.valid_perplexity = lambda: float("inf")
    with pytest.raises(UserError, match="diverged at epoch 1.*validation perplexity inf"):
        trainer.train()


@pytest.mark.parametrize("loss,stops", [(float("nan"), True), (float("inf"), True), (-float("inf"), True),
                                        (1.6e30, True), (-1.6e30, True), (2e6, True), (9.2, False), (5e5, False)])
def test_the_divergence_rule(loss, stops):
    from sampledlm.neural.trainer import DIVERGED_LOSS, diverged

    assert diverged(loss) is stops
    assert DIVERGED_LOSS >= 1e4  # far above any sane loss (ln V is 9.2 for V = 10k)


def test_a_running_loss_that_climbs_is_warned_about_once_and_training_goes_on(words_corpus, monkeypatch):
    """A slow divergence (IS at its PTB rate at V = 485k: a running loss of 5.92 that climbed to 20.7 over an epoch,
    never infinite) is not stopped, but the user is told, once, with the rate to lower."""
    from sampledlm.data.corpus import load_ids
    from sampledlm.neural import divergence

    monkeypatch.setattr(divergence.RisingLoss, "AFTER", 2)
    config, vocab = config_for(words_corpus)
    model = build_model(config["model"], len(vocab))
    ids = load_ids(str(words_corpus / "train.txt"), vocab, cache=False)
    os.makedirs(words_corpus / "rise")

    class Rises(SoftmaxObjective):
        calls = 0

        def forward(self, scorer, ctx, targets):
            self.calls += 1
            loss = super().forward(scorer, ctx, targets)
            return loss + 20.0 if self.calls >= 4 else loss  # 20 nats more from the fourth step on

    said = []
    trainer = Trainer(str(words_corpus / "rise"), model, Rises(), ids, ids[:40],
                      TrainOptions(lr=0.01, batch_size=8, epochs=2), log=said.append)
    trainer.train()
    warned = [m for m in said if m.startswith("warning: the running training loss")]
    assert len(warned) == 1 and "epoch 1" in warned[0] and "--lr (this run: 0.01)" in warned[0], said
    assert trainer.state.epoch == 2  # it trained on


def test_the_rising_loss_watch():
    from sampledlm.neural.divergence import RisingLoss

    w = RisingLoss()
    w.AFTER = 1
    means = [9.0, 7.0, 6.0, 5.92, 6.63, 6.9]  # down, then up by less than a nat: quiet
    assert [w.update(m) for m in means] == [None] * len(means)
    assert w.update(6.93) == 5.92  # a nat and more above the lowest
    assert w.update(11.75) is None  # said once
    w2 = RisingLoss()
    assert all(w2.update(m) is None for m in [5.0] + [9.0] * (RisingLoss.AFTER - 2))  # too early to judge
