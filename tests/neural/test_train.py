"""The trainer: exact resume, atomic checkpoints, learning-rate schedule, RNN state handling, sparse gradients."""

import json
import math
import os

import numpy as np
import pytest
import torch
from helpers import config_for

from sampledlm.neural import rundir as runs
from sampledlm.errors import UserError
from sampledlm.objectives.base import OutputObjective
from sampledlm.data.batches import bptt_rows
from sampledlm.neural.rnn import RecurrentData
from sampledlm.neural.trainer import (Trainer, TrainingInterrupted, TrainOptions, clip_gradients, new_run,
                             resume_run)


def final_numbers(run_dir):
    model, objective, vocab, config = runs.load_run(str(run_dir))
    metrics = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    for m in metrics:  # timings differ between runs, numbers must not
        m.pop("tokens_per_s"), m.pop("wall_s"), m.pop("cpu_s")
    return {k: v.clone() for k, v in model.state_dict().items()}, metrics


@pytest.mark.parametrize("model,train", [("ffnn", {"momentum": 0.5, "weight_decay": 1e-4}),
                                         ("gru", {"optimizer": "adam", "lr": 0.01, "clip": 1.0, "epochs": 2, "bf16": True})])
def test_resume_after_interrupt_gives_the_same_numbers(words_corpus, model, train):
    config, vocab = config_for(words_corpus, model, **train)
    new_run(str(words_corpus / "a"), config, vocab).train()
    want_w, want_m = final_numbers(words_corpus / "a")

    t = new_run(str(words_corpus / "b"), config, vocab)
    steps_per_epoch = t.data.num_batches()
    t.stop_when = lambda st, n=steps_per_epoch + 3: st.step >= n  # in the middle of epoch 2
    with pytest.raises(TrainingInterrupted):
        t.train()
    resumed = resume_run(str(words_corpus / "b"))
    assert resumed.state.step == steps_per_epoch + 3 and resumed.state.epoch == 1
    resumed.train()
    got_w, got_m = final_numbers(words_corpus / "b")
    assert got_m == want_m
    for k in want_w:
        assert torch.equal(got_w[k], want_w[k]), k


def test_interrupted_checkpoint_write_keeps_the_previous_one(words_corpus, monkeypatch):
    config, vocab = config_for(words_corpus, epochs=2)
    t = new_run(str(words_corpus / "r"), config, vocab)
    t.opts.epochs = 1
    t.train()
    before = runs.latest_checkpoint(str(words_corpus / "r"))
    snapshot = {f: open(os.path.join(before, f), "rb").read() for f in os.listdir(before)}

    real = runs.save_tensors
    calls = {"n": 0}

    def failing(path, tensors, metadata=None):
        calls["n"] += 1
        if calls["n"] == 3:  # die half-way through the new checkpoint
            raise KeyboardInterrupt
        return real(path, tensors, metadata)

    monkeypatch.setattr(runs, "save_tensors", failing)
    t2 = resume_run(str(words_corpus / "r"))
    t2.state.done, t2.state.finalized = False, False
    t2.opts.epochs = 2
    with pytest.raises(KeyboardInterrupt):
        t2.train()
    monkeypatch.setattr(runs, "save_tensors", real)
    assert runs.latest_checkpoint(str(words_corpus / "r")) == before
    assert {f: open(os.path.join(before, f), "rb").read() for f in os.listdir(before)} == snapshot
    resume_run(str(words_corpus / "r"))  # still loads


def test_lr_halving_and_stop(words_corpus):
    config, vocab = config_for(words_corpus, epochs=30, max_halvings=1, lr=0.5, min_improvement=0.99)
    st = new_run(str(words_corpus / "h"), config, vocab).train()
    # epoch 1 improves on infinity; later epochs never gain 99%: halve once, then stop
    assert [m["lr"] for m in st.metrics] == [0.5, 0.5, 0.25]
    assert st.done and st.finalized and st.halvings == 1
    assert os.path.exists(words_corpus / "h" / "learning_curve.png")


