"""RowAdam (neural.row_adam): torch.optim.SparseAdam's update and state, through index operations."""

import pytest
import torch

from sampledlm.neural.row_adam import RowAdam


def _grads(steps, shape=(30, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(steps):
        rows = torch.randint(0, shape[0], (12,), generator=g)  # repeats: an uncoalesced gradient
        out.append(torch.sparse_coo_tensor(rows.unsqueeze(0), torch.randn(12, shape[1], generator=g), shape))
    return out


@pytest.mark.parametrize("maximize", [False, True])
def test_weights_and_moments_equal_sparse_adams_step_after_step(maximize):
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(30, 5))
    b = torch.nn.Parameter(a.detach().clone())
    ref = torch.optim.SparseAdam([a], lr=0.01, maximize=maximize)
    ours = RowAdam([b], lr=0.01, maximize=maximize)
    for grad in _grads(6):
        a.grad, b.grad = grad.clone(), grad.clone()
        ref.step()
        ours.step()
        torch.testing.assert_close(b, a)
    for key in ("exp_avg", "exp_avg_sq"):
        torch.testing.assert_close(ours.state[b][key], ref.state[a][key])
    assert ours.state[b]["step"] == ref.state[a]["step"] == 6


def test_its_state_loads_into_sparse_adam_and_back():
    p = torch.nn.Parameter(torch.randn(30, 5))
    ours = RowAdam([p], lr=0.01)
    for grad in _grads(2):
        p.grad = grad
        ours.step()
    ref = torch.optim.SparseAdam([p], lr=0.01)
    ref.load_state_dict(ours.state_dict())
    back = RowAdam([p], lr=0.01)
    back.load_state_dict(ref.state_dict())
    torch.testing.assert_close(back.state[p]["exp_avg"], ours.state[p]["exp_avg"])


def test_a_dense_gradient_is_refused_as_sparse_adam_refuses_it():
    p = torch.nn.Parameter(torch.randn(3, 2))
    p.grad = torch.ones(3, 2)
    with pytest.raises(RuntimeError, match="dense gradients"):
        RowAdam([p]).step()


def test_rows_already_distinct_and_in_order_are_flagged_not_merged_and_others_are_merged():
    from sampledlm.neural.row_adam import coalesced

    values = torch.randn(3, 4)
    ordered = torch.sparse_coo_tensor(torch.tensor([[1, 4, 7]]), values, (9, 4))
    assert not ordered.is_coalesced()
    out = coalesced(ordered)
    assert out.is_coalesced() and torch.equal(out.to_dense(), ordered.to_dense())
    repeated = torch.sparse_coo_tensor(torch.tensor([[4, 1, 4]]), values, (9, 4))
    out = coalesced(repeated)
    assert out.is_coalesced() and out._nnz() == 2 and torch.allclose(out.to_dense(), repeated.to_dense())


def test_a_float64_table_takes_the_index_operations_and_still_equals_sparse_adam():
    a = torch.nn.Parameter(torch.randn(30, 5, dtype=torch.float64))
    b = torch.nn.Parameter(a.detach().clone())
    ref, ours = torch.optim.SparseAdam([a], lr=0.01), RowAdam([b], lr=0.01)
    for grad in _grads(3):
        a.grad, b.grad = grad.double(), grad.double()
        ref.step()
        ours.step()
    torch.testing.assert_close(b, a)


def _every_row(steps, shape=(30, 5), seed=1):
    """Gradients touching every row each step: lazy and dense Adam then agree."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.arange(shape[0]).unsqueeze(0)
    return [torch.sparse_coo_tensor(rows, torch.randn(*shape, generator=g), shape) for _ in range(steps)]


def test_weight_decay_on_every_step_equals_dense_adamw_when_every_row_is_touched():
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(30, 5))
    b = torch.nn.Parameter(a.detach().clone())
    ref = torch.optim.AdamW([a], lr=0.01, weight_decay=0.1)
    ours = RowAdam([b], lr=0.01, weight_decay=0.1)
    for grad in _every_row(5):
        a.grad, b.grad = grad.to_dense(), grad.clone()
        ref.step()
        ours.step()
        torch.testing.assert_close(b, a)


def test_deferred_decay_reaches_untouched_rows_once_its_period_is_full_and_resumes(monkeypatch):
    """Zero gradients: Adam moves nothing, so the table is exactly its start times the decay applied so far. A
    table of 150 elements at 64 elements a step decays every 3 steps; the pending factor survives a state dict."""
    from sampledlm.neural import row_adam

    monkeypatch.setattr(row_adam, "DECAY_CHUNK", 64)
    start = torch.randn(30, 5)
    p = torch.nn.Parameter(start.clone())
    assert row_adam.decay_period(p) == 3
    opt = RowAdam([p], lr=0.01, weight_decay=0.5)
    zero = torch.sparse_coo_tensor(torch.tensor([[3, 7]]), torch.zeros(2, 5), (30, 5))
    for _ in range(2):
        p.grad = zero.clone()
        opt.step()
    torch.testing.assert_close(p.detach(), start)  # two steps' factors pending
    resumed = RowAdam([p], lr=0.01, weight_decay=0.5)
    resumed.load_state_dict(opt.state_dict())
    p.grad = zero.clone()
    resumed.step()
    torch.testing.assert_close(p.detach(), start * (1 - 0.01 * 0.5) ** 3)
    assert resumed.state[p]["decay_steps"] == 0 and resumed.state[p]["decay_log"] == 0.0


def test_adamw_gives_the_row_sparse_tables_decay_and_adam_does_not():
    from sampledlm.neural.optim import make_optimizers
    from sampledlm.neural.train_options import TrainOptions

    class Table(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(30, 5, sparse=True)
            self.bias = torch.nn.Parameter(torch.zeros(30, 1))  # as an output layer's sparse bias column
            self.out = torch.nn.Linear(5, 5)

        def sparse_parameters(self):
            return [self.emb.weight, self.bias]

    for name, want in (("adamw", [0.1, 0.0]), ("adam", [0.0])):
        opts = TrainOptions(optimizer=name, weight_decay=0.1)
        table = Table()
        sparse = [o for o in make_optimizers(table, torch.nn.Module(), opts) if isinstance(o, RowAdam)]
        assert [g["weight_decay"] for g in sparse[0].param_groups] == want
        if name == "adamw":  # the table decays, the [V, 1] bias column does not
            assert sparse[0].param_groups[0]["params"] == [table.emb.weight]
            assert sparse[0].param_groups[1]["params"] == [table.bias]
