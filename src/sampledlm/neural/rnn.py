"""Recurrent neural LM: GRU or LSTM with an output projection (seed 001 §6.2).

For the input stream ``x_1 .. x_T`` (``</s>`` first, see :mod:`sampledlm.data.batches`)::

    e_t       = E[x_t]                              input embedding, E [V+1, e]
    h_t, s_t  = GRU/LSTM(e_t, s_{t-1})              ``layers`` stacked cells of size ``hidden``
    ctx_t     = P h_t   (when ``proj`` is set)      projection P [proj, hidden] (seed 001: s_t(c) = w_c^T P h_t)
    a_w       = W_w · ctx_t + b_w                   the OutputLayer, W [V, h_out]

With ``tie=True`` the input embedding of word w *is* the output row ``W_w`` (Press & Wolf 2017;
Inan et al. 2017), which needs ``embed_dim == h_out``; only ``<s>`` (id V) keeps a row of its own.
Dropout (when > 0) is applied to the embeddings, between layers and to ``h_t``.

State: ``forward(x [B, T], state) -> (hidden [B, T, h_out], state)``; ``state=None`` means zeros
(the recurrent state starts at zero). The trainer carries the state across the BPTT segments
of an epoch (detached, so gradients stop at the segment boundary) and resets it to zero at the
start of every epoch and of every evaluation pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import NeuralScorer
from ..objectives.output import OutputLayer

State = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


class RNNLM(NeuralScorer):
    kind = "rnn"

    def __init__(self, num_words: int, cell: str = "gru", embed_dim: int = 200, hidden: int = 200, layers: int = 1,
                 dropout: float = 0.0, proj: int | None = None, tie: bool = False, sparse_output: bool = False):
        super().__init__()
        if cell not in ("gru", "lstm"):
            raise ValueError(f"unknown cell {cell!r}")
        out_dim = proj or hidden
        if tie and embed_dim != out_dim:
            raise ValueError(f"tied embeddings need embed_dim ({embed_dim}) == output size ({out_dim})")
        self.cell, self.tie = cell, tie
        rnn = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = rnn(embed_dim, hidden, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.proj = nn.Linear(hidden, proj, bias=False) if proj else None
        self.drop = nn.Dropout(dropout)
        # A tied output layer is also read densely by the input lookup, so it is never built sparse.
        self.output = OutputLayer(num_words, out_dim, sparse=sparse_output and not tie)
        if tie:
            self.bos_embed = nn.Parameter(torch.empty(1, embed_dim).uniform_(-0.1, 0.1))
        else:
            self.embed = nn.Embedding(num_words + 1, embed_dim)
            nn.init.uniform_(self.embed.weight, -0.1, 0.1)

    def embed_ids(self, x: torch.Tensor) -> torch.Tensor:
        if not self.tie:
            return self.embed(x)
        table = torch.cat([self.output.weight, self.bos_embed], dim=0)  # [V+1, e]
        return F.embedding(x, table)

    def forward(self, x: torch.Tensor, state: State | None = None) -> tuple[torch.Tensor, State]:
        """``x [B, T]`` int64 -> ``(hidden [B, T, h_out], new state)``."""
        out, state = self.rnn(self.drop(self.embed_ids(x)), state)
        out = self.drop(out)
        if self.proj is not None:
            out = self.proj(out)
        return out, state


def detach_state(state: State | None) -> State | None:
    """Cut the graph at a segment boundary (truncated BPTT), keeping the values."""
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(s.detach() for s in state)
    return state.detach()
