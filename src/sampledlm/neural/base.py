"""What every neural scorer shares: an :class:`~.output.OutputLayer` and the Scorer methods delegated to it.

A neural model computes a hidden representation ``ctx = hidden [N, h]`` of N histories
(``forward``); the scores ``a_w(h) = W_w . h + b_w`` come from ``self.output``. Objectives only
ever call the delegating methods below, so a model never needs to know which objective trains it.
"""

from __future__ import annotations

import torch
from torch import nn

from ..objectives.output import OutputLayer


class NeuralScorer(nn.Module):
    """Base class: subclasses set ``self.output = OutputLayer(V, h, sparse)`` and define ``forward``."""

    output: OutputLayer
    kind: str = "neural"

    @property
    def num_words(self) -> int:
        return self.output.num_words

    def score_targets(self, ctx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.output.score_targets(ctx, targets)

    def score_shared(self, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        return self.output.score_shared(ctx, words)

    def score_each(self, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        return self.output.score_each(ctx, words)

    def score_all(self, ctx: torch.Tensor) -> torch.Tensor:
        return self.output.score_all(ctx)

    def shift_bias(self, delta) -> None:
        self.output.shift_bias(delta)

    def sparse_parameters(self) -> list[nn.Parameter]:
        """Parameters that receive sparse gradients (the output layer's, when built sparse)."""
        return list(self.output.parameters()) if self.output.sparse else []
