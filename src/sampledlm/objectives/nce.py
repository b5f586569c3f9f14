"""Discriminative sampled objectives: noise-contrastive estimation (NCE), negative sampling (NEG)
and BlackOut. None of them estimates the normaliser; each trains the scores to tell the true word
from noise words drawn from q. Evaluation uses the exact softmax over V (inherited
:meth:`~sampledlm.objectives.base.OutputObjective.log_prob`), of the scores plus ``log q`` for NEG, whose scores
converge to ``log P - log q`` (:meth:`NegativeSampling.log_prob`).

Notation: ``a_w`` the model's score of word w after history h, ``σ`` the logistic function,
``q`` the noise distribution (``count^β``), k = S noise draws per example.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from dataclasses import dataclass

from ..config import option
from .base import Scorer
from .normaliser import scorer_blocks
from .options import NegativesOptions, SampledOptions, like
from .sampled import NegativesObjective, SampledObjective, count_kept, masked_fill

NEG_INF = float("-inf")


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """``log(1 - exp(x))`` for ``x <= 0``, stable at both ends (Mächler, 2012)."""
    x = x.clamp(max=-1e-7)
    return torch.where(x > -math.log(2), torch.log(-torch.expm1(x)), torch.log1p(-torch.exp(x)))


class BlackOutLoss(torch.autograd.Function):
    """BlackOut's per-example loss with its gradient in closed form (one pass over the [N, S] scores each way,
    where autograd through logsumexp and :func:`log1mexp` keeps about ten [N, S] intermediates).

    Inputs: ``l_true`` [N] (``a_y - log q(y)``) and ``l_neg`` [N, S] (``a_d - log q(d)``; -inf where a negative is
    not kept). With ``log Z = logsumexp(l_true, l_neg)``, ``x_d = l_d - log Z`` (capped at -1e-7 as
    :func:`log1mexp` caps it), ``p_d = exp(x_d)``, ``r_d = p_d / (1 - p_d)`` and ``b = sum_d r_d``:

    - ``loss = log Z - l_true - sum_d log(1 - p_d)``;
    - ``d loss / d l_d = p_d + r_d - p_d b`` and ``d loss / d l_true = p_y - 1 - p_y b`` (``p_y = exp(l_true -
      log Z)``), since ``d log Z / d l_c = p_c`` and ``d x_d / d l_c = [c = d] - p_c``.
    """

    @staticmethod
    def forward(ctx, l_true: torch.Tensor, l_neg: torch.Tensor) -> torch.Tensor:
        log_z = torch.logaddexp(l_true, torch.logsumexp(l_neg, dim=1))
        x = l_neg - log_z.unsqueeze(1)
        p = torch.exp(x)
        capped = x >= -1e-7
        x.clamp_(max=-1e-7)
        one_minus = torch.expm1(x).neg_()
        neg = torch.where(x > -math.log(2), torch.log(one_minus), torch.log1p(-p)).sum(1)  # p = exp(x) where x < -log 2: the cap never applies
        r = (p / one_minus).masked_fill_(capped, 0.0)  # a capped term has no gradient, as under clamp
        ctx.save_for_backward(p, torch.exp(l_true - log_z), r)
        return log_z - l_true - neg

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        p, p_true, r = ctx.saved_tensors
        b = r.sum(1)
        return (p_true - 1 - p_true * b) * g, (p + r - p * b.unsqueeze(1)) * g.unsqueeze(1)


class CompiledBlackOutLoss(torch.autograd.Function):
    """``CompiledBlackOutLoss.apply(l_true [N], scores [N, S], logq [1 or N, S], keep [N, S] or None) -> loss [N]``:
    :class:`BlackOutLoss` of ``l_neg = scores - logq`` (-inf where not kept), the subtraction, the mask, the loss
    and its gradient in one compiled loop (:mod:`.blackout_kernel`); CPU, float32. Gradients for l_true and scores."""

    @staticmethod
    def forward(ctx, l_true, scores, logq, keep):
        from .blackout_kernel import compiled_loss

        arrays = [t.detach().contiguous().numpy() for t in (l_true, scores, logq)]
        loss, g_true, g_neg = compiled_loss(*arrays, None if keep is None else keep.contiguous().numpy())
        ctx.save_for_backward(torch.from_numpy(g_true), torch.from_numpy(g_neg))
        return torch.from_numpy(loss)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        g_true, g_neg = ctx.saved_tensors
        return g_true * g, g_neg * g.unsqueeze(1), None, None


def blackout_loss_of_scores(l_true: torch.Tensor, scores: torch.Tensor, logq: torch.Tensor,
                            keep: torch.Tensor | None) -> torch.Tensor:
    """BlackOut's loss ``[N]`` from ``l_true = a_y - log q(y)`` ``[N]``, the negatives' scores ``[N, S]``, their log q
    ``[1 or N, S]`` and the kept-mask: the compiled loop on a CPU in float32, :func:`blackout_loss` elsewhere."""
    tensors = (l_true, scores, logq)
    if (all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors) and scores.dim() == logq.dim() == 2
            and logq.shape[0] in (1, scores.shape[0]) and logq.shape[1] == scores.shape[1]
            and not logq.requires_grad):
        return CompiledBlackOutLoss.apply(l_true, scores, logq, keep)
    return blackout_loss(l_true, masked_fill(scores - logq, keep, NEG_INF))


def blackout_loss(l_true: torch.Tensor, l_neg: torch.Tensor) -> torch.Tensor:
    """:class:`BlackOutLoss`; half-precision scores (autocast) go through autograd in float32 instead."""
    if l_neg.dtype in (torch.float16, torch.bfloat16):
        l_true, l_neg = l_true.float(), l_neg.float()
    return BlackOutLoss.apply(l_true, l_neg)


@dataclass
class NCEOptions(SampledOptions):
    samples: int = like(SampledOptions, "samples", recurrent=1000)
    noise_power: float = like(SampledOptions, "noise_power", 1.0)
    learn_norm: bool = option(False, "NCE: learn the log normaliser instead of fixing it to 0")


@dataclass
class BlackOutOptions(NegativesOptions):
    samples: int = like(NegativesOptions, "samples", recurrent=1000)
    noise_power: float = like(NegativesOptions, "noise_power", recurrent=0.4)


class NCE(SampledObjective):
    """Noise-contrastive estimation (Gutmann & Hyvärinen 2010; Mnih & Teh 2012; Labeau 2014, Botev et al. 2017 §5.2).

    The model's unnormalised probability is ``P(w|h) = exp(a_w - c)`` with ``c = log z``, fixed to 0
    ("normaliser fixed to 1", the default) or one learned scalar (``learn_norm=True``). With
    ``Δ_w = a_w - c - log(k q(w))`` the posterior that w came from the data is
    ``P(D=1|w) = P(w|h) / (P(w|h) + k q(w)) = σ(Δ_w)``, and the loss per example is
    ``-log σ(Δ_y) - sum_{i=1..k} log(1 - σ(Δ_{x_i}))`` with the k noise words ``x_i ~ q``
    (drawn from the whole vocabulary: the true word may be among them).

    Its gradient weights ``k q(y) / (P(y) + k q(y)) = 1 - σ(Δ_y)`` and ``σ(Δ_x)`` lie in [0, 1].
    Default noise: the unigram (``noise_power=1``), which Labeau 2014 found far better than uniform.
    """

    name = "nce"
    Options = NCEOptions
    sequence_train = {"lr": 0.004}
    sequence_why = ("PTB GRU-256, 8 epochs: one bag of 1,000 noise words shared by the batch gives test 93.82 at lr "
                    "0.004 (the best validation of 0.002-0.008) and 94.33 at 0.008, against 99.72 with 20 per "
                    "position and 95.35 with 100 per position at 0.008 (the softmax at its best rate: 92.01); a shared "
                    "bag of 20 pushes down too few rows a step (valid 259 after 2 epochs); under the GRU's short-run "
                    "AdamW recipe (docs/results/lr-grid-adamw.md) a bag of 1,000 scores 3.0 % above the softmax on "
                    "the mean of three seeds and one of 2,000 2.0 %, at half the words a CPU second: give --samples "
                    "2000 for that point")
    sequence_train_long = ((20_000, {"lr": 0.002},
                            "over the first epoch of a 4-epoch cosine run of 110,800 steps on 31.0M words of "
                            "Wikipedia at V = 485k (one bag of 1,000): 0.004 249.74, 0.002 235.44 (5.7 % better), "
                            "0.001 246.93, as IS and BlackOut; PTB's 8 epochs take 6,640 steps"),)

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        learn_norm = self.options.learn_norm
        self.learn_norm = bool(learn_norm)
        if self.learn_norm:
            self.log_norm = nn.Parameter(torch.zeros(()))
        else:
            self.register_buffer("log_norm", torch.zeros(()))

    def loss(self, true, logq_true, scores, logq, keep):
        log_k = math.log(scores.shape[1])
        d_true = true - self.log_norm - log_k - logq_true
        d_noise = scores - self.log_norm - log_k - logq
        return F.softplus(-d_true) + F.softplus(d_noise).sum(1)


class NegativeSampling(NegativesObjective):
    """Negative sampling (Mikolov et al. 2013) with the 1/S scale of Botev et al. 2017 eq. 29:
    ``loss = -log σ(a_y) - (1/S) sum_d log(1 - σ(a_d))``, d drawn from q and (by default,
    ``exclude_true``) different from the true word. Its optimum is not the likelihood's.
    """

    name = "neg"
    # an embedding loss, not a language model: nothing to tune for perplexity, no recurrent defaults

    def log_prob(self, scorer: Scorer, ctx) -> torch.Tensor:
        """The exact rule of a model trained by NEG: ``P(w | h) = softmax_w(a_w + log q(w))``.

        In expectation over the draws the loss is ``-sum_w [P(w|h) log σ(a_w) + q(w) log(1 - σ(a_w))]``, whose
        pointwise optimum is ``σ(a_w) = P / (P + q)``, i.e. ``a_w = log P(w|h) - log q(w)`` (the shifted PMI of
        Levy & Goldberg 2014): the scores alone rank words by ``P / q`` and favour rare words, so their softmax
        is no language model; adding ``log q`` back recovers ``P`` up to the normaliser, which the softmax supplies.
        (With ``exclude_true`` the true word is never its own negative, which adds ``-log(1 - P(w|h))``: the
        rule is exact at the optimum only for words of small probability.)"""
        self._ensure_noise(scorer.num_words)
        return torch.log_softmax(scorer.score_all(ctx).float() + self.log_noise.to(ctx.device), dim=-1)

    def log_prob_targets(self, scorer: Scorer, ctx, targets: torch.Tensor) -> torch.Tensor:
        """The rule of :meth:`log_prob` for the targets alone, in blocks of output rows at a large V."""
        self._ensure_noise(scorer.num_words)
        found = self.normalised_targets(scorer, ctx, targets, offset=self.log_noise.to(ctx.device))
        return found if found is not None else super().log_prob_targets(scorer, ctx, targets)

    def scores_in_blocks(self, scorer: Scorer) -> bool:
        return scorer_blocks(scorer)

    def loss(self, true, logq_true, scores, logq, keep):
        n = count_kept(keep, *scores.shape, scores.device)
        neg = masked_fill(F.softplus(scores), keep, 0.0).sum(1) / n
        return F.softplus(-true) + neg


class BlackOut(NegativesObjective):
    """BlackOut (Ji et al. 2016; Botev et al. 2017 eq. 30-31). Over the set {y} ∪ N_y (N_y: S draws from q,
    none equal to y unless ``exclude_true=False``) it forms the weighted softmax
    ``p~(c) = (exp(a_c)/q(c)) / (exp(a_y)/q(y) + sum_{d in N_y} exp(a_d)/q(d))`` and the loss
    ``-log p~(y) - sum_{d in N_y} log(1 - p~(d))``.
    """

    name = "blackout"
    Options = BlackOutOptions
    sequence_train = {"lr": 0.008}
    sequence_why = ("PTB GRU-256, 8 epochs, each rate of 0.004-0.016 tried (docs/results/lr-grid.md): lr 0.008 valid "
                    "100.40 / test 95.02, 0.004 valid 101.68, 0.016 diverged in epoch 5; "
                    "as Ji et al. 2016, one set of negatives shared by the batch, drawn from unigram^alpha with alpha "
                    "chosen on validation: PTB GRU-256, 8 epochs, lr 0.008, one bag of 1,000: alpha 0.4 valid 100.40 / "
                    "test 95.02, 0.2 100.62 / 95.41, 0.75 105.70 / 99.93, 1.0 108.91 / 102.36; 20 per position "
                    "106.94 / 100.79 (alpha 0.75); at V = 485k per-position draws read 22,400 scattered output rows a "
                    "step (0.65x their V = 10k speed)")
    sequence_train_long = ((20_000, {"lr": 0.002},
                            "over the first epoch of a 4-epoch cosine run of 74,600 steps on 20.9M words of Wikipedia "
                            "at V = 485k (one bag of 1,000): 0.008 diverged, 0.004 277.35, 0.002 262.14 (5.5 % "
                            "better), 0.001 278.44, as IS; PTB's 8 epochs take 6,640 steps"),)

    def loss(self, true, logq_true, scores, logq, keep):
        return blackout_loss_of_scores(true - logq_true, scores, logq, keep)