def test_rnn_state_reset_at_epoch_start_and_carried_within(words_corpus):
    config, vocab = config_for(words_corpus, "gru", epochs=1)
    t = new_run(str(words_corpus / "s"), config, vocab)
    seen = []
    real_forward = t.model.forward

    def spy(x, state=None):
        seen.append(None if state is None else state.clone())
        return real_forward(x, state)

    t.model.forward = spy
    t.opts.epochs = 2
    t.valid_perplexity = lambda: 10.0
    t.write_metrics = lambda: None
    t.train()
    n = t.data.num_batches()
    assert seen[0] is None and seen[n] is None  # epoch starts
    assert all(s is not None for s in seen[1:n]) and all(s is not None for s in seen[n + 1:])
    assert not any(s.requires_grad for s in seen[1:n])  # carried detached


def test_recurrent_data_covers_every_prediction():
    ids = np.arange(1, 24, dtype=np.int32)
    d = RecurrentData(ids, batch_size=3, bptt=4)
    got = torch.cat([y[m] for _, y, m, _ in (d.batch(0, b) for b in range(d.num_batches()))])
    assert sorted(got.tolist()) == sorted(ids.tolist())


@pytest.mark.parametrize("n,batch,bptt", [(0, 3, 4), (1, 3, 4), (23, 3, 4), (24, 4, 5), (50, 7, 3), (9, 1, 35)])
def test_recurrent_data_matches_bptt_rows(n, batch, bptt):
    ids = np.random.default_rng(n).integers(1, 1000, size=n).astype(np.int32)
    x, y, mask = bptt_rows(ids, batch)
    d = RecurrentData(ids, batch_size=batch, bptt=bptt)
    parts = [d.batch(0, b) for b in range(d.num_batches())]
    assert torch.equal(torch.cat([p[0] for p in parts], 1), x) and torch.equal(torch.cat([p[1] for p in parts], 1), y)
    assert torch.equal(torch.cat([p[2] for p in parts], 1), mask)
    assert torch.equal(torch.cat([p[3] for p in parts], 1).flatten(), torch.arange(x.numel()))
    assert d.stream.dtype == torch.int32 and d.stream.numel() == n + 2  # the stream once, 4 bytes a token


class SparseToy(OutputObjective):
    """Scores the target against 3 shared candidates with a softmax: exercises sparse output gradients."""

    name = "toy"
    sparse_output = True

    def forward(self, scorer, ctx, targets):
        cand = torch.tensor([0, 1, 2])
        s = torch.cat([scorer.score_targets(ctx, targets)[:, None], scorer.score_shared(ctx, cand)], 1)
        return torch.nn.functional.cross_entropy(s, torch.zeros(len(targets), dtype=torch.long))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_sparse_objective_trains_with_sparse_optimisers(words_corpus, optimizer):
    from sampledlm.data.corpus import load_ids
    from sampledlm.neural.registry import build_model

    config, vocab = config_for(words_corpus)
    obj = SparseToy()
    model = build_model(config["model"], len(vocab), sparse_output=True)
    opts = TrainOptions(optimizer=optimizer, lr=0.05, batch_size=4, epochs=1, clip=1.0, weight_decay=1e-3)
    ids = load_ids(str(words_corpus / "train.txt"), vocab, cache=False)
    os.makedirs(words_corpus / "sp")
    t = Trainer(str(words_corpus / "sp"), model, obj, ids, ids[:50], opts)
    assert [type(o).__name__ for o in t.optimizers] == (["SGD"] if optimizer == "sgd" else ["Adam", "RowAdam"])
    before = model.output.weight.detach().clone()
    batch = t.data.batch(0, 0)
    hist, targets, _ = batch
    t.step(batch)
    assert model.output.weight.grad.is_sparse
    touched = set(targets.tolist()) | {0, 1, 2}
    changed = set(torch.nonzero((model.output.weight.detach() != before).any(1)).flatten().tolist())
    assert changed and changed <= touched


