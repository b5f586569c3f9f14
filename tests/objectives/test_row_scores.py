"""Each position's own candidates scored on the CPU with one compact sparse gradient (objectives.row_scores):
the same numbers and gradients as the plain gather and batched product."""

import pytest
import torch
import torch.nn.functional as F

from sampledlm.objectives.output import OutputLayer
from sampledlm.objectives.row_scores import row_scores


def _reference(weight, bias, ctx, words):
    w = F.embedding(words, weight, sparse=True)
    b = F.embedding(words, bias, sparse=True).squeeze(-1)
    return torch.bmm(w, ctx.unsqueeze(-1)).squeeze(-1) + b


def _grads(fn, weight, bias, ctx, words, upstream):
    for t in (weight, bias, ctx):
        t.grad = None
    fn(weight, bias, ctx, words).backward(upstream)
    return weight.grad, bias.grad, ctx.grad.clone()


def _setup(v=50, h=8, n=13, s=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(v, h, generator=g).requires_grad_()
    bias = torch.randn(v, 1, generator=g).requires_grad_()
    ctx = torch.randn(n, h, generator=g).requires_grad_()
    # few distinct ids, so most rows are drawn many times (the sums over repeats are what is tested)
    words = torch.randint(0, v // 5, (n, s), generator=g)
    return weight, bias, ctx, words, torch.randn(n, s, generator=g)


def test_scores_and_gradients_equal_the_gather_and_batched_product():
    weight, bias, ctx, words, upstream = _setup()
    torch.testing.assert_close(row_scores(weight, bias, ctx, words), _reference(weight, bias, ctx, words))
    got = _grads(row_scores, weight, bias, ctx, words, upstream)
    want = _grads(_reference, weight, bias, ctx, words, upstream)
    for g, w in zip(got[:2], want[:2]):
        assert g.is_sparse
        torch.testing.assert_close(g.to_dense(), w.to_dense())
    torch.testing.assert_close(got[2], want[2])


def test_the_weight_gradient_holds_one_row_per_distinct_id():
    weight, bias, ctx, words, upstream = _setup()
    dw, db = torch.autograd.grad(row_scores(weight, bias, ctx, words), [weight, bias], upstream)
    distinct = torch.unique(words)
    assert dw.is_coalesced() and db.is_coalesced()  # (.grad loses the flag: autograd re-wraps a sparse gradient)
    assert torch.equal(dw.indices()[0], distinct) and torch.equal(db.indices()[0], distinct)
    assert dw.values().shape == (len(distinct), weight.shape[1])


def test_only_the_gradients_asked_for_are_computed():
    weight, bias, ctx, words, upstream = _setup()
    weight.requires_grad_(False)
    bias.requires_grad_(False)
    row_scores(weight, bias, ctx, words).backward(upstream)
    assert weight.grad is None and bias.grad is None and ctx.grad is not None


def test_a_bf16_context_under_autocast_gives_float32_scores_and_a_bf16_gradient():
    weight, bias, ctx, words, upstream = _setup()
    low = ctx.detach().bfloat16().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        scores = row_scores(weight, bias, low, words)
    assert scores.dtype == torch.float32
    torch.testing.assert_close(scores, _reference(weight, bias, low.detach().float(), words))
    scores.backward(upstream)
    assert low.grad.dtype == torch.bfloat16


def test_a_sparse_output_layer_scores_each_position_this_way():
    layer = OutputLayer(40, 6, sparse=True)
    ctx = torch.randn(5, 6)
    words = torch.tensor([[1, 1, 2], [3, 1, 1], [0, 0, 0], [39, 2, 1], [5, 5, 6]])
    scores = layer.score_each(ctx, words)
    scores.sum().backward()
    grad = layer.weight.grad
    assert grad.is_sparse and grad._nnz() == 7  # one row per distinct id, not one per draw (15)
    assert grad.coalesce().indices()[0].tolist() == [0, 1, 2, 3, 5, 6, 39]
    dense = OutputLayer(40, 6, sparse=False)
    dense.load_state_dict(layer.state_dict())
    torch.testing.assert_close(scores, dense.score_each(ctx, words))


def test_an_id_outside_the_table_is_refused_before_the_compiled_loop_reads_it():
    import pytest

    weight, bias, ctx, words, _ = _setup()
    for bad in (-1, weight.shape[0]):
        words[2, 3] = bad
        with pytest.raises(IndexError):
            row_scores(weight, bias, ctx, words)


@pytest.mark.parametrize("num_rows", [50, 5_000])  # a table over the rows; too many rows for the draws: a sort
def test_distinct_ids_and_their_positions_are_torch_uniques(num_rows):
    from sampledlm.objectives.row_scores import _distinct

    words = torch.randint(0, 50, (200,), generator=torch.Generator().manual_seed(3)) * (num_rows // 50)
    ids, inverse = _distinct(words, num_rows)
    ref_ids, ref_inverse = torch.unique(words, return_inverse=True)
    assert torch.equal(ids, ref_ids) and torch.equal(inverse, ref_inverse)
