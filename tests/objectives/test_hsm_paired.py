"""hsm's step scored pair by pair on the CPU (sampledlm.objectives.hsm_paired) against the portable path and the
exact rule; the pair loops' scores and their one row gradient (sampledlm.objectives.row_scores.pair_scores)."""

import numpy as np
import pytest
import torch

from sampledlm.objectives import make_objective
from sampledlm.objectives import hsm_paired
from sampledlm.objectives.output import OutputLayer
from sampledlm.objectives.row_scores import pair_scores

V = 300
COUNTS = (3000 / np.arange(1, V + 1) ** 1.1).astype(np.int64) + 1


def batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.choice(V, size=n, p=COUNTS / COUNTS.sum()))


def hsm_pair(arity, components):
    """A sparse float32 output layer and a wide hsm over random word classes, weights far from uniform."""
    torch.manual_seed(1)
    out = OutputLayer(V, 8, sparse=True)
    obj = make_objective("hsm", COUNTS, arity=arity, components=components)
    obj.bind(out)
    obj.set_word_classes(np.random.default_rng(2).integers(0, 12, size=V))
    with torch.no_grad():
        for p in list(out.parameters()) + list(obj.parameters()):
            p.normal_(0, 0.7)
    return out, obj


def loss_and_grads(out, obj, x, y):
    x = x.clone().requires_grad_(True)
    params = [out.weight, out.bias, obj.node_layer.weight, obj.node_layer.bias]
    for p in params:
        p.grad = None
    loss = obj(out, x, y)
    loss.backward()
    grads = [p.grad.to_dense() if p.grad.is_sparse else p.grad for p in params]
    return loss.detach(), grads + [x.grad]


@pytest.mark.parametrize("block_min", [1, 4, 10**9])  # every parent a block, a mix, every step pair by pair
@pytest.mark.parametrize("arity,components", [(4, 1), (8, 3), (64, 4)])
def test_paired_step_equals_the_portable_path_and_its_gradients(block_min, arity, components, monkeypatch):
    out, obj = hsm_pair(arity, components)
    x, y = torch.randn(200, 8), batch(200)
    assert obj._pairs_in_place(out, x)
    monkeypatch.setattr(hsm_paired, "PAIRED_BLOCK_MIN", block_min)
    got = loss_and_grads(out, obj, x, y)
    monkeypatch.setattr(type(obj), "_pairs_in_place", lambda self, scorer, ctx: False)
    want = loss_and_grads(out, obj, x, y)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    # and both are the exact rule's -mean log P
    exact = -obj.log_prob(out, x).gather(1, y.unsqueeze(1)).mean()
    torch.testing.assert_close(got[0], exact.detach(), rtol=1e-5, atol=1e-5)


def test_paired_step_gives_each_layer_one_coalesced_row_gradient():
    out, obj = hsm_pair(8, 2)
    x, y = torch.randn(100, 8), batch(100, seed=3)
    obj(out, x, y).backward()
    for p in (out.weight, obj.node_layer.weight):
        rows = p.grad._indices()[0]
        assert p.grad.is_sparse and len(rows) == len(rows.unique())  # one gradient: no row twice
        assert 0 < len(rows) < p.shape[0]  # only the rows the batch's steps touched


def test_paired_step_is_not_used_where_rows_are_not_read_in_place():
    out, obj = hsm_pair(8, 2)
    assert not obj._pairs_in_place(out, torch.randn(3, 8, dtype=torch.float64))
    out.double(), obj.double()
    assert not obj._pairs_in_place(out, torch.randn(3, 8, dtype=torch.float64))
    dense = OutputLayer(V, 8, sparse=False)
    dense_obj = make_objective("hsm", COUNTS, arity=8)
    dense_obj.bind(dense)
    assert not dense_obj._pairs_in_place(dense, torch.randn(3, 8))


def test_pair_scores_and_block_rows_match_a_gather_and_share_one_gradient():
    torch.manual_seed(0)
    w = torch.randn(50, 6, requires_grad=True)
    b = torch.randn(50, 1, requires_grad=True)
    ctx = torch.randn(7, 6, requires_grad=True)
    rows = torch.tensor([3, 3, 9, 0, 49, 9, 12])
    at = torch.tensor([0, 6, 6, 2, 2, 5, 1])
    block = torch.tensor([9, 30, 3])
    scores, bw, bb = pair_scores(w, b, ctx, rows, at, block=block)
    torch.testing.assert_close(scores, (w[rows] * ctx[at]).sum(1) + b[rows, 0])
    torch.testing.assert_close(bw, w[block].detach()), torch.testing.assert_close(bb, b[block].detach())
    weights = torch.randn(len(rows))
    (scores * weights).sum().add((bw * 2).sum()).add(bb.sum()).backward()
    gw, gb, gc = w.grad, b.grad, ctx.grad
    assert gw.is_sparse and gw._indices()[0].tolist() == [0, 3, 9, 12, 30, 49]  # one gradient: each row once
    w.grad = b.grad = ctx.grad = None
    gathered = ((w[rows] * ctx[at]).sum(1).add(b[rows, 0]) * weights).sum()
    gathered.add((w[block] * 2).sum()).add(b[block].sum()).backward()
    torch.testing.assert_close(gw.to_dense(), w.grad)
    torch.testing.assert_close(gb.to_dense(), b.grad)
    torch.testing.assert_close(gc, ctx.grad)
    with pytest.raises(IndexError, match="row ids"):
        pair_scores(w, b, ctx, torch.tensor([50]), torch.tensor([0]))
    with pytest.raises(IndexError, match="context ids"):
        pair_scores(w, None, ctx, torch.tensor([1]), torch.tensor([7]))
