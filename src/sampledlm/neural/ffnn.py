"""Feed-forward n-gram neural LM (Bengio et al. 2003; Schwenk 2007; Monz's lecture; Xu et al. 2011 §2.3).

For a history of the ``n-1`` previous words ``w_{i-n+1} .. w_{i-1}`` (``<s>``-padded)::

    x   = [C(w_{i-n+1}); ...; C(w_{i-1})]          projection layer, (n-1)·d  (shared embeddings C, V+1 rows)
    h_1 = tanh(H_1 x + c_1),  h_k = tanh(H_k h_{k-1} + c_k)     one or more tanh layers of size h
    z   = D h_K                (optional deep output: a linear projection before the output, no bias)
    ctx = [z; x] with direct connections, else z
    a_w = W_w · ctx + b_w      the OutputLayer: W [V, h_out], b [V]

With ``direct=True`` this is Bengio's ``y = b + W x + U tanh(d + H x)`` (skip
connections from the projection layer to the output): concatenating ``x`` to the hidden state lets
the one OutputLayer hold both ``U`` and ``W``, so every objective sees an ordinary ``ctx [N, h_out]``.
``P(w | h) = softmax_w(a_w)`` under the softmax objective (Xu et al. 2011 eq. 11).

Shapes: ``histories [N, n-1]`` int64 (oldest first, ``<s>`` = V) -> ``ctx [N, h_out]``.

With ``sparse_output`` (an objective that reads only a candidate set of output rows) the projection
``C`` takes row-sparse gradients as well: a step touches at most ``N (n-1)`` of its ``V+1`` rows, so
with the output layer's ``O((N + S) h)`` the whole step costs the same at any V.

Training reads shuffled n-gram mini-batches (Schwenk's *bunch mode*, :class:`FeedForwardData`);
evaluation reads the stream in order. A history never crosses a sentence boundary, so running text
and independent sentences give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..config import option
from ..data.batches import ngram_histories, sentence_positions
from ..objectives.output import OutputLayer
from .base import NeuralScorer
from ..objectives.cpu_linear import FastLinear
from .dropout import Dropout


@dataclass
class FFNNConfig:
    """The feed-forward model's settings (``--model ffnn``); defaults: the PTB results pages' model."""

    order: int = option(3, "n-gram order n (a history of n-1 words)", min=2)
    embed_dim: int = option(50, "word embedding size d", min=1, short="-d")
    hidden: list[int] = option([200], "hidden layer sizes (repeat the flag for more tanh layers)", min=1, multiple=True)
    direct: bool = option(False, "direct (skip) connections from the projection layer to the output")
    deep_output: int | None = option(None, "a linear projection of this size before the output layer", min=1)
    dropout: float = option(0.2, "dropout rate", min=0.0, max=0.99)


class FFNN(NeuralScorer):
    Config = FFNNConfig
    #: training settings the results pages use for this model (Adam converges in fewer epochs than SGD)
    train_defaults = {"optimizer": "adam", "lr": 0.001, "batch_size": 256, "epochs": 12, "max_halvings": 3,
                      "min_improvement": 0.003}
    uses_bptt = False  # each prediction's context is its own n-1 words

    def __init__(self, num_words: int, cfg: FFNNConfig, sparse_output: bool = False):
        """Every setting comes from ``cfg`` (its defaults are the only ones: :meth:`build` fills a config from
        keywords)."""
        super().__init__()
        order, embed_dim, hidden, direct, deep_output, dropout = (cfg.order, cfg.embed_dim, tuple(cfg.hidden),
                                                                  cfg.direct, cfg.deep_output, cfg.dropout)
        if order < 2:
            raise ValueError("a feed-forward model needs order >= 2 (at least one word of history)")
        self.order = order
        # row V is <s>; sparse with a sampled output, so a step touches only the batch's history rows
        self.embed = nn.Embedding(num_words + 1, embed_dim, sparse=sparse_output)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        width = (order - 1) * embed_dim
        layers = []
        for h in hidden:
            layers.append(FastLinear(width, h))
            width = h
        self.hidden = nn.ModuleList(layers)
        self.deep = FastLinear(width, deep_output, bias=False) if deep_output else None
        out_dim = (deep_output or width) + ((order - 1) * embed_dim if direct else 0)
        self.direct = direct
        self.drop = Dropout(dropout)
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

    def export_signature(self) -> dict:
        """Example inputs and names of :meth:`export_forward`: ``history [B, n-1]`` (``V`` pads before ``<s>``)."""
        return {"inputs": (torch.zeros((2, self.order - 1), dtype=torch.int64),), "input_names": ["history"],
                "state_names": [], "axes": {"history": {0: "batch"}},
                "meta": {"order": str(self.order), "bos_id": str(self.num_words)}}

    def export_forward(self, history):
        return self(history), ()

    @classmethod
    def check_train_options(cls, opts) -> None:
        """Every option applies (``data_fraction``: each epoch a random share of the positions)."""

    @classmethod
    def from_config(cls, cfg: FFNNConfig, num_words: int, sparse_output: bool = False) -> "FFNN":
        return cls(num_words, cfg, sparse_output=sparse_output)

    @classmethod
    def build(cls, num_words: int, sparse_output: bool = False, **settings) -> "FFNN":
        """``FFNN.build(V, order=5)``: the model of ``FFNNConfig(**settings)``, every other setting its default."""
        return cls(num_words, FFNNConfig(**settings), sparse_output=sparse_output)

    shares_contexts = True

    def history_key(self, history) -> tuple:
        """The last ``n-1`` ids of ``<s> history`` (``<s>`` = V pads a short one): all the model reads."""
        k = self.order - 1
        h = [int(x) for x in history][-k:]
        return (self.num_words,) * (k - len(h)) + tuple(h)

    def history_contexts(self, histories: list) -> torch.Tensor:
        """``ctx [H, h_out]`` after each history: one forward pass over their ``(n-1)``-word keys."""
        if not len(histories):
            return torch.zeros((0, self.hidden_size))
        return self(torch.tensor([self.history_key(h) for h in histories], dtype=torch.int64))

    # --- reading id streams ------------------------------------------------------------------
    def train_data(self, ids: np.ndarray, opts) -> "FeedForwardData":
        return FeedForwardData(ids, self.order, self.num_words, opts.batch_size, opts.seed, opts.data_fraction,
                               opts.data_subset == "fixed")

    def train_contexts(self, batch, carry):
        hist, targets, positions = batch
        return self(hist), targets, positions, None

    def eval_contexts(self, ids: np.ndarray, batch_size: int | None = None, independent: bool = False):
        """Yield ``(ctx [u, h], targets [n], stream positions [n], rows [n])`` covering the stream once.

        Identical histories are computed once (Schwenk 2007): the stream's distinct histories are
        taken in bunches of ``batch_size`` (default 1024), and ``rows`` says which ``ctx`` row (one
        output distribution) serves each of the ``n`` predictions whose history it is.
        """
        ids = np.asarray(ids)
        B = batch_size or 1024
        hist = ngram_histories(ids, sentence_positions(ids), self.order, self.num_words)
        if len(hist) == 0:
            return
        uniq, inverse = np.unique(hist, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        by_row = np.argsort(inverse, kind="stable")  # predictions grouped by their history's row
        bounds = np.searchsorted(inverse[by_row], np.arange(0, len(uniq) + B, B))
        targets = torch.from_numpy(ids.astype(np.int64))
        for k, s in enumerate(range(0, len(uniq), B)):
            at = by_row[bounds[k] : bounds[k + 1]]
            rows = torch.from_numpy(inverse[at] - s)
            yield self(torch.from_numpy(uniq[s : s + B])), targets[at], at, rows


class FeedForwardData:
    """Shuffled n-gram mini-batches; the order of epoch e depends only on (seed, e).

    ``fraction < 1`` trains each epoch on a random share of the positions, the standard model's
    data subsampling in Xu et al. 2011 (tables 4-7): ``fixed=True`` draws the share once (the same
    positions every epoch, in a new order), otherwise a fresh share each epoch. A batch is
    ``(histories [B, n-1], targets [B], stream positions [B])``.
    """

    def __init__(self, ids: np.ndarray, order: int, bos_id: int, batch_size: int, seed: int,
                 fraction: float = 1.0, fixed: bool = False):
        self.ids = np.asarray(ids)
        self.positions = sentence_positions(self.ids)
        self.order, self.bos_id, self.batch_size, self.seed = order, bos_id, batch_size, seed
        self.size = max(1, round(fraction * len(self.ids))) if fraction < 1.0 else len(self.ids)
        self.fixed = fixed
        self._perm_epoch, self._perm = None, None

    def num_batches(self) -> int:
        return (self.size + self.batch_size - 1) // self.batch_size

    def order_of(self, epoch: int) -> np.ndarray:
        """The positions epoch ``epoch`` visits, in order."""
        n = len(self.ids)
        if self.fixed and self.size < n:  # one share for the whole run, visited in an order that changes per epoch
            share = np.random.default_rng([self.seed, 2**32 - 1]).permutation(n)[: self.size]
            return share[np.random.default_rng([self.seed, epoch]).permutation(self.size)]
        return np.random.default_rng([self.seed, epoch]).permutation(n)[: self.size]

    def batch(self, epoch: int, b: int):
        if self._perm_epoch != epoch:
            self._perm, self._perm_epoch = self.order_of(epoch), epoch
        at = self._perm[b * self.batch_size : (b + 1) * self.batch_size]
        hist = ngram_histories(self.ids, self.positions, self.order, self.bos_id, at)
        return torch.from_numpy(hist), torch.from_numpy(self.ids[at].astype(np.int64)), torch.from_numpy(at.astype(np.int64))
