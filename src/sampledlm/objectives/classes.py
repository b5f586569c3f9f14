"""The class-based output layer (Goodman 2001; Mikolov et al. 2011): a softmax over C word classes,
then a softmax over the words of the predicted class.

Every word w belongs to exactly one class c(w)::

    log P(w|h) = log softmax_c(U h + d)_{c(w)} + a_w(h) - log sum_{v: c(v) = c(w)} exp a_v(h)

with the class layer ``U [C, h], d [C]`` (this objective's own, created by :meth:`bind`) and the
model's word scores ``a_w(h) = W_w . h + b_w``. With ``components`` M > 1 a class scores
``s_c(h) = log sum_{k<M} exp(U_{c,k} . h + d_{c,k})`` (``U [C M, h]``) instead of one linear score: the
softmax's own class marginal is such a log-sum-exp over the class's members, and on PTB's GRU the whole
gap between the class layer and the softmax was in the class factor (class perplexity 25.40 against the
softmax's marginal 24.57 over the same classes; within-class 4.23 on both). Both factors are softmaxes, so P is normalised over
V by construction. Classes come from *frequency binning* (Mikolov et al. 2011, the RNNLM toolkit):
words by decreasing count, cut into C consecutive bins, C = 2 sqrt(V) by default. By default
(``binning="sqrt"``, the toolkit's default) each bin holds about equal mass of sqrt(unigram
probability); ``binning="mass"`` (the paper's, the toolkit's ``-old-classes``) equal unigram mass.
Frequent words sit in small classes and rare words in larger ones. A batch shares one product against
the union of its targets' classes, so what a step costs is the rows that union covers: under Zipf(1)
at V = 100k, C = 316 and 128 targets, about 33 % of V with equal-mass bins (their rare classes hold
~3,750 words each and a third of them are hit) and about 12 % with sqrt bins (at most ~630 words);
with C = 632 sqrt bins, 6 %. One example alone costs O((C + |class|) h), least near C = sqrt(V); a
batch's shared union makes more, smaller classes pay, hence the default C = 2 sqrt(V). Measured on
the synthetic step of the outputs page (V = 100k, 1 thread): 2.8x the softmax's tokens/s with
equal-mass bins and C = 316, 7.1x with sqrt bins, 14.6x with sqrt bins and C = 632.

Training is batched the GPU-friendly way, with no loop over examples or classes: the output rows of
the classes present in the batch (T words, their union) are scored in one ``[N, h] x [h, T]``
product, and each example's own class block is gathered from it, padded to the largest class in the
batch (``[N, M]``, scalars only) and masked. (Gathering ``[N, M, h]`` row blocks per example instead
is slower on PTB: with equal-mass bins the rarest class holds ~1,600 of the 10k words and nearly
every batch of 256 has a target in it, so M is almost always 1,600.) The class assignment is saved with the model (buffers ``word_class``, ``members``, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ..config import option, setting_name, setting_value
from ..errors import UserError
from .cpu_linear import FastLinear
from .base import Scorer
from .options import WordClassOptions, like
from .row_scores import pair_scores
from .structure import (NO_CLASSES, WordClassObjective, concat_ranges, frequency_order, hidden_width, launch_bound,
                        output_rows, segment_logsumexp)


BINNINGS = ("sqrt", "mass")
# What one more product (and its backward) costs, in multiply-adds per hidden unit, when a batch is split by class.
PER_CLASS_OVERHEAD = 5000
# The same where a product costs a launch (a GPU: structure.launch_bound). Measured on an H200 at V = 485k: 0.4 ms
# a class a step, about 4M multiply-adds a unit at the union product's rate there; 1M so that a very large batch,
# whose union product would take gigabytes, still splits by class.
PER_CLASS_OVERHEAD_LAUNCHED = 1_000_000
# What a candidate row scored per example (compiled, read in place) costs against a row of a
# per-class product, which shares each row among the class's examples in one dense product.
PER_EXAMPLE_FACTOR = 2


def frequency_classes(counts, num_words: int, num_classes: int, binning: str = "sqrt") -> np.ndarray:
    """Frequency binning: ``int64 [V]`` class of each word, classes ``0..C'-1`` (C' <= C).

    Words by decreasing count; a running sum of each word's share moves to the next class once it
    passes ``(c+1)/C`` (at most one class per word, so no class is empty; a very frequent word ends a
    class early and fewer than C classes may result). The share is the unigram probability
    (``mass``: Mikolov et al. 2011's equal-mass bins, the RNNLM toolkit's ``-old-classes``) or its
    square root, normalised (``sqrt``: the toolkit's default), which cuts the rare words into
    smaller classes.
    """
    order = frequency_order(counts, num_words)
    c = np.ones(num_words) if counts is None else np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    c = np.sqrt(c) if binning == "sqrt" else c
    mass = c[order] / max(c.sum(), 1e-300)
    cls = np.empty(num_words, dtype=np.int64)
    a, cum = 0, 0.0
    for r, w in enumerate(order.tolist()):
        cum += mass[r]
        cls[w] = a
        if cum > (a + 1) / num_classes and a < num_classes - 1 and r < num_words - 1:
            a += 1
    return cls


@dataclass
class ClassOptions(WordClassOptions):
    classes: int | None = option(None, "class: number of word classes C, frequency-binned (default 2 sqrt(V); not "
                                       "with --word-classes)", min=1)
    binning: str = option("sqrt", "class: how words are cut into classes by frequency: sqrt (equal mass of sqrt "
                                  "unigram probability, the RNNLM toolkit's default) or mass (equal unigram mass, its "
                                  "-old-classes)", choices=("sqrt", "mass"))
    word_classes: str | None = like(WordClassOptions, "word_classes", recurrent="auto",
                                    recurrent_unless=("classes", "binning"))
    components: int = like(WordClassOptions, "components", recurrent=4)

    def __post_init__(self):
        if self.word_classes not in (None, NO_CLASSES) and self.classes is not None:
            raise UserError(f"{setting_name('classes')} and {setting_name('word_classes')}: give one (the file decides the number of classes)")


class ClassSoftmax(WordClassObjective):
    """Two-level class-factored softmax (see the module docstring).

    Options ``classes``: C (default ``round(2 sqrt(V))``); ``binning``: ``sqrt`` (default) or ``mass``
    (:func:`frequency_classes`); ``word_classes``: a word-classes file instead (Brown-style classes from
    ``sampledlm classes``; the run directory reads it and calls :meth:`set_word_classes`).

    Shapes: ``ctx [N, h]``, ``targets [N]`` -> scalar mean ``-log P(y|h)``. Per step
    O(N (C + T) h) with T the words of the classes among the batch's targets (at most V; for one
    example, its class size).
    """

    name = "class"
    sparse_output = True  # a step reads only the output rows of the targets' classes
    Options = ClassOptions
    sequence_why = ("PTB's tied GRU-256, 8 epochs, against the softmax's 98.58: 200 frequency bins gave 113.23 "
                    "(+14.9 %), the exchange algorithm's 200 classes of the training text 102.98 (+4.5 %), and with "
                    "each class scored by the log-sum-exp of 4 linear scores 98.23 (-0.4 %) at 2.5x the softmax's "
                    "words per CPU second; clustering PTB takes about 17 s before the first epoch; lr 0.008: valid "
                    "97.58, test 92.31 against 98.25 / 92.35 at 0.004, and valid 210 after 6 of 8 epochs at 0.016 "
                    "(docs/results/lr-grid.md; the softmax at its best rate: 92.01)")
    sequence_train = {"lr": 0.008}
    sequence_train_long = ((10_000, {"lr": 0.002},
                            "over the first epoch of a 4-epoch cosine run of about 15,400 steps on 4.3M words of "
                            "Wikipedia at V = 485k (its 1,393 exchange classes): 0.008 463.89, 0.004 382.39, 0.002 "
                            "378.42, 0.001 431.75; PTB's 8 epochs take 6,640 steps, where 0.008 and 0.004 tie"),)

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        self.classes_option = self.options.classes
        self.binning = self.options.binning

    def bind(self, scorer: Scorer) -> None:
        v, h = int(scorer.num_words), hidden_width(scorer)
        if self.counts is not None and len(self.counts) != v:
            raise ValueError(f"counts has {len(self.counts)} entries, the scorer {v} words")
        c = self.classes_option or max(1, min(v, round(2 * math.sqrt(v))))
        if c > v:
            raise UserError(f"{setting_value('classes', c)}: at most V = {v}")
        self._set_classes(frequency_classes(self.counts, v, c, self.binning), h)

    def set_word_classes(self, cls, labels=None) -> None:
        """Use the classes ``cls [V]`` (e.g. the exchange algorithm's, :mod:`sampledlm.data.clusters`)
        instead of frequency bins; after :meth:`bind`, before training (``labels``: unused, the class layer is flat)."""
        self._check()
        cls = np.asarray(cls, dtype=np.int64)
        if cls.shape != tuple(self.word_class.shape):
            raise ValueError(f"word classes for {len(cls)} words, the model has {self.word_class.numel()}")
        self._set_classes(cls, self.class_layer.in_features)

    def upgrade_state(self, tensors: dict) -> dict:
        """Adopt the class assignment saved with the weights (a model file written with other binning or
        by an earlier version keeps its own classes) before the weights load."""
        saved = tensors.get("word_class")
        if self.bound and saved is not None and saved.shape == self.word_class.shape \
                and not torch.equal(saved.to(self.word_class.device), self.word_class):
            self._set_classes(saved.cpu().numpy(), self.class_layer.in_features)
        return tensors

    def _set_classes(self, cls: np.ndarray, h: int) -> None:
        """Buffers of the assignment ``cls [V]`` and a class layer ``[C, h]`` (kept when C is unchanged)."""
        v = len(cls)
        n_cls = int(cls.max()) + 1
        members = np.argsort(cls, kind="stable")  # words grouped by class, by id within a class
        size = np.bincount(cls, minlength=n_cls)
        start = np.concatenate([[0], np.cumsum(size)[:-1]])
        pos = np.empty(v, dtype=np.int64)
        pos[members] = np.arange(v) - start[cls[members]]
        for name, arr in (("word_class", cls), ("members", members), ("class_start", start),
                          ("class_size", size), ("pos_in_class", pos)):
            device = getattr(self, name).device if self.bound else None
            self.register_buffer(name, torch.from_numpy(np.ascontiguousarray(arr, dtype=np.int64)).to(device))
        if not self.bound or self.class_layer.out_features != n_cls * self.components:
            self.class_layer = FastLinear(h, n_cls * self.components)
            nn.init.zeros_(self.class_layer.bias)
        self.bound = True

    @property
    def num_classes(self) -> int:
        return int(self.class_size.numel())

    def _check(self) -> None:
        if not self.bound:
            raise RuntimeError("class: call objective.bind(scorer) once before use (it creates the class layer)")

    def class_log_prob(self, ctx: Any) -> torch.Tensor:
        """``[N, C]``: ``log P(c | h)``; with M components, ``s_c(h) = log sum_k exp(U_{c,k} . h + d_{c,k})``."""
        self._check()
        s = self.class_layer(ctx).float()
        if self.components > 1:
            s = s.view(s.shape[0], -1, self.components).logsumexp(-1)
        return torch.log_softmax(s, dim=1)

    def log_prob_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """Exact ``log P(y_i | h_i)``, ``[N]``: the class term plus the within-class softmax over each
        example's class block, from whichever of two equal computations costs less (:meth:`_within_shared`,
        :meth:`_within_per_class`)."""
        c = self.word_class[targets]
        uc, inv, n_in = torch.unique(c, return_inverse=True, return_counts=True)  # the batch's classes
        usize = self.class_size[uc]
        shared_cost = len(targets) * int(usize.sum())
        overhead = PER_CLASS_OVERHEAD_LAUNCHED if launch_bound(ctx) else PER_CLASS_OVERHEAD
        per_class_cost = int((n_in * usize).sum()) + overhead * len(uc)
        per_example_cost = int((n_in * usize).sum()) * PER_EXAMPLE_FACTOR if self._rows_in_place(scorer, ctx) \
            else None
        if per_example_cost is not None and per_example_cost < min(per_class_cost, shared_cost):
            within = self._within_per_example(scorer, ctx, targets, c)
        elif per_class_cost < shared_cost:
            within = self._within_per_class(scorer, ctx, targets, c, uc, n_in, usize)
        else:
            within = self._within_shared(scorer, ctx, targets, uc, inv, usize)
        return self.class_log_prob(ctx).gather(1, c.unsqueeze(1)).squeeze(1) + within

    def _union(self, uc: torch.Tensor, usize: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The members of the classes ``uc`` one class after another: ``(offset [U], union [T])``, each class's
        first column in the union and the union's word ids."""
        return concat_ranges(self.members, self.class_start[uc], usize)

    def _within_per_class(self, scorer: Scorer, ctx: torch.Tensor, targets: torch.Tensor, c: torch.Tensor,
                          uc: torch.Tensor, n_in: torch.Tensor, usize: torch.Tensor) -> torch.Tensor:
        """``[N]`` within-class log-probabilities, each class's examples against its own members only
        (``scorer.score_blocks``). Costs ``sum_c n_c |c| h``: what a recurrent batch needs (thousands of
        targets, whose classes' union is nearly V), where one product against the union costs ``N |union| h``."""
        order = torch.argsort(c, stable=True)  # examples grouped by class, in the order of uc (sorted)
        _, union = self._union(uc, usize)
        blocks = [s.float() for s in scorer.score_blocks(ctx[order], n_in.tolist(), union, usize.tolist())]
        pos = self.pos_in_class[targets[order]].split(n_in.tolist())
        within = torch.cat([s.gather(1, p.unsqueeze(1)).squeeze(1) - torch.logsumexp(s, 1) for s, p in zip(blocks, pos)])
        return within[torch.argsort(order)]

    @staticmethod
    def _rows_in_place(scorer: Scorer, ctx: Any) -> bool:
        """Whether ``scorer.score_each`` reads the candidate rows in place (an output layer with row-sparse
        gradients, float32 on the CPU: :func:`.row_scores.row_scores`) rather than gathering ``[N, S, h]``."""
        layer = output_rows(scorer)
        weight = getattr(layer, "weight", None)
        return (bool(getattr(layer, "sparse", False)) and torch.is_tensor(ctx) and ctx.device.type == "cpu"
                and weight is not None and weight.dtype == torch.float32)

    def _within_per_example(self, scorer: Scorer, ctx: torch.Tensor, targets: torch.Tensor,
                            c: torch.Tensor) -> torch.Tensor:
        """``[N]`` within-class log-probabilities, each example against its own class's members as (member,
        history) pairs scored by compiled loops that read the rows in place (:func:`.row_scores.pair_scores`): no
        loop over classes and no padding. Costs ``sum_i |c_i| h``; at V = 485k a batch of 1,120 targets hits ~500
        classes, and the per-class loop's small products and their backward took most of a step, where padding
        every example to the batch's largest class (614 words against 343 on average) did half the work for
        nothing. The examples go to the loops grouped by class (and come back in their order), so that a class's
        rows, read for its first example, are still in cache for the next."""
        order = torch.argsort(c, stable=True)
        n, size = len(order), self.class_size[c[order]]
        _, words = concat_ranges(self.members, self.class_start[c[order]], size)
        example = torch.repeat_interleave(torch.arange(n, device=order.device), size)
        layer = output_rows(scorer)
        scores = pair_scores(layer.weight, layer.bias, ctx, words, order[example])
        first = torch.cumsum(size, 0) - size
        within = scores[first + self.pos_in_class[targets[order]]] - segment_logsumexp(scores, example, n)
        return torch.empty_like(within).index_put((order,), within)

    def _within_shared(self, scorer: Scorer, ctx: Any, targets: torch.Tensor, uc: torch.Tensor,
                       inv: torch.Tensor, usize: torch.Tensor) -> torch.Tensor:
        """``[N]`` within-class log-probabilities from one product against the union of the batch's
        classes, each example's own block gathered from it (padded, ``[N, M]``): no loop, for small batches."""
        offset, union = self._union(uc, usize)
        shared = scorer.score_shared(ctx, union).float()  # [N, T]: one product against the union's rows
        size = usize[inv]
        j = torch.arange(int(size.max()), device=targets.device)
        keep = j.unsqueeze(0) < size.unsqueeze(1)  # [N, M]: each example's own class block, padded
        idx = offset[inv].unsqueeze(1) + torch.where(keep, j.unsqueeze(0), 0)
        scores = shared.gather(1, idx).masked_fill(~keep, float("-inf"))
        return scores.gather(1, self.pos_in_class[targets].unsqueeze(1)).squeeze(1) - torch.logsumexp(scores, 1)

    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        return -self.log_prob_targets(scorer, ctx, targets).mean()

    def log_prob(self, scorer: Scorer, ctx: Any) -> torch.Tensor:
        """Exact ``log P(w | h)`` over all V, ``[N, V]``: per-class log-sum-exp by scatter, no loop over classes."""
        a = scorer.score_all(ctx).float()  # [N, V]
        n, cw = a.shape[0], self.word_class
        top = torch.full((n, self.num_classes), float("-inf"), device=a.device)
        top = top.scatter_reduce(1, cw.expand(n, -1), a.detach(), reduce="amax")
        shifted = (a - top[:, cw]).exp()
        # scatter_add, not index_add along dim 1: the same sums, and what an ONNX export reproduces
        lse = top + torch.zeros_like(top).scatter_add(1, cw.expand(n, -1), shifted).log()
        return self.class_log_prob(ctx)[:, cw] + a - lse[:, cw]
