"""The segment GRU (neural.gru_cpu): torch.nn.GRU's outputs, final state and every gradient."""

import pytest
import torch

from sampledlm.neural import gru_cpu


def _pair(layers, seed=0, batch=4):
    torch.manual_seed(seed)
    rnn = torch.nn.GRU(6, 9, layers, batch_first=True)
    x = torch.randn(batch, 7, 6, requires_grad=True)
    h0 = torch.randn(layers, batch, 9, requires_grad=True)
    return rnn, x, h0


def _run(fn, rnn, x, h0, upstream_out, upstream_state):
    for p in [*rnn.parameters(), x, h0]:
        p.grad = None
    out, state = fn(x, h0)
    ((out * upstream_out).sum() + (state * upstream_state).sum()).backward()
    return [out.detach(), state.detach(), x.grad.clone(), h0.grad.clone(), *[p.grad.clone() for p in rnn.parameters()]]


# up to SEGMENT_ROWS rows a segment runs in one compiled loop, more rows step by step around a batched product
@pytest.mark.parametrize("batch", [4, gru_cpu.SEGMENT_ROWS + 4])
@pytest.mark.parametrize("layers", [1, 2])
def test_outputs_state_and_every_gradient_equal_torch_gru(layers, batch):
    rnn, x, h0 = _pair(layers, batch=batch)
    rnn.train()
    g = torch.Generator().manual_seed(1)
    up_out, up_state = torch.randn(batch, 7, 9, generator=g), torch.randn(layers, batch, 9, generator=g)
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


def test_it_stands_in_for_float32_cpu_training_and_for_scoring_a_few_rows():
    rnn, x, _ = _pair(1)
    assert gru_cpu.usable(rnn.train(), x)
    assert not gru_cpu.usable(rnn.eval(), x)  # a gradient wanted, but not training: torch.nn.GRU
    with torch.no_grad():
        assert gru_cpu.usable(rnn, x)  # scoring 4 rows
        assert not gru_cpu.usable(rnn, torch.randn(9, 7, 6))  # 9 rows: torch.nn.GRU's batched steps
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert not gru_cpu.usable(rnn, x)  # evaluation stays float32
    rnn.train()
    with torch.autocast("cpu", dtype=torch.float16):
        assert not gru_cpu.usable(rnn, x)
    assert not gru_cpu.usable(rnn, x.double())
    assert not gru_cpu.usable(torch.nn.LSTM(6, 9, batch_first=True), x)