def test_clip_gradients_dense_and_sparse():
    a = torch.nn.Parameter(torch.zeros(3))
    b = torch.nn.Parameter(torch.zeros(4, 2))
    a.grad = torch.tensor([3.0, 0.0, 0.0])
    b.grad = torch.sparse_coo_tensor([[1]], torch.tensor([[4.0, 0.0]]), (4, 2), check_invariants=True)
    assert clip_gradients([a, b], 1.0) == pytest.approx(5.0)
    total = a.grad.norm() ** 2 + b.grad.to_dense().norm() ** 2
    assert float(total.sqrt()) == pytest.approx(1.0, rel=1e-4)


def test_new_run_refuses_an_existing_run(words_corpus):
    config, vocab = config_for(words_corpus, epochs=1)
    new_run(str(words_corpus / "x"), config, vocab).train()
    with pytest.raises(UserError, match="--resume"):
        new_run(str(words_corpus / "x"), config, vocab)


@pytest.mark.parametrize("how", ["lr", "nan", "huge"])
def test_diverging_training_stops_with_a_clear_error(words_corpus, monkeypatch, how):
    """lr=1e30 (nan on some CPUs, huge finite losses on AVX-512 ones) and the two injected for certain."""
    from sampledlm.objectives.softmax import SoftmaxObjective

    config, vocab = config_for(words_corpus, lr=1e30 if how == "lr" else 0.5, epochs=1)
    if how != "lr":
        real = SoftmaxObjective.forward
        bad = float("nan") if how == "nan" else 1.6e30
        monkeypatch.setattr(SoftmaxObjective, "forward", lambda self, *a, **k: real(self, *a, **k) + bad)
    with pytest.raises(UserError, match="diverged"):
        new_run(str(words_corpus / "d"), config, vocab).train()


def test_resume_with_fewer_epochs_stops_and_finalizes(words_corpus):
    config, vocab = config_for(words_corpus, epochs=5)
    t = new_run(str(words_corpus / "f"), config, vocab)
    t.stop_when = lambda st, n=t.data.num_batches(): st.step >= n  # the last step of epoch 1
    with pytest.raises(TrainingInterrupted):
        t.train()
    r = resume_run(str(words_corpus / "f"), {"epochs": 1})  # finishes epoch 1 (its validation), then stops
    st = r.train()
    assert st.finalized and len(st.metrics) == 1
    assert runs.load_tensors(str(words_corpus / "f" / "model.safetensors"))[1]["finalized"] == "true"


@pytest.mark.parametrize("objective,options", [("neg", {"samples": 5}), ("binary", {"neg_rate": 0.3})])
def test_resume_is_exact_with_sampled_objectives(words_corpus, objective, options):
    """Sparse output gradients, SparseAdam and the objectives' own randomness survive an interrupt."""
    config, vocab = config_for(words_corpus, optimizer="adam", lr=0.01, epochs=2)
    config["objective"] = {"name": objective, "options": options}
    new_run(str(words_corpus / "a"), config, vocab).train()
    t = new_run(str(words_corpus / "b"), config, vocab)
    t.stop_when = lambda st, n=t.data.num_batches() + 2: st.step >= n
    with pytest.raises(TrainingInterrupted):
        t.train()
    resume_run(str(words_corpus / "b")).train()
    (wa, ma), (wb, mb) = final_numbers(words_corpus / "a"), final_numbers(words_corpus / "b")
    assert ma == mb and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("model", ["ffnn", "gru"])
def test_train_eval_records_exact_training_perplexity(words_corpus, model):
    from sampledlm.data.corpus import load_ids
    from sampledlm.neural.lm import perplexity

    config, vocab = config_for(words_corpus, model, epochs=2, train_eval=50)
    st = new_run(str(words_corpus / "te"), config, vocab).train()
    assert all(m["train_ppl"] > 1 for m in st.metrics) and len(st.metrics) == 2
    # the figure is the exact perplexity of the training prefix under the weights at the epoch's end
    m, obj, _, _ = runs.load_run(str(words_corpus / "te"))
    ids = load_ids(str(words_corpus / "train.txt"), vocab, cache=False)
    best = min(st.metrics, key=lambda r: r["valid_ppl"])
    assert best["train_ppl"] == pytest.approx(perplexity(m, obj, ids[:50]), rel=1e-5)


