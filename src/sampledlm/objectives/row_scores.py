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
from PTB's unigram). Three compiled loops (:mod:`.row_scores_kernel`) compute the scores, ``d ctx`` and
the U summed rows, reading W's rows in place; a fourth finds the U ids through a table over the rows, not a
sort. Autograd through ``F.embedding(sparse=True)`` and ``bmm`` gives the same numbers, but gathers the
N S rows into an ``[N, S, h]`` tensor, returns their gradient as N S uncoalesced rows that the optimiser
must sort and sum, and runs N tiny ``[S, h] x [h, 1]`` products; on the PTB GRU (N = 1,120, S = 20, h = 200, one thread) that took about five times as long.
"""

from __future__ import annotations

import torch


def _sparse_rows(ids: torch.Tensor, values: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A coalesced sparse ``shape`` tensor whose rows ``ids`` (sorted, distinct) hold ``values``."""
    return torch.sparse_coo_tensor(ids.unsqueeze(0), values, shape, is_coalesced=True, check_invariants=False)


class RowScores(torch.autograd.Function):
    """``RowScores.apply(weight [V, h], bias [V, 1], ctx [N, h], words [N, S]) -> scores [N, S]``, with
    row-sparse, coalesced gradients for ``weight`` and ``bias`` (see the module's docstring). CPU, float32."""

    @staticmethod
    def forward(fctx, weight, bias, ctx, words):
        from .row_scores_kernel import scores

        weight, bias, ctx, words = (t.detach().contiguous() for t in (weight, bias, ctx, words))
        if words.numel() and (int(words.min()) < 0 or int(words.max()) >= weight.shape[0]):
            raise IndexError(f"row ids must lie in [0, {weight.shape[0]}): the compiled loops do not check")
        out = ctx.new_empty(words.shape)
        scores(weight.numpy(), bias.numpy(), ctx.numpy(), words.numpy(), out.numpy())
        fctx.save_for_backward(weight, ctx, words)
        fctx.bias_shape = bias.shape
        return out

    @staticmethod
    def backward(fctx, grad):
        from .row_scores_kernel import context_grad, row_grads

        weight, ctx, words = fctx.saved_tensors
        grad = grad.contiguous()
        d_ctx = d_weight = d_bias = None
        if fctx.needs_input_grad[2]:
            d_ctx = torch.empty_like(ctx)
            context_grad(weight.numpy(), words.numpy(), grad.numpy(), d_ctx.numpy())
        if fctx.needs_input_grad[0] or fctx.needs_input_grad[1]:
            ids, inverse = _distinct(words.reshape(-1), weight.shape[0])
            rows, biases = ctx.new_empty(len(ids), ctx.shape[1]), ctx.new_empty(len(ids), 1)
            row_grads(ctx.numpy(), inverse.view(words.shape).numpy(), grad.numpy(), rows.numpy(),
                             biases.numpy())
            if fctx.needs_input_grad[0]:
                d_weight = _sparse_rows(ids, rows, weight.shape)
            if fctx.needs_input_grad[1]:
                d_bias = _sparse_rows(ids, biases, fctx.bias_shape)
        return d_weight, d_bias, d_ctx, None


