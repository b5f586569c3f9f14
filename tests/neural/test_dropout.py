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


def test_embedding_dropout_drops_every_occurrence_of_a_word_together_and_scales_the_rest():
    from sampledlm.neural.dropout import WordDropout

    torch.manual_seed(3)
    ids = torch.randint(0, 12, (8, 40))
    vectors = torch.rand(12, 5)[ids] + 1.0  # a word's vector the same wherever it occurs, no zeros of its own
    y = WordDropout(0.3).train()(ids, vectors)
    dropped = {int(w) for w in ids[(y == 0).all(-1)]}
    assert 0 < len(dropped) < 12
    for w in range(12):
        rows = y[ids == w]
        if w in dropped:
            assert (rows == 0).all()
        elif len(rows):
            torch.testing.assert_close(rows, vectors[ids == w] / 0.7)
    assert torch.equal(WordDropout(0.3).eval()(ids, vectors), vectors)
    assert torch.equal(WordDropout(0.0).train()(ids, vectors), vectors)


def test_embedding_dropout_drops_word_types_at_its_rate():
    from sampledlm.neural.dropout import WordDropout

    torch.manual_seed(4)
    ids = torch.arange(20_000).view(100, 200)  # every word once
    y = WordDropout(0.1).train()(ids, torch.ones(100, 200, 3))
    rate = (y == 0).all(-1).float().mean().item()
    assert abs(rate - 0.1) < 6 * (0.1 * 0.9 / 20_000) ** 0.5


@pytest.mark.parametrize("model", ["gru", "transformer"])
def test_a_model_with_embedding_dropout_scores_as_without_it_in_eval_mode_and_differs_in_training(model):
    from sampledlm.neural.registry import build_model, complete_spec, model_spec

    def built(p):
        size = {"heads": 2} if model == "transformer" else {"hidden": 8}
        spec = complete_spec(model_spec(model, embed_dim=8, dropout=0.0, embed_dropout=p, **size), {"bptt": 10})
        torch.manual_seed(0)
        return build_model(spec, 30)

    plain, dropping = built(0.0), built(0.5)
    x = torch.randint(0, 30, (4, 10))
    plain.eval(), dropping.eval()
    torch.testing.assert_close(dropping(x)[0], plain(x)[0])
    dropping.train()
    torch.manual_seed(5)
    assert not torch.allclose(dropping(x)[0], plain(x)[0])
