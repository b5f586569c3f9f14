"""When a training run counts as diverged: the hard stop (a non-finite or absurd loss) and the warning for a slow
divergence (an epoch's running loss climbing well above its lowest)."""

from __future__ import annotations

import math

# A mean training loss above this many nats per prediction is a diverged run, even when it is finite: a softmax
# starts near ln V (about 9 for V = 10k, 16 for V = 10M) and every sampled objective's loss is a sum of at most a
# few thousand softplus / log terms of such scores. Whether a huge learning rate gives nan or a huge finite loss
# depends on the CPU's floating-point path (AVX-512 keeps -1.6e30 finite where AVX2 gives nan); both stop here.
DIVERGED_LOSS = 1e6


def diverged(loss: float) -> bool:
    """True for a non-finite loss or one beyond :data:`DIVERGED_LOSS` (in either sign)."""
    return not math.isfinite(loss) or abs(loss) > DIVERGED_LOSS


class RisingLoss:
    """Watches an epoch's running mean training loss and says once when it has climbed :attr:`NATS` above the lowest
    it reached (after :attr:`AFTER` steps of the epoch): a run diverging slowly, which the hard stop
    (:func:`diverged`) does not catch. At V = 485k, IS at lr 0.008 (PTB's best) went 5.92 -> 6.63 -> 11.75 -> 20.7
    over epoch 1 without a non-finite loss; the warning saves a user the hours such a run would otherwise take."""

    NATS = 1.0
    AFTER = 50

    def __init__(self):
        self.low = math.inf
        self.steps = 0
        self.warned = False

    def new_epoch(self) -> None:
        self.low, self.steps = math.inf, 0

    def update(self, mean_loss: float) -> float | None:
        """The lowest running mean when ``mean_loss`` (the epoch's running mean after this step) first stands
        :attr:`NATS` above it, else None."""
        self.steps += 1
        if self.steps < self.AFTER or self.warned:
            return None
        if mean_loss < self.low:
            self.low = mean_loss
            return None
        if mean_loss > self.low + self.NATS:
            self.warned = True
            return self.low
        return None
