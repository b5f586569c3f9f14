"""Recurrent neural LM: GRU or LSTM with an output projection (Botev et al. 2017 §6.2).

For the input stream ``x_1 .. x_T`` (``</s>`` first, see :mod:`sampledlm.data.batches`)::

    e_t       = E[x_t]                              input embedding, E [V+1, e]
    h_t, s_t  = GRU/LSTM(e_t, s_{t-1})              ``layers`` stacked cells of size ``hidden``
                                                    (GRU without input matrices: e_t added to each gate,
                                                    ``input_weights=False``, needs e == hidden)
    ctx_t     = P h_t   (when ``proj`` is set)      projection P [proj, hidden] (Botev et al.: s_t(c) = w_c^T P h_t)
    a_w       = W_w · ctx_t + b_w                   the OutputLayer, W [V, h_out]

With ``adaptive_input`` the embeddings come in frequency bands (:mod:`.adaptive_input`, Baevski &
Auli 2019). With ``tie=True`` the input embedding of word w *is* the output row ``W_w`` (Press & Wolf 2017;
Inan et al. 2017), which needs ``embed_dim == h_out``; only ``<s>`` (id V) keeps a row of its own.
Dropout (when > 0) is applied to the embeddings, between layers and to ``h_t``.

With ``sparse_output`` (an objective that reads only a candidate set of output rows: the sampled ones,
the structured ones) every word table takes row-sparse gradients: ``E`` (untied), the adaptive input's
band tables, and a tied ``W``, whose gradient then holds the rows of the batch's inputs plus those of
its targets and candidates, ``O((B T + S) e)`` numbers instead of ``V e``; the optimiser updates only
those rows (:func:`~sampledlm.neural.trainer.make_optimizers`), so a step costs the same at any V.
Exact evaluation (``score_all``) reads ``W`` densely either way.

State: ``forward(x [B, T], state) -> (hidden [B, T, h_out], state)``; ``state=None`` means zeros
(the recurrent state starts at zero). The trainer carries the state across the BPTT segments
of an epoch (detached, so gradients stop at the segment boundary) and resets it to zero at the
start of every epoch and of every evaluation pass.

Evaluation reads either running text (``independent=False``: the stream as one row, the state
carried across sentences, the convention of the PTB tables) or independent sentences
(``independent=True``: each sentence from a zero state with ``</s>`` as its first input, as n-best
and per-sentence scoring need; sentences are sorted by length into bunches and padded).
"""

from __future__ import annotations

import torch
from torch import nn

from dataclasses import dataclass

import numpy as np

from ..config import option
from ..data.batches import bptt_rows
from ..data.vocab import EOS_ID
from ..errors import UserError
from ..lm import sentence_bounds
from ..objectives.output import OutputLayer
from . import adaptive_input
from .base import NeuralScorer
from . import gru_cpu
from ..objectives.cpu_linear import FastLinear
from .dropout import Dropout, WordDropout

State = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


#: independent sentences: at most this many tokens' scores a call (64 sentences of 64 tokens in one; a sentence of
#: 200,000 words had asked for its whole ``[n, V]`` score matrix at once, 2 GB at V = 1k)
SENTENCE_TOKENS = 4096


