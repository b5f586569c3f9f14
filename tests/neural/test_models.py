"""Neural scorers: shapes, finite-difference gradients, exact distributions, model specs."""

import numpy as np
import pytest
import torch

from sampledlm.errors import UserError
from sampledlm.neural.lm import batch_log_probs
from sampledlm.neural.registry import FFNN, RNNLM, build_model, model_spec
from sampledlm.neural.rnn import GRULM, LSTMLM
from sampledlm.objectives import make_objective

V = 11


def tiny_ffnn(**kw):
    torch.manual_seed(0)
    return FFNN.build(V, **{"order": 3, "embed_dim": 4, "hidden": [5], "dropout": 0.0, **kw})


def tiny_rnn(cell="gru", **kw):
    torch.manual_seed(0)
    return (GRULM if cell == "gru" else LSTMLM).build(V, **{"embed_dim": 4, "hidden": 5, "dropout": 0.0, "tie": False, **kw})


@pytest.mark.parametrize("kw,out", [({}, 5), ({"direct": True}, 5 + 8), ({"deep_output": 3}, 3),
                                    ({"deep_output": 3, "direct": True}, 11)])
def test_ffnn_shapes(kw, out):
    m = tiny_ffnn(**kw)
    hist = torch.tensor([[V, V], [V, 3], [2, 3]])  # <s> = V pads the history
    ctx = m(hist)
    assert ctx.shape == (3, out)
    assert m.score_all(ctx).shape == (3, V)
    assert m.score_targets(ctx, torch.tensor([0, 1, 2])).shape == (3,)
    assert m.score_shared(ctx, torch.tensor([4, 5])).shape == (3, 2)
    assert m.score_each(ctx, torch.tensor([[4, 5]] * 3)).shape == (3, 2)
    assert m.num_words == V


def test_scorer_methods_agree():
    m = tiny_ffnn(direct=True)
    ctx = m(torch.tensor([[V, 1], [2, 3]]))
    full = m.score_all(ctx)
    torch.testing.assert_close(m.score_targets(ctx, torch.tensor([4, 7])), full[[0, 1], [4, 7]])
    torch.testing.assert_close(m.score_shared(ctx, torch.tensor([2, 9])), full[:, [2, 9]])


def _gradcheck_model(m, inputs, targets):
    """Finite differences vs autograd for every parameter of ``m`` (float64), softmax loss."""
    from torch.func import functional_call

    names = [n for n, _ in m.named_parameters()]
    obj = make_objective("softmax")

    def loss(*ws):
        params = dict(zip(names, ws))
        out = functional_call(m, params, (inputs,))
        hidden = out[0] if isinstance(out, tuple) else out
        ctx = hidden.reshape(-1, hidden.shape[-1])
        scores = ctx @ params["output.weight"].t() + params["output.bias"].squeeze(1)
        return obj(_Dense(scores), ctx, targets.reshape(-1))

    ws = tuple(p.detach().clone().requires_grad_(True) for p in m.parameters())
    assert torch.autograd.gradcheck(loss, ws, eps=1e-6, atol=1e-5, fast_mode=True)


class _Dense:
    """A scorer over precomputed scores (so the functional parameters flow into the objective)."""

    def __init__(self, scores):
        self.scores = scores
        self.num_words = scores.shape[1]

    def score_all(self, ctx):
        return self.scores


def test_ffnn_gradcheck_float64():
    m = tiny_ffnn(direct=True, deep_output=3).double()
    _gradcheck_model(m, torch.tensor([[V, 2], [3, 4], [5, 6]]), torch.tensor([1, 0, 7]))


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_rnn_gradcheck_float64(cell):
    m = tiny_rnn(cell, proj=3).double()
    _gradcheck_model(m, torch.tensor([[0, 2, 3], [4, 5, 0]]), torch.tensor([[2, 3, 1], [5, 0, 6]]))


def test_softmax_objective_gradient_matches_finite_differences():
    """The objective path itself (scorer methods + softmax objective) in float64."""
    m = tiny_ffnn().double()
    obj = make_objective("softmax")
    hist = torch.tensor([[V, 2], [3, 4]])
    targets = torch.tensor([1, 9])
    ctx = m(hist).detach().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda c: obj(m, c, targets), (ctx,), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("maker", [lambda: tiny_ffnn(direct=True), lambda: tiny_rnn("gru", proj=3), lambda: tiny_rnn("lstm")])
def test_exact_distribution_sums_to_one(maker):
    m = maker()
    obj = make_objective("softmax")
    lp = batch_log_probs(m, obj, np.array([2, 3, 4, 0, 5, 0]))  # an id stream of two sentences
    assert lp.shape[1] == V
    torch.testing.assert_close(lp.exp().sum(1), torch.ones(lp.shape[0]), atol=1e-5, rtol=0)


def test_tied_rnn_shares_output_rows():
    m = tiny_rnn("gru", embed_dim=5, tie=True)
    e = m.embed_ids(torch.tensor([[3, V]]))
    torch.testing.assert_close(e[0, 0], m.output.weight[3])
    torch.testing.assert_close(e[0, 1], m.bos_embed[0])
    with pytest.raises(ValueError):  # tied with an explicit projection of another size than the embedding
        RNNLM.build(V, embed_dim=4, hidden=5, proj=3, tie=True, dropout=0.0)
    assert RNNLM.build(V, embed_dim=4, hidden=5, tie=True).proj.out_features == 4  # unset: projected to d


def test_rnn_state_carries():
    """Reading a stream in two segments with the state carried equals reading it at once."""
    m = tiny_rnn("lstm").eval()
    x = torch.tensor([[0, 2, 3, 4, 5, 6]])
    whole, _ = m(x)
    a, st = m(x[:, :4])
    b, _ = m(x[:, 4:], st)
    torch.testing.assert_close(torch.cat([a, b], 1), whole)
    fresh, _ = m(x[:, 4:])  # a reset state gives something else
    assert not torch.allclose(fresh, whole[:, 4:])


def test_model_spec_defaults_and_errors():
    spec = model_spec("ffnn", hidden=[100, 50])
    assert spec == {"type": "ffnn", "order": 3, "embed_dim": 50, "hidden": [100, 50], "direct": False,
                    "deep_output": None, "dropout": 0.2}
    m = build_model(spec, V)
    assert isinstance(m, FFNN) and len(m.hidden) == 2
    with pytest.raises(UserError, match="tie"):
        model_spec("ffnn", tie=True)
    with pytest.raises(UserError, match="unknown model"):
        model_spec("mamba")
    with pytest.raises(UserError, match="gru"):
        build_model(model_spec("gru", embed_dim=3, hidden=5, proj=4, tie=True), V)
    assert isinstance(build_model(model_spec("lstm"), V), RNNLM)


def test_sparse_output_parameters():
    """With a sparse output the word tables are row-sparse too: the FFNN's projection; a tied W once."""
    m = FFNN.build(V, sparse_output=True)
    assert [id(p) for p in m.sparse_parameters()] == [id(m.output.weight), id(m.output.bias), id(m.embed.weight)]
    assert FFNN.build(V).sparse_parameters() == []
    tied = RNNLM.build(V, embed_dim=20, hidden=20, tie=True, dropout=0.0, sparse_output=True)
    assert [id(p) for p in tied.sparse_parameters()] == [id(tied.output.weight), id(tied.output.bias)]
    assert RNNLM.build(V, embed_dim=20, hidden=20, tie=True, dropout=0.0).sparse_parameters() == []
