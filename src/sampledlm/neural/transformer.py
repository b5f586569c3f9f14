"""Causal Transformer decoder LM (Vaswani et al. 2017; pre-LayerNorm as in GPT-2, Radford et al. 2019).

For the input stream ``x_1 .. x_T`` (``</s>`` first, as the recurrent models read it)::

    z_0   = sqrt(d) e(x_t) + p_t                 e: the word embedding (tied to the output rows by default,
                                                 or adaptive input bands, Baevski & Auli 2019), p_t: learned
                                                 or sinusoidal position t (0-based within the window)
    z_l   = z_{l-1} + Attn(LN(z_{l-1}))          causal multi-head self-attention, ``heads`` heads
    z_l  += FF(LN(z_l))                          FF(u) = W_2 GELU(W_1 u), W_1 [ff_dim, d]
    ctx_t = LN(z_L)                              [d]; the scores a_w = W_w . ctx_t + b_w (the OutputLayer)

Attention is :func:`torch.nn.functional.scaled_dot_product_attention` with ``is_causal`` (the
flash / memory-efficient kernels where the device has them). Dropout (``dropout``) on the input sum,
the attention weights and each residual branch. The window is ``context`` tokens (default: the
training ``--bptt``): training reads the stream in ``[batch, bptt]`` segments, each attended on its own
(no memory across segments, as PyTorch's word_language_model example).

Evaluation (exact, every token predicted once):

- running text (``independent=False``): a sliding window of ``context`` inputs advanced by
  ``stride`` tokens; each window predicts only its last ``stride`` tokens (the first window all of
  its own), so every token after the first window sees at least ``context - stride`` tokens of
  history. ``stride = context`` is block evaluation (consecutive non-overlapping windows).
- independent sentences: each sentence read from ``</s>`` on its own, by the same sliding window
  when it is longer than the window.

Generation and :meth:`~sampledlm.neural.lm.NeuralLM.next_logprobs` use a key-value cache
(:meth:`TransformerLM.decode`): one new word costs one position's pass, not the whole prefix's.

With ``sparse_output`` (an objective that reads only a candidate set of output rows) the word tables
take row-sparse gradients: the untied embedding, the adaptive input's bands, or the tied output rows
(looked up in place, so their gradient holds only the batch's input, target and candidate rows).

Shapes: ``forward(x [B, T]) -> (hidden [B, T, d], cache)``, ``T <= context``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..config import option, setting_value
from ..data.vocab import EOS_ID
from ..errors import UserError
from ..lm import sentence_bounds
from ..objectives.output import OutputLayer
from . import adaptive_input
from .base import NeuralScorer
from .rnn import RecurrentData
from ..objectives.cpu_linear import FastLinear
from .dropout import Dropout, WordDropout

Cache = list  # per layer: (keys, values), each [B, heads, t, d / heads]


@dataclass
class TransformerConfig(adaptive_input.InputOptions):
    """The Transformer decoder's settings (``--model transformer``); defaults: a small PTB model."""

    embed_dim: int = option(256, "model size d: embeddings, attention and the residual stream", min=1, short="-d")
    layers: int = option(4, "decoder blocks", min=1)
    heads: int = option(4, "attention heads (d must be a multiple)", min=1)
    ff_dim: int | None = option(None, "feed-forward inner size [default: 4 d]", min=1)
    dropout: float = option(0.3, "dropout rate", min=0.0, max=0.99)
    positions: str = option("learned", "position embeddings: learned or sinusoidal (Vaswani et al. 2017)",
                            choices=("learned", "sinusoidal"))
    context: int | None = option(None, "transformer: attention window in tokens [default: the training --bptt]",
                                 min=1)
    stride: int | None = option(None, "transformer, running-text evaluation: the window advances this many tokens, "
                                      "so every token sees at least context - stride words [default: context / 2]",
                                min=1)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.qkv = FastLinear(dim, 3 * dim)
        self.proj = FastLinear(dim, dim)
        self.resid_drop = Dropout(dropout)

    def forward(self, x: torch.Tensor, past: tuple | None = None) -> tuple[torch.Tensor, tuple]:
        B, T, D = x.shape
        q, k, v = (t.view(B, T, self.heads, D // self.heads).transpose(1, 2) for t in self.qkv(x).split(D, dim=2))
        if past is not None:
            k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
        drop = self.dropout if self.training else 0.0
        if past is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)
        else:  # T new positions after S - T cached ones: position i sees keys 0 .. S - T + i
            S = k.shape[2]
            mask = None if T == 1 else torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
        y = y.transpose(1, 2).reshape(B, T, D)
        return self.resid_drop(self.proj(y)), (k, v)


class Block(nn.Module):
    """Pre-LN decoder block: ``z + Attn(LN z)``, then ``z + FF(LN z)``."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, dropout)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(FastLinear(dim, ff_dim), nn.GELU(), FastLinear(ff_dim, dim), Dropout(dropout))

    def forward(self, x: torch.Tensor, past: tuple | None = None) -> tuple[torch.Tensor, tuple]:
        a, present = self.attn(self.ln_1(x), past)
        x = x + a
        return x + self.mlp(self.ln_2(x)), present


def sinusoids(length: int, dim: int) -> torch.Tensor:
    """``[length, dim]``: ``sin(t / 10000^(2i/d))`` in even columns, ``cos`` in odd ones (Vaswani et al. 2017)."""
    t = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(t * freq)
    pe[:, 1::2] = torch.cos(t * freq)[:, : dim // 2]
    return pe


def window_spans(n: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """``[(start, first, end)]`` covering positions ``0 .. n-1`` once: the window reads inputs
    ``[start, end)`` (at most ``window`` of them) and predicts positions ``[first, end)``: the first
    window its ``window`` positions, each later one the next ``stride`` (fewer at the end) after
    ``window - stride`` positions of context. ``stride == window``: consecutive blocks."""
    end = min(n, window)
    spans = [(0, 0, end)] if n else []
    while end < n:
        new_end = min(n, end + stride)
        spans.append((end - (window - stride), end, new_end))
        end = new_end
    return spans


class TransformerLM(NeuralScorer):
    Config = TransformerConfig
    #: training settings for this model (Adam; the results page's PTB runs)
    train_defaults = {"optimizer": "adam", "lr": 0.001, "batch_size": 32, "bptt": 64, "clip": 1.0, "epochs": 10,
                      "max_halvings": 3, "min_improvement": 0.003}
    uses_counts = True  # the adaptive input's bands are ranks by training count
    crosses_sentences = True  # running text: the window holds the sentences before

    def __init__(self, num_words: int, cfg: TransformerConfig, counts=None, sparse_output: bool = False):
        super().__init__()
        d, ff = cfg.embed_dim, cfg.ff_dim or 4 * cfg.embed_dim
        if d % cfg.heads:
            raise ValueError(f"-d {d} is not a multiple of --heads {cfg.heads}")
        if cfg.context is None:
            raise ValueError("the attention window (context) is not set")
        if cfg.stride is not None and cfg.stride > cfg.context:
            raise ValueError(f"--stride {cfg.stride} is longer than the window --context {cfg.context}")
        self.cfg, self.dim, self.context = cfg, d, cfg.context
        self.stride = cfg.stride or max(1, cfg.context // 2)
        self.output = OutputLayer(num_words, d, sparse=sparse_output)
        if cfg.adaptive_input:
            self.embed = adaptive_input.from_config(cfg, num_words, d, counts,
                                                    head_rows=(lambda: self.output.weight) if cfg.tie else None,
                                                    sparse=sparse_output)
        elif cfg.tie:
            self.bos_embed = nn.Parameter(torch.empty(1, d).normal_(std=d ** -0.5))
        else:
            self.embed = nn.Embedding(num_words + 1, d, sparse=sparse_output)
            nn.init.normal_(self.embed.weight, std=d ** -0.5)
        if cfg.positions == "learned":
            self.pos = nn.Parameter(torch.empty(cfg.context, d).normal_(std=0.5))
        else:
            self.register_buffer("pos", sinusoids(cfg.context, d), persistent=False)
        self.drop = Dropout(cfg.dropout)
        self.word_drop = WordDropout(cfg.embed_dropout)
        self.blocks = nn.ModuleList(Block(d, cfg.heads, ff, cfg.dropout) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.blocks.named_parameters():  # GPT-2's initialisation
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * cfg.layers) if name.endswith(("attn.proj.weight", "mlp.2.weight")) else 0.02
                nn.init.normal_(p, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    @classmethod
    def from_config(cls, cfg: TransformerConfig, num_words: int, sparse_output: bool = False,
                    counts=None) -> "TransformerLM":
        return cls(num_words, cfg, counts=counts, sparse_output=sparse_output)

    @staticmethod
    def complete(spec: dict, train: dict) -> dict:
        """The window from the training ``bptt`` when not set."""
        if spec.get("context") is None:
            spec = {**spec, "context": int(train["bptt"])}
        return spec

    def adaptive_input_bands(self):
        """``(cutoffs, factor, order, [(Q_i, E_i)])`` of a tied adaptive input, for the adaptive softmax to
        share (:meth:`~sampledlm.objectives.adaptive.AdaptiveSoftmax.shared_bands`); else None."""
        if not (self.cfg.adaptive_input and self.cfg.tie):
            return None
        return self.embed.offer()

    # --- the network ------------------------------------------------------------------------
    def embed_ids(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, T]`` -> ``[B, T, d]``. Tied: word w's output row, ``<s>`` (id V) its own row, looked up in
        place (no ``[V+1, d]`` copy of the table per call, whose backward pass would be a dense ``[V, d]``
        gradient), row-sparse when the output layer is sparse."""
        if self.cfg.adaptive_input or not self.cfg.tie:
            return self.embed(x)
        return adaptive_input.tied_embedding(x, self.output, self.bos_embed)

    def forward(self, x: torch.Tensor, past: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        """``x [B, T]`` (after ``t0`` cached positions when ``past`` is given) -> ``(ctx [B, T, d], cache)``."""
        t0 = 0 if past is None else past[0][0].shape[2]
        T = x.shape[1]
        if t0 + T > self.context:
            raise ValueError(f"{t0 + T} positions do not fit the window of {self.context}")
        z = self.drop(self.word_drop(x, self.embed_ids(x)) * math.sqrt(self.dim) + self.pos[t0 : t0 + T])
        cache = []
        for i, block in enumerate(self.blocks):
            z, present = block(z, None if past is None else past[i])
            cache.append(present)
        return self.ln_f(z), cache

    @torch.no_grad()
    def decode(self, x: torch.Tensor, past: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        """Inference step with the key-value cache: ``forward`` in eval mode (``x [B, T]`` new inputs)."""
        return self(x, past)

    # --- reading id streams ------------------------------------------------------------------
    def train_data(self, ids: np.ndarray, opts) -> RecurrentData:
        self.check_train_options(opts)
        if opts.bptt > self.context:
            raise UserError(f"{setting_value('bptt', opts.bptt)} is longer than the transformer's window (context {self.context})")
        return RecurrentData(ids, opts.batch_size, opts.bptt)

    def train_contexts(self, batch, carry):
        """One ``[B, bptt]`` segment, attended on its own (nothing is carried between segments)."""
        x, y, mask, positions = batch
        hidden, _ = self(x)
        return hidden[mask], y[mask], positions[mask], None

    def export_signature(self) -> dict:
        """Example inputs and names of :meth:`export_forward`: ``words [B, T]``, T at most the window."""
        return {"inputs": (torch.zeros((1, 3), dtype=torch.int64),), "input_names": ["words"], "state_names": [],
                "axes": {"words": {0: "batch", 1: "time"}}, "meta": {"window": str(self.context)}}

    def export_forward(self, words):
        return self(words)[0], ()

    def next_window(self, n: int) -> int:
        """Where the window that predicts position ``n`` of a sentence starts, as :meth:`eval_contexts` reads a
        sentence whose last position is ``n`` (its last span): scoring, ``advance``, ``/next`` and
        ``next_logprobs`` all predict a word after a history from this window, so they agree."""
        return window_spans(n + 1, self.context, self.stride)[-1][0]

    def history_contexts(self, histories: list) -> torch.Tensor:
        """``ctx [H, d]``: the context after ``<s> histories[i]``, from the one window that predicts the next word
        (:meth:`next_window`): a window's work a history, however long (reading every window of the history made a
        decoder's ``advance`` cost grow with the hypothesis). The numbers of :meth:`eval_contexts`."""
        if not len(histories):
            return torch.zeros((0, self.hidden_size))
        rows = []
        for h in histories:
            inputs = np.concatenate([[EOS_ID], np.asarray(h, dtype=np.int64)])
            rows.append(inputs[self.next_window(len(inputs) - 1):])
        L = max(len(r) for r in rows)
        x = torch.full((len(rows), L), EOS_ID, dtype=torch.int64)  # right padding: causal, so never read
        for i, r in enumerate(rows):
            x[i, : len(r)] = torch.from_numpy(r)
        hidden, _ = self(x)  # the forward pre-hook puts x on the weights' device
        last = torch.tensor([len(r) - 1 for r in rows], device=hidden.device)
        return hidden[torch.arange(len(rows), device=hidden.device), last]

    def eval_contexts(self, ids: np.ndarray, batch_size: int | None = None, independent: bool = False,
                      stride: int | None = None):
        """Yield ``(ctx [n, d], targets [n], stream positions [n])`` covering the stream once (module docstring)."""
        ids = np.asarray(ids, dtype=np.int64)
        n = len(ids)
        if n == 0:
            return
        stride = stride or self.stride
        if not 1 <= stride <= self.context:
            raise UserError(f"--stride {stride}: give 1 .. the window ({self.context})")
        x_all = np.concatenate([[EOS_ID], ids[:-1]])  # input before each position: </s> starts every sentence
        if independent:
            starts, ends = sentence_bounds(ids)
            spans = [(s + a, s + f, s + e) for s, t in zip(starts.tolist(), ends.tolist())
                     for a, f, e in window_spans(t - s + 1, self.context, stride)]
            spans.sort(key=lambda p: p[2] - p[0])
        else:
            spans = window_spans(n, self.context, stride)
        B = batch_size or 64
        y_all = torch.from_numpy(ids)
        for k in range(0, len(spans), B):
            chunk = np.asarray(spans[k : k + B], dtype=np.int64)
            lengths = chunk[:, 2] - chunk[:, 0]
            L = int(lengths.max())
            cols = np.arange(L)
            inside = cols[None, :] < lengths[:, None]
            src = np.where(inside, chunk[:, :1] + cols[None, :], 0)
            x = torch.from_numpy(np.where(inside, x_all[src], EOS_ID))  # right padding: causal, so never read
            pred = inside & (chunk[:, :1] + cols[None, :] >= chunk[:, 1:2])
            hidden, _ = self(x)
            pos = src[pred]
            yield hidden[torch.from_numpy(pred)], y_all[pos], pos