def running_text_chunk(num_words: int) -> int:
    """Tokens of running text scored per call in evaluation: as many as keep a ``[n, V]`` float32 score matrix near
    16 MB, from 64 to 1,024. Each call reads the whole output table once (8 MB at V = 10k, h = 200), so small calls
    were bound by that read: on PTB's NCE GRU the exact validation took 3.8-4.3 CPU s in 64-token calls and 3.1 s in
    256- or 1,024-token ones (the same perplexity)."""
    return max(64, min(1024, (1 << 22) // max(num_words, 1)))


@dataclass
class RNNConfig(adaptive_input.InputOptions):
    """The recurrent models' settings (``--model gru|lstm``); defaults: the PTB results pages' GRU."""

    embed_dim: int = option(200, "word embedding size d", min=1, short="-d")
    hidden: int = option(256, "recurrent state size", min=1)
    layers: int = option(1, "stacked recurrent layers", min=1)
    dropout: float = option(0.25, "dropout rate", min=0.0, max=0.99)
    input_weights: bool = option(True, "GRU: input matrices for the gates; --no-input-weights adds the embedding to "
                                       "each gate as it is (faster-rnnlm's gru; needs --embed-dim equal to "
                                       "--hidden; about half the multiply-adds a word at 256)")
    proj: int | None = option(None, "project the state to this size before the output layer (0: none) "
                                    "[default: embed_dim when tied and hidden differs, else none]", min=0)


class RNNLM(NeuralScorer):
    Config = RNNConfig
    #: training settings the results pages use for this model
    train_defaults = {"optimizer": "adam", "lr": 0.002, "batch_size": 32, "bptt": 35, "clip": 1.0, "epochs": 8,
                      "max_halvings": 3, "min_improvement": 0.003, "lr_schedule": "cosine"}
    sequence_model = True
    crosses_sentences = True
    # the 0.25 default was chosen on PTB read 8 times; a GRU reading 145M Wikipedia tokens once (V = 485k) scored
    # test 85.41 without dropout against 98.45 with it, validation 12-13 % lower at every quarter of the run
    one_pass_dropout = 0.0
    cell_type = "gru"
    uses_counts = True  # adaptive input bands are ranks by training count

    def __init__(self, num_words: int, cfg: RNNConfig, sparse_output: bool = False, counts=None):
        """Every setting comes from ``cfg`` (its defaults are the only ones: :meth:`build` fills a config from
        keywords); the cell from the class (:class:`GRULM`, :class:`LSTMLM`)."""
        super().__init__()
        cell, embed_dim, hidden, layers, dropout, tie = (self.cell_type, cfg.embed_dim, cfg.hidden, cfg.layers,
                                                         cfg.dropout, cfg.tie)
        proj = self.projection(cfg)
        out_dim = proj or hidden
        if tie and embed_dim != out_dim:
            raise ValueError(f"tied embeddings need embed_dim ({embed_dim}) == output size ({out_dim})")
        self.cell, self.tie = cell, tie
        rnn = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = rnn(embed_dim, hidden, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        if not cfg.input_weights:
            if cell != "gru":
                raise ValueError("--no-input-weights is for the GRU (--model gru)")
            if embed_dim != hidden:
                raise ValueError(f"--no-input-weights adds the embedding to the state's gates: it needs --embed-dim "
                                 f"({embed_dim}) equal to --hidden ({hidden}), e.g. -d {hidden}")
            gru_cpu.identity_input(self.rnn)
        self.proj = FastLinear(hidden, proj, bias=False) if proj else None
        self.drop = Dropout(dropout)
        self.word_drop = WordDropout(cfg.embed_dropout)
        # Tied: the input lookup reads W's rows sparsely too, so W's gradient stays row-sparse.
        self.output = OutputLayer(num_words, out_dim, sparse=sparse_output)
        self.adaptive = cfg.adaptive_input
        if self.adaptive:
            self.embed = adaptive_input.from_config(cfg, num_words, embed_dim, counts,
                                                    head_rows=(lambda: self.output.weight) if tie else None,
                                                    sparse=sparse_output)
        elif tie:
            self.bos_embed = nn.Parameter(torch.empty(1, embed_dim).uniform_(-0.1, 0.1))
        else:
            self.embed = nn.Embedding(num_words + 1, embed_dim, sparse=sparse_output)
            nn.init.uniform_(self.embed.weight, -0.1, 0.1)

    def adaptive_input_bands(self):
        """What a tied adaptive softmax shares (see :class:`~sampledlm.neural.adaptive_input.AdaptiveInput`)."""
        return self.embed.offer() if self.adaptive and self.tie else None

    def embed_ids(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, T]`` -> ``[B, T, e]``. Tied: word w's row of the output layer, ``<s>`` (id V) its own row,
        looked up in place (no ``[V+1, e]`` copy of the table per call, which cost more than a short
        sentence's whole forward pass), with a row-sparse gradient when the output layer is sparse."""
        if self.adaptive or not self.tie:
            return self.embed(x)
        return adaptive_input.tied_embedding(x, self.output, self.bos_embed)

    def forward(self, x: torch.Tensor, state: State | None = None) -> tuple[torch.Tensor, State]:
        """``x [B, T]`` int64 -> ``(hidden [B, T, h_out], new state)``."""
        inputs = self.drop(self.word_drop(x, self.embed_ids(x)))
        if gru_cpu.usable(self.rnn, inputs):  # the same GRU: one weight-gradient product per segment, fused steps
            out, state = gru_cpu.gru_forward(self.rnn, inputs, state)
        else:
            out, state = self.rnn(inputs, state)
        out = self.drop(out)
        if self.proj is not None:
            out = self.proj(out)
        return out, state


    def history_contexts(self, histories: list) -> torch.Tensor:
        """``ctx [H, h_out]`` after ``<s> histories[i]`` (input ``</s> h_1 .. h_L``, the state after the last):
        every history in one packed call of the recurrent layers, which run only each history's own steps
        (a padded bunch would run every row to the longest history: 2-3x the work for a decoder's mixed
        lengths)."""
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        if not len(histories):
            return torch.zeros((0, self.hidden_size))
        rows = [torch.as_tensor(np.concatenate([[EOS_ID], np.asarray(h, dtype=np.int64)]), dtype=torch.int64)
                for h in histories]
        lengths = torch.tensor([len(r) for r in rows])
        x = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=EOS_ID)
        inputs = self.drop(self.word_drop(x, self.embed_ids(x)))
        packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True)
        last = self.drop(out[torch.arange(len(rows)), lengths - 1])
        return self.proj(last) if self.proj is not None else last

    # --- ONNX export (sampledlm.neural.onnx_export) ---------------------------------------------
    def export_signature(self) -> dict:
        """Example inputs and names of :meth:`export_forward`: ``words [B, T]``, ``h [L, B, H]`` (and ``c``)."""
        lstm, shape = self.cell_type == "lstm", (self.rnn.num_layers, 1, self.rnn.hidden_size)
        names = ["words", "h", "c"] if lstm else ["words", "h"]
        states = [torch.zeros(shape) for _ in names[1:]]
        axes = {"words": {0: "batch", 1: "time"}, **{n: {1: "batch"} for n in names[1:]},
                **{f"{n}_out": {1: "batch"} for n in names[1:]}}
        return {"inputs": (torch.zeros((1, 3), dtype=torch.int64), *states), "input_names": names,
                "state_names": [f"{n}_out" for n in names[1:]], "axes": axes, "meta": {}}

    def export_forward(self, words, h, c=None):
        """``(hidden [B, T, h_out], new state tensors)`` from ids and the state, the graph's trunk."""
        hidden, state = self(words, (h, c) if c is not None else h)
        return hidden, (tuple(state) if c is not None else (state,))

    @classmethod
    def from_config(cls, cfg: RNNConfig, num_words: int, sparse_output: bool = False, counts=None) -> "RNNLM":
        return cls(num_words, cfg, sparse_output=sparse_output, counts=counts)

    @classmethod
    def build(cls, num_words: int, sparse_output: bool = False, counts=None, **settings) -> "RNNLM":
        """``GRULM.build(V, hidden=512)``: the model of ``RNNConfig(**settings)``, every other setting its default."""
        return cls(num_words, RNNConfig(**settings), sparse_output=sparse_output, counts=counts)

    @staticmethod
    def projection(cfg: RNNConfig) -> int | None:
        """The output projection's size: as configured, or (tied, unset) the embedding size when needed."""
        if cfg.proj is None:
            return cfg.embed_dim if cfg.tie and cfg.hidden != cfg.embed_dim else None
        return cfg.proj or None

    # --- reading id streams ------------------------------------------------------------------
    def train_data(self, ids: np.ndarray, opts) -> "RecurrentData":
        self.check_train_options(opts)
        return RecurrentData(ids, opts.batch_size, opts.bptt)

    def train_contexts(self, batch, carry):
        """One BPTT segment: the state ``carry`` comes in from the previous segment and leaves detached."""
        x, y, mask, positions = batch
        hidden, state = self(x, carry)
        return hidden[mask], y[mask], positions[mask], detach_state(state)

    def eval_contexts(self, ids: np.ndarray, batch_size: int | None = None, independent: bool = False,
                      bptt: int | None = None):
        """Yield ``(ctx [n, h], targets [n], stream positions [n])`` covering the stream once.

        Running text (``independent=False``): one stream, the state carried from its first token to its last, read
        ``batch_size`` tokens per call (default ``bptt``, else :func:`running_text_chunk`). Cutting the stream into
        rows, each from a fresh state, made the perplexity depend on the batch size (84.5 in one row, 86.0 in 7, 346
        in 1,000 on one model); the batch size now changes only how many tokens each call reads. Independent
        sentences: ``batch_size`` sentences per call, each from a fresh state, in calls of at most
        :data:`SENTENCE_TOKENS` tokens."""
        ids = np.asarray(ids, dtype=np.int64)
        if not independent:
            bptt = batch_size or bptt or running_text_chunk(self.num_words)
            x, y, mask = bptt_rows(ids, 1)
            pos = torch.arange(x.numel()).reshape(x.shape)
            state = None
            for t in range(0, x.shape[1], bptt):
                hidden, state = self(x[:, t : t + bptt], state)
                m = mask[:, t : t + bptt]
                yield hidden[m], y[:, t : t + bptt][m], pos[:, t : t + bptt][m].numpy()
            return
        starts, ends = sentence_bounds(ids)
        order = np.argsort(ends - starts, kind="stable")
        B = batch_size or 64
        for k in range(0, len(order), B):
            sel = order[k : k + B]
            length = int((ends[sel] - starts[sel]).max()) + 1
            x = torch.full((len(sel), length), EOS_ID, dtype=torch.int64)
            y = torch.full((len(sel), length), EOS_ID, dtype=torch.int64)
            mask = torch.zeros((len(sel), length), dtype=torch.bool)
            pos = torch.zeros((len(sel), length), dtype=torch.int64)
            for r, i in enumerate(sel):
                s, e = int(starts[i]), int(ends[i]) + 1
                n = e - s
                y[r, :n] = torch.from_numpy(ids[s:e])
                x[r, 1:n] = torch.from_numpy(ids[s : e - 1])
                mask[r, :n] = True
                pos[r, :n] = torch.arange(s, e)
            span = max(1, SENTENCE_TOKENS // len(sel))  # a long sentence in pieces, its state carried
            state = None
            for t in range(0, length, span):
                hidden, state = self(x[:, t : t + span], state)
                m = mask[:, t : t + span]
                yield hidden[m], y[:, t : t + span][m], pos[:, t : t + span][m].numpy()


class GRULM(RNNLM):
    cell_type = "gru"
    #: lr 0.004: PTB GRU-256 with the softmax, 8 epochs, cosine: valid 98.15 / test 92.01, against 103.69 / 98.04 at
    #: 0.002 and 99.25 / 93.49 at 0.008 (docs/results/lr-grid.md); the LSTM keeps 0.002 (not measured)
    train_defaults = {**RNNLM.train_defaults, "lr": 0.004}
    #: a run of fewer than 20,000 planned steps (PTB's 8 epochs are 6,640): AdamW with decoupled weight decay 0.1 at
    #: 0.008, for every output objective. The same grid under AdamW chose 0.008 for every row and lowered each row's
    #: test perplexity: the softmax 92.01 -> 86.46, NCE 98.39 -> 88.86, IS 98.05 -> 86.02 (docs/results/
    #: lr-grid-adamw.md). A longer run keeps Adam at the objectives' long-run rates, as measured at V = 485k (AdamW
    #: not measured there: its decay shrinks every row of a 485k-row table each step, the rare words' included). A
    #: short run at V = 485k keeps it: CSS-IS over 8,000 steps of Wikipedia, validation 208.54 against Adam's 211.94
    short_run_train = {"optimizer": "adamw", "weight_decay": 0.1, "lr": 0.008}


class LSTMLM(RNNLM):
    cell_type = "lstm"


class RecurrentData:
    """BPTT segments ``(x, y, mask, stream positions) [B, T]`` of the stream, in order (the layout of
    :func:`~sampledlm.data.batches.bptt_rows`: row ``b`` holds predictions ``b L .. b L + L - 1``, ``L = ceil(n / B)``).

    The stream is held once, as int32 with ``</s>`` in front: prediction ``i`` reads ``x = stream[i]`` (the token
    before it) and ``y = stream[i + 1]``. A batch's int64 ``x``, ``y`` and positions are made when it is asked for.
    This is 4 bytes a token; holding ``x``, ``y`` and positions whole as int64 took about 25 (7.7 GB at the peak of a
    165M-token text)."""

    def __init__(self, ids: np.ndarray, batch_size: int, bptt: int):
        ids = np.asarray(ids)
        self.n = len(ids)
        self.rows = max(1, (self.n + batch_size - 1) // batch_size)
        stream = np.full(self.n + 2, EOS_ID, dtype=np.int32)  # the last </s>: what an empty stream's y reads
        stream[1 : self.n + 1] = ids
        self.stream = torch.from_numpy(stream)
        self.row_starts = torch.arange(batch_size, dtype=torch.int64)[:, None] * self.rows
        self.bptt = bptt

    def num_batches(self) -> int:
        return (self.rows + self.bptt - 1) // self.bptt

    def batch(self, epoch: int, b: int):
        cols = torch.arange(b * self.bptt, min(self.rows, (b + 1) * self.bptt), dtype=torch.int64)
        positions = self.row_starts + cols[None, :]
        mask = positions < self.n
        at = positions.clamp(max=max(self.n - 1, 0))
        eos = torch.tensor(EOS_ID, dtype=torch.int64)
        x = torch.where(mask, self.stream[at].long(), eos)
        y = torch.where(mask, self.stream[at + 1].long(), eos)
        return x, y, mask, positions


def detach_state(state: State | None) -> State | None:
    """Cut the graph at a segment boundary (truncated BPTT), keeping the values."""
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(s.detach() for s in state)
    return state.detach()
