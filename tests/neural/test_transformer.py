"""The Transformer decoder and adaptive input embeddings: causality, normalisation under every objective,
sliding-window evaluation, the key-value cache, tied adaptive bands, exact resume."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from sampledlm.data.corpus import build_vocab
from sampledlm.data.tokenizer import TextOptions
from sampledlm.data.vocab import EOS_ID
from sampledlm.errors import UserError
from sampledlm.lm import LanguageModel
from sampledlm.neural import rundir as runs
from sampledlm.neural.lm import NeuralLM, batch_log_probs, stream_logprobs
from sampledlm.neural.registry import build_model, complete_spec, model_spec
from sampledlm.neural.trainer import TrainingInterrupted, TrainOptions, make_optimizers, new_run, resume_run
from sampledlm.neural.transformer import window_spans
from sampledlm.objectives import make_objective
from sampledlm.objectives.registry import OBJECTIVES

V = 40
COUNTS = (1000 / np.arange(1, V + 1)).astype(np.int64)


def stream(n, seed=0):
    """A stream of ``n`` ids with a ``</s>`` every few words (and at the end)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, V, size=n)
    ids[rng.random(n) < 0.15] = EOS_ID
    ids[-1] = EOS_ID
    return ids.astype(np.int64)


def make(objective="softmax", context=8, **model):
    spec = complete_spec(model_spec("transformer", embed_dim=16, layers=2, heads=2, dropout=0.0, **model),
                         {"bptt": context})
    options = {"cutoffs": [8, 20]} if objective == "adaptive" else {}
    obj = make_objective(objective, counts=COUNTS, **options)
    torch.manual_seed(0)
    m = build_model(spec, V, sparse_output=obj.sparse_output, counts=COUNTS)
    obj.bind(m)
    obj.prepare(m)
    return m.eval(), obj


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_changing_a_later_token_never_changes_an_earlier_logprob(positions):
    m, obj = make(positions=positions, adaptive_input=True, input_cutoffs=[8, 20])
    ids = stream(60, 1)
    for independent in (False, True):
        base = stream_logprobs(m, obj, ids, independent=independent, batch_size=5)
        for p in (7, 23, 41, 59):
            changed = ids.copy()
            changed[p] = (changed[p] % (V - 1)) + 1 if changed[p] else 3  # another word (never </s> -> the same)
            got = stream_logprobs(m, obj, changed, independent=independent, batch_size=5)
            np.testing.assert_array_equal(got[:p], base[:p])
            assert not np.array_equal(got[p:], base[p:])  # the change is seen from p on


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_probabilities_sum_to_one_under_every_objective(name):
    m, obj = make(name, adaptive_input=name != "softmax", input_cutoffs=[8, 20])
    lp = batch_log_probs(m, obj, stream(30, 2))
    assert lp.shape == (30, V)
    np.testing.assert_allclose(lp.double().exp().sum(1).numpy(), 1.0, atol=1e-5)


def test_sliding_window_with_stride_equal_to_the_window_is_block_evaluation():
    m, obj = make(context=8)
    ids = stream(45, 3)
    got = stream_logprobs(m, obj, ids, stride=8, batch_size=3)
    x = np.concatenate([[EOS_ID], ids[:-1]])
    want = []
    with torch.no_grad():
        for s in range(0, len(ids), 8):  # consecutive blocks, each read on its own
            h, _ = m(torch.from_numpy(x[s : s + 8])[None])
            want.append(torch.log_softmax(m.score_all(h[0]), -1).gather(1, torch.from_numpy(ids[s : s + 8])[:, None]))
    np.testing.assert_allclose(got, torch.cat(want).squeeze(1).double().numpy(), rtol=1e-5, atol=1e-6)


