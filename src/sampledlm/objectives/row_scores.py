"""Each position's own candidate rows, scored with a compact row-sparse gradient (the CPU path of
:meth:`~sampledlm.objectives.output.OutputLayer.score_each`).

For contexts ``ctx [N, h]`` and candidate ids ``words [N, S]`` (a sampled objective's S noise words per
position, hsm's path nodes)::

    scores[n, s] = W[words[n, s]] . ctx[n] + b[words[n, s]]                  [N, S]

Backward, with ``g = d loss / d scores [N, S]`` and the U distinct ids ``u_1 < .. < u_U`` of ``words``::

    d ctx[n] = sum_s g[n, s] W[words[n, s]]                                 [N, h]
    d W[u_j] = sum_{(n, s): words[n, s] = u_j} g[n, s] ctx[n] = (G @ ctx)_j   G [U, N] sparse
    d b[u_j] = sum_{(n, s): words[n, s] = u_j} g[n, s]

so W's gradient is a *coalesced* sparse tensor of U rows (a few thousand for N S = 22,400 draws
from PTB's unigram), computed as one sparse-dense product. Autograd through ``F.embedding(sparse=True)``
and ``bmm`` gives the same numbers as N S uncoalesced rows ``[N S, h]`` that the optimiser must then
sort and sum, and ``bmm`` over N tiny ``[S, h] x [h, 1]`` products is slow on a CPU: on the PTB GRU
(N = 1,120, S = 20, h = 200, one thread) this path takes about half the time of that one.
"""

from __future__ import annotations

import torch


def _sparse_rows(ids: torch.Tensor, values: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A coalesced sparse ``shape`` tensor whose rows ``ids`` (sorted, distinct) hold ``values``."""
    return torch.sparse_coo_tensor(ids.unsqueeze(0), values, shape, is_coalesced=True, check_invariants=False)


class RowScores(torch.autograd.Function):
    """``RowScores.apply(weight [V, h], bias [V, 1], ctx [N, h], words [N, S]) -> scores [N, S]``, with
    row-sparse, coalesced gradients for ``weight`` and ``bias`` (see the module's docstring)."""

    @staticmethod
    def forward(fctx, weight, bias, ctx, words):
        n, s = words.shape
        flat = words.reshape(-1)
        rows = weight.index_select(0, flat).view(n, s, -1)
        scores = (rows * ctx.unsqueeze(1)).sum(-1) + bias.index_select(0, flat).view(n, s)
        fctx.save_for_backward(rows, ctx, words)
        fctx.weight_shape, fctx.bias_shape = weight.shape, bias.shape
        return scores

    @staticmethod
    def backward(fctx, grad):
        rows, ctx, words = fctx.saved_tensors
        n, s = words.shape
        grad = grad.contiguous()
        d_ctx = torch.bmm(grad.unsqueeze(1), rows).squeeze(1) if fctx.needs_input_grad[2] else None
        d_weight = d_bias = None
        if fctx.needs_input_grad[0] or fctx.needs_input_grad[1]:
            ids, inverse = torch.unique(words.reshape(-1), return_inverse=True)
            flat_grad = grad.reshape(-1)
            if fctx.needs_input_grad[0]:
                position = torch.arange(n, device=words.device).repeat_interleave(s)
                g = torch.sparse_coo_tensor(torch.stack([inverse, position]), flat_grad, (len(ids), n),
                                            check_invariants=False).coalesce()
                d_weight = _sparse_rows(ids, torch.sparse.mm(g, ctx), fctx.weight_shape)
            if fctx.needs_input_grad[1]:
                summed = flat_grad.new_zeros(len(ids)).index_add_(0, inverse, flat_grad)
                d_bias = _sparse_rows(ids, summed.unsqueeze(1), fctx.bias_shape)
        return d_weight, d_bias, d_ctx, None


def row_scores(weight: torch.Tensor, bias: torch.Tensor, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
    """``scores [N, S]`` of each position's own candidates, in float32 (a 16-bit ``ctx`` under autocast is
    widened first: these products are memory-bound, so narrower numbers would save little)."""
    with torch.autocast(ctx.device.type, enabled=False):
        return RowScores.apply(weight, bias, ctx.float(), words)
