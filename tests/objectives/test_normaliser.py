"""The exact rule in blocks of output rows (large vocabularies): the same numbers as one [N, V] product."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sampledlm.neural.lm import stream_logprobs
from sampledlm.neural.registry import RNNLM
from sampledlm.objectives import make_objective, normaliser, output


def _float64_rule(w, b, x, t, offset=None, log_sigmoid=False):
    s = x.double() @ w.double().t() + b.double()
    if offset is not None:
        s = s + torch.as_tensor(offset, dtype=torch.float64)
    f = F.logsigmoid(s) if log_sigmoid else s
    return (f - torch.logsumexp(f, 1, keepdim=True)).gather(1, t.unsqueeze(1)).squeeze(1)


@pytest.mark.parametrize("rule", [{}, {"offset": "vector"}, {"offset": 0.7}, {"log_sigmoid": True},
                                  {"offset": -1.3, "log_sigmoid": True}])
@pytest.mark.parametrize("block", [64, 1000, 5000])  # the last block short; one block holding every row
@pytest.mark.parametrize("workers", [1, 3])  # the rows in one share, or in three (combined afterwards)
def test_blocks_give_the_float64_rule(rule, block, workers):
    g = torch.Generator().manual_seed(1)
    V, h, N = 1003, 16, 37
    w, b = torch.randn(V, h, generator=g), torch.randn(V, generator=g)
    x, t = torch.randn(N, h, generator=g) * 2, torch.randint(0, V, (N,), generator=g)
    rule = dict(rule)
    if rule.get("offset") == "vector":
        rule["offset"] = torch.randn(V, generator=g)
    before = torch.get_num_threads()
    got = normaliser.log_normalised_targets(w, b, x, t, block=block, workers=workers, **rule)
    assert torch.get_num_threads() == before
    want = _float64_rule(w, b, x, t, **rule)
    assert got.dtype == torch.float32 and got.shape == (N,)
    np.testing.assert_allclose(got.double().numpy(), want.numpy(), atol=2e-5)


def test_bf16_sum_is_close_and_asked_for_only():
    g = torch.Generator().manual_seed(2)
    V, h, N = 5000, 64, 50
    w, b = torch.randn(V, h, generator=g) * 0.2, torch.randn(V, generator=g) * 0.1
    x, t = torch.randn(N, h, generator=g), torch.randint(0, V, (N,), generator=g)
    want = _float64_rule(w, b, x, t)
    assert normaliser.current_precision() == "fp32"
    with normaliser.sum_precision("bf16"):
        assert normaliser.current_precision() == "bf16" and normaliser.blocked(10)
        low = normaliser.log_normalised_targets(w, b, x, t, block=700).double()
    assert normaliser.current_precision() == "fp32" and not normaliser.blocked(10)
    err = (low - want).abs()
    assert err.max() < 0.05 and err.mean() < 0.01  # bfloat16 products: close, not equal
    with pytest.raises(ValueError, match="fp32, bf16"):
        with normaliser.sum_precision("fp8"):
            pass


@pytest.mark.parametrize("name", ["softmax", "nce", "binary", "neg"])
def test_evaluation_in_blocks_equals_the_one_product_path(name, monkeypatch):
    """A recurrent model's running text, gathered into 1,024-history calls and scored in blocks of rows, against
    the small-vocabulary path ([64, V] products, then the targets' entries)."""
    torch.manual_seed(0)
    V = 300
    counts = np.arange(V, 0, -1).astype(np.int64)
    m = RNNLM.build(V, embed_dim=8, hidden=12, dropout=0.0, tie=False)
    obj = make_objective(name, counts=counts)
    ids = np.random.default_rng(0).integers(0, V, 3000).astype(np.int32)
    ids[::17] = 0
    whole = stream_logprobs(m, obj, ids, bptt=64)
    monkeypatch.setattr(normaliser, "BLOCKED_MIN_WORDS", 100)
    monkeypatch.setattr(normaliser, "BLOCK_ROWS", 128)
    assert obj.scores_in_blocks(m)
    calls = []
    real = normaliser.log_normalised_targets
    monkeypatch.setattr(output, "log_normalised_targets",  # patched where the output layer looks it up
                        lambda *a, **k: calls.append(len(a[2])) or real(*a, **{**k, "block": 128}))
    blocked = stream_logprobs(m, obj, ids, bptt=64)
    assert calls and max(calls) >= 1024  # the 64-token chunks were gathered
    np.testing.assert_allclose(blocked, whole, atol=2e-5)


def test_structured_objectives_keep_their_own_rule():
    m = RNNLM.build(300, embed_dim=8, hidden=12, dropout=0.0, tie=False)
    counts = np.arange(300, 0, -1).astype(np.int64)
    assert not make_objective("adaptive", counts=counts, cutoffs=[50]).scores_in_blocks(m)
