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
"""

from __future__ import annotations

import math

import numpy as np
import torch


class RowAdam(torch.optim.SparseAdam):
    """SparseAdam with the update above; refuses dense gradients as SparseAdam does."""

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