def test_scoring_without_gradients_equals_torch_gru_in_eval_mode():
    torch.manual_seed(0)
    rnn = torch.nn.GRU(6, 9, 2, dropout=0.5, batch_first=True).eval()  # dropout between layers: off in eval
    x, h0 = torch.randn(1, 40, 6), torch.randn(2, 1, 9)
    with torch.no_grad():
        assert gru_cpu.usable(rnn, x)
        out, state = gru_cpu.gru_forward(rnn, x, h0)
        ref_out, ref_state = rnn(x, h0)
    torch.testing.assert_close(out, ref_out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(state, ref_state, rtol=1e-5, atol=1e-6)


def _grads(rnn, x, h0, up_out, up_state, fn):
    for p in [*rnn.parameters(), x, h0]:
        p.grad = None
    out, state = fn(x, h0)
    ((out * up_out).sum() + (state * up_state).sum()).backward()
    return [out.detach(), state.detach(), x.grad.clone(), h0.grad.clone(),
            *[None if p.grad is None else p.grad.clone() for p in rnn.parameters()]]


@pytest.mark.parametrize("batch", [4, gru_cpu.SEGMENT_ROWS + 4])
@pytest.mark.parametrize("layers", [1, 2])
def test_without_input_matrices_it_equals_torch_gru_multiplying_by_the_identity(layers, batch):
    torch.manual_seed(0)
    rnn = torch.nn.GRU(9, 9, layers, batch_first=True)
    gru_cpu.identity_input(rnn)
    x = torch.randn(batch, 7, 9, requires_grad=True)
    h0 = torch.randn(layers, batch, 9, requires_grad=True)
    g = torch.Generator().manual_seed(1)
    up_out, up_state = torch.randn(batch, 7, 9, generator=g), torch.randn(layers, batch, 9, generator=g)
    want = _grads(rnn, x, h0, up_out, up_state, rnn)
    got = _grads(rnn, x, h0, up_out, up_state, lambda a, b: gru_cpu.gru_forward(rnn, a, b))
    for w, o in zip(want, got):
        if w is None:
            assert o is None
        else:
            torch.testing.assert_close(o, w, rtol=1e-5, atol=1e-5)
    frozen = [n for n, p in rnn.named_parameters() if p.grad is None]
    assert frozen == [f"weight_ih_l{k}" for k in range(layers)]
    assert all(torch.equal(getattr(rnn, f"weight_ih_l{k}"), torch.eye(9).repeat(3, 1)) for k in range(layers))


def test_without_input_matrices_the_embedding_must_be_as_wide_as_the_state():
    with pytest.raises(ValueError, match="embed_dim"):
        gru_cpu.identity_input(torch.nn.GRU(6, 9))


def test_a_gru_trained_without_input_matrices_keeps_them_the_identity_through_save_and_resume(words_corpus):
    from helpers import config_for

    from sampledlm.neural import rundir as runs
    from sampledlm.neural.registry import model_spec
    from sampledlm.neural.trainer import TrainingInterrupted, new_run, resume_run

    config, vocab = config_for(words_corpus, "gru", optimizer="adam", lr=0.01, epochs=2)
    config["model"] = model_spec("gru", embed_dim=8, hidden=8, dropout=0.1, input_weights=False)
    first = new_run(str(words_corpus / "a"), config, vocab)
    bias_at_start = first.model.rnn.bias_ih_l0.detach().clone()
    first.train()
    t = new_run(str(words_corpus / "b"), config, vocab)
    t.stop_when = lambda st, n=t.data.num_batches() + 2: st.step >= n
    with pytest.raises(TrainingInterrupted):
        t.train()
    resume_run(str(words_corpus / "b")).train()
    (a, *_), (b, *_) = runs.load_run(str(words_corpus / "a")), runs.load_run(str(words_corpus / "b"))
    assert torch.equal(a.rnn.weight_ih_l0, torch.eye(8).repeat(3, 1)) and not a.rnn.weight_ih_l0.requires_grad
    assert not torch.equal(a.rnn.bias_ih_l0, bias_at_start)  # the input biases train
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k


@pytest.mark.parametrize("model,dims,message", [("lstm", (8, 8), "for the GRU"), ("gru", (6, 8), "--embed-dim")])
def test_no_input_weights_is_refused_where_it_cannot_apply(model, dims, message):
    from sampledlm.errors import UserError
    from sampledlm.neural.registry import build_model

    with pytest.raises(UserError, match=message):
        build_model({"type": model, "embed_dim": dims[0], "hidden": dims[1], "input_weights": False}, 20)


@pytest.mark.parametrize("identity", [False, True])
def test_under_bf16_autocast_its_products_round_their_inputs_and_it_stays_near_the_float32_gru(identity):
    torch.manual_seed(0)
    rnn = torch.nn.GRU(9, 9, 2, batch_first=True)
    if identity:
        gru_cpu.identity_input(rnn)
    x = torch.randn(4, 7, 9, requires_grad=True)
    h0 = torch.randn(2, 4, 9, requires_grad=True)
    g = torch.Generator().manual_seed(1)
    up_out, up_state = torch.randn(4, 7, 9, generator=g), torch.randn(2, 4, 9, generator=g)
    want = _grads(rnn, x, h0, up_out, up_state, rnn)

    def bf16(a, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert gru_cpu.usable(rnn, a)
            return gru_cpu.gru_forward(rnn, a, b)

    got = _grads(rnn, x, h0, up_out, up_state, bf16)
    exact = _grads(rnn, x, h0, up_out, up_state, lambda a, b: gru_cpu.gru_forward(rnn, a, b))
    for w, o, e in zip(want, got, exact):
        if w is None:
            assert o is None
            continue
        assert o.dtype == torch.float32
        torch.testing.assert_close(o, w, rtol=0.05, atol=0.05)  # bf16 keeps 8 bits of each product's inputs
    # the products did run on rounded inputs: the outputs differ from the float32 path's
    assert not torch.allclose(got[0], exact[0], rtol=1e-5, atol=1e-5)


def test_no_input_weights_unties_the_embeddings_unless_told(tmp_path, run_in_process):
    import json

    from helpers import write_word_corpus

    write_word_corpus(tmp_path / "train.txt", 40, 1)
    base = ("train", "--train", "train.txt", "--valid", "train.txt", "--model", "gru", "-d", "6", "--hidden", "6",
            "--no-input-weights", "--epochs", "1", "--threads", "1")
    r = run_in_process(*base, "-o", "a", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--no-input-weights: input and output embeddings untied" in r.stderr
    model = json.loads((tmp_path / "a" / "config.json").read_text())["model"]
    assert model["tie"] is False and model["input_weights"] is False
    r = run_in_process(*base, "--tie", "-o", "b", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "b" / "config.json").read_text())["model"]["tie"] is True
    r = run_in_process("eval", "a", "--test", "train.txt", cwd=tmp_path)
    assert r.returncode == 0 and "ppl" in r.stdout, r.stderr