def test_data_fraction_fixed_and_variable_shares():
    from sampledlm.neural.ffnn import FeedForwardData

    ids = np.arange(1, 1001, dtype=np.int32) % 50
    full = FeedForwardData(ids, 3, 50, 10, seed=3)
    assert sorted(full.order_of(0)) == list(range(1000))
    fixed = FeedForwardData(ids, 3, 50, 10, seed=3, fraction=0.1, fixed=True)
    var = FeedForwardData(ids, 3, 50, 10, seed=3, fraction=0.1)
    assert fixed.num_batches() == var.num_batches() == 10
    f0, f1 = fixed.order_of(0), fixed.order_of(1)
    assert len(f0) == 100 and set(f0) == set(f1) and list(f0) != list(f1)  # same share, new order
    v0, v1 = var.order_of(0), var.order_of(1)
    assert len(set(v0)) == 100 and len(set(v0) & set(v1)) < 50  # a fresh share each epoch


def test_data_fraction_is_refused_for_recurrent_models(words_corpus):
    config, vocab = config_for(words_corpus, "gru", data_fraction=0.5)
    with pytest.raises(UserError, match="feed-forward"):
        new_run(str(words_corpus / "df"), config, vocab)
    assert not (words_corpus / "df").exists()


@pytest.mark.parametrize("clock", ["wall", "cpu"])
def test_max_time_stops_at_the_step_that_passes_it(words_corpus, clock):
    """--max-time: a budget spent by the first step stops the run there, within its first epoch (the partial epoch
    validated, recorded with its share, finalised); every epoch records its wall and CPU seconds."""
    config, vocab = config_for(words_corpus, "ffnn", epochs=5, max_time=1e-6, time_clock=clock)
    t = new_run(str(words_corpus / clock), config, vocab)
    assert t.data.num_batches() > 1
    state = t.train()
    assert state.step == 1 and len(state.metrics) == 1 and state.finalized
    m = state.metrics[0]
    assert m["wall_s"] > 0 and m["cpu_s"] > 0 and m["epoch_fraction"] == 1 / t.data.num_batches()
    config, vocab = config_for(words_corpus, "ffnn", epochs=2, max_time=1e6, time_clock=clock)
    assert len(new_run(str(words_corpus / f"{clock}-long"), config, vocab).train().metrics) == 2


@pytest.mark.parametrize("model", ["gru", "ffnn"])
def test_max_steps_stops_within_the_epoch_and_ends_the_schedule_there(words_corpus, model):
    """--max-steps: the run stops after that many steps, within its first epoch; the partial epoch is validated,
    recorded with its share and finalised; the cosine rate reaches 0 at that step; an interrupted run resumed goes
    on to the same step and the same numbers."""
    config, vocab = config_for(words_corpus, model, epochs=3, max_steps=3, lr_schedule="cosine")
    t = new_run(str(words_corpus / f"{model}-steps"), config, vocab)
    assert t.data.num_batches() > 3
    state = t.train()
    assert state.step == 3 and state.finalized and len(state.metrics) == 1
    m = state.metrics[0]
    assert m["step"] == 3 and 0 < m["epoch_fraction"] < 1
    base = config["train"]["lr"]  # the last step's rate is that of step 3 of 3 on the cosine (not of 3 epochs)
    assert m["lr"] == pytest.approx(base * 0.5 * (1 + math.cos(math.pi * 2 / 3)))
    assert os.path.exists(words_corpus / f"{model}-steps" / "model.safetensors")
    want_w, _ = final_numbers(words_corpus / f"{model}-steps")

    t = new_run(str(words_corpus / f"{model}-steps-b"), config, vocab)
    t.stop_when = lambda st: st.step >= 2
    with pytest.raises(TrainingInterrupted):
        t.train()
    state = resume_run(str(words_corpus / f"{model}-steps-b")).train()
    assert state.step == 3 and state.finalized
    got_w, _ = final_numbers(words_corpus / f"{model}-steps-b")
    for k in want_w:
        torch.testing.assert_close(got_w[k], want_w[k])


