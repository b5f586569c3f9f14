"""The output word embeddings shared by every neural scorer: ``a_w(h) = W_w . h + b_w``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .normaliser import blocked, log_normalised_targets
from .cpu_linear import fast_linear
from .row_scores import row_scores


def _wide(scores: torch.Tensor) -> torch.Tensor:
    """Scores computed in 16 bits (under autocast) as float32; other dtypes as they are."""
    return scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores


class OutputLayer(nn.Module):
    """Output embeddings ``weight [V, h]`` and biases ``bias [V, 1]``; implements the scorer methods
    of :class:`sampledlm.objectives.base.Scorer` with ``ctx`` = hidden states ``[N, h]``.

    With ``sparse=True`` the candidate-set methods gather rows with ``F.embedding(..., sparse=True)``,
    so a sampled objective's backward pass produces *sparse* gradients that touch only the
    S rows drawn: the output layer then costs O(S h) per step in the forward pass, the
    backward pass and an optimiser that supports sparse gradients (SGD, SparseAdam).
    ``score_all`` is always dense (it touches every row anyway). On the CPU, ``score_each`` (each
    position's own candidates) returns one coalesced row gradient of the distinct ids drawn
    (:mod:`.row_scores`). The bias is stored as a
    ``[V, 1]`` column so that it, too, can receive a sparse row gradient.

    Scores are returned in float32 whatever the autocast precision: the products run in 16 bits
    under ``--precision bf16|fp16``, but every objective's log-sum-exp, log-softmax, sigmoid and loss
    then work on float32 numbers (:mod:`sampledlm.neural.device`).
    """

    def __init__(self, num_words: int, hidden_size: int, sparse: bool = False):
        super().__init__()
        self.num_words = num_words
        self.sparse = sparse
        self.weight = nn.Parameter(torch.empty(num_words, hidden_size))
        self.bias = nn.Parameter(torch.zeros(num_words, 1))
        nn.init.normal_(self.weight, std=hidden_size ** -0.5)

    @property
    def hidden_size(self) -> int:
        """``h``: the width of the hidden states this layer scores."""
        return self.weight.shape[1]

    def _rows(self, words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = F.embedding(words, self.weight, sparse=self.sparse)
        b = F.embedding(words, self.bias, sparse=self.sparse).squeeze(-1)
        return w, b

    def score_targets(self, ctx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        w, b = self._rows(targets)  # [N, h], [N]
        return _wide((ctx * w).sum(-1) + b)

    def score_shared(self, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        w, b = self._rows(words)  # [S, h], [S]
        return _wide(fast_linear(ctx, w, b))

    def score_each(self, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        if self.sparse and ctx.device.type == "cpu" and self.weight.dtype == torch.float32:
            return row_scores(self.weight, self.bias, ctx, words)  # one compact sparse gradient, no bmm
        w, b = self._rows(words)  # [N, S, h], [N, S]
        return _wide(torch.bmm(w, ctx.unsqueeze(-1)).squeeze(-1) + b)

    def score_blocks(self, ctx: torch.Tensor, ctx_sizes: list[int], words: torch.Tensor,
                     word_sizes: list[int]) -> list[torch.Tensor]:
        # One gather of the rows and splits (whose backward is one concatenation), not a gather per group:
        # per-group gathers would each send back a gradient the size of W or of ctx.
        w, b = self._rows(words)  # [S, h], [S]
        return [_wide(fast_linear(cg, wg, bg))
                for cg, wg, bg in zip(ctx.split(ctx_sizes), w.split(word_sizes), b.split(word_sizes))]

    def score_all(self, ctx: torch.Tensor) -> torch.Tensor:
        return _wide(fast_linear(ctx, self.weight, self.bias.squeeze(1)))

    def normalised_targets(self, ctx: torch.Tensor, targets: torch.Tensor, offset=None,
                           log_sigmoid: bool = False) -> torch.Tensor | None:
        """Exact ``log P(targets | ctx)`` ``[N]`` over all V words in blocks of rows, never an ``[N, V]`` matrix
        (:func:`.normaliser.log_normalised_targets`), when the vocabulary is large enough for that to pay
        (:func:`.normaliser.blocked`); None otherwise (the caller takes the one-product path)."""
        if not blocked(self.num_words) or not torch.is_tensor(ctx) or ctx.dim() != 2:
            return None
        return log_normalised_targets(self.weight, self.bias.squeeze(1), ctx, targets, offset=offset,
                                      log_sigmoid=log_sigmoid)

    @torch.no_grad()
    def shift_bias(self, delta) -> None:
        delta = torch.as_tensor(delta, dtype=self.bias.dtype, device=self.bias.device)
        self.bias.add_(delta.reshape(-1, 1) if delta.dim() else delta)
