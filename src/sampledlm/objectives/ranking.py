"""The log-sigmoid ranking objective (Collobert & Weston 2008 made smooth; Botev et al. 2017 §5.3, eq. 26)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch.nn.functional as F

from ..config import option
from .options import NegativesOptions
from .sampled import NegativesObjective, count_kept, masked_fill


@dataclass
class RankingOptions(NegativesOptions):
    margin: float | None = option(None, "ranking: the margin (default log(V-1))", min=0.0)


class Ranking(NegativesObjective):
    """Ask the true word's score to beat each sampled word's by a margin Δ:
    ``loss = -(1/S) sum_{d in N_y} log σ(a_y - a_d - Δ)`` over S negatives d != y drawn from q.

    With Δ = log(V - 1) (the default, ``margin=None``) and a single uniform negative this is the
    one-sample CSS estimate of ``log p(y|h)`` (Botev et al. 2017 eq. 27-28); averaging over the S negatives
    (the paper's sum divided by S) keeps the loss on the log-likelihood scale for any S.
    """

    name = "ranking"

    Options = RankingOptions

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        margin = self.options.margin
        self.margin = None if margin is None else float(margin)

    def delta(self) -> float:
        """Δ: the ``margin`` option, or log(V - 1)."""
        return self.margin if self.margin is not None else math.log(max(self.noise.numel() - 1, 1))

    def loss(self, true, logq_true, scores, logq, keep):
        n = count_kept(keep, *scores.shape, scores.device)
        terms = F.softplus(scores + self.delta() - true.unsqueeze(1))  # -log σ(a_y - a_d - Δ)
        return masked_fill(terms, keep, 0.0).sum(1) / n