def test_a_sliding_window_gives_every_token_at_least_window_minus_stride_words():
    for n, w, s in ((1, 8, 4), (8, 8, 3), (45, 8, 3), (45, 8, 8), (100, 10, 1)):
        spans = window_spans(n, w, s)
        assert [p for _, f, e in spans for p in range(f, e)] == list(range(n))  # each position predicted once
        for a, f, e in spans:
            assert e - a <= w and (a == 0 or f - a >= w - s)
    m, obj = make(context=8)
    ids = stream(40, 4)
    got = stream_logprobs(m, obj, ids, stride=1)
    x = np.concatenate([[EOS_ID], ids[:-1]])
    with torch.no_grad():  # stride 1: position p read from exactly the 8 inputs ending at p
        h, _ = m(torch.from_numpy(x[30 - 7 : 31])[None])
        want = torch.log_softmax(m.score_all(h[0, -1:]), -1)[0, ids[30]]
    assert got[30] == pytest.approx(float(want), abs=1e-5)


def test_independent_sentences_are_read_each_on_its_own():
    m, obj = make(context=6)
    ids = stream(50, 5)
    both = stream_logprobs(m, obj, ids, independent=True, batch_size=4)
    ends = np.flatnonzero(ids == EOS_ID)
    s = int(ends[2]) + 1
    e = int(ends[3]) + 1
    alone = stream_logprobs(m, obj, ids[s:e], independent=True)
    np.testing.assert_allclose(both[s:e], alone, rtol=1e-5, atol=1e-6)


def test_the_key_value_cache_gives_the_distribution_of_a_full_pass():
    """Within the window from the cache, past it afresh: either way the distribution that scoring gives the next
    word (past the window it read the last 8 inputs, where scoring reads the strided window: 0.2 nats apart)."""
    m, obj = make(context=8)
    lm = NeuralLM(m, obj, vocab=[str(i) for i in range(V)])  # only its length is read
    hist = [int(w) for w in stream(40, 6) if w != EOS_ID]
    assert len(hist) > 3 * 8
    for k in range(len(hist)):  # one word at a time, as generation asks: the cache is used up to the window
        got = lm.next_logprobs(hist[:k])
        want = LanguageModel.next_logprobs(lm, hist[:k])  # every word scored as a sentence, without the cache
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_historys_context_is_read_from_one_window_whatever_its_length():
    """A decoder's ``advance`` over a long hypothesis: the Transformer's context after a history is computed from the
    one window that scoring reads for the next word (every window of the history was read: cost grew with it), and
    equals the context that reading the whole sentence gives."""
    from sampledlm.neural.base import NeuralScorer

    m, _ = make(context=8)
    histories = [np.zeros(0, dtype=np.int64)] + [np.asarray([int(w) for w in stream(n, n) if w != EOS_ID],
                                                            dtype=np.int64) for n in (5, 9, 30, 90)]
    widths, forward = [], m.forward

    def counted(x, *args, **kwargs):
        widths.append(tuple(x.shape))
        return forward(x, *args, **kwargs)

    with torch.no_grad():
        whole = NeuralScorer.history_contexts(m, histories)
        m.forward = counted
        one_window = m.history_contexts(histories)
    np.testing.assert_allclose(one_window.numpy(), whole.numpy(), atol=1e-5)
    assert len(widths) == 1 and widths[0][0] == len(histories) and widths[0][1] <= 8  # one window (<= 8) each


def test_tied_adaptive_input_shares_its_bands_with_the_adaptive_softmax():
    m, obj = make("adaptive", adaptive_input=True, input_cutoffs=[8, 20])
    shared = {id(p) for p in m.parameters()} & {id(p) for p in obj.parameters()}
    assert len(shared) == 4  # two bands: table and projection each
    assert obj.tail[0][1].weight is m.embed.tables[0] and obj.tail[0][0].weight is m.embed.projs[0]
    opts = TrainOptions(optimizer="adam")
    params = [p for o in make_optimizers(m, obj, opts) for g in o.param_groups for p in g["params"]]
    assert len(params) == len({id(p) for p in params})  # each weight updated once
    untied, obj2 = make("adaptive", adaptive_input=True, input_cutoffs=[8, 20], tie=False)
    assert not {id(p) for p in untied.parameters()} & {id(p) for p in obj2.parameters()}
    with pytest.raises(UserError, match="same bands"):
        make("adaptive", adaptive_input=True, input_cutoffs=[10, 20])
    with pytest.raises(UserError, match="div-value"):
        make("adaptive", adaptive_input=True, input_cutoffs=[8, 20], input_factor=2.0)