class PairScores(torch.autograd.Function):
    """``PairScores.apply(weight [V, h], bias [V, 1] or None, ctx [N, h], rows [S], at [S], block [R])
    -> (scores [S], block_weight [R, h], block_bias [R, 1])``: ``scores[s] = weight[rows[s]] . ctx[at[s]] +
    bias[rows[s]]`` (:class:`RowScores` for ragged candidate lists: each pair names its row and its context) and the
    rows ``block`` themselves, for dense products elsewhere. Both uses come back as **one** coalesced row-sparse
    gradient: autograd adds the gradients a weight gets from several uses, and each sum of row-sparse tensors copies
    all their rows (at V = 485k about 30 ms a step for each). CPU, float32; ``block_bias`` is empty without a bias."""

    @staticmethod
    def forward(fctx, weight, bias, ctx, rows, at, block):
        from .row_scores_kernel import pair_scores

        weight, ctx, rows, at, block = (t.detach().contiguous() for t in (weight, ctx, rows, at, block))
        for ids, size, what in ((rows, weight.shape[0], "row"), (at, ctx.shape[0], "context"),
                                (block, weight.shape[0], "block row")):
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= size):
                raise IndexError(f"{what} ids must lie in [0, {size}): the compiled loops do not check")
        b = weight.new_empty(0, 1) if bias is None else bias.detach().contiguous()
        out = ctx.new_empty(rows.shape)
        pair_scores(weight.numpy(), b.numpy(), ctx.numpy(), rows.numpy(), at.numpy(), out.numpy())
        fctx.save_for_backward(weight, ctx, rows, at, block)
        fctx.bias_shape = None if bias is None else bias.shape
        return out, weight[block], b[block] if bias is not None else b

    @staticmethod
    def backward(fctx, grad, grad_block, grad_block_bias):
        from .row_scores_kernel import pair_context_grad, pair_row_grads

        weight, ctx, rows, at, block = fctx.saved_tensors
        grad = grad.contiguous()
        d_ctx = d_weight = d_bias = None
        if fctx.needs_input_grad[2]:
            d_ctx = torch.empty_like(ctx)
            pair_context_grad(weight.numpy(), rows.numpy(), at.numpy(), grad.numpy(), d_ctx.numpy())
        if fctx.needs_input_grad[0] or fctx.needs_input_grad[1]:
            ids, inverse = _distinct(torch.cat([rows, block]), weight.shape[0])
            summed, biases = ctx.new_empty(len(ids), ctx.shape[1]), ctx.new_empty(len(ids), 1)
            pair_row_grads(ctx.numpy(), inverse[:len(rows)].numpy(), at.numpy(), grad.numpy(), summed.numpy(),
                           biases.numpy())
            if len(block) and grad_block is not None:
                summed.index_add_(0, inverse[len(rows):], grad_block)
            if len(block) and grad_block_bias is not None and fctx.bias_shape is not None:
                biases.index_add_(0, inverse[len(rows):], grad_block_bias)
            if fctx.needs_input_grad[0]:
                d_weight = _sparse_rows(ids, summed, weight.shape)
            if fctx.needs_input_grad[1]:
                d_bias = _sparse_rows(ids, biases, fctx.bias_shape)
        return d_weight, d_bias, d_ctx, None, None, None


def _distinct(words: torch.Tensor, num_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.unique(words [M], return_inverse=True)``: through a table over the rows (compiled) while the rows are
    no more than 16 times the draws (then the table's pass costs less than a sort), else by sorting."""
    if num_rows > 16 * max(words.numel(), 1):
        return torch.unique(words, return_inverse=True)
    from .row_scores_kernel import distinct

    words = words.to(torch.int64).contiguous()
    inverse = torch.empty_like(words)
    return torch.from_numpy(distinct(words.numpy(), num_rows, inverse.numpy())), inverse


def row_scores(weight: torch.Tensor, bias: torch.Tensor, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
    """``scores [N, S]`` of each position's own candidates, in float32 (a 16-bit ``ctx`` under autocast is
    widened first: these products are memory-bound, so narrower numbers would save little)."""
    with torch.autocast(ctx.device.type, enabled=False):
        return RowScores.apply(weight, bias, ctx.float(), words)


def pair_scores(weight: torch.Tensor, bias: torch.Tensor | None, ctx: torch.Tensor, rows: torch.Tensor,
                at: torch.Tensor, block: torch.Tensor | None = None):
    """``scores [S]`` of the pairs (``rows[s]``, ``ctx[at[s]]``) in float32, and with ``block [R]`` also
    ``(block_weight [R, h], block_bias [R, 1])``, those rows of the layer: one row gradient for both
    (:class:`PairScores`)."""
    with torch.autocast(ctx.device.type, enabled=False):
        ids = rows.new_empty(0) if block is None else block
        out, block_weight, block_bias = PairScores.apply(weight, bias, ctx.float(), rows.to(torch.int64),
                                                         at.to(torch.int64), ids.to(torch.int64))
    return out if block is None else (out, block_weight, block_bias)
