"""The adaptive softmax (Grave et al. 2017): a head softmax over the frequent words and one token per
tail cluster, each tail a softmax of its own over a hidden state projected to a smaller size.

Words are ranked by training count (rank 0 the most frequent). With cutoffs
``0 < c_0 < c_1 < ... < c_{K-1} < V`` the head holds the ``c_0`` most frequent words and tail
cluster ``i`` the ranks ``[c_i, c_{i+1})`` (``c_K = V``)::

    head(h)   = [a_w(h) for the c_0 head words ; u_i . h + d_i for the K clusters]     [N, c_0 + K]
    tail_i(h) = T_i (P_i h)        P_i [h / div^(i+1), h], T_i [|cluster i|, h / div^(i+1)]
    log P(w|h) = log softmax(head)_w                                    w in the head
               = log softmax(head)_{c_0 + i} + log softmax(tail_i(h))_w   w in cluster i

which is normalised over V by construction. The head words' scores ``a_w(h) = W_w . h + b_w`` are
the model's own output rows (so tied embeddings and sparse gradients work for them); the cluster
tokens ``u, d`` and the projections ``P_i, T_i`` belong to this objective (created by :meth:`bind`),
and the output rows of the tail words go unused. This is the structure of
:class:`torch.nn.AdaptiveLogSoftmaxWithLoss` (no tail biases, ``hsz = h // div^(i+1)``); with the same
weights both give the same ``log_prob``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ..config import option, said, setting_value
from ..errors import UserError
from .cpu_linear import FastLinear
from .base import OutputObjective, Scorer
from .structure import frequency_order, hidden_width

#: default cutoffs: the ranks where the unigram mass reaches these shares (the head at most MAX_HEAD words)
COVERAGE = (0.8, 0.95)
MAX_HEAD = 4000
#: a large vocabulary's rare words: while more than MAX_TAIL words lie past the last cut, one more cluster ends
#: where the mass reaches the next of these shares above the last cut's (each cluster narrower than the last)
RARE_COVERAGE = (0.95, 0.99, 0.999, 0.9999)
MAX_TAIL = 20_000


def default_cutoffs(counts, num_words: int, head_coverage: float = COVERAGE[0], max_head: int = MAX_HEAD) -> list[int]:
    """The head covers ``head_coverage`` of the training tokens (default 80 %, at most ``max_head`` words, default
    4,000), the first cluster up to 95 % (none when the head reaches that).

    A vocabulary whose last cluster would hold more than :data:`MAX_TAIL` words gets more clusters, each ending
    at the next of 95 %, 99 %, 99.9 %, 99.99 % of the mass above the last cut's, until fewer words remain (a cut
    that would leave fewer than half of :data:`MAX_TAIL` words after it is not made). A
    target in cluster ``i`` costs ``|cluster i| x h / div^(i+1)`` multiply-adds (a softmax over the whole
    cluster), so one cluster of all the rare words makes a rare target cost O(V): at V = 485k (Wikipedia, count
    >= 3) the recurrent default (head 95 % capped at 5,000 words, 83 % of the tokens) left 480k words in one
    cluster of width 128, 12.1M multiply-adds per token on average (head included); cut at 95 %, 99 % and
    99.9 %, 2.2M. At V = 100k (the same text's 100k most frequent words) one cut at 5,000 words, 3.2M; cut
    also at 95 % and 99 %, 1.6M. PTB (V = 10k) keeps its cuts."""
    if counts is None:
        c = np.ones(num_words)
    else:
        c = np.sort(np.maximum(np.asarray(counts, dtype=np.float64), 0.0))[::-1]
    cum = np.cumsum(c) / max(c.sum(), 1e-300)
    shares = [head_coverage] + [c for c in COVERAGE[1:] if c > head_coverage]
    cuts = [int(np.searchsorted(cum, share) + 1) for share in shares]
    cuts[0] = min(cuts[0], max_head)
    for share in RARE_COVERAGE:
        last = max(cuts)
        if num_words - last <= MAX_TAIL:
            break
        cut = int(np.searchsorted(cum, share) + 1)
        if share > cum[last - 1] and cut > last and num_words - cut >= MAX_TAIL // 2:  # no cluster of a few words
            cuts.append(cut)
    return sorted({min(max(x, 1), num_words - 1) for x in cuts}) if num_words > 1 else []


@dataclass
class AdaptiveOptions:
    cutoffs: list[int] | None = option(None, "adaptive: rank cutoffs of the head and the tail clusters, increasing "
                                             "(repeat the flag; default: 80 % and 95 % unigram coverage, and at "
                                             "99 % and 99.9 % for a large vocabulary)",
                                       min=1, multiple=True)
    div_value: float = option(4.0, "adaptive: each tail cluster's projection is this many times narrower than the last",
                              min=1.0, recurrent=2.0)
    head_coverage: float = option(COVERAGE[0], "adaptive without --cutoffs: the head holds the words of this share of "
                                               "the training tokens (at most --max-head words), the first tail up to "
                                               "95 %", min=0.0, max=1.0, recurrent=0.95)
    max_head: int = option(MAX_HEAD, "adaptive without --cutoffs: at most this many words in the head, whatever "
                                     "--head-coverage asks", min=1, recurrent=5000)

    def __post_init__(self):
        if not 0.0 < float(self.head_coverage) < 1.0:
            raise UserError(f"{setting_value('head_coverage', self.head_coverage)}: a share of the training tokens, between 0 and 1")


class AdaptiveSoftmax(OutputObjective):
    """Adaptive softmax (Grave et al. 2017); see the module docstring for the factorisation.

    Options: ``cutoffs`` (increasing ranks, each in ``[1, V-1]``; default: 80 % and 95 % unigram
    coverage), ``div_value`` (each tail's projection is ``div_value`` times narrower than the one
    before; default 4, as PyTorch).

    Shapes: ``ctx [N, h]`` hidden states, ``targets [N]`` -> scalar mean ``-log P(y|h)``; cost per
    example O((c_0 + K) h) for the head plus, for a tail target, O(h^2 / div + |cluster| h / div).
    """

    name = "adaptive"
    sparse_output = True  # only the head words' output rows are read

    Options = AdaptiveOptions
    sequence_why = ("PTB's tied GRU-256, 8 epochs, against the softmax's 98.58: a head of the words of 80 % of the "
                    "tokens gave +7.1 %, 90 % (2,712 words) +2.9 %, tails half as wide +2.5 %, 95 % capped at 4,000 "
                    "words with tails half as wide 100.56 (+2.0 %), and the whole 95 % (4,754 words) 100.20 (+1.6 %) "
                    "at 1.7x the softmax's words per CPU second: the tails' narrow, untied rows hold too many words")
    sequence_train_long = ((10_000, {"lr": 0.002},
                            "over the first epoch of a 4-epoch cosine run of about 17,300 steps on 4.8M words of "
                            "Wikipedia at V = 485k: 0.004 389.34, 0.002 368.39, 0.001 405.55; PTB's 8 epochs take "
                            "6,640 steps"),)

    sequence_model_settings = {"adaptive_input": (True, (
        "--adaptive-input: the input embeddings in the same frequency bands as the softmax's head and tails, tied "
        "to them (Baevski & Auli 2019; --input-factor = --div-value). PTB's GRU-256, 8 epochs, seeds 1-2: +1.0 % "
        "over the softmax, against +2.3 % with one full-width input table; give --no-adaptive-input for that"),
        ("tie", "input_weights"))}

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        o = self.options
        cutoffs, div_value, head_coverage, max_head = o.cutoffs, o.div_value, o.head_coverage, o.max_head
        self.head_coverage = float(head_coverage)
        self.max_head = int(max_head)
        self.counts = None if counts is None else np.asarray(counts)
        self.cutoffs_option = None if cutoffs is None else [int(c) for c in cutoffs]
        self.div_value = float(div_value)
        self.bound = False

    def bind(self, scorer: Scorer) -> None:
        v, h = int(scorer.num_words), hidden_width(scorer)
        cuts = self.cutoffs_option if self.cutoffs_option is not None else \
            default_cutoffs(self.counts, v, self.head_coverage, self.max_head)
        if any(b <= a for a, b in zip(cuts, cuts[1:])) or any(c < 1 or c > v - 1 for c in cuts):
            raise UserError(f"{said('--cutoffs ' + ' '.join(map(str, cuts)), f'cutoffs={list(cuts)!r}')}: give increasing ranks between 1 and V-1 = {v - 1}")
        self.cutoffs = list(cuts) + [v]  # c_0 .. c_{K-1}, V
        order = frequency_order(self.counts, v)
        rank = np.empty(v, dtype=np.int64)
        rank[order] = np.arange(v)
        self.register_buffer("order", torch.from_numpy(order))
        self.register_buffer("rank", torch.from_numpy(rank))
        k = len(cuts)
        self.cluster = FastLinear(h, k) if k else None
        shared = self.shared_bands(scorer, cuts, order)
        tails = []
        for i in range(k):
            hsz = max(1, int(h // (self.div_value ** (i + 1))))
            # a tail's rows: those of the step's targets in it, a number that changes every step; its word table
            # goes through torch, whose products keep nothing per shape (cpu_linear's _MAX_ROWS note)
            tail = nn.Sequential(FastLinear(h, hsz, bias=False),
                                 nn.Linear(hsz, self.cutoffs[i + 1] - self.cutoffs[i], bias=False))
            if shared is not None:  # tail i is the input's band i + 1: P_i = Q_{i+1}^T, T_i = E_{i+1}
                proj, table = shared[i]
                if tuple(proj.shape) != (hsz, h) or tuple(table.shape) != tuple(tail[1].weight.shape):
                    raise UserError(f"adaptive input band {i + 1} is {list(table.shape)} x {list(proj.shape)}; the "
                                    f"adaptive softmax's tail {i} needs [{tail[1].weight.shape[0]}, {hsz}]: give the "
                                    "same --div-value and --input-factor, or --no-tie")
                del tail[0].weight, tail[1].weight
                tail[0].weight, tail[1].weight = proj, table
            tails.append(tail)
        self.tail = nn.ModuleList(tails)
        self.bound = True

    def shared_bands(self, scorer: Scorer, cuts: list[int], order: np.ndarray):
        """A scorer whose input embeddings come in the same frequency bands (adaptive input, Baevski & Auli
        2019) offers them through ``adaptive_input_bands()``; the tails then share those weights."""
        offer = getattr(scorer, "adaptive_input_bands", None)
        bands = offer() if callable(offer) else None
        if bands is None:
            return None
        in_cuts, factor, in_order, pairs = bands
        if list(in_cuts) != list(cuts) or not np.array_equal(np.asarray(in_order), order):
            raise UserError(f"tied adaptive input and adaptive softmax need the same bands: input cutoffs "
                            f"{' '.join(map(str, in_cuts))}, softmax cutoffs {' '.join(map(str, cuts))} "
                            "(give one --cutoffs, or --no-tie)")
        if float(factor) != self.div_value:
            raise UserError(f"tied adaptive input and adaptive softmax need --input-factor ({factor:g}) equal to "
                            f"--div-value ({self.div_value:g}), or --no-tie")
        return pairs

    def _check(self) -> None:
        if not self.bound:
            raise RuntimeError("adaptive: call objective.bind(scorer) once before use (it creates the tail layers)")

    def head_log_prob(self, scorer: Scorer, ctx: Any) -> torch.Tensor:
        """``[N, c_0 + K]``: log-softmax over the head words (by rank) and the K cluster tokens."""
        self._check()
        parts = [scorer.score_shared(ctx, self.order[: self.cutoffs[0]])]
        if self.cluster is not None:
            parts.append(self.cluster(ctx))
        return torch.log_softmax(torch.cat(parts, 1).float(), dim=1)

    def log_prob_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """Exact ``log P(y_i | h_i)``, ``[N]``: one head softmax, then each tail only for its own targets."""
        head = self.head_log_prob(scorer, ctx)
        r = self.rank[targets]
        c0 = self.cutoffs[0]
        bounds = torch.tensor(self.cutoffs[1:-1], dtype=r.dtype, device=r.device)
        col = torch.where(r < c0, r, c0 + torch.bucketize(r, bounds, right=True))
        lp = head.gather(1, col.unsqueeze(1)).squeeze(1)
        for i, tail in enumerate(self.tail):
            lo, hi = self.cutoffs[i], self.cutoffs[i + 1]
            rows = ((r >= lo) & (r < hi)).nonzero().squeeze(1)
            if rows.numel():
                t = torch.log_softmax(tail(ctx[rows]).float(), dim=1)
                lp = lp.index_add(0, rows, t.gather(1, (r[rows] - lo).unsqueeze(1)).squeeze(1))
        return lp

    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        return -self.log_prob_targets(scorer, ctx, targets).mean()

    def log_prob(self, scorer: Scorer, ctx: Any) -> torch.Tensor:
        """Exact ``log P(w | h)`` over all V words, ``[N, V]`` (columns by word id)."""
        head = self.head_log_prob(scorer, ctx)
        c0 = self.cutoffs[0]
        parts = [head[:, :c0]]
        for i, tail in enumerate(self.tail):
            parts.append(head[:, c0 + i : c0 + i + 1] + torch.log_softmax(tail(ctx).float(), dim=1))
        by_rank = torch.cat(parts, 1)
        return by_rank.index_select(1, self.rank)