def test_validation_sums_in_the_precision_asked_for(words_corpus, monkeypatch):
    """--valid-sum-precision bf16: each epoch's validation runs under eval's --sum-precision bf16 (an exact
    validation over V = 485k cost 13 CPU-minutes a pass in fp32); the training steps do not."""
    from sampledlm.neural import loop
    from sampledlm.objectives.normaliser import current_precision

    seen = []
    real = loop.Trainer.valid_perplexity
    monkeypatch.setattr(loop.Trainer, "valid_perplexity", lambda self: seen.append(current_precision()) or real(self))
    steps = []
    real_step = loop.Trainer.step
    monkeypatch.setattr(loop.Trainer, "step", lambda self, b: steps.append(current_precision()) or real_step(self, b))
    config, vocab = config_for(words_corpus, "gru", epochs=2, valid_sum_precision="bf16")
    state = new_run(str(words_corpus / "bf16-valid"), config, vocab).train()
    assert seen == ["bf16", "bf16"] and set(steps) == {"fp32"}
    assert all(math.isfinite(m["valid_ppl"]) for m in state.metrics)


def test_cosine_budget_takes_the_larger_of_the_steps_and_the_time_budgets_shares():
    from sampledlm.neural.optim import scheduled_lr

    assert scheduled_lr(1.0, "cosine-budget", 5, 10, 0.2) == pytest.approx(scheduled_lr(1.0, "cosine", 5, 10))
    assert scheduled_lr(1.0, "cosine-budget", 1, 10, 0.5) == pytest.approx(0.5)
    assert scheduled_lr(1.0, "cosine-budget", 1, 10, 1.7) == 0.0  # the budget passed: 0, not up the cosine again
    assert scheduled_lr(1.0, "plateau", 9, 10, 0.9) == 1.0
    with pytest.raises(UserError, match="max-time"):
        TrainOptions(lr_schedule="cosine-budget").check()  # nothing but the epochs to decay over
    TrainOptions(lr_schedule="cosine-budget", max_time=60.0).check()


def test_warmup_raises_the_rate_linearly_then_hands_over_to_the_schedule():
    from sampledlm.neural.optim import scheduled_lr

    assert [scheduled_lr(2.0, "cosine", s, 14, warmup=4) for s in range(4)] == pytest.approx([0.5, 1.0, 1.5, 2.0])
    # the cosine spans the 10 steps after the warm-up: its top at step 4, its middle at step 9
    assert scheduled_lr(2.0, "cosine", 4, 14, warmup=4) == pytest.approx(2.0)
    assert scheduled_lr(2.0, "cosine", 9, 14, warmup=4) == pytest.approx(1.0)
    assert [scheduled_lr(2.0, "plateau", s, 14, warmup=4) for s in (1, 4, 13)] == pytest.approx([1.0, 2.0, 2.0])
    assert scheduled_lr(2.0, "cosine", 5, 10) == pytest.approx(1.0)  # none: the schedule as before


def test_a_warmup_run_sets_each_steps_rate_and_resumes_on_the_same_ones(words_corpus, monkeypatch):
    """--warmup 3 under the plateau schedule (which otherwise never sets a rate within an epoch): the first three
    steps train at lr/3, 2 lr/3, lr; a run interrupted within the warm-up and resumed trains the same steps at the same
    rates and ends with the same weights."""
    from sampledlm.neural import loop

    used = []
    real_set_lr = loop.set_lr
    monkeypatch.setattr(loop, "set_lr", lambda optimizers, lr: used.append(lr) or real_set_lr(optimizers, lr))
    config, vocab = config_for(words_corpus, "ffnn", epochs=1, max_steps=5, warmup=3)
    base = config["train"]["lr"]
    new_run(str(words_corpus / "warm"), config, vocab).train()
    assert used[:5] == pytest.approx([base / 3, 2 * base / 3, base, base, base])
    want_w, _ = final_numbers(words_corpus / "warm")
    used.clear()
    t = new_run(str(words_corpus / "warm-b"), config, vocab)
    t.stop_when = lambda st: st.step >= 2
    with pytest.raises(TrainingInterrupted):
        t.train()
    resume_run(str(words_corpus / "warm-b")).train()
    assert used[:5] == pytest.approx([base / 3, 2 * base / 3, base, base, base])
    got_w, _ = final_numbers(words_corpus / "warm-b")
    for k in want_w:
        torch.testing.assert_close(got_w[k], want_w[k])


