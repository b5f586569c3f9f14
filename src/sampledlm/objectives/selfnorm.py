"""Self-normalisation (Devlin et al. 2014): the softmax loss plus a penalty that drives log Z(h) to 0,
so that a decoder may use the raw score ``a_w(h)`` as ``log P(w|h)`` without summing over V.

    loss = -a_y(h) + log Z(h) + alpha (log Z(h))^2,        log Z(h) = log sum_w exp a_w(h)

averaged over the batch (Devlin et al. 2014 eq. 3; alpha = 0.1 there). The output biases start at
``log(1/V)`` (:meth:`SelfNormalised.prepare`), where a fresh model's log Z is already about 0.

The penalty acts on the training-mode network; with dropout, the evaluation-mode network's log Z
sits off 0 by a near-constant amount (on PTB's feed-forward trigram with alpha = 0.1, a mean of
-0.19 on test text and -0.18 on training text). So after training, by default
(``selfnorm_calibrate``), the trainer measures the mean log Z on the validation text and shifts the
output biases by its negative (:meth:`SelfNormalised.calibrate`): exact probabilities do not change,
the raw scores' mean log Z moves to about 0.

Training costs what the softmax costs (O(V h): Z is computed exactly); the saving is at inference,
where one score is O(h). Evaluation still uses the exact softmax (inherited ``log_prob``);
:meth:`log_normaliser` lets ``sampledlm eval`` report how far the shortcut is from it (mean and spread
of log Z on the test file, and the perplexity the raw scores would give).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..config import option
from .base import OutputObjective, Scorer


@dataclass
class SelfNormOptions:
    selfnorm_alpha: float = option(0.1, "selfnorm: weight alpha of the (log Z)^2 penalty (Devlin et al. 2014: 0.1)",
                                   min=0.0)
    selfnorm_calibrate: bool = option(True, "selfnorm: after training, shift the output biases so the mean log Z on "
                                            "the validation text is 0 (exact probabilities unchanged)")


class SelfNormalised(OutputObjective):
    """Softmax cross-entropy with the self-normalisation penalty ``alpha (log Z)^2`` (``selfnorm_alpha``).

    Shapes: ``ctx`` for N histories, ``targets [N]`` -> scalar mean loss. Unnormalised scoring:
    :meth:`unnormalised_log_prob_targets` ``[N]`` (O(h) per query); :meth:`log_normaliser` ``[N]``.
    """

    name = "selfnorm"
    scores_every_word = True

    Options = SelfNormOptions

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        self.alpha = float(self.options.selfnorm_alpha)
        self.calibrate_on_valid = bool(self.options.selfnorm_calibrate)

    def calibrate(self, scorer: Scorer, log_z_mean: float) -> float:
        """Shift every output bias by ``-log_z_mean`` (the mean log Z the trainer measured on the
        validation text in evaluation mode, after training): the raw scores' log Z then averages 0 there,
        while every exact probability is unchanged (a constant added to all V scores cancels in the
        softmax). Returns the shift."""
        scorer.shift_bias(-float(log_z_mean))
        return -float(log_z_mean)

    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        a = scorer.score_all(ctx).float()
        log_z = torch.logsumexp(a, dim=1)
        true = a.gather(1, targets.unsqueeze(1)).squeeze(1)
        return (log_z - true + self.alpha * log_z.pow(2)).mean()

    def prepare(self, scorer: Scorer) -> None:
        """Start every output bias at ``log(1/V)`` (a fresh model's are 0), so log Z starts near 0."""
        scorer.shift_bias(-math.log(scorer.num_words))

    def log_normaliser(self, scorer: Scorer, ctx: Any) -> torch.Tensor:
        return torch.logsumexp(scorer.score_all(ctx).float(), dim=1)

    def unnormalised_log_prob_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """The decoder's shortcut: the raw score ``a_y(h)`` taken as ``log P(y|h)``, ``[N]`` (not normalised)."""
        return scorer.score_targets(ctx, targets).float()
