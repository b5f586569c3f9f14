"""The segment GRU (neural.gru_cpu): torch.nn.GRU's outputs, final state and every gradient."""

import pytest
import torch

from sampledlm.neural import gru_cpu


def _pair(layers, seed=0):
    torch.manual_seed(seed)
    rnn = torch.nn.GRU(6, 9, layers, batch_first=True)
    x = torch.randn(4, 7, 6, requires_grad=True)
    h0 = torch.randn(layers, 4, 9, requires_grad=True)
    return rnn, x, h0


def _run(fn, rnn, x, h0, upstream_out, upstream_state):
    for p in [*rnn.parameters(), x, h0]:
        p.grad = None
    out, state = fn(x, h0)
    ((out * upstream_out).sum() + (state * upstream_state).sum()).backward()
    return [out.detach(), state.detach(), x.grad.clone(), h0.grad.clone(), *[p.grad.clone() for p in rnn.parameters()]]


@pytest.mark.parametrize("layers", [1, 2])
def test_outputs_state_and_every_gradient_equal_torch_gru(layers):
    rnn, x, h0 = _pair(layers)
    rnn.train()
    g = torch.Generator().manual_seed(1)
    up_out, up_state = torch.randn(4, 7, 9, generator=g), torch.randn(layers, 4, 9, generator=g)
    assert gru_cpu.usable(rnn, x)
    want = _run(rnn, rnn, x, h0, up_out, up_state)
    got = _run(lambda a, b: gru_cpu.gru_forward(rnn, a, b), rnn, x, h0, up_out, up_state)
    for w, o in zip(want, got):
        torch.testing.assert_close(o, w, rtol=1e-5, atol=1e-5)


def test_a_missing_state_starts_from_zeros():
    rnn, x, _ = _pair(1)
    out, state = gru_cpu.gru_forward(rnn, x, None)
    ref_out, ref_state = rnn(x)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(state, ref_state)


def test_it_stands_in_only_for_float32_cpu_training_outside_autocast():
    rnn, x, _ = _pair(1)
    assert gru_cpu.usable(rnn.train(), x)
    assert not gru_cpu.usable(rnn.eval(), x)
    rnn.train()
    with torch.no_grad():
        assert not gru_cpu.usable(rnn, x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not gru_cpu.usable(rnn, x)
    assert not gru_cpu.usable(rnn, x.double())
    assert not gru_cpu.usable(torch.nn.LSTM(6, 9, batch_first=True), x)