def test_adaptive_input_bands_have_the_stated_widths():
    m, _ = make(adaptive_input=True, input_cutoffs=[8, 20], tie=False)
    assert m.embed.head.shape == (8, 16)
    assert [tuple(t.shape) for t in m.embed.tables] == [(12, 4), (20, 1)]
    assert [tuple(p.shape) for p in m.embed.projs] == [(4, 16), (1, 16)]
    e = m.embed(torch.arange(V + 1)[None])
    assert e.shape == (1, V + 1, 16)
    rank0 = int(np.argmax(COUNTS))  # the most frequent word reads the head row of rank 0
    assert torch.equal(e[0, rank0], m.embed.head[0].detach())


def test_adaptive_input_without_branches_gives_the_same_vectors():
    """``every_band`` (what an exported graph runs) against the band-by-band lookup, tied head and own head."""
    for tie in (True, False):
        m, _ = make("adaptive" if tie else "softmax", adaptive_input=True, input_cutoffs=[8, 20], tie=tie)
        ids = torch.tensor([[V, 0, 5, 9, 17, 25, V - 1], [3, 3, V, 12, 29, 8, 1]])  # every band and <s>
        assert torch.equal(m.embed.every_band(ids), m.embed(ids))


def write_corpus(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]
    for name, n in (("train.txt", 120), ("valid.txt", 20)):
        lines = [" ".join(rng.choice(words, size=rng.integers(3, 12), p=np.arange(30, 0, -1) / 465)) for _ in range(n)]
        (tmp_path / name).write_text("\n".join(lines) + "\n")


def transformer_config(tmp_path, **model):
    vocab = build_vocab(str(tmp_path / "train.txt"))
    train = dataclasses.asdict(TrainOptions(optimizer="adam", lr=0.01, batch_size=8, bptt=10, epochs=2, clip=1.0))
    spec = complete_spec(model_spec("transformer", embed_dim=8, layers=1, heads=2, adaptive_input=True,
                                    input_cutoffs=[5, 15], **model), train)
    data = {"train": str(tmp_path / "train.txt"), "valid": str(tmp_path / "valid.txt"),
            "text_options": TextOptions().to_dict()}
    return runs.make_config(spec, "adaptive", {"cutoffs": [5, 15]}, train, data, vocab), vocab


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_a_checkpoint_resumes_to_identical_weights(tmp_path, optimizer):
    write_corpus(tmp_path)
    config, vocab = transformer_config(tmp_path)
    config["train"] = dict(config["train"], optimizer=optimizer, weight_decay=0.1 if optimizer == "adamw" else 0.0)
    b = _interrupted_and_resumed_equals_uninterrupted(tmp_path, config, vocab)
    assert b[1].tail[0][1].weight is b[0].embed.tables[0]  # still tied after loading