def test_no_plateau_halving_while_the_warmup_raises_the_rate(words_corpus):
    """Validations within the warm-up (--valid-every) see a rate far below --lr and gain little: the plateau rule
    waits for the warm-up's end, where it would otherwise halve the rate or stop the run before it had trained."""
    config, vocab = config_for(words_corpus, "ffnn", epochs=1, max_steps=12, warmup=8, valid_every=1,
                               min_improvement=0.9, max_halvings=0)  # every point stalls: the first to count ends it
    state = new_run(str(words_corpus / "warm-plateau"), config, vocab).train()
    assert state.step == 8 and len(state.metrics) == 8  # the first point after the warm-up's 8 steps ends it


def test_a_warmup_as_long_as_the_run_or_under_a_time_budget_is_refused(words_corpus):
    from sampledlm.neural.train_options import check_warmup_fits

    with pytest.raises(UserError, match="--warmup 1000 is not shorter than the run's 23 planned steps"):
        check_warmup_fits(TrainOptions(warmup=1000), 23)
    check_warmup_fits(TrainOptions(warmup=22), 23)
    with pytest.raises(UserError, match="does not combine with --lr-schedule cosine-budget"):
        TrainOptions(warmup=5, lr_schedule="cosine-budget", max_time=60.0).check()
    config, vocab = config_for(words_corpus, "ffnn", epochs=1, max_steps=4, warmup=4)
    with pytest.raises(UserError, match="not shorter than the run's 4 planned steps"):
        new_run(str(words_corpus / "warm-long"), config, vocab).train()


def test_cosine_budget_reaches_zero_where_the_time_budget_stops_the_run(words_corpus, monkeypatch):
    """--lr-schedule cosine-budget --max-time 4 --time-clock cpu over 50 epochs: each step's rate is the cosine at
    the budget's share spent (far above the steps' share), so the run the budget stops ends near 0 where a cosine over
    its epochs would still be near its peak. A fake CPU clock (one second a step) makes it exact on any machine."""
    import time as real_time

    from sampledlm.neural import loop

    class OneSecondAStep:
        t = 0.0

        def process_time(self):
            self.t += 1.0
            return self.t

        def __getattr__(self, name):
            return getattr(real_time, name)

    used = []

    def recording(optimizers, lr):
        used.append(lr)
        return real_set_lr(optimizers, lr)

    real_set_lr = loop.set_lr
    monkeypatch.setattr(loop, "time", OneSecondAStep())
    monkeypatch.setattr(loop, "set_lr", recording)
    config, vocab = config_for(words_corpus, "ffnn", epochs=50, max_time=4.0, time_clock="cpu",
                               lr_schedule="cosine-budget")
    t = new_run(str(words_corpus / "budget-cosine"), config, vocab)
    assert t.data.num_batches() > 4
    state = t.train()
    base = config["train"]["lr"]
    want = [base * 0.5 * (1 + math.cos(math.pi * k / 4)) for k in range(4)]  # before step k: k CPU seconds spent
    assert state.step == 4 and used == pytest.approx(want)
    assert state.metrics[-1]["lr"] == pytest.approx(want[-1])  # the rate the last step trained at
    from sampledlm.neural.optim import scheduled_lr

    assert want[-1] < 0.15 * base < 0.99 * base < scheduled_lr(base, "cosine", 3, 50 * t.data.num_batches())
