"""Exact normalised log-probabilities of target words over a large vocabulary, in blocks of output rows.

For ``N`` hidden states ``h_i [N, h]``, output rows ``W [V, h]`` and biases ``b [V]``, the scores are
``s_iw = W_w . h_i + b_w (+ o_w)`` with an optional per-word offset ``o`` (``[V]`` or a scalar), the rule's
per-word term ``f(s) = s`` (softmax) or ``f(s) = log σ(s)`` (a one-vs-all model's renormalised sigmoids), and::

    log P(t_i | h_i) = f(s_{i t_i}) - log sum_w exp f(s_iw)

:func:`log_normalised_targets` never forms the ``[N, V]`` score matrix: it walks ``W`` in blocks of
:data:`BLOCK_ROWS` rows and keeps a running maximum and sum per history (the streaming log-sum-exp), so each
block's scores are made, exponentiated and summed while they are still in the cache, and a call may hold many
histories (the product then reads ``W`` once for all of them instead of once per 64 tokens). Each target's own
score is a separate float32 dot product.

At V = 485k (h = 256, one core of the project's Xeon) the exact evaluation went from about 7 CPU seconds per
1,000 tokens (``[64, V]`` score matrices, ``W`` re-read for every 64 tokens) to about 2.7 in blocks.

**Precision of the sum.** Under :func:`sum_precision` ``("bf16")`` the block products run in bfloat16 (float32
accumulation; AMX on recent Xeons: about 2.5x faster again), while the target's own score and the sum itself stay
float32. Every word's score is then off by a relative 2^-8 or so, and the normaliser, a weighted mean of many such
scores, by far less: on random weights its ln P differs from float64 by up to 1.5e-3 per token, 7e-6 on average
(float32 products: 1.8e-6 and 2e-8); ``python -m benchmarks.large_vocab normaliser`` measures it on the real model.
float32 is the default; evaluation asks for bfloat16 only when told to (``sampledlm eval --sum-precision bf16``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import dataclasses
import weakref

import torch
import torch.nn.functional as F

#: Output rows per block: a ``[1024, 4096]`` float32 block of scores is 16 MB; the products' speed was flat from
#: 1,024 to 4,096 rows and fell at 16,384 (the block no longer stays in the cache between product and sum).
BLOCK_ROWS = 4096
#: Vocabularies from this size up are scored in blocks (below it one ``[N, V]`` product is as fast, and the figures
#: of the PTB pages stay bit for bit what they were).
BLOCKED_MIN_WORDS = 1 << 16
#: Histories per call that evaluation gathers before scoring them in blocks (``[1024, h]`` hidden states).
EVAL_ROWS = 1024

_PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar("sampledlm_sum_precision", default="fp32")
_LOW = {"fp32": None, "bf16": torch.bfloat16}
_low_copies: dict[int, tuple[weakref.ref, int, torch.Tensor]] = {}  # id(weight) -> (weight, its version, copy)


@contextlib.contextmanager
def sum_precision(precision: str):
    """Within the block, the normaliser's products run in ``precision`` (``fp32`` or ``bf16``)."""
    if precision not in _LOW:
        raise ValueError(f"sum precision must be one of {', '.join(_LOW)}, not {precision!r}")
    token = _PRECISION.set(precision)
    try:
        yield
    finally:
        _PRECISION.reset(token)


def current_precision() -> str:
    """The normaliser's product precision in force (``fp32`` unless :func:`sum_precision` says otherwise)."""
    return _PRECISION.get()


def blocked(num_words: int) -> bool:
    """Whether a vocabulary of ``num_words`` is scored in blocks (or a lower precision was asked for)."""
    return num_words >= BLOCKED_MIN_WORDS or _PRECISION.get() != "fp32"


def scorer_blocks(scorer) -> bool:
    """Whether ``scorer`` (a :class:`~.base.Scorer`) scores normalised targets in blocks at its vocabulary size."""
    return hasattr(scorer, "normalised_targets") and blocked(scorer.num_words)


