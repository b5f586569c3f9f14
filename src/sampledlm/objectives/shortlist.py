"""Schwenk's short-list (Schwenk 2007): the network's softmax covers only the
S most frequent words; a back-off n-gram model covers the others and says how much mass the
short-list gets after each history::

    P(w|h) = P_NN(w | h, w in SL) * M(h)      w in SL,     M(h) = sum_{v in SL} P_ngram(v | h)
           = P_ngram(w | h)                   otherwise

with ``P_NN(. | h, w in SL) = softmax over the S short-list scores a_v(h)``. Summed over V this is
``M(h) + (1 - M(h)) = 1``: exactly normalised whenever the n-gram is (the test checks it). The
back-off model is an ARPA file given by ``--backoff MODEL.arpa`` over the same vocabulary (the run
directory records its path; :func:`sampledlm.ngram.backoff.open_backoff` reads it and
:meth:`ShortList.set_backoff` hands it over). Without one, the back-off is the unigram distribution
of the training counts (add-one smoothed): still exactly normalised, usable from
:class:`~sampledlm.objectives.SampledOutput` where there are no histories, but weaker.

**Training skips the positions whose target is outside the short-list** (as Schwenk 2007 does):
the loss is the mean of ``-log P_NN(y | h, y in SL)`` over the batch's short-list targets only.
That conditional is exactly what evaluation multiplies by ``M(h)``, and examples with an
out-of-short-list target carry no information about it. (The alternative, an extra "not in the
short-list" output trained on every position, would estimate ``P(w in SL | h)``, which the
formula above takes from the n-gram instead, so that output would go unused.) At S = 2,000 on
PTB the short-list covers about 87 % of the training tokens.

Cost: a training step is one ``[N, h] x [h, S]`` product (the output rows of the short-list only,
so the output layer takes sparse gradients): O(S h) per token, independent of V. Evaluation needs
each position's n-gram history: the objective sets ``uses_history`` and the evaluator passes the
id stream and the positions (``ids=``, ``positions=``) to :meth:`log_prob_targets` / :meth:`log_prob`.
``M(h)`` costs a few binary searches per history (:meth:`NgramLM.subset_logmass10_ids`), not S queries.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..data.batches import ngram_histories, sentence_positions
from ..config import option
from ..errors import UserError
from .base import OutputObjective, Scorer
from .structure import frequency_order

DEFAULT_SHORTLIST = 2000


class UnigramBackoff:
    """The back-off used when no n-gram model is given: the add-one unigram of the training counts
    (uniform without counts). Same interface as :class:`sampledlm.ngram.backoff.VocabBackoff`."""

    order = 1

    def __init__(self, counts, num_words: int):
        c = np.ones(num_words) if counts is None else np.asarray(counts, dtype=np.float64) + 1.0
        self.logp = np.log(c / c.sum())

    def log_probs(self, hist: np.ndarray, words: np.ndarray) -> np.ndarray:
        return self.logp[np.asarray(words, dtype=np.int64)]

    def log_mass(self, hist: np.ndarray, member: np.ndarray) -> np.ndarray:
        m = float(np.logaddexp.reduce(self.logp[np.asarray(member, dtype=bool)]))
        return np.full(len(hist), m)


@dataclass
class ShortListOptions:
    shortlist: int = option(DEFAULT_SHORTLIST, "shortlist: the S most frequent words the network's softmax covers "
                                               "(Schwenk 2007: 2,000; the whole vocabulary when V is smaller)", min=1)
    backoff: str | None = option(None, "shortlist: back-off n-gram (ARPA file, same vocabulary) for the other words "
                                       "and the short-list's mass [default: the training unigram]")


class ShortList(OutputObjective):
    """Short-list softmax with n-gram back-off (see the module docstring).

    Options: ``shortlist`` (S, default 2,000, at most V), ``backoff`` (path of an ARPA file over the
    same vocabulary; the model directory's loader opens it).

    Shapes: ``ctx [N, h]``, ``targets [N]`` -> scalar loss (mean over the short-list targets);
    :meth:`log_prob_targets` ``[N]`` and :meth:`log_prob` ``[N, V]`` take ``ids`` (the id stream) and
    ``positions [N]`` (each row's index in it) to find the n-gram histories.
    """

    name = "shortlist"
    sparse_output = True  # only the S short-list rows are read
    #: log_prob / log_prob_targets need each position's previous words (``ids=``, ``positions=``)
    uses_history = True

    Options = ShortListOptions

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        shortlist, backoff = self.options.shortlist, self.options.backoff
        self.counts = None if counts is None else np.asarray(counts)
        self.shortlist_option = int(shortlist)
        self.backoff_path = backoff
        self.backoff = None
        self.bound = False
        self._stream = (None, None)  # (ids, sentence positions) of the last stream seen

    def bind(self, scorer: Scorer) -> None:
        v = int(scorer.num_words)
        if self.counts is not None and len(self.counts) != v:
            raise ValueError(f"counts has {len(self.counts)} entries, the scorer {v} words")
        s = min(self.shortlist_option, v)
        order = frequency_order(self.counts, v)
        index = np.full(v, -1, dtype=np.int64)
        index[order[:s]] = np.arange(s)
        self.register_buffer("words", torch.from_numpy(np.ascontiguousarray(order[:s])))  # [S] the short-list
        self.register_buffer("index", torch.from_numpy(index))  # [V] position in the short-list, -1 outside
        if self.backoff is None:
            self.backoff = UnigramBackoff(self.counts, v)
        self.bound = True

    @classmethod
    def settle_options(cls, options: dict, vocab) -> tuple[dict, list[str]]:
        """The back-off file's absolute path is recorded: the run directory must find it from anywhere."""
        if options.get("backoff"):
            import os

            return {**options, "backoff": os.path.abspath(options["backoff"])}, []
        return dict(options), []

    def attach(self, vocab, fresh: bool, open_ngram, train_ids=None) -> None:
        """The short-list's n-gram (Schwenk 2007), new or resumed run alike (it holds no trained weights)."""
        if self.backoff_path is not None:
            self.set_backoff(open_ngram(self.backoff_path, vocab))

    def set_backoff(self, backoff) -> None:
        """The n-gram for the words outside the short-list: an object with ``order``,
        ``log_probs(hist, words)`` and ``log_mass(hist, member)`` (:class:`~sampledlm.ngram.backoff.VocabBackoff`)."""
        self.backoff = backoff

    @property
    def size(self) -> int:
        return int(self.words.numel())

    def _check(self) -> None:
        if not self.bound:
            raise RuntimeError("shortlist: call objective.bind(scorer) once before use (it picks the short-list)")

    # --- training ---
    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        self._check()
        lp = torch.log_softmax(scorer.score_shared(ctx, self.words).float(), dim=1)  # [N, S]
        j = self.index[targets]
        inside = j >= 0
        nll = -lp.gather(1, j.clamp(min=0).unsqueeze(1)).squeeze(1)
        return (nll * inside).sum() / inside.sum().clamp(min=1)

    # --- exact inference ---
    def _histories(self, n: int, ids, positions, v: int) -> np.ndarray:
        """``[n, order-1]`` n-gram histories (vocab ids, ``<s>`` = V) of the rows at ``positions`` of ``ids``."""
        k = max(self.backoff.order - 1, 0)
        if k == 0:
            return np.zeros((n, 0), dtype=np.int64)
        if ids is None or positions is None:
            raise UserError("shortlist: exact probabilities need each position's previous words "
                            "(pass ids= and positions=, as sampledlm's evaluator does)")
        if self._stream[0] is not ids:
            self._stream = (ids, sentence_positions(np.asarray(ids)))
        at = np.asarray(positions.cpu() if torch.is_tensor(positions) else positions, dtype=np.int64)
        return ngram_histories(np.asarray(ids), self._stream[1], k + 1, v, at)

    def _member(self) -> np.ndarray:
        return (self.index >= 0).cpu().numpy()

    def log_prob_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor, *, ids=None,
                         positions=None) -> torch.Tensor:
        """Exact ``log P(y_i | h_i)``, ``[N]`` (module docstring)."""
        self._check()
        hist = self._histories(len(targets), ids, positions, scorer.num_words)
        y = targets.cpu().numpy()
        ngram = torch.from_numpy(self.backoff.log_probs(hist, y)).to(targets.device)
        mass = torch.from_numpy(self.backoff.log_mass(hist, self._member())).to(targets.device)
        j = self.index[targets]
        inside = j >= 0
        lp = torch.log_softmax(scorer.score_shared(ctx, self.words).float(), dim=1)
        nn = lp.gather(1, j.clamp(min=0).unsqueeze(1)).squeeze(1).double() + mass
        return torch.where(inside, nn, ngram).float()

    def log_prob(self, scorer: Scorer, ctx: Any, *, ids=None, positions=None) -> torch.Tensor:
        """Exact ``log P(w | h)`` over all V, ``[N, V]``: V n-gram queries per history (tests, small V)."""
        self._check()
        v = scorer.num_words
        n = ctx.shape[0]
        hist = self._histories(n, ids, positions, v)
        words = np.tile(np.arange(v, dtype=np.int64), n)
        ngram = self.backoff.log_probs(np.repeat(hist, v, axis=0), words).reshape(n, v)
        mass = self.backoff.log_mass(hist, self._member())
        out = torch.from_numpy(ngram).to(ctx.device)
        lp = torch.log_softmax(scorer.score_shared(ctx, self.words).float(), dim=1).double()
        out[:, self.words] = lp + torch.from_numpy(mass).to(ctx.device).unsqueeze(1)
        return out.float()


def coverage(counts, shortlist: int) -> float:
    """Share of the training tokens whose word is in the S most frequent (for reports)."""
    c = np.sort(np.asarray(counts, dtype=np.float64))[::-1]
    return float(c[:shortlist].sum() / max(c.sum(), 1e-300)) if len(c) else math.nan
