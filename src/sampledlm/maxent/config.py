"""A maximum-entropy training run's settings (no numba here: the command line reads its defaults cheaply)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class TrainConfig:
    """A maximum-entropy training run's settings; ``sampledlm maxent train`` takes its flags' defaults from here.

    ``lr`` 1.0 goes with ``adagrad`` (steps ``lr g / sqrt(1 + sum g^2)``): the setting of every MaxEnt run of
    docs/results/xu-melm.md, where binary Feat-I at L2 0.3 measured test 152.07 at lr 1 against 154.65 at lr 0.5 and
    151.40 at lr 2 and 151.34 at lr 4 (one seed each: lr 1 to 4 are within noise, 0.5 is worse; the paper's 0.1 is
    for plain SGD, ``adagrad=False``). ``min_gain``: the relative validation gain
    that counts as improving (``--min-improvement``, the neural trainer's name for it)."""

    objective: str = "binary"
    alpha: float = 1.0  # binary: negative sampling rate; softmax: fraction of training positions
    lr: float = 1.0
    epochs: int = 20
    min_gain: float = 0.003
    l2: float = 0.0  # Gaussian prior l2/2 ||theta||^2 over the training set (see train())
    seed: int = 1
    block: int = 32  # positions per update of the dense unigram weights
    adagrad: bool = True  # per-parameter step sizes (False: plain SGD, as in the paper)
    fixed_negatives: bool = False  # binary: True keeps the same negative subset every epoch (the paper's MELM runs)
    average: str = "run"  # "none" | "epoch" | "run" | "auto": which parameter average is evaluated and kept (maxent.train)

    def __post_init__(self):
        if self.average not in AVERAGES:
            raise ValueError(f"average must be one of {', '.join(AVERAGES)}, not {self.average!r}")
        for name in ("alpha", "lr", "min_gain", "l2"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be a finite number, not {getattr(self, name)!r}")
        if not 0.0 < self.alpha <= 1.0 or self.lr <= 0.0 or self.l2 < 0.0:
            raise ValueError(f"need 0 < alpha <= 1, lr > 0, l2 >= 0 (got alpha {self.alpha}, lr {self.lr}, l2 {self.l2})")


AVERAGES = ("none", "epoch", "run", "auto")
