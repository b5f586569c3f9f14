"""Binarised output with negative subsampling (Xu, Gunawardana & Khudanpur 2011).

V one-vs-all logistic classifiers share the model: ``P_b(w|h) = σ(a_w(h))`` (eq. 5, 16). Each
training pair (h, y) is a positive example for classifier y and a negative one for the others;
the log-likelihood of all classifiers (eq. 6) gives the per-example loss

    ``-log σ(a_y) - sum_{w != y} log(1 - σ(a_w)) = sum_w softplus(a_w) - a_y``   (α = 1, exact).

Negative subsampling (§2.1): each example is a negative for only a fraction α (``neg_rate``) of
the other classifiers, which cuts the output cost from V h to about α V h. The classifiers' odds
are then overestimated by 1/α (eq. 9); :meth:`Binary.finalize` adds log α to every bias once
(calibration). The inference rule renormalises the sigmoids over V (eq. 8):
``P'(w|h) = σ(a_w) / sum_w' σ(a_w')``.

How the subsets are drawn (the paper draws them per example and per classifier; we share work
across a mini-batch while keeping every (example, classifier) pair a negative with probability α):

* ``neg_subset="variable"`` (tables 6-7, the default): every mini-batch draws ``neg_groups`` (G)
  fresh subsets of words, each word in each subset independently with probability α; example i
  uses subset ``i mod G``, minus its true word. Each (example, classifier) pair is a negative with
  probability α, independently across batches and epochs, as in the paper; examples of the same
  group share their negatives, so all scores come from one dense ``[N,h] x [h,|R_1 ∪ .. ∪ R_G|]``
  product (about G α V columns). G = 1 (one subset for the whole batch) is cheapest but its
  negatives are correlated across the batch, which makes the shared layers' gradient N times
  noisier: on PTB-like data it trained markedly worse (valid ppl 1626 → 793 over 5 epochs against
  688 → 482 for the softmax), while G = 8 tracked the softmax (784 → 541) and G = N (independent
  per example) did no better (642 → 534); hence the default G = 8.
* ``neg_subset="fixed"`` (tables 4-5): each training example keeps one subset for the whole run.
  The example is named by its position p in the training stream (the trainer passes ``positions``,
  see ``uses_positions``). A base subset B (each word with probability α, buffer ``neg_base``) is
  drawn once; example p's negatives are B shifted cyclically by ``o(p) = hash(seed, p) mod V``:
  ``{(b + o(p)) mod V : b in B} \\ {y}`` (``neg_seed`` is drawn once too; both are saved with the
  model, so a resumed run keeps its subsets). Each example's subset is a Bernoulli(α) subset of V,
  never changes across epochs, and differs between examples, as in the paper; for any classifier w
  the examples it is a negative for are an independent α share of the corpus (o(p) is uniform and
  independent across p). Keying by position rather than by target matters: keyed by the target
  word (this objective's first version), a classifier outside a word's subset is never pushed down
  in any of that word's contexts, and the fixed runs fell 10-20 % behind the variable ones on PTB.
  A batch of N examples with distinct shifts covers all of V, so a fixed-subset step scores every
  word densely and masks each row (``[N, V]``, built by one strided gather of the doubled base
  mask): it costs about a full-softmax step, and the output layer is dense (``sparse_output`` is
  False). The paper's saving for fixed subsets assumes per-example sparse updates, which a
  mini-batched GPU-friendly step does not reproduce.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from ..config import option
from .sampling import BernoulliSampler
from .base import OutputObjective, Scorer, score_true_and_candidates
from .normaliser import scorer_blocks
from .sampled import Candidates, masked_fill, unigram_bias


@dataclass
class BinaryOptions:
    neg_rate: float = option(0.05, "binary: share alpha of the negatives kept, in (0, 1]", min=0.0, min_open=True,
                             max=1.0)
    neg_subset: str = option("variable", "binary: fixed or variable negative subsets", choices=("fixed", "variable"))
    neg_groups: int = option(8, "binary, variable subsets: subsets drawn per mini-batch (example i uses subset i mod "
                                "G)", min=1)


class Binary(OutputObjective):
    """One-vs-all logistic classifiers with negatives subsampled at rate ``neg_rate`` (α).

    Options: ``neg_rate`` α in (0, 1] (1 = eq. 6 exactly, over all V), ``neg_subset``
    ``"variable"`` | ``"fixed"``, ``neg_groups`` G (variable subsets drawn per batch; see the
    module docstring).

    Calibration choice: the ``calibrated`` buffer records whether log α has been added to the
    biases. Before :meth:`finalize` (e.g. validation during training) :meth:`log_prob` adds log α to
    the scores in flight, so validation perplexities are those of the calibrated model; after it,
    the biases hold the shift and nothing is added. A reloaded model keeps the flag, so calibration
    happens exactly once. Training after calibration subtracts log α again, so the training loss
    always sees the uncalibrated scores.
    """

    name = "binary"
    sparse_output = True  # variable subsets; fixed ones (and alpha = 1) score all of V densely

    Options = BinaryOptions

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        neg_rate, neg_subset, neg_groups = self.options.neg_rate, self.options.neg_subset, self.options.neg_groups
        self.neg_groups = int(neg_groups)
        self.neg_rate = float(neg_rate)
        self.neg_subset = neg_subset
        self.log_alpha = math.log(self.neg_rate)
        self.register_buffer("calibrated", torch.tensor(False))
        self.register_buffer("neg_base", torch.zeros(0, dtype=torch.bool))
        self.register_buffer("neg_seed", torch.tensor(0))
        fixed = neg_subset == "fixed" and self.neg_rate < 1.0
        self.uses_positions = fixed  # fixed subsets are keyed on each example's stream position
        self.sparse_output = not fixed and self.neg_rate < 1.0
        self._sampler = None
        # uncalibrated log-odds of a word with probability p are about log p - log alpha (eq. 9)
        self._init_bias = unigram_bias(counts, -self.log_alpha)
        if counts is not None and neg_subset == "fixed" and self.neg_rate < 1.0:
            self._draw_fixed(len(counts))

    # -- negatives ---------------------------------------------------------------------------
    def _draw_fixed(self, num_words: int) -> None:
        self.neg_base = torch.rand(num_words) < self.neg_rate
        self.neg_seed = torch.randint(2 ** 62, ())

    def upgrade_state(self, tensors: dict) -> dict:
        """Read files that hold another version's buffers for the fixed subsets (``neg_fixed``, a
        short-lived grouped scheme that left most classifiers without negatives; ``neg_offset``, the
        per-target shifts of the version keyed on target words): inference never
        uses the training negatives, so foreign buffers are dropped and this objective's own kept."""
        own = self.state_dict()
        for k in ("neg_fixed", "neg_base", "neg_offset", "neg_seed"):
            if k not in own:
                tensors.pop(k, None)
            elif k not in tensors:
                tensors[k] = own[k]
        return tensors

    def start_epoch(self, epoch: int) -> None:
        """Nothing to redraw: variable subsets are fresh every mini-batch, fixed ones never change."""

    def draw(self, targets: torch.Tensor, num_words: int, positions: torch.Tensor | None = None) -> Candidates:
        """The negatives of a batch: words ``[M]`` shared by the batch with the mask ``[N, M]`` of each
        example's negatives (never its own target). Fixed subsets need ``positions [N]``."""
        if self.neg_subset == "fixed" and self.neg_rate < 1.0:
            return Candidates(torch.arange(num_words, device=targets.device),
                              self.fixed_negatives(targets, positions, num_words))
        if self._sampler is None or self._sampler_v != num_words:
            self._sampler = BernoulliSampler(torch.full((num_words,), self.neg_rate, device=targets.device))
            self._sampler_v = num_words
        groups = min(self.neg_groups, len(targets))
        if groups == 1:
            words = self._sampler.draw().to(targets.device)
            return Candidates(words, words.unsqueeze(0) != targets.unsqueeze(1))
        dev = targets.device
        draws = [self._sampler.draw().to(dev) for _ in range(groups)]
        words, inverse = torch.unique(torch.cat(draws), return_inverse=True)
        member = torch.zeros(groups, len(words), dtype=torch.bool, device=dev)
        sizes = torch.tensor([len(d) for d in draws], device=dev)
        member[torch.repeat_interleave(torch.arange(groups, device=dev), sizes), inverse] = True
        group_of = torch.arange(len(targets), device=dev) % groups
        keep = member[group_of] & (words.unsqueeze(0) != targets.unsqueeze(1))
        return Candidates(words, keep)

    def fixed_negatives(self, targets: torch.Tensor, positions: torch.Tensor | None, num_words: int) -> torch.Tensor:
        """``[N, V]`` bool: word w is a negative of example i iff ``(w - o(p_i)) mod V`` is in the base
        subset and w is not its target, with ``o(p) = hash(seed, p) mod V`` (see the module docstring)."""
        if positions is None:
            raise ValueError("fixed negative subsets are per example: pass positions= (each example's index "
                             "in the training data, e.g. its position in the token stream)")
        if self.neg_base.numel() != num_words:
            self._draw_fixed(num_words)
        offset = position_hash(self.neg_seed, positions.to(torch.long)).remainder(num_words)  # [N]
        windows = torch.cat([self.neg_base, self.neg_base]).unfold(0, num_words, 1)  # [V + 1, V], a view
        mask = windows[(num_words - offset.cpu()) % num_words].to(targets.device)  # row i: base[(w - o_i) mod V]
        mask[torch.arange(len(targets), device=targets.device), targets] = False
        return mask

    def prepare(self, scorer: Scorer) -> None:
        """Start each classifier's bias at its unigram log-odds under subsampling, ``log p(w) - log α``
        (a fresh model's sigmoids all start at 1/2, i.e. V/2 in total)."""
        if self._init_bias is not None:
            scorer.shift_bias(self._init_bias)

    # -- training ----------------------------------------------------------------------------
    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor,
                candidates: Candidates | None = None, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Mean over the batch of ``-log σ(a_y) - sum_{w in negatives} log(1 - σ(a_w))``.

        ``positions [N]``: each example's position in the training stream (fixed subsets only)."""
        off = self.log_alpha if bool(self.calibrated) else 0.0  # train on uncalibrated scores
        if candidates is None and (self.neg_rate >= 1.0 or self.neg_subset == "fixed"):
            a = scorer.score_all(ctx) - off  # [N, V]
            true = a.gather(1, targets.unsqueeze(1)).squeeze(1)
            if self.neg_rate >= 1.0:
                return (F.softplus(a).sum(1) - true).mean()
            keep = self.fixed_negatives(targets, positions, scorer.num_words)
            return (F.softplus(-true) + masked_fill(F.softplus(a), keep, 0.0).sum(1)).mean()
        cand = self.draw(targets, scorer.num_words, positions) if candidates is None else candidates
        true, scores = score_true_and_candidates(scorer, ctx, targets, cand.words)
        true, scores = true - off, scores - off
        neg = masked_fill(F.softplus(scores), cand.keep, 0.0).sum(1)
        return (F.softplus(-true) + neg).mean()

    # -- inference ---------------------------------------------------------------------------
    def log_prob(self, scorer: Scorer, ctx: Any) -> torch.Tensor:
        """Exact ``log P'(w|h)`` ``[N, V]``: the calibrated sigmoids renormalised over V (eq. 8)."""
        a = scorer.score_all(ctx).float()
        if not bool(self.calibrated):
            a = a + self.log_alpha
        lp = F.logsigmoid(a)
        return lp - torch.logsumexp(lp, dim=1, keepdim=True)

    def log_prob_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """The rule of :meth:`log_prob` for the targets alone, in blocks of output rows at a large V."""
        off = None if bool(self.calibrated) else self.log_alpha
        found = self.normalised_targets(scorer, ctx, targets, offset=off, log_sigmoid=True)
        return found if found is not None else super().log_prob_targets(scorer, ctx, targets)

    def scores_in_blocks(self, scorer: Scorer) -> bool:
        return scorer_blocks(scorer)

    def finalize(self, scorer: Scorer) -> None:
        """Calibration (§2.1): add log α to every classifier's bias, exactly once."""
        if not bool(self.calibrated):
            if self.neg_rate < 1.0:
                scorer.shift_bias(self.log_alpha)
            self.calibrated.fill_(True)

    def unfinalize(self, scorer: Scorer) -> None:
        """Take log α off the biases again (training works on uncalibrated scores)."""
        if bool(self.calibrated):
            if self.neg_rate < 1.0:
                scorer.shift_bias(-self.log_alpha)
            self.calibrated.fill_(False)


