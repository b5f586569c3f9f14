"""The CPU dropout with a mask from 16-bit slices of 64-bit draws (neural.dropout)."""

import pytest
import torch
from torch import nn

from sampledlm.neural.dropout import Dropout, dropout_mask


def test_kept_units_are_scaled_by_the_exact_inverse_keep_rate_and_the_rest_are_zero():
    torch.manual_seed(0)
    x = torch.rand(64, 50, 30) + 1.0  # no zeros of its own
    y = Dropout(0.25).train()(x)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] * (65536 / (65536 - 16384)))


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5, 0.9])
def test_the_keep_rate_is_one_minus_p(p):
    torch.manual_seed(1)
    n = 400_000
    keep, scale = dropout_mask(torch.Size([n]), p)
    rate = keep.float().mean().item()
    sd = (p * (1 - p) / n) ** 0.5
    assert abs(rate - (1 - p)) < 6 * sd + 1 / 65536
    assert scale == pytest.approx(1 / (1 - p), rel=1e-4)


def test_the_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(10, 20, requires_grad=True)
    y = Dropout(0.3).train()(x)
    y.sum().backward()
    mask = (y != 0).float()
    torch.testing.assert_close(x.grad, mask * (y.detach() / x.detach()).nan_to_num().max())


def test_eval_mode_and_p_zero_pass_the_input_through_and_p_one_drops_everything():
    x = torch.randn(4, 5)
    assert torch.equal(Dropout(0.5).eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))


def test_a_seeded_mask_is_reproducible_and_the_module_is_a_torch_dropout():
    torch.manual_seed(3)
    a = Dropout(0.4).train()(torch.ones(1000))
    torch.manual_seed(3)
    b = Dropout(0.4).train()(torch.ones(1000))
    assert torch.equal(a, b)
    assert isinstance(Dropout(0.4), nn.Dropout) and not list(Dropout(0.4).parameters())


@pytest.mark.parametrize("contiguous", [True, False])
def test_the_compiled_pass_gives_the_masks_numbers_forward_and_backward(contiguous):
    x = torch.randn(35, 32, 24)
    if not contiguous:
        x = x.transpose(0, 1)
    x.requires_grad_(True)
    g = torch.randn(x.shape)
    torch.manual_seed(4)
    y = Dropout(0.3).train()(x)
    (dx,) = torch.autograd.grad(y, x, g)
    torch.manual_seed(4)
    keep, scale = dropout_mask(x.shape, 0.3)
    assert torch.equal(y, x.detach() * keep * scale)
    assert torch.equal(dx, g * keep * scale)
    x64 = x.detach().double().requires_grad_(True)  # another dtype: the mask and two products
    torch.manual_seed(4)
    y64 = Dropout(0.3).train()(x64)
    assert torch.equal(y64 != 0, keep) and y64.dtype == torch.float64