def test_a_sampled_gru_under_adamw_resumes_to_identical_weights_its_sparse_tables_decay_pending(tmp_path, monkeypatch):
    """NCE's output rows and the embedding are row-sparse tables; their deferred decay (every 2 steps here) is
    optimizer state, so a run stopped between two applications resumes to the same numbers."""
    from sampledlm.neural import row_adam

    monkeypatch.setattr(row_adam, "DECAY_CHUNK", 64)
    write_corpus(tmp_path)
    vocab = build_vocab(str(tmp_path / "train.txt"))
    train = dataclasses.asdict(TrainOptions(optimizer="adamw", weight_decay=0.1, lr=0.01, batch_size=8, bptt=10,
                                            epochs=2, clip=1.0))
    data = {"train": str(tmp_path / "train.txt"), "valid": str(tmp_path / "valid.txt"),
            "text_options": TextOptions().to_dict()}
    config = runs.make_config(complete_spec(model_spec("gru", embed_dim=8, hidden=8), train), "nce", {"samples": 5},
                              train, data, vocab)
    _interrupted_and_resumed_equals_uninterrupted(tmp_path, config, vocab)


def _interrupted_and_resumed_equals_uninterrupted(tmp_path, config: dict, vocab):
    """Train ``config`` whole (run a) and stopped in epoch 2 then resumed (run b); both end with the same weights
    and validation figures. Returns run b loaded."""
    new_run(str(tmp_path / "a"), config, vocab).train()
    t = new_run(str(tmp_path / "b"), config, vocab)
    t.stop_when = lambda st, n=t.data.num_batches() + 1: st.step >= n  # in epoch 2, a decay pending
    with pytest.raises(TrainingInterrupted):
        t.train()
    resume_run(str(tmp_path / "b")).train()
    a, b = runs.load_run(str(tmp_path / "a")), runs.load_run(str(tmp_path / "b"))
    for x, y in ((a[0], b[0]), (a[1], b[1])):
        for k, v in x.state_dict().items():
            assert torch.equal(v, y.state_dict()[k]), k
    ma = [json.loads(line)["valid_ppl"] for line in open(tmp_path / "a" / "metrics.jsonl")]
    assert ma == [json.loads(line)["valid_ppl"] for line in open(tmp_path / "b" / "metrics.jsonl")]
    return b


def test_recurrent_models_take_adaptive_input(tmp_path):
    spec = model_spec("gru", embed_dim=16, hidden=16, adaptive_input=True, input_cutoffs=[8, 20])
    obj = make_objective("adaptive", counts=COUNTS, cutoffs=[8, 20])
    m = build_model(spec, V, sparse_output=True, counts=COUNTS)
    obj.bind(m)
    assert obj.tail[1][1].weight is m.embed.tables[1]
    lp = batch_log_probs(m, obj, stream(20, 7))
    np.testing.assert_allclose(lp.double().exp().sum(1).numpy(), 1.0, atol=1e-5)


def test_the_window_and_stride_are_checked():
    with pytest.raises(UserError, match="multiple"):
        build_model(complete_spec(model_spec("transformer", embed_dim=10, heads=4), {"bptt": 8}), V)
    with pytest.raises(UserError, match="stride"):
        build_model(complete_spec(model_spec("transformer", embed_dim=8, heads=2, stride=9), {"bptt": 8}), V)
    m, obj = make(context=8)
    with pytest.raises(UserError, match="--stride 9"):
        stream_logprobs(m, obj, stream(20), stride=9)


def test_adamw_decays_the_weight_matrices_and_nothing_else():
    """One AdamW step with a zero gradient: Adam's update is 0, so a matrix moves by exactly ``-lr wd w`` and a
    bias or LayerNorm gain not at all."""
    m, obj = make()
    (opt,) = make_optimizers(m, obj, TrainOptions(optimizer="adamw", lr=0.1, weight_decay=0.5))
    before = {n: p.detach().clone() for n, p in m.named_parameters()}
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in m.named_parameters():
        expect = before[n] * (1 - 0.1 * 0.5) if p.dim() >= 2 and not n.endswith("bias") else before[n]
        torch.testing.assert_close(p.detach(), expect, msg=n)
    assert any(p.dim() < 2 for p in m.parameters()) and any(p.dim() >= 2 for p in m.parameters())
    assert any(p.dim() == 2 and n.endswith("bias") for n, p in m.named_parameters())  # the output's [V, 1] column