def position_hash(seed: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """SplitMix64 finaliser of ``seed ^ position``, as non-negative int64 ``[N]`` (a counter-based hash:
    the same example always gets the same value, whatever batch or epoch it is in). Int64 products wrap
    modulo 2^64 as the unsigned ones of the reference; right shifts are made logical by masking."""
    def shr(x, k):
        return (x >> k) & ((1 << (64 - k)) - 1)

    x = positions ^ seed.to(positions.device)
    x = x + (0x9E3779B97F4A7C15 - (1 << 64))
    x = (x ^ shr(x, 30)) * (0xBF58476D1CE4E5B9 - (1 << 64))
    x = (x ^ shr(x, 27)) * (0x94D049BB133111EB - (1 << 64))
    return shr(x ^ shr(x, 31), 1)


def renormalised_log_prob(scores: torch.Tensor) -> torch.Tensor:
    """The inference rule (eq. 8) on calibrated scores ``[N, V]``, in their own dtype:
    ``log P'(w|h) = log σ(a_w) - log sum_w' σ(a_w')`` (:meth:`Binary.log_prob` applies the same rule after
    a float32 cast; exact float64 scorers such as the maximum-entropy models call this)."""
    lp = F.logsigmoid(scores)
    return lp - torch.logsumexp(lp, dim=1, keepdim=True)
