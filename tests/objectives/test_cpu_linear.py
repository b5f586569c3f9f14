"""Float32 products through oneDNN (:mod:`sampledlm.neural.cpu_linear`): the same numbers as torch to float32
rounding, the same gradients, and torch itself wherever the path does not apply."""

import pytest
import torch

from sampledlm.neural import gru_cpu
from sampledlm.objectives import cpu_linear

needs_onednn = pytest.mark.skipif(not cpu_linear.available(), reason="this PyTorch build has no oneDNN linear operator")


@pytest.fixture(autouse=True)
def onednn_on(monkeypatch):
    """The path on, whatever the CPU's vendor (off by default on Intel's), so that these tests exercise it."""
    monkeypatch.setenv("SAMPLEDLM_ONEDNN", "1")
    cpu_linear.enabled.cache_clear()
    yield
    monkeypatch.undo()
    cpu_linear.enabled.cache_clear()


def test_by_default_the_path_is_off_on_intel_cpus_and_on_elsewhere(monkeypatch):
    monkeypatch.delenv("SAMPLEDLM_ONEDNN")
    for vendor, want in (("GenuineIntel", False), ("AuthenticAMD", cpu_linear.available()), ("", cpu_linear.available())):
        monkeypatch.setattr(cpu_linear, "cpu_vendor", lambda v=vendor: v)
        cpu_linear.enabled.cache_clear()
        assert cpu_linear.enabled() is want, vendor
    monkeypatch.setenv("SAMPLEDLM_ONEDNN", "1")  # asked for: on, even on Intel's
    monkeypatch.setattr(cpu_linear, "cpu_vendor", lambda: "GenuineIntel")
    cpu_linear.enabled.cache_clear()
    assert cpu_linear.enabled() is cpu_linear.available()


@pytest.fixture
def onednn_off(monkeypatch, onednn_on):
    monkeypatch.setenv("SAMPLEDLM_ONEDNN", "0")  # the autouse fixture clears the cache again afterwards
    cpu_linear.enabled.cache_clear()


def _big(m=64, k=96, n=400, seed=0):
    g = torch.Generator().manual_seed(seed)
    assert m * k * n >= cpu_linear._MIN_MACS  # large enough to take the oneDNN path
    return torch.randn(m, k, generator=g), torch.randn(n, k, generator=g), torch.randn(n, generator=g)


@needs_onednn
def test_linear_and_mm_agree_with_torch_on_strided_operands():
    x, w, b = _big()
    torch.testing.assert_close(cpu_linear.linear(x, w, b), x @ w.t() + b, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(cpu_linear.linear(x, w.t().contiguous().t(), b), x @ w.t() + b, rtol=1e-5, atol=1e-4)
    # transposed views, read as they lie: dW = dY^T X
    dy = torch.randn(x.shape[0], w.shape[0])
    torch.testing.assert_close(cpu_linear.mm(dy.t(), x), dy.t() @ x, rtol=1e-5, atol=1e-4)  # formed as (x^T dy)^T
    assert cpu_linear.mm(dy.t(), x).is_contiguous()
    torch.testing.assert_close(cpu_linear.mm(x.t(), dy), x.t() @ dy, rtol=1e-5, atol=1e-4)  # the smaller a copied
    torch.testing.assert_close(cpu_linear.mm(dy, w), dy @ w, rtol=1e-5, atol=1e-4)


def test_small_products_and_other_dtypes_are_torchs_own():
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    assert torch.equal(cpu_linear.linear(x, w), torch.nn.functional.linear(x, w))
    xd, wd = torch.randn(64, 96, dtype=torch.float64), torch.randn(400, 96, dtype=torch.float64)
    assert torch.equal(cpu_linear.linear(xd, wd), torch.nn.functional.linear(xd, wd))


@pytest.mark.parametrize("bias", [True, False])
def test_fast_linear_gives_the_gradients_of_torchs_linear(bias):
    x, w, b = _big(seed=1)
    x3 = x.view(4, 16, 96)  # leading dimensions are flattened and restored
    b = b if bias else None
    grads = []
    for f in (cpu_linear.fast_linear, torch.nn.functional.linear):
        leaves = [t.clone().requires_grad_() for t in (x3, w) + ((b,) if bias else ())]
        out = f(leaves[0], leaves[1], leaves[2] if bias else None)
        assert out.shape == (4, 16, 400)
        (out * torch.linspace(-1, 1, 400)).sum().backward()
        grads.append([out.detach()] + [t.grad for t in leaves])
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_the_module_is_a_torch_linear_with_the_same_state():
    torch.manual_seed(0)
    plain = torch.nn.Linear(96, 400)
    torch.manual_seed(0)
    fast = cpu_linear.FastLinear(96, 400)
    assert fast.state_dict().keys() == plain.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(fast.state_dict().values(), plain.state_dict().values()))
    x = torch.randn(64, 96)
    torch.testing.assert_close(fast(x), plain(x), rtol=1e-5, atol=1e-4)


def test_the_switch_turns_the_path_off(onednn_off):
    assert not cpu_linear.enabled()
    x, w, b = _big()
    assert torch.equal(cpu_linear.fast_linear(x, w, b), torch.nn.functional.linear(x, w, b))


def test_under_autocast_the_product_is_autocasts():
    x, w, b = _big()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert cpu_linear.fast_linear(x, w, b).dtype == torch.bfloat16


@pytest.mark.parametrize("identity", [False, True])
def test_segment_gru_with_onednn_products_matches_torchs_gru(identity):
    """A batch and width where every product of the segment GRU takes the oneDNN path (32 x 128 x 384 multiply-adds
    a step is below the threshold, so 48 rows)."""
    torch.manual_seed(0)
    rnn = torch.nn.GRU(128, 128, batch_first=True)
    if identity:
        gru_cpu.identity_input(rnn)
    x = torch.randn(48, 12, 128, requires_grad=True)
    up = torch.randn(48, 12, 128)
    results = []
    for f in (lambda a: gru_cpu.gru_forward(rnn, a, None), lambda a: rnn(a)):
        rnn.zero_grad()
        x.grad = None
        out, last = f(x)
        ((out * up).sum() + last.sum()).backward()
        grads = [p.grad.clone() for p in rnn.parameters() if p.grad is not None]
        results.append([out.detach(), x.grad.clone()] + grads)
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_operands_of_many_rows_stay_with_torch():
    """PyTorch caches each oneDNN product by shape with buffers the size of its operands: a vocabulary-sized operand
    whose other side changes every step would add one per step, so such products go through torch."""
    import torch

    from sampledlm.objectives import cpu_linear

    x = torch.randn(64, 32)
    small, large = torch.randn(4096, 32), torch.randn(cpu_linear._MAX_ROWS + 1, 32)
    if cpu_linear.enabled():
        assert cpu_linear.goes_to_onednn(x, small)
    assert not cpu_linear.goes_to_onednn(x, large)
    assert torch.allclose(cpu_linear.linear(x, large), x @ large.t(), atol=1e-4)


def test_an_adaptive_softmax_tail_table_is_a_plain_linear_layer():
    import torch

    from sampledlm.objectives import make_objective
    from sampledlm.objectives.cpu_linear import FastLinear

    counts = torch.arange(2000, 0, -1).numpy()
    obj = make_objective("adaptive", counts=counts, cutoffs=[100, 500])

    class Scorer:
        num_words, hidden_size = 2000, 16

    obj.bind(Scorer())
    assert all(type(t[1]) is torch.nn.Linear and isinstance(t[0], FastLinear) for t in obj.tail)
