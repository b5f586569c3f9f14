"""The training loop for neural scorers: batches, optimiser, learning-rate halving, checkpoints, exact resume.

One epoch visits every prediction of the training stream once:

* feed-forward models: mini-batches of ``(histories [B, n-1], targets [B])`` in a random order
  that depends only on ``(seed, epoch)`` (Schwenk's *bunch mode*);
* recurrent models: the stream cut into ``B`` rows read in BPTT segments ``[B, T]``; the
  output ``[B, T, h]`` is flattened to ``[N, h]`` keeping ``mask == True`` positions before the
  objective sees it. The recurrent state is carried (detached) from one segment to the next and
  reset to zero at the start of every epoch and of every evaluation.

Each step: ``loss = objective(model, hidden, targets)`` (mean over the N predictions), backward,
optional gradient clipping to a total norm (with ``bf16`` the forward pass runs under
bfloat16 autocast, about twice as fast on CPUs with AVX512-BF16; master weights, updates and every
evaluation stay float32), optimiser step (SGD -- the papers' choice -- or Adam;
for a sampled objective the output layer's parameters get sparse gradients and SGD without
weight decay / SparseAdam). After each epoch the exact validation perplexity is measured; when it
does not improve by the relative ``min_improvement`` the learning rate is halved (seed 000
§3.1), and training stops when that happens after ``max_halvings`` halvings, or after ``epochs``.
The weights with the best validation perplexity are kept as ``model.safetensors``; at the end
they are reloaded, ``objective.finalize(model)`` runs once, and the final model is saved.

Exact resume: before every epoch torch, numpy and Python's ``random`` are re-seeded from
``(seed, epoch)`` and ``objective.start_epoch(epoch)`` is called; a checkpoint stores the model,
objective, optimiser and RNG states, the position in the epoch (batch index, recurrent state)
and the schedule, so ``--resume`` continues with the very numbers of an uninterrupted run.
Checkpoints are written at the end of every epoch, every ``checkpoint_every`` steps, and on
SIGINT/SIGTERM (then training stops; the previous checkpoint stays intact until the new one is
complete, see :mod:`sampledlm.neural.rundir`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from . import rundir as runs
from ..data.batches import bptt_rows, ngram_histories, sentence_positions
from ..errors import UserError
from .evaluate import perplexity
from .rnn import detach_state
from ..progress import bar, enabled as progress_enabled
from ..data.textio import atomic_write


LOG_SECONDS = 60.0  # off a terminal (no progress bar), a progress line at most this often


class TrainingInterrupted(KeyboardInterrupt):
    """Raised after the checkpoint written on an interrupt is complete."""


@dataclass
class TrainOptions:
    optimizer: str = "sgd"  # "sgd" | "adam"
    lr: float = 0.1
    momentum: float = 0.0
    weight_decay: float = 0.0
    clip: float = 0.0  # max total gradient norm; 0 = no clipping
    batch_size: int = 128
    bptt: int = 35
    epochs: int = 20
    max_halvings: int = 4
    min_improvement: float = 0.0  # relative improvement of valid ppl that counts as "improving"
    seed: int = 1
    checkpoint_every: int = 0  # steps; 0 = only at epoch ends (and on interrupt)
    eval_batch: int | None = None
    bf16: bool = False  # autocast the training forward pass to bfloat16 (weights, updates and evaluation stay float32)
    train_eval: int = 0  # > 0: after each epoch also the exact perplexity of the first N training tokens
    data_fraction: float = 1.0  # ffnn: train each epoch on this share of the training positions (seed 000 §3.2)
    data_subset: str = "variable"  # "fixed": the same random share every epoch; "variable": a fresh one each epoch

    @classmethod
    def from_dict(cls, d: dict, path: str = "config.json") -> "TrainOptions":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise UserError(f"{path}: unknown training options {unknown}")
        return cls(**d)

    def check(self) -> None:
        if self.optimizer not in ("sgd", "adam"):
            raise UserError(f"unknown optimizer {self.optimizer!r}: use sgd or adam")
        if self.lr <= 0 or self.batch_size < 1 or self.bptt < 1 or self.epochs < 1 or self.max_halvings < 0:
            raise UserError("--lr, --batch-size, --bptt and --epochs must be positive, --max-halvings >= 0")
        if not 0.0 < self.data_fraction <= 1.0 or self.data_subset not in ("fixed", "variable"):
            raise UserError("--data-fraction must lie in (0, 1] and --data-subset be fixed or variable")


@dataclass
class TrainState:
    """Everything besides tensors that a checkpoint holds."""

    epoch: int = 0  # current epoch (0-based)
    batch: int = 0  # next batch index within the epoch
    step: int = 0  # optimiser steps so far
    lr: float = 0.0
    best_valid: float = math.inf
    halvings: int = 0
    done: bool = False
    finalized: bool = False
    loss_sum: float = 0.0  # sum over this epoch's steps of loss * predictions
    loss_count: int = 0
    epoch_tokens: int = 0
    epoch_seconds: float = 0.0
    wall_seconds: float = 0.0
    metrics: list = field(default_factory=list)


# --- data ----------------------------------------------------------------------------------
class FeedForwardData:
    """Shuffled n-gram mini-batches; the order of epoch e depends only on (seed, e).

    ``fraction < 1`` trains each epoch on a random share of the positions, the standard model's
    subsampling in seed 000 (tables 4-7): ``fixed=True`` draws the share once (the same positions
    every epoch, in a new order), otherwise a fresh share each epoch.
    """

    def __init__(self, ids: np.ndarray, order: int, bos_id: int, batch_size: int, seed: int,
                 fraction: float = 1.0, fixed: bool = False):
        self.ids = np.asarray(ids)
        self.positions = sentence_positions(self.ids)
        self.order, self.bos_id, self.batch_size, self.seed = order, bos_id, batch_size, seed
        self.size = max(1, round(fraction * len(self.ids))) if fraction < 1.0 else len(self.ids)
        self.fixed = fixed
        self._perm_epoch, self._perm = None, None

    def num_batches(self) -> int:
        return (self.size + self.batch_size - 1) // self.batch_size

    def order_of(self, epoch: int) -> np.ndarray:
        """The positions epoch ``epoch`` visits, in order."""
        n = len(self.ids)
        if self.fixed and self.size < n:  # one share for the whole run, visited in an order that changes per epoch
            share = np.random.default_rng([self.seed, 2**32 - 1]).permutation(n)[: self.size]
            return share[np.random.default_rng([self.seed, epoch]).permutation(self.size)]
        return np.random.default_rng([self.seed, epoch]).permutation(n)[: self.size]

    def batch(self, epoch: int, b: int):
        if self._perm_epoch != epoch:
            self._perm, self._perm_epoch = self.order_of(epoch), epoch
        at = self._perm[b * self.batch_size : (b + 1) * self.batch_size]
        hist = ngram_histories(self.ids, self.positions, self.order, self.bos_id, at)
        return torch.from_numpy(hist), torch.from_numpy(self.ids[at].astype(np.int64))


class RecurrentData:
    """BPTT segments ``(x, y, mask) [B, T]`` of the stream, in order."""

    def __init__(self, ids: np.ndarray, batch_size: int, bptt: int):
        self.x, self.y, self.mask = bptt_rows(ids, batch_size)
        self.bptt = bptt

    def num_batches(self) -> int:
        return (self.x.shape[1] + self.bptt - 1) // self.bptt

    def batch(self, epoch: int, b: int):
        s = slice(b * self.bptt, (b + 1) * self.bptt)
        return self.x[:, s], self.y[:, s], self.mask[:, s]


# --- optimiser -----------------------------------------------------------------------------
def make_optimizers(model, objective, opts: TrainOptions) -> list[torch.optim.Optimizer]:
    """SGD or Adam; parameters with sparse gradients get SGD without weight decay/momentum, or SparseAdam."""
    sparse_ids = {id(p) for p in model.sparse_parameters()}
    params = [p for p in list(model.parameters()) + list(objective.parameters()) if p.requires_grad]
    dense = [p for p in params if id(p) not in sparse_ids]
    sparse = [p for p in params if id(p) in sparse_ids]
    if opts.optimizer == "sgd":
        groups = [{"params": dense, "weight_decay": opts.weight_decay, "momentum": opts.momentum}]
        if sparse:
            groups.append({"params": sparse, "weight_decay": 0.0, "momentum": 0.0})
        return [torch.optim.SGD(groups, lr=opts.lr)]
    optimizers: list[torch.optim.Optimizer] = [torch.optim.Adam(dense, lr=opts.lr, weight_decay=opts.weight_decay)]
    if sparse:
        optimizers.append(torch.optim.SparseAdam(sparse, lr=opts.lr))
    return optimizers


def set_lr(optimizers, lr: float) -> None:
    for opt in optimizers:
        for g in opt.param_groups:
            g["lr"] = lr


def clip_gradients(params, max_norm: float) -> float:
    """Scale all gradients (dense or sparse) so that their total 2-norm is at most ``max_norm``."""
    grads = [p.grad for p in params if p.grad is not None]
    sq = 0.0
    for g in grads:
        v = g.coalesce().values() if g.is_sparse else g
        sq += float(v.pow(2).sum())
    norm = math.sqrt(sq)
    if max_norm > 0 and norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        for p in params:
            if p.grad is not None:
                p.grad = p.grad.coalesce() * scale if p.grad.is_sparse else p.grad.mul_(scale)
    return norm


def seed_everything(seed: int, epoch: int) -> None:
    s = (seed * 1_000_003 + epoch) % (2**31)
    torch.manual_seed(s)
    np.random.seed(s)
    random.seed(s)


# --- interrupts ----------------------------------------------------------------------------
@contextlib.contextmanager
def interrupt_flag():
    """Turn SIGINT/SIGTERM into a flag the loop checks after each step (main thread only)."""
    flag = {"set": False}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum, frame):
        if flag["set"]:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        flag["set"] = True

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield flag
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# --- the trainer ---------------------------------------------------------------------------
class Trainer:
    """Train ``model`` with ``objective`` into ``run_dir`` (see module docstring)."""

    def __init__(self, run_dir: str, model, objective, train_ids: np.ndarray, valid_ids: np.ndarray,
                 opts: TrainOptions, log=None):
        self.run_dir, self.model, self.objective, self.opts = run_dir, model, objective, opts
        self.valid_ids = np.asarray(valid_ids)
        self.train_ids = np.asarray(train_ids)
        self.log = log or (lambda msg: None)
        self.recurrent = getattr(model, "kind", "") == "rnn"
        if self.recurrent:
            if opts.data_fraction < 1.0:
                raise UserError("--data-fraction applies to feed-forward models only")
            self.data = RecurrentData(train_ids, opts.batch_size, opts.bptt)
        else:
            self.data = FeedForwardData(train_ids, model.order, model.num_words, opts.batch_size, opts.seed,
                                        opts.data_fraction, opts.data_subset == "fixed")
        self.optimizers = make_optimizers(model, objective, opts)
        self.params = [p for g in self.optimizers for grp in g.param_groups for p in grp["params"]]
        self.state = TrainState(lr=opts.lr)
        self.rnn_state = None
        self.interrupt_at_step: int | None = None  # tests: simulate Ctrl-C after this many steps

    # --- checkpoints ---
    def save_checkpoint(self) -> None:
        opt_tensors, opt_meta = runs.optimizer_to_files(self.optimizers)
        rng_tensors, rng_meta = runs.rng_to_files()
        if self.rnn_state is not None:
            st = self.rnn_state if isinstance(self.rnn_state, tuple) else (self.rnn_state,)
            for i, s in enumerate(st):
                rng_tensors[f"rnn_state/{i}"] = s
        files = {
            "model.safetensors": self.model.state_dict(),
            "objective.safetensors": self.objective.state_dict(),
            "optimizer.safetensors": opt_tensors,
            "optimizer.json": opt_meta,
            "rng.safetensors": rng_tensors,
            "rng.json": rng_meta,
            "trainer_state.json": dataclasses.asdict(self.state),
        }
        runs.write_checkpoint(self.run_dir, f"ckpt-{self.state.step:09d}", files)

    def load_checkpoint(self, path: str) -> None:
        state = runs.read_json(os.path.join(path, "trainer_state.json"))
        try:
            self.state = TrainState(**state)
        except TypeError as e:
            raise UserError(f"{path}/trainer_state.json: {e}") from None
        # Recreate what the start of the epoch set up, then overwrite with the saved states.
        seed_everything(self.opts.seed, self.state.epoch)
        if not self.state.done:
            self.objective.start_epoch(self.state.epoch)
        for name, module in (("model", self.model), ("objective", self.objective)):
            f = os.path.join(path, f"{name}.safetensors")
            runs.load_state_into(module, runs.load_tensors(f)[0], f)
        f = os.path.join(path, "optimizer.safetensors")
        runs.optimizer_from_files(self.optimizers, runs.load_tensors(f)[0],
                                  runs.read_json(os.path.join(path, "optimizer.json")), f)
        rng_tensors, _ = runs.load_tensors(os.path.join(path, "rng.safetensors"))
        runs.rng_from_files(rng_tensors, runs.read_json(os.path.join(path, "rng.json")))
        st = [rng_tensors[k] for k in sorted(k for k in rng_tensors if k.startswith("rnn_state/"))]
        self.rnn_state = None if not st else (tuple(st) if len(st) > 1 else st[0])
        set_lr(self.optimizers, self.state.lr)

    # --- one step ---
    def step(self, batch) -> tuple[float, int]:
        model, objective = self.model, self.objective
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.opts.bf16):
            if self.recurrent:
                x, y, mask = batch
                hidden, state = model(x, self.rnn_state)
                self.rnn_state = detach_state(state)
                ctx, targets = hidden[mask], y[mask]
            else:
                hist, targets = batch
                ctx = model(hist)
            n = int(targets.shape[0])
            if n == 0:
                return 0.0, 0
            loss = objective(model, ctx, targets)
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):
            return loss_value, n  # nothing applied: no NaN/inf ever reaches the weights; the caller stops
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.opts.clip > 0 and not math.isfinite(clip_gradients(self.params, self.opts.clip)):
            return float("nan"), n  # a non-finite gradient: skip the update, the caller stops
        for opt in self.optimizers:
            opt.step()
        return loss_value, n

    def valid_perplexity(self) -> float:
        eb = self.opts.eval_batch
        return perplexity(self.model, self.objective, self.valid_ids, batch_size=eb)

    # --- the loop ---
    def train(self) -> TrainState:
        st, opts = self.state, self.opts
        nb = self.data.num_batches()
        with interrupt_flag() as flag:
            while not st.done:
                if st.batch == 0:
                    seed_everything(opts.seed, st.epoch)
                    self.objective.start_epoch(st.epoch)
                    self.rnn_state = None  # recurrent state reset at the start of each epoch
                    st.loss_sum, st.loss_count, st.epoch_tokens, st.epoch_seconds = 0.0, 0, 0, 0.0
                self.model.train()
                t_last = last_log = time.perf_counter()
                with bar(total=nb, desc=f"epoch {st.epoch + 1}", unit="batch", initial=st.batch) as pbar:
                    while st.batch < nb:
                        loss, n = self.step(self.data.batch(st.epoch, st.batch))
                        if not math.isfinite(loss):
                            raise UserError(f"training diverged at epoch {st.epoch + 1}, step {st.step + 1} "
                                            f"(loss {loss}); the weights were left as they were and the last "
                                            f"checkpoint in {self.run_dir} is intact; try a smaller --lr or --clip")
                        st.batch += 1
                        st.step += 1
                        st.loss_sum += loss * n
                        st.loss_count += n
                        st.epoch_tokens += n
                        now = time.perf_counter()
                        st.epoch_seconds += now - t_last
                        st.wall_seconds += now - t_last
                        t_last = now
                        pbar.update(1)
                        if not progress_enabled() and now - last_log >= LOG_SECONDS and st.batch < nb:
                            last_log = now
                            self.log(f"epoch {st.epoch + 1}: {100 * st.batch // nb}%  loss "
                                     f"{st.loss_sum / max(st.loss_count, 1):.4f}  "
                                     f"{st.epoch_tokens / max(st.epoch_seconds, 1e-9):.0f} tok/s")
                        pbar.set_postfix(loss=f"{st.loss_sum / max(st.loss_count, 1):.3f}",
                                         tok_s=f"{st.epoch_tokens / max(st.epoch_seconds, 1e-9):.0f}", refresh=False)
                        if flag["set"] or (self.interrupt_at_step is not None and st.step >= self.interrupt_at_step):
                            self.save_checkpoint()
                            raise TrainingInterrupted(f"interrupted at step {st.step}; resume with --resume {self.run_dir}")
                        if opts.checkpoint_every and st.step % opts.checkpoint_every == 0 and st.batch < nb:
                            self.save_checkpoint()
                self.end_epoch()
                t_last = time.perf_counter()
        self.finish()
        return st

    def end_epoch(self) -> None:
        st, opts = self.state, self.opts
        t0 = time.perf_counter()
        valid = self.valid_perplexity()
        train_ppl = None
        if opts.train_eval > 0:  # the exact training likelihood (seed 001 fig. 3), on a prefix to bound its cost
            train_ppl = perplexity(self.model, self.objective, self.train_ids[:opts.train_eval],
                                   batch_size=opts.eval_batch)
        st.wall_seconds += time.perf_counter() - t0
        improved = valid < st.best_valid * (1.0 - opts.min_improvement)
        if valid < st.best_valid:
            st.best_valid = valid
            runs.save_model_files(self.run_dir, self.model, self.objective, finalized=False)
        record = {
            "epoch": st.epoch + 1, "step": st.step, "train_loss": st.loss_sum / max(st.loss_count, 1),
            "valid_ppl": valid, "lr": st.lr, "tokens_per_s": st.epoch_tokens / max(st.epoch_seconds, 1e-9),
            "wall_s": st.wall_seconds,
        }
        if train_ppl is not None:
            record["train_ppl"] = train_ppl
        st.metrics.append(record)
        self.log(f"epoch {st.epoch + 1}: train loss {record['train_loss']:.4f}  valid ppl {valid:.2f}  lr {st.lr:g}  "
                 f"{record['tokens_per_s']:.0f} tok/s")
        if not improved:
            if st.halvings >= opts.max_halvings:
                st.done = True
            else:
                st.halvings += 1
                st.lr /= 2
                set_lr(self.optimizers, st.lr)
        st.epoch += 1
        st.batch = 0
        if st.epoch >= opts.epochs:
            st.done = True
        self.save_checkpoint()
        self.write_metrics()

    def write_metrics(self) -> None:
        with atomic_write(os.path.join(self.run_dir, "metrics.jsonl")) as f:
            f.write("".join(json.dumps(m) + "\n" for m in self.state.metrics))
        with contextlib.suppress(Exception):  # a missing font or backend must not stop training
            plot_learning_curve(self.state.metrics, os.path.join(self.run_dir, "learning_curve.png"))

    def finish(self) -> None:
        """Reload the best weights, ``objective.finalize`` once, save the final model."""
        st = self.state
        if st.finalized:
            return
        best = os.path.join(self.run_dir, "model.safetensors")
        if os.path.exists(best):
            runs.load_state_into(self.model, runs.load_tensors(best)[0], best)
            obj = os.path.join(self.run_dir, "objective.safetensors")
            runs.load_state_into(self.objective, runs.load_tensors(obj)[0], obj)
        self.model.eval()
        self.objective.finalize(self.model)
        runs.save_model_files(self.run_dir, self.model, self.objective, finalized=True)
        st.finalized = True
        self.save_checkpoint()


def plot_learning_curve(metrics: list[dict], path: str) -> None:
    """Train loss and validation perplexity per epoch, as a PNG (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ep = [m["epoch"] for m in metrics]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(ep, [m["valid_ppl"] for m in metrics], "o-", color="C0", label="valid perplexity (exact)")
    if all("train_ppl" in m for m in metrics):
        ax.plot(ep, [m["train_ppl"] for m in metrics], "^:", color="C2", label="train perplexity (exact, prefix)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("valid perplexity", color="C0")
    ax2 = ax.twinx()
    ax2.plot(ep, [m["train_loss"] for m in metrics], "s--", color="C1", label="train loss")
    ax2.set_ylabel("train loss (objective)", color="C1")
    ax.set_title("learning curve")
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)


# --- starting and resuming runs --------------------------------------------------------------
def _load_streams(config: dict, vocab):
    from ..data.corpus import load_ids
    from ..data.tokenizer import TextOptions

    data = config["data"]
    opts = TextOptions(**data.get("text_options", {}))
    return load_ids(data["train"], vocab, opts), load_ids(data["valid"], vocab, opts)


def new_run(run_dir: str, config: dict, vocab, log=None) -> Trainer:
    """Create ``run_dir`` (config.json, vocab.txt) and a trainer for a fresh run described by ``config``."""
    if os.path.exists(os.path.join(run_dir, "config.json")):
        raise UserError(f"{run_dir}: already holds a run; continue it with --resume {run_dir} or choose another -o")
    opts = TrainOptions.from_dict(config["train"])
    opts.check()
    if opts.data_fraction < 1.0 and config["model"]["type"] != "ffnn":
        raise UserError("--data-fraction applies to feed-forward models only")
    torch.manual_seed(opts.seed)  # the initial weights depend on the seed only
    model, objective = runs.build_from_config(config, vocab)
    objective.prepare(model)  # fresh weights only (e.g. biases at log unigram); a resumed run loads its own
    train_ids, valid_ids = _load_streams(config, vocab)
    if len(train_ids) == 0 or len(valid_ids) == 0:
        raise UserError(f"{config['data']['train'] if len(train_ids) == 0 else config['data']['valid']}: no sentences")
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as e:
        raise UserError(f"{run_dir}: cannot create run directory ({e.strerror})") from None
    vocab.save(os.path.join(run_dir, "vocab.txt"))
    runs.write_json(os.path.join(run_dir, "config.json"), config)
    return Trainer(run_dir, model, objective, train_ids, valid_ids, opts, log=log)


def resume_run(run_dir: str, overrides: dict | None = None, log=None) -> Trainer:
    """A trainer that continues ``run_dir`` from its latest checkpoint.

    ``overrides`` may change ``epochs`` and ``max_halvings`` (to train longer); the rest of the
    configuration is the run's own.
    """
    cfg_path = os.path.join(run_dir, "config.json")
    config = runs.check_config(runs.read_json(cfg_path), cfg_path)
    for k, v in (overrides or {}).items():
        if v is not None:
            config["train"][k] = v
    vocab = runs.load_vocab_checked(run_dir, config)
    opts = TrainOptions.from_dict(config["train"], cfg_path)
    model, objective = runs.build_from_config(config, vocab)
    train_ids, valid_ids = _load_streams(config, vocab)
    trainer = Trainer(run_dir, model, objective, train_ids, valid_ids, opts, log=log)
    ckpt = runs.latest_checkpoint(run_dir)
    if ckpt is None:
        raise UserError(f"{run_dir}: no checkpoint to resume from (checkpoint.json missing)")
    trainer.load_checkpoint(ckpt)
    if overrides and any(v is not None for v in overrides.values()):
        runs.write_json(cfg_path, config)
        st = trainer.state
        if st.done and not st.finalized and st.epoch < opts.epochs:
            st.done = False  # more epochs were asked for
        if not st.done and st.batch == 0 and st.epoch >= opts.epochs:
            st.done = True  # fewer epochs: stop here (the best weights so far become the final model)
    return trainer
