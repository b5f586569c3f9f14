"""Sampling estimates of the softmax normaliser: importance sampling (IS) and complementary sum
sampling (CSS-IS, CSS-Bernoulli), Botev, Zheng & Barber, 2017 §2-4.

All three train the softmax model ``p(c|x) = exp a_c / Z`` by replacing ``Z = sum_c exp a_c`` in
``-log p(y|x) = -a_y + log Z`` with an estimate ``Z~`` built from a few candidate words:

* ``is``: ``Z~ = (1/S) (sum_{s in bag} exp(a_s) / q(s) + exp(a_y) / q(y))``, bag of S draws from q
  (eq. 5, 11, 16), plus the true word's own term, which bounds the loss below. Without it
  (``true_term=False``) the estimator is unbiased for Z but not log Z; the implied weights ``p~`` are
  unbounded (§3.1), so training can diverge when the true word is missing from the bag.
* ``css-is``: ``Z~ = exp a_y + sum_{d in N} exp(a_d) / (S q_y(d))`` (eq. 17-19, C_n = {y}): the true
  word summed exactly, the rest by IS with q restricted to the words != y,
  ``q_y(d) = q(d) / (1 - q(y))``; the draws come from the S + S' trick (§6.2).
* ``css-bernoulli``: ``Z~ = exp a_y + sum_{d: s_d = 1, d != y} exp(a_d) / b_d`` (eq. 7-8, 18, 23)
  with independent ``s_d ~ Bernoulli(b_d)``, ``b = min(1, λ q)`` scaled so ``E[#draws] = S``.

The gradient is ``sum_{c in C'} (δ(c, y) - p~(c)) ∇a_c`` with ``p~`` a distribution over the
candidates (eq. 20-21), so each weight lies in [-1, 1] for CSS.

Shapes: ``targets [N]``; candidates ``[M]`` shared by the batch (one ``[N,h] x [h,M]`` product)
or ``[N, M]`` per example (``sample_mode="each"``); loss: scalar mean over the N examples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..config import option, setting_name, setting_value
from ..errors import UserError
from .sampling import SAMPLERS, BernoulliSampler, bernoulli_probs, first_k_not, noise_distribution
from .base import OutputObjective, Scorer, score_true_and_candidates
from .options import NegativesOptions, SampledOptions, like

NEG_INF = float("-inf")


@dataclass
class Candidates:
    """A draw of candidate words: ``words`` ``[M]`` (shared) or ``[N, M]`` (per example);
    ``keep`` ``[N, M]`` bool or None (all kept), e.g. the first S draws != the true word."""

    words: torch.Tensor
    keep: torch.Tensor | None = None


def masked_fill(x: torch.Tensor, keep: torch.Tensor | None, value: float) -> torch.Tensor:
    """``x`` with the entries not kept set to ``value`` (``x`` itself when ``keep`` is None)."""
    return x if keep is None else x.masked_fill(~keep, value)


def count_kept(keep: torch.Tensor | None, n: int, m: int, device=None) -> torch.Tensor:
    """Number of kept candidates per example, ``[N]`` (at least 1, to divide by), on ``device``."""
    if keep is None:
        return torch.full((n,), float(m), device=device)
    return keep.sum(1).clamp_min(1).float()


def unigram_bias(counts, shift: float = 0.0) -> torch.Tensor | None:
    """``[V]`` initial output biases ``log(count(w) / total) + shift`` (counts floored at 1), or None."""
    if counts is None:
        return None
    c = np.maximum(np.asarray(counts, dtype=np.float64), 1.0)
    return torch.from_numpy(np.log(c / c.sum()) + shift).float()


def css_loss(true: torch.Tensor, weighted: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """``-log p~(y) = log(exp a_y + sum_kept exp(a_d + log kappa_d)) - a_y`` (eq. 18-19), ``[N]``;
    ``weighted [N, M]`` holds ``a_d + log kappa_d``."""
    terms = masked_fill(weighted, keep, NEG_INF)
    return torch.logsumexp(torch.cat([true.unsqueeze(1), terms], 1), dim=1) - true


class SampledObjective(OutputObjective):
    """Shared machinery of the objectives that score a bag of words drawn from a noise distribution.

    Options (keyword-only, same names as the ``train`` flags):

    * ``samples`` (S): candidates per example (default 250).
    * ``noise_power`` (β): ``q(w) ∝ count(w)^β``; 0 = uniform.
    * ``sample_mode``: ``"shared"`` (one bag for the whole mini-batch: one dense product against
      S columns, Botev et al. 2017 §6.2) or ``"each"`` (an independent bag per example).
    * ``sampler``: ``"alias"`` (O(1) per draw) or ``"multinomial"`` (torch.multinomial, O(V) per call).

    ``q`` is the buffer ``noise`` (saved with the model); :meth:`set_noise` replaces it.
    Subclasses set ``excludes_true`` (draw S + S' and keep the first S that are not the true
    word) and implement :meth:`loss`.
    """

    sparse_output = True
    excludes_true = False

    Options = SampledOptions

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        o = self.options
        if o.sampler not in SAMPLERS:
            raise UserError(f"{setting_name('sampler')} must be one of {', '.join(SAMPLERS)}, got {o.sampler!r}")
        self.samples = int(o.samples)
        self.noise_power = float(o.noise_power)
        self.sample_mode = o.sample_mode
        self.sampler_name = o.sampler
        noise_power = self.noise_power
        self._sampler = self._log_noise = self.inclusion = self._qmax = None
        noise = noise_distribution(counts, noise_power) if counts is not None else torch.empty(0, dtype=torch.float64)
        self.register_buffer("noise", noise)
        self._init_bias = unigram_bias(counts)
        self.register_load_state_dict_post_hook(lambda module, keys: module._invalidate())

    def prepare(self, scorer: Scorer) -> None:
        """Start the output biases at the log unigram (a fresh model's are 0). With every score at 0,
        NCE's unnormalised model starts V times too large and needs many epochs to come down
        (small PTB sample: valid ppl 72k after 4 epochs from zero biases, 487 from log-unigram ones)."""
        if self._init_bias is not None:
            scorer.shift_bias(self._init_bias)

    # -- noise -------------------------------------------------------------------------------
    def set_noise(self, probs: torch.Tensor) -> None:
        """Use ``probs [V]`` (normalised here) as the noise / proposal distribution q."""
        probs = torch.as_tensor(probs, dtype=torch.float64)
        self.noise = (probs / probs.sum()).to(self.noise.device)
        self._invalidate()

    def _invalidate(self) -> None:
        self._sampler = self._log_noise = self.inclusion = self._qmax = None

    def _ensure_noise(self, num_words: int) -> None:
        if self.noise.numel() == 0:
            self.noise = noise_distribution(None, 0.0, num_words).to(self.noise.device)
        elif self.noise.numel() != num_words:
            raise UserError(f"noise distribution has {self.noise.numel()} words but the model predicts {num_words}")

    @property
    def log_noise(self) -> torch.Tensor:
        """``log q [V]`` (float32), cached until the noise changes."""
        if self._log_noise is None or self._log_noise.device != self.noise.device:
            self._log_noise = torch.log(self.noise).float()
        return self._log_noise

    def sampler(self):
        """The sampler over ``noise``, built on its device (again when the objective has moved)."""
        if self._sampler is None or self._sampler.device != self.noise.device:
            self._sampler = self._build_sampler()
        return self._sampler

    def _build_sampler(self):
        return SAMPLERS[self.sampler_name](self.noise)

    # -- drawing -----------------------------------------------------------------------------
    def extra_draws(self) -> int:
        """S' of the S + S' trick: enough spare draws that a row almost never runs short even
        when its true word is frequent (Botev et al. 2017 used S' = 10 after removing stop words)."""
        if self._qmax is None:
            self._qmax = float(self.noise.max())
        qmax = self._qmax
        return 10 + math.ceil(2 * self.samples * qmax + 4 * math.sqrt(self.samples * qmax))

    def draw(self, targets: torch.Tensor) -> Candidates:
        """Draw the candidates for a batch with true words ``targets [N]``."""
        m = self.samples + (self.extra_draws() if self.excludes_true else 0)
        shape = (m,) if self.sample_mode == "shared" else (len(targets), m)
        words = self.sampler().draw(shape).to(targets.device)
        keep = first_k_not(words, targets, self.samples) if self.excludes_true else None
        return Candidates(words, keep)

    # -- training ----------------------------------------------------------------------------
    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor,
                candidates: Candidates | None = None) -> torch.Tensor:
        """Mean loss over the batch. ``candidates`` (tests, custom samplers) replaces the draw."""
        self._ensure_noise(scorer.num_words)
        cand = self.draw(targets) if candidates is None else candidates
        log_q = self.log_proposal()
        true, scores = score_true_and_candidates(scorer, ctx, targets, cand.words)
        logq = log_q[cand.words].unsqueeze(0) if cand.words.dim() == 1 else log_q[cand.words]
        return self.loss(true, log_q[targets], scores, logq, cand.keep).mean()

    def log_proposal(self) -> torch.Tensor:
        """``[V]`` log of the per-word proposal weight the loss divides by (log q by default)."""
        return self.log_noise

    def loss(self, true: torch.Tensor, logq_true: torch.Tensor, scores: torch.Tensor,
             logq: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        """Per-example loss ``[N]`` from the true words' scores ``[N]`` and log q ``[N]``, the
        candidates' scores ``[N, M]`` and log q ``[1 or N, M]``, and the kept-mask (or None)."""
        raise NotImplementedError

    @classmethod
    def settle_options(cls, options: dict, vocab) -> tuple[dict, list[str]]:
        """``samples`` given must leave a word out: S >= V would score every word, the softmax's cost."""
        if options.get("samples") is not None and options["samples"] >= len(vocab):
            raise UserError(f"{setting_value('samples', options['samples'])}: must be smaller than the vocabulary size V = "
                            f"{len(vocab)} (to score every word, use {setting_value('objective', 'softmax')})")
        return dict(options), []


class NegativesObjective(SampledObjective):
    """A sampled objective over *negatives*: by default (``exclude_true=True``) the S draws kept
    for an example all differ from its true word (S + S' trick). NEG, BlackOut and ranking."""

    Options = NegativesOptions

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        self.excludes_true = bool(self.options.exclude_true)


@dataclass
class ISOptions(SampledOptions):
    samples: int = like(SampledOptions, "samples", recurrent=1000)
    true_term: bool = option(True, "is: add the true word's own term to the estimate of Z, which bounds the loss "
                                   "below (--no-true-term: Botev et al.'s plain estimator, which can diverge)")


@dataclass
class CSSOptions(SampledOptions):
    samples: int = like(SampledOptions, "samples", recurrent=3000)


class ImportanceSampling(SampledObjective):
    """Importance sampling of the normaliser (Bengio & Senécal 2003; Botev et al. 2017 eq. 11, 16), with the true
    word's own term in the estimate (Jean et al. 2015 keep the target words in every sampled set)::

        Z~ = (1/S) (sum_{s in bag} exp(a_s) / q(s) + exp(a_y) / q(y)),   loss = -a_y + log Z~

    over a bag of S draws from q (the true word among them or not). The true term bounds the loss below by
    ``-log(S q(y))``; as S grows it vanishes and Z~ -> Z. It is the softmax cross-entropy over the S + 1 scores
    ``a_c - log(S q(c))`` (TensorFlow's sampled softmax, accidental hits kept), shifted by ``log(S q(y))``, a
    constant: the gradients are the same.

    ``true_term=False`` leaves the true term out: Botev et al.'s plain estimator, unbounded below, since the
    model can raise a_y while the bag rarely holds y (their §3.1). Measured on PTB's GRU-256 with 1,000 shared
    draws: train loss -16 and valid perplexity 146,288 by epoch 7; with the true term, test 98.30 after 8.
    """

    name = "is"
    Options = ISOptions
    sequence_train = {"lr": 0.004}
    sequence_why = ("PTB GRU-256, 8 epochs, each rate of 0.004-0.016 tried (docs/results/lr-grid.md): 1,000 shared "
                    "draws with the true term at lr 0.004 give valid 97.57, test 92.26, against the softmax's 92.01 "
                    "at its own best rate (0.004); 0.008 validates 0.5 % better (97.09, test 92.29) but diverges "
                    "where a run holds it longer (PTB at a near-constant 0.008: step 6,516; V = 485k: step ~7,700 "
                    "of its first epoch), where 0.004 held on")
    sequence_train_long = ((20_000, {"lr": 0.002},
                            "over the first epoch of a 4-epoch cosine run of 72,000 steps on 20M words of Wikipedia, "
                            "0.002 validated 6.5 % better than 0.004 at V = 10k (75.98 against 81.30) and 4.5 % at "
                            "V = 485k (246.17 against 257.23; 0.001 260.18); PTB's 8 epochs take 6,640 steps"),)

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        self.true_term = bool(self.options.true_term)

    def loss(self, true, logq_true, scores, logq, keep):
        terms = (scores - logq).expand(true.shape[0], -1)
        if self.true_term:
            terms = torch.cat([terms, (true - logq_true).unsqueeze(1)], 1)
        return torch.logsumexp(terms, dim=1) - math.log(scores.shape[1]) - true


class CSSImportance(SampledObjective):
    """Complementary sum sampling with importance sampling (Botev et al. 2017 eq. 17-20, "IS Correct Class"):
    ``Z~ = exp a_y + sum_{d in N_y} exp(a_d) / (S_y q_y(d))``, ``q_y(d) = q(d) / (1 - q(y))``, N_y the
    first S draws != y out of S + S' (§6.2); S_y = |N_y| (= S unless the spares ran out).
    """

    name = "css-is"
    Options = CSSOptions
    sequence_train = {"lr": 0.008}
    sequence_why = ("PTB GRU-256, 8 epochs, each rate of 0.001-0.016 tried with 3,000 shared draws "
                    "(docs/results/lr-grid.md): 0.008 gives valid 97.04, test 92.10 (0.004 97.71, 0.016 109.98), "
                    "against the softmax's 92.01 at its own best rate (0.004); 1,000 draws at 0.008 98.75 / 93.71 in "
                    "0.83x the CPU seconds, 6,000 97.33 / 91.64 in 1.6x (since 2026-12-01, was 1,000)")
    sequence_train_long = ((20_000, {"lr": 0.002, "samples": 1000},
                            "over the first epoch of a 4-epoch cosine run of about 96,000 steps on 26.6M words of "
                            "Wikipedia at V = 485k with 1,000 shared draws: 0.008 diverged, 0.004 248.74, 0.002 231.05 "
                            "(7.1 % better), 0.001 242.74, as IS and BlackOut; 3,000 draws at 0.002 reached 221.45 "
                            "after that epoch but in 2.06x the CPU seconds (3,468 against 1,682), where 1,000 had "
                            "206.89 after two epochs (3,342 CPU s): on a long run the CPU budget, not the text, ends "
                            "it; PTB's 8 epochs take 6,640 steps"),)
    excludes_true = True

    def loss(self, true, logq_true, scores, logq, keep):
        n = count_kept(keep, scores.shape[0], scores.shape[1], scores.device)
        log_kappa = -logq + torch.log1p(-logq_true.exp()).unsqueeze(1) - n.log().unsqueeze(1)
        return css_loss(true, scores + log_kappa, keep)


class CSSBernoulli(SampledObjective):
    """Complementary sum sampling with Bernoulli sampling (Botev et al. 2017 eq. 7-9, 18, 23):
    ``Z~ = exp a_y + sum_{d != y, s_d = 1} exp(a_d) / b_d``; ``s_d ~ Bernoulli(b_d)`` independent,
    ``b = min(1, λ q)`` with ``sum b = S`` (``samples >= V`` gives b = 1: the exact softmax).

    Shared mode: one joint draw for the batch (O(S), see :class:`~sampledlm.objectives.sampling.BernoulliSampler`);
    example i drops its own target from it, which leaves an exact Bernoulli draw over its
    complement. ``sample_mode="each"`` draws an independent ``[N, V]`` mask (O(N V): for checks only).
    """

    name = "css-bernoulli"

    def _build_sampler(self):
        self.inclusion = bernoulli_probs(self.noise, self.samples).float().to(self.noise.device)
        self._log_b = torch.log(self.inclusion)
        return BernoulliSampler(self.inclusion)

    def draw(self, targets: torch.Tensor) -> Candidates:
        sampler = self.sampler()  # also sets self.inclusion
        if self.sample_mode == "shared":
            words = sampler.draw().to(targets.device)
            return Candidates(words, words.unsqueeze(0) != targets.unsqueeze(1))
        mask = torch.rand(len(targets), len(self.inclusion), device=self.inclusion.device) < self.inclusion
        mask[torch.arange(len(targets), device=mask.device), targets.to(mask.device)] = False
        m = max(int(mask.sum(1).max()), 1)
        keep, words = torch.sort(mask.to(torch.int8), dim=1, descending=True, stable=True)
        return Candidates(words[:, :m].to(targets.device), keep[:, :m].bool())

    def log_proposal(self) -> torch.Tensor:
        """``log b [V]`` (-inf where b = 0: such words are never drawn)."""
        self.sampler()
        return self._log_b

    def loss(self, true, logq_true, scores, logq, keep):
        return css_loss(true, scores - logq, keep)  # logq holds log b_d here: kappa_d = 1 / b_d
