"""The exact softmax: the reference every approximation is measured against."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .base import OutputObjective, Scorer


class SoftmaxObjective(OutputObjective):
    """Cross-entropy over all V words: ``loss = -a_y(h) + log sum_w exp a_w(h)``. Cost O(V h) per example.

    Shapes: ``ctx`` for N histories, ``targets [N]`` -> scalar mean loss.
    """

    name = "softmax"
    scores_every_word = True

    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(scorer.score_all(ctx), targets)