def _low_copy(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``weight`` in ``dtype``, made once per version of the weights (a 485k x 256 table: 0.25 GB in bfloat16)."""
    hit = _low_copies.get(id(weight))
    if hit is not None and hit[0]() is weight and hit[1] == weight._version and hit[2].dtype == dtype:
        return hit[2]
    low = weight.detach().to(dtype)
    _low_copies.clear()  # one table at a time: a copy is as large as a quarter of the model
    key = id(weight)
    _low_copies[key] = (weakref.ref(weight, lambda _: _low_copies.pop(key, None)), weight._version, low)
    return low


@torch.no_grad()
def log_normalised_targets(weight: torch.Tensor, bias: torch.Tensor | None, ctx: torch.Tensor,
                           targets: torch.Tensor, offset: torch.Tensor | float | None = None,
                           log_sigmoid: bool = False, block: int = BLOCK_ROWS,
                           workers: int | None = None) -> torch.Tensor:
    """``log P(targets[i] | ctx[i])`` ``[N]`` float32, normalised over all ``V`` rows of ``weight [V, h]``
    (module docstring: the rule, the blocks, the precision). ``bias [V]``; ``offset [V]`` or a scalar added to
    every score; ``log_sigmoid``: the per-word term is ``log σ(s)`` instead of ``s``. ``workers`` (default: torch's
    CPU threads) share the rows of a CPU table (:func:`_in_parallel`)."""
    ctx = ctx.float()
    low = _LOW[_PRECISION.get()]
    rows = RowTable(weight, _low_copy(weight, low) if low is not None else None, bias,
                    torch.as_tensor(offset, dtype=torch.float32, device=ctx.device) if offset is not None else None,
                    log_sigmoid, block)
    ctx_low = ctx.to(low) if low is not None else None
    workers = workers or (torch.get_num_threads() if ctx.device.type == "cpu" else 1)
    if workers > 1 and weight.shape[0] >= 2 * block:
        top, total = _in_parallel(rows, ctx, ctx_low, workers)
    else:
        top, total = rows.partial(ctx, ctx_low, 0, weight.shape[0])
    own = rows.scores(ctx, targets)
    if log_sigmoid:
        own = F.logsigmoid(own)
    return own - (top + torch.log(total))


@dataclasses.dataclass
class RowTable:
    """What the sum reads: the rows (and their low-precision copy, if any), biases, offset, rule and block size."""

    weight: torch.Tensor
    low: torch.Tensor | None
    bias: torch.Tensor | None
    offset: torch.Tensor | None
    log_sigmoid: bool
    block: int

    def scores(self, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """``s_{i, words[i]}`` ``[N]`` in float32 (before the rule's ``log σ``)."""
        own = (ctx * self.weight[words].float()).sum(1)
        if self.bias is not None:
            own = own + self.bias[words]
        if self.offset is not None:
            own = own + (self.offset[words] if self.offset.dim() else self.offset)
        return own

    def partial(self, ctx: torch.Tensor, ctx_low: torch.Tensor | None, first: int, last: int):
        """Rows ``first .. last-1``: ``(m [N], t [N])`` with ``sum_w exp f(s_iw) = t_i exp(m_i)`` over them."""
        n = ctx.shape[0]
        top = torch.full((n,), float("-inf"), device=ctx.device)
        total = torch.zeros(n, device=ctx.device)
        scores = torch.empty(n, min(self.block, last - first), device=ctx.device)
        for start in range(first, last, self.block):
            stop = min(last, start + self.block)
            z = scores[:, : stop - start]
            if self.low is not None:
                z.copy_(ctx_low @ self.low[start:stop].t())
                if self.bias is not None:
                    z.add_(self.bias[start:stop])
            elif self.bias is not None:
                torch.addmm(self.bias[start:stop], ctx, self.weight[start:stop].t(), out=z)
            else:
                torch.mm(ctx, self.weight[start:stop].t(), out=z)
            if self.offset is not None:
                z.add_(self.offset[start:stop] if self.offset.dim() else self.offset)
            if self.log_sigmoid:
                z.copy_(F.logsigmoid(z))
            new_top = torch.maximum(top, z.amax(1))
            z.sub_(new_top.unsqueeze(1)).exp_()
            total.mul_(torch.exp(top - new_top)).add_(z.sum(1))
            top = new_top
        return top, total


_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _in_parallel(rows: RowTable, ctx: torch.Tensor, ctx_low: torch.Tensor | None, workers: int):
    """The sum over ``workers`` contiguous shares of the rows, one single-threaded worker each, then combined
    (``m = max_k m_k``, ``t = sum_k t_k exp(m_k - m)``).

    Why not torch's own threads: each block is five small operations, and each is a parallel region whose
    threads meet at a barrier; on a machine whose cores are also running other work a thread that waits there
    spins, and with two threads the sum took 4x the CPU time of one and 4x its wall time (485k rows, 2 cores
    shared with two other processes). A worker per share meets the others once a call. Torch's thread count is 1
    while the workers run (each product single-threaded) and restored afterwards."""
    global _pool
    if _pool is None or _pool._max_workers < workers:
        _pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="sampledlm-normaliser")
    v = rows.weight.shape[0]
    cuts = [v * k // workers for k in range(workers + 1)]

    def share(k: int):
        torch.set_num_threads(1)
        with torch.no_grad():
            return rows.partial(ctx, ctx_low, cuts[k], cuts[k + 1])

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        parts = list(_pool.map(share, range(workers)))
    finally:
        torch.set_num_threads(before)
    tops = torch.stack([p[0] for p in parts])
    top = tops.amax(0)
    total = sum(p[1] * torch.exp(p[0] - top) for p in parts)
    return top, total
