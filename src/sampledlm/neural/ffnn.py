"""Feed-forward n-gram neural LM (Bengio et al. 2003; Schwenk 2007; seed 002, seed 004, seed 000 §2.3).

For a history of the ``n-1`` previous words ``w_{i-n+1} .. w_{i-1}`` (``<s>``-padded)::

    x   = [C(w_{i-n+1}); ...; C(w_{i-1})]          projection layer, (n-1)·d  (shared embeddings C, V+1 rows)
    h_1 = tanh(H_1 x + c_1),  h_k = tanh(H_k h_{k-1} + c_k)     one or more tanh layers of size h
    z   = D h_K                (optional deep output: a linear projection before the output, no bias)
    ctx = [z; x] with direct connections, else z
    a_w = W_w · ctx + b_w      the OutputLayer: W [V, h_out], b [V]

With ``direct=True`` this is Bengio's ``y = b + W x + U tanh(d + H x)`` (seed 004, skip
connections from the projection layer to the output): concatenating ``x`` to the hidden state lets
the one OutputLayer hold both ``U`` and ``W``, so every objective sees an ordinary ``ctx [N, h_out]``.
``P(w | h) = softmax_w(a_w)`` under the softmax objective (seed 000 eq. 11).

Shapes: ``histories [N, n-1]`` int64 (oldest first, ``<s>`` = V) -> ``ctx [N, h_out]``.
"""

from __future__ import annotations

import torch
from torch import nn

from .base import NeuralScorer
from ..objectives.output import OutputLayer


class FFNN(NeuralScorer):
    kind = "ffnn"

    def __init__(self, num_words: int, order: int = 3, embed_dim: int = 50, hidden: tuple[int, ...] = (200,),
                 direct: bool = False, deep_output: int | None = None, dropout: float = 0.0,
                 sparse_output: bool = False):
        super().__init__()
        if order < 2:
            raise ValueError("a feed-forward model needs order >= 2 (at least one word of history)")
        self.order = order
        self.embed = nn.Embedding(num_words + 1, embed_dim)  # row V is <s>
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        width = (order - 1) * embed_dim
        layers = []
        for h in hidden:
            layers.append(nn.Linear(width, h))
            width = h
        self.hidden = nn.ModuleList(layers)
        self.deep = nn.Linear(width, deep_output, bias=False) if deep_output else None
        out_dim = (deep_output or width) + ((order - 1) * embed_dim if direct else 0)
        self.direct = direct
        self.drop = nn.Dropout(dropout)
        self.output = OutputLayer(num_words, out_dim, sparse=sparse_output)

    def forward(self, histories: torch.Tensor) -> torch.Tensor:
        """``histories [N, n-1]`` -> ``ctx [N, h_out]``."""
        x = self.drop(self.embed(histories).flatten(1))  # [N, (n-1) d]
        h = x
        for layer in self.hidden:
            h = self.drop(torch.tanh(layer(h)))
        if self.deep is not None:
            h = self.deep(h)
        return torch.cat([h, x], dim=1) if self.direct else h
