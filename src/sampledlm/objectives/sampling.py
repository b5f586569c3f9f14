"""Drawing candidate words for the sampled output objectives.

* :func:`noise_distribution` -- the noise / proposal distribution ``q(w) ∝ count(w)^β``
  (β = 0 is uniform; Botev et al. use β ∈ {0.75, 1}, Mnih & Teh the unigram, β = 1).
* :class:`AliasSampler` -- i.i.d. draws from ``q`` in O(1) each (Walker/Vose alias method),
  after an O(V) table build; :class:`MultinomialSampler` -- the same draws with
  ``torch.multinomial`` (which re-scans the O(V) cumulative distribution on every call).
  ``python -m benchmarks scaling`` measures both; the alias method is the default (faster at every V we
  measured, and the only one whose cost does not grow with V).
* :func:`bernoulli_probs` / :class:`BernoulliSampler` -- one joint draw of independent
  Bernoulli variables ``s_c ~ Bernoulli(b_c)`` (CSS-Bernoulli, Botev et al. 2017 eq. 7-8; the binary
  objective's negative subsets, Xu et al. 2011 §2.1) in O(expected number drawn), not O(V).
* :func:`first_k_not` -- the S + S' trick of Botev et al. 2017 §6.2: from a bag drawn with
  replacement, keep for each example the first S draws that are not its true word.

Every draw uses torch's global RNG, so one ``torch.manual_seed`` reproduces a run.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..data.alias import vose_alias


def noise_distribution(counts, power: float = 0.75, num_words: int | None = None) -> torch.Tensor:
    """``q [V]`` (float64, sums to 1) with ``q(w) ∝ max(count(w), 1)^power``.

    ``counts``: unigram counts ``[V]`` (``vocab.counts``) or None (uniform over ``num_words``).
    ``power`` = 0 gives the uniform distribution. Words never seen in training are given a
    count of 1 so that q > 0 everywhere (an importance sampler must be able to draw any word).
    """
    if power < 0:
        raise ValueError(f"noise power must be >= 0, got {power}")
    if counts is None:
        if num_words is None:
            raise ValueError("need counts or num_words for a noise distribution")
        return torch.full((num_words,), 1.0 / num_words, dtype=torch.float64)
    c = np.maximum(np.asarray(counts, dtype=np.float64), 1.0)
    w = c ** power if power else np.ones_like(c)
    return torch.from_numpy(w / w.sum())


class AliasSampler:
    """I.i.d. draws from a discrete distribution ``probs [V]`` by the alias method (Vose, 1991).

    Build: split the V columns of height ``V * q(w)`` so that each column holds at most two
    words: its own (with probability ``prob[k]``) and an ``alias[k]``. Draw: pick a column k
    uniformly and a uniform u; return k if u < prob[k], else alias[k]. O(V) once, O(1) per draw.
    """

    def __init__(self, probs: torch.Tensor):
        prob, alias = vose_alias(probs.detach().cpu().numpy())
        n = len(prob)
        self.prob = torch.from_numpy(prob).float().to(probs.device)
        self.alias = torch.from_numpy(alias).long().to(probs.device)
        self.num_words = n
        self.device = probs.device

    def draw(self, shape) -> torch.Tensor:
        """LongTensor of ``shape`` with i.i.d. draws."""
        k = torch.randint(self.num_words, shape, device=self.prob.device)
        u = torch.rand(shape, device=self.prob.device)
        return torch.where(u < self.prob[k], k, self.alias[k])


class MultinomialSampler:
    """The same i.i.d. draws via ``torch.multinomial(..., replacement=True)`` (O(V) per call)."""

    def __init__(self, probs: torch.Tensor):
        self.probs = probs.float()
        self.device = probs.device

    def draw(self, shape) -> torch.Tensor:
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        n = math.prod(shape)
        return torch.multinomial(self.probs, n, replacement=True).view(shape)


SAMPLERS = {"alias": AliasSampler, "multinomial": MultinomialSampler}


def bernoulli_probs(q: torch.Tensor, expected: float) -> torch.Tensor:
    """Inclusion probabilities ``b_c = min(1, λ q_c)`` with λ chosen so that ``sum_c b_c = expected``.

    (Seed 001 §6.1 picks ``b_c = f(c)^0.54`` to get an expected S = 20; scaling and clipping
    ``q`` keeps the user's noise power and hits any S exactly.) ``expected >= V`` gives all ones,
    the exact sum.
    """
    q = q.detach().double().cpu()  # built once per run, on the host; callers move it to their device
    V = len(q)
    if expected >= V:
        return torch.ones(V, dtype=torch.float64)
    qs, _ = torch.sort(q, descending=True)
    # with the top k clipped to 1: k + lam * tail_k = expected, tail_k = sum of qs[k:]
    tail = torch.flip(torch.cumsum(torch.flip(qs, [0]), 0), [0])
    k = torch.arange(V, dtype=torch.float64)
    lam = (expected - k) / tail
    ok = torch.nonzero(lam * qs <= 1.0).flatten()  # first k whose (k+1)-th largest is not clipped
    if len(ok):
        return torch.clamp(lam[ok[0]] * q, max=1.0)
    return torch.ones(V, dtype=torch.float64)


class BernoulliSampler:
    """One joint draw of independent ``s_c ~ Bernoulli(b_c)``, returning ``{c : s_c = 1}``.

    Cost O(expected size + log(max b / min b)), not O(V): words are sorted by b and grouped in
    buckets where b varies by at most a factor 2; within a bucket with upper bound ``p`` the
    inclusion positions of Bernoulli(p) trials are generated by geometric gaps, and each is
    kept with probability ``b_c / p`` (thinning), which leaves exactly Bernoulli(b_c) per word.
    Words with b_c = 1 are always included; b_c = 0 never.

    On a GPU (``b`` on a CUDA device) the draw is the dense ``rand(V) < b`` instead: one kernel over V
    words costs microseconds there, stays on the device (no walk over buckets in Python), and is the same
    distribution.
    """

    def __init__(self, b: torch.Tensor, spare_sd: float = 6.0, spare: int = 16):
        """``b [V]``: inclusion probabilities. ``spare_sd``, ``spare``: gaps drawn per bucket beyond
        its mean (a bucket that runs short is completed exactly, just more slowly)."""
        self.device = b.device
        self.dense = b.detach().float().clamp(0, 1) if b.device.type == "cuda" else None
        b = b.detach().double().cpu()
        order = torch.argsort(b, descending=True)
        bs = b[order]
        n_sure = int((bs >= 1.0).sum())
        n_pos = int((bs > 0).sum())
        self.sure = order[:n_sure].clone()
        self.order = order[n_sure:n_pos].clone()
        self.b = bs[n_sure:n_pos].clone()
        starts, lengths, tops = [], [], []
        if len(self.b):
            level = torch.floor(torch.log2(self.b[0] / self.b)).long()
            change = torch.ones(len(level), dtype=torch.bool)
            change[1:] = level[1:] != level[:-1]
            starts = torch.nonzero(change).flatten()
            lengths = torch.diff(torch.cat([starts, torch.tensor([len(level)])]))
            tops = self.b[starts]
        self.starts = torch.as_tensor(starts, dtype=torch.long)
        self.lengths = torch.as_tensor(lengths, dtype=torch.long)
        self.tops = torch.as_tensor(tops, dtype=torch.float64)
        mean = self.lengths.double() * self.tops
        self.budget = torch.ceil(mean + spare_sd * mean.sqrt() + spare).long()
        self.bucket_of = torch.repeat_interleave(torch.arange(len(self.starts)), self.budget)
        self.log1m_top = torch.log1p(-self.tops.clamp(max=1 - 1e-12))[self.bucket_of]
        seg_end = torch.cumsum(self.budget, 0)
        self.seg_first = seg_end - self.budget
        self.seg_last = seg_end - 1
        self.expected = float(b.clamp(max=1).sum())

    def _gaps(self, log1m: torch.Tensor) -> torch.Tensor:
        u = torch.rand(log1m.shape, dtype=torch.float64).clamp_min(1e-300)
        return torch.floor(torch.log(u) / log1m).long() + 1  # Geometric on {1, 2, ...}

    def draw(self) -> torch.Tensor:
        """LongTensor of the included word ids (order unspecified), on the device of ``b``."""
        if self.dense is not None:
            return torch.nonzero(torch.rand(self.dense.shape, device=self.device) < self.dense).flatten()
        if not len(self.starts):
            return self.sure.clone()
        cs = torch.cumsum(self._gaps(self.log1m_top), 0)
        base = torch.where(self.seg_first > 0, cs[(self.seg_first - 1).clamp_min(0)], torch.zeros_like(self.seg_first))
        pos = cs - base[self.bucket_of] - 1  # 0-based position inside its bucket
        n = self.lengths[self.bucket_of]
        hit = pos < n
        picked = [(self.starts[self.bucket_of] + pos)[hit]]
        # a bucket whose gaps ran out before its end: keep drawing (rare) -- exact, not truncated
        for k in torch.nonzero(pos[self.seg_last] < self.lengths).flatten().tolist():
            last = int(pos[self.seg_last[k]])
            lm = torch.log1p(-self.tops[k].clamp(max=1 - 1e-12))
            while True:
                more = last + torch.cumsum(self._gaps(lm.expand(int(self.budget[k]))), 0)
                picked.append(self.starts[k] + more[more < self.lengths[k]])
                if more[-1] >= self.lengths[k]:
                    break
                last = int(more[-1])
        idx = torch.cat(picked)
        top = self.tops[torch.searchsorted(self.starts, idx, right=True) - 1]
        keep = torch.rand(len(idx), dtype=torch.float64) * top < self.b[idx]  # thinning
        return torch.cat([self.sure, self.order[idx[keep]]])


def first_k_not(words: torch.Tensor, targets: torch.Tensor, k: int) -> torch.Tensor:
    """Mask ``[N, M]``: for example i, the first ``k`` draws of ``words`` (``[M]`` shared, or
    ``[N, M]``) that differ from ``targets[i]`` (Botev et al. 2017 §6.2: draw S + S', keep the first S
    non-true). The kept draws are i.i.d. from q restricted to the words other than the target.
    """
    ok = words.unsqueeze(0) != targets.unsqueeze(1) if words.dim() == 1 else words != targets.unsqueeze(1)
    return ok & (torch.cumsum(ok, 1) <= k)
