"""``torch.optim.SparseAdam``'s update on the touched rows only, in one compiled pass on a CPU.

For a row-sparse gradient with rows ``i`` and values ``g [R, d]`` (coalesced), at step t::

    m_i = beta1 m_i + (1 - beta1) g          v_i = beta2 v_i + (1 - beta2) g^2
    W_i -= lr sqrt(1 - beta2^t) / (1 - beta1^t) * m_i / (sqrt(v_i) + eps)

on the touched rows only (a lazy Adam: an untouched row's moments do not decay), exactly as SparseAdam
computes it. SparseAdam reaches the rows through sparse tensors (``sparse_mask`` and sparse additions,
each building and merging index sets). Here a float32 CPU table's rows are updated in place by one compiled
loop (:mod:`.row_adam_kernel`: each row read and written once, where gathering the rows, updating the copies
and writing them back took eleven passes: 5.1 ms of a 29 ms NCE step on the PTB GRU); other tables go
through index operations (gathered once with ``index_select``, updated, written back with ``index_copy_`` and
``index_add_``). Same state layout (``step``, ``exp_avg``, ``exp_avg_sq``), so checkpoints of either load in
the other.

With ``weight_decay`` wd (AdamW's decoupled decay, Loshchilov & Hutter 2019) every row shrinks, touched or not, by
``W *= 1 - lr_t wd`` at each step, as a dense AdamW table's rows do. Visiting all V rows each step would cost O(V d),
so the factors are multiplied up (``decay_log``, the sum of ``log(1 - lr_t wd)``) and applied to the whole table
once every :func:`decay_period` steps: every :data:`DECAY_CHUNK` elements of the table defer it one step more (a
PTB table of 10,000 x 200: every step, exactly AdamW's; 485,000 x 256: every 60 steps, a row then lags its dense
decay by at most 59 steps' factors, about 1 % at lr 0.002 and wd 0.1). The pending factor is optimizer state, so a
resumed run continues it.
"""

from __future__ import annotations

import math

import numpy as np
import torch


#: the table elements one step of deferred weight decay may cost (:func:`decay_period`)
DECAY_CHUNK = 1 << 21


def decay_period(p: torch.Tensor) -> int:
    """The steps between two applications of a table's deferred weight decay: one per :data:`DECAY_CHUNK` elements
    (at least one), so that the decay costs at most about that many multiplications a step."""
    return max(1, math.ceil(p.numel() / DECAY_CHUNK))


class RowAdam(torch.optim.SparseAdam):
    """SparseAdam with the update above, and decoupled ``weight_decay`` deferred as above (0: none, SparseAdam's);
    refuses dense gradients as SparseAdam does."""

    def __init__(self, params, lr: float = 1e-3, weight_decay: float = 0.0, **kwargs):
        super().__init__(params, lr=lr, **kwargs)
        for group in self.param_groups:
            group.setdefault("weight_decay", weight_decay)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps = float(group["lr"]), group["eps"]
            maximize = group.get("maximize", False)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                _decay(p, state, lr, group.get("weight_decay", 0.0))
                grad = coalesced(p.grad)
                rows, values = grad.indices()[0], grad.values()
                if rows.numel() == 0:
                    continue
                t = state["step"]
                step_size = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                if _compiled(p, values, state):
                    from .row_adam_kernel import adam_rows

                    f32 = np.float32
                    adam_rows(p.detach().numpy(), state["exp_avg"].numpy(), state["exp_avg_sq"].numpy(),
                              rows.contiguous().numpy(), values.contiguous().numpy(), f32(-1.0 if maximize else 1.0),
                              f32(beta1), f32(beta2), f32(step_size), f32(eps))
                    continue
                if maximize:
                    values = -values
                m = state["exp_avg"].index_select(0, rows).mul_(beta1).add_(values, alpha=1 - beta1)
                v = state["exp_avg_sq"].index_select(0, rows).mul_(beta2).addcmul_(values, values, value=1 - beta2)
                state["exp_avg"].index_copy_(0, rows, m)
                state["exp_avg_sq"].index_copy_(0, rows, v)
                p.index_add_(0, rows, m.div_(v.sqrt_().add_(eps)), alpha=-step_size)
        return loss


def _decay(p: torch.Tensor, state: dict, lr: float, wd: float) -> None:
    """One step's decoupled decay ``1 - lr wd`` of every row of ``p``, deferred (:func:`decay_period`): the factors
    are summed as logarithms in ``state`` and the table multiplied once the period is full."""
    if not wd:
        return
    state["decay_log"] = state.get("decay_log", 0.0) + math.log1p(-lr * wd)
    state["decay_steps"] = state.get("decay_steps", 0) + 1
    if state["decay_steps"] >= decay_period(p):
        p.mul_(math.exp(state["decay_log"]))
        state["decay_log"], state["decay_steps"] = 0.0, 0


def _compiled(p: torch.Tensor, values: torch.Tensor, state: dict) -> bool:
    """Whether the compiled loop may update ``p`` in place: a 2-d float32 CPU table, its gradient rows and moments
    alike (anything else, e.g. a float64 or 1-d table, takes the index operations)."""
    tensors = (p, values, state["exp_avg"], state["exp_avg_sq"])
    return (p.dim() == 2 and values.dim() == 2 and all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)
            and all(t.is_contiguous() for t in (p, state["exp_avg"], state["exp_avg_sq"])))


def coalesced(grad: torch.Tensor) -> torch.Tensor:
    """``grad.coalesce()``, without sorting again rows that are already distinct and in order. Autograd stores a
    sparse gradient without its coalesced flag, so a compact row gradient (:mod:`sampledlm.objectives.row_scores`)
    would otherwise be merged again: about 1 ms a step for PTB's 10,000 x 256 output table."""
    if grad.is_coalesced() or grad.sparse_dim() != 1:
        return grad.coalesce()
    rows = grad._indices()[0]
    if rows.numel() > 1 and not bool((rows[1:] > rows[:-1]).all()):
        return grad.coalesce()
    return torch.sparse_coo_tensor(grad._indices(), grad._values(), grad.shape, is_coalesced=True,
                                   check_invariants=False)
