"""The training loop for neural scorers: batches, optimiser, learning-rate halving, checkpoints, exact resume.

One epoch visits every prediction of the training stream once:

* feed-forward models: mini-batches of ``(histories [B, n-1], targets [B])`` in a random order that depends only
  on ``(seed, epoch)`` (Schwenk's *bunch mode*);
* recurrent models: the stream cut into ``B`` rows read in BPTT segments ``[B, T]``; the output ``[B, T, h]`` is
  flattened to ``[N, h]`` keeping ``mask == True`` positions before the objective sees it. The recurrent state is
  carried (detached) from one segment to the next and reset to zero at the start of every epoch and evaluation.

Each step: ``loss = objective(model, hidden, targets)`` (mean over the N predictions), backward, optional gradient
clipping to a total norm (``--precision bf16|fp16`` runs the forward pass under autocast; master weights, updates and
every evaluation stay float32, see :mod:`sampledlm.neural.device`), optimiser step (SGD -- the papers' choice -- or
Adam; for a sampled or structured objective the output layer and the word tables -- input embeddings, a tied ``W`` --
get row-sparse gradients and SGD without weight decay / SparseAdam, see :func:`make_optimizers`). After each epoch the
exact validation perplexity is measured; when it does not improve by the relative ``min_improvement`` the learning
rate is halved (Xu et al. 2011 §3.1), and training stops when that happens after ``max_halvings`` halvings, or after
``epochs`` (``lr_schedule="plateau"``). With ``lr_schedule="cosine"`` the rate instead follows
``lr_t = lr · (1 + cos(π t / T)) / 2`` over the ``T = epochs × batches`` steps of the whole run (Loshchilov & Hutter
2017, without restarts), set before every step, and training runs all ``epochs``: the decay to 0 anneals within the
epoch budget, where halving on a plateau may start only after it. ``"cosine-budget"`` puts ``max(t / T, s)`` for
``t / T``, ``s`` the share of ``max_time`` spent: 0 where a time budget ends the run. ``warmup = N`` first raises
the rate linearly over N steps (none halved meanwhile). With ``valid_every = K`` the same validation (and, under
``plateau``, the same halving rule) also runs after every K-th optimiser step within an epoch: a large corpus read
once or twice gets its curve and best model from those points. The weights with the best validation perplexity are
kept as ``model.safetensors``; at the end they are reloaded, ``objective.finalize(model)`` runs once, and the final
model is saved.

Exact resume: before every epoch torch, numpy and Python's ``random`` are re-seeded from ``(seed, epoch)`` and
``objective.start_epoch(epoch)`` is called; a checkpoint stores the model, objective, optimiser and RNG states, the
position in the epoch (batch index, recurrent state) and the schedule, so ``--resume`` continues with the very numbers
of an uninterrupted run. Checkpoints are written at the end of every epoch, every ``checkpoint_every`` steps, and on
SIGINT/SIGTERM (then training stops; the previous checkpoint stays intact until the new one is complete, see
:mod:`sampledlm.neural.rundir`).

Devices and processes: the model, the objective and each batch live on ``--device``; under ``torchrun`` every rank
trains on its share of each global batch and the gradients are averaged over the ranks
(:mod:`sampledlm.neural.distributed`); rank 0 alone writes the run directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import signal
import sys
import time
from typing import Callable

import numpy as np
import torch

from tqdm import tqdm

from . import rundir as runs
from ..config import said
from ..errors import TrainingInterrupted, UserError
from .run_state import (TrainState, interrupt_flag, optimizer_from_files, optimizer_to_files,  # noqa: F401
                        rng_from_files, rng_to_files, seed_everything)
from .lm import perplexity
from ..progress import announced, bar, enabled as progress_enabled
from ..objectives.normaliser import sum_precision
from .device import autocast, device_name, grad_scaler, keep_freed_memory, resolve_device, to_device
from .distributed import Ranks
from ..data.textio import atomic_write
from .train_options import TB_EVERY, TrainOptions, budget_spent, check_resumed_options, check_warmup_fits, stopped_by
from .optim import clip_gradients, make_optimizers, plateau_rule, scheduled_lr, set_lr, sparse_parameter_ids
from .divergence import DIVERGED_LOSS, RisingLoss, diverged  # noqa: F401 - DIVERGED_LOSS re-exported
from .reporting import open_tensorboard, out_of_memory, plot_learning_curve, progress_line, step_scores_bytes

LOG_SECONDS = 60.0  # off a terminal (no progress bar), a progress line at most this often
PLOT_EVERY_S = 60.0  # the learning-curve plot is redrawn at most this often (and when training ends)


# --- the trainer ---------------------------------------------------------------------------
class Trainer:
    """Train ``model`` with ``objective`` into ``run_dir`` (see module docstring)."""
    lr_used: float | None = None  # the rate a scheduled (cosine) run set before its last step

    def __init__(self, run_dir: str, model, objective, train_ids: np.ndarray, valid_ids: np.ndarray,
                 opts: TrainOptions, log=None, ranks: Ranks | None = None):
        self.run_dir, self.opts = run_dir, opts
        self.device = resolve_device(opts.device)
        self.ranks = ranks or Ranks.single()
        if self.device.type == "cuda" and self.device.index is None:
            # set_device needs an index ("cuda" alone is refused by torch <= 2.11); one GPU per rank
            index = int(os.environ.get("LOCAL_RANK", "0")) if self.ranks.active else torch.cuda.current_device()
            self.device = torch.device("cuda", index)
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        else:
            keep_freed_memory()  # a step's large temporaries reuse freed heap, not fresh pages
        self.model, self.objective = model.to(self.device), objective.to(self.device)
        self.ranks.broadcast_module(self.model)
        self.ranks.broadcast_module(self.objective)
        if opts.compile:  # the forward method only: state_dict keys (the file format) stay the model's own
            model.forward = torch.compile(model.forward)
        self.valid_ids = np.asarray(valid_ids)
        self.train_ids = np.asarray(train_ids)
        self.log = (log or (lambda msg: None)) if self.ranks.is_main else (lambda msg: None)
        self.data = model.train_data(self.train_ids, opts)
        self.build_optimizers()
        self.scaler = grad_scaler(self.device, opts.precision)
        if self.device.type != "cpu" or self.ranks.active:
            where = device_name(self.device) + (f", {self.ranks.world} ranks" if self.ranks.active else "")
            self.log(f"training on {where}, precision {opts.precision}")
        self.state = TrainState(lr=opts.lr)
        self.tb = open_tensorboard(opts.tensorboard) if opts.tensorboard and self.ranks.is_main else None
        self.lock = None  # the run directory's lock, held while this trainer writes into it
        self.carry = None  # what the model passes from batch to batch within an epoch (a recurrent state)
        #: a function of the :class:`TrainState` after each step; True stops the training there as Ctrl-C does (a
        #: checkpoint, then ``TrainingInterrupted``): a caller's own budget, or a stop at a chosen step
        self.stop_when: Callable[[TrainState], bool] | None = None

    def build_optimizers(self) -> None:
        """Fresh optimisers over the model's and the objective's parameters as they are now: after anything that may
        replace a parameter (loading a checkpoint, copying another run's weights), before optimiser state loads."""
        self.optimizers = make_optimizers(self.model, self.objective, self.opts)
        self.params = [p for g in self.optimizers for grp in g.param_groups for p in grp["params"]]
        self.sparse_ids = sparse_parameter_ids(self.model, self.objective)

    def _preflight(self) -> None:
        """Before training: every parameter in an optimiser, room on disk for checkpoints and in memory for a step."""
        self._check_every_parameter_optimised()
        check_warmup_fits(self.opts, self.total_steps())
        weights = runs.tensor_bytes(self.model) + runs.tensor_bytes(self.objective)
        if self.ranks.is_main:
            runs.check_disk_room(self.run_dir, weights, runs.optimizer_state_bytes(self.optimizers))
        runs.check_memory_room(self.optimizers, weights, self.device,
                               step_scores_bytes(self.opts, self.model, self.objective, len(self.train_ids)))

    def _check_every_parameter_optimised(self) -> None:
        """Refuse to train a parameter that no optimiser holds (one replaced after :meth:`build_optimizers`): it
        would never change, and a row-sparse gradient of it would grow with every step."""
        held = {id(p) for p in self.params}
        stray = [f"{part}.{name}" for part, module in (("model", self.model), ("objective", self.objective))
                 for name, p in module.named_parameters() if p.requires_grad and id(p) not in held]
        if stray:
            raise RuntimeError(f"parameters outside the optimisers: {', '.join(stray[:4])}; call build_optimizers() "
                               "after anything that replaces a parameter")

    # --- checkpoints ---
    def save_checkpoint(self) -> None:
        rng_tensors, rng_meta = rng_to_files(self.device)
        if self.carry is not None:
            for i, t in enumerate(self.carry if isinstance(self.carry, tuple) else (self.carry,)):
                rng_tensors[f"carry/{i}"] = t.detach().cpu()
        if self.scaler is not None:
            rng_meta["grad_scaler"] = {k: v for k, v in self.scaler.state_dict().items() if not torch.is_tensor(v)}
        if self.ranks.active:  # every rank's random state and carried state, written by rank 0
            parts = self.ranks.gather((rng_tensors, rng_meta))
            if not self.ranks.is_main:
                self.ranks.barrier()
                return
            rng_meta = dict(rng_meta, world=self.ranks.world, ranks={str(r): m for r, (_, m) in enumerate(parts) if r})
            for r, (t, _) in enumerate(parts[1:], 1):
                rng_tensors.update({f"rank{r}/{k}": v for k, v in t.items()})
        opt_tensors, opt_meta = optimizer_to_files(self.optimizers)
        files = {
            "model.safetensors": self.model.state_dict(), "objective.safetensors": self.objective.state_dict(),
            "optimizer.safetensors": opt_tensors, "optimizer.json": opt_meta,
            "rng.safetensors": rng_tensors, "rng.json": rng_meta,
            "trainer_state.json": dataclasses.asdict(self.state),
            "options.json": dataclasses.asdict(self.opts),  # what a resume checks config.json against
        }
        runs.write_checkpoint(self.run_dir, f"ckpt-{self.state.step:09d}", files)
        self.ranks.barrier()

    def load_checkpoint(self, path: str) -> None:
        state = runs.read_json(os.path.join(path, "trainer_state.json"))
        try:
            self.state = TrainState(**state)
        except TypeError as e:
            raise UserError(f"{path}/trainer_state.json: {e}") from None
        check_resumed_options(os.path.join(path, "options.json"), self.opts, self.run_dir)
        # Recreate what the start of the epoch set up, then overwrite with the saved states.
        seed_everything(self.opts.seed, self.state.epoch, self.ranks.rank)
        if not self.state.done:
            self.objective.start_epoch(self.state.epoch)
        for name, module in (("model", self.model), ("objective", self.objective)):
            f = os.path.join(path, f"{name}.safetensors")
            runs.load_state_into(module, runs.load_tensors(f)[0], f)
        # Loading may replace parameters: hsm adopts the saved tree and, when its node count differs from the tree it
        # was built with (word classes), a node layer of that size. Optimisers built before would hold the old
        # layer, so the new one would never be updated and its gradients never cleared (they grew each step).
        self.build_optimizers()
        f = os.path.join(path, "optimizer.safetensors")
        optimizer_from_files(self.optimizers, runs.load_tensors(f)[0],
                                  runs.read_json(os.path.join(path, "optimizer.json")), f)
        rng_tensors, _ = runs.load_tensors(os.path.join(path, "rng.safetensors"))
        rng_meta = runs.read_json(os.path.join(path, "rng.json"))
        saved_world = rng_meta.get("world", 1)
        if saved_world != self.ranks.world:
            raise UserError(f"{path}: written by a run with {saved_world} rank(s); resume it with the same number "
                            f"(torchrun --nproc-per-node {saved_world}), not {self.ranks.world}", every_rank=True)
        if self.ranks.rank:
            prefix = f"rank{self.ranks.rank}/"
            rng_tensors = {k[len(prefix):]: v for k, v in rng_tensors.items() if k.startswith(prefix)}
            rng_meta = rng_meta["ranks"][str(self.ranks.rank)]
        rng_from_files(rng_tensors, rng_meta, self.device)
        if self.scaler is not None and rng_meta.get("grad_scaler"):
            self.scaler.load_state_dict(rng_meta["grad_scaler"])
        # "rnn_state/" in checkpoints written before the model owned its carried state
        st = [rng_tensors[k] for k in sorted(k for k in rng_tensors if k.startswith(("carry/", "rnn_state/")))]
        st = [t.to(self.device) for t in st]
        self.carry = None if not st else (tuple(st) if len(st) > 1 else st[0])
        set_lr(self.optimizers, self.state.lr)

    # --- one step ---
    def step(self, batch) -> tuple[float, int]:
        """One optimiser step on a global batch; returns ``(mean loss, predictions)`` over all ranks."""
        model, objective, ranks = self.model, self.objective, self.ranks
        batch = to_device(ranks.shard(batch), self.device)
        loss = None
        with autocast(self.device, self.opts.precision):
            ctx, targets, positions, self.carry = model.train_contexts(batch, self.carry)
            n = int(targets.shape[0])
            if n:
                if objective.uses_positions:
                    loss = objective(model, ctx, targets, positions=positions)
                else:
                    loss = objective(model, ctx, targets)
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)
        if not ranks.active:
            if not n:
                return 0.0, 0
            loss_value = float(loss.detach())
            if diverged(loss_value):
                return loss_value, n  # nothing applied: no NaN/inf ever reaches the weights; the caller stops
            self._backward(loss)
        else:  # the gradient of this rank's summed loss; reduce_gradients divides by the global count
            local = float(loss.detach()) * n if n else 0.0
            if n and math.isfinite(local):
                self._backward(loss * n)
            n, total = ranks.reduce_gradients(self.params, self.sparse_ids, n, local)
            if not n:
                return 0.0, 0
            loss_value = total / n
            if diverged(loss_value):
                return loss_value, n  # every rank sees the same sum, so every rank stops here
        if self.scaler is not None:
            for opt in self.optimizers:
                self.scaler.unscale_(opt)
        if self.opts.clip > 0 and not math.isfinite(clip_gradients(self.params, self.opts.clip)):
            if self.scaler is None:
                return float("nan"), n  # a non-finite gradient: skip the update, the caller stops
        if self.scaler is not None:  # fp16: a step whose gradients overflowed is skipped and the scale lowered
            for opt in self.optimizers:
                self.scaler.step(opt)
            self.scaler.update()
        else:
            for opt in self.optimizers:
                opt.step()
        return loss_value, n

    def _backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def valid_perplexity(self) -> float:
        """Exact, in float32, on the training device; every rank computes it and rank 0's number is used."""
        eb = self.opts.eval_batch
        return self.ranks.broadcast_float(perplexity(self.model, self.objective, self.valid_ids, batch_size=eb))

    # --- the loop ---
    def release_lock(self) -> None:
        lock, self.lock = getattr(self, "lock", None), None
        if lock is not None:
            lock.__exit__(None, None, None)

    def train(self) -> TrainState:
        try:
            return self._train()
        finally:
            if self.tb is not None:
                self.tb.close()
            self.release_lock()

    def _train(self) -> TrainState:
        st, opts = self.state, self.opts
        nb = self.data.num_batches()
        scheduled = opts.lr_schedule != "plateau" or opts.warmup > 0  # the rate is set before every step
        if st.metrics:  # resumed: metrics.jsonl and the plot again from the checkpoint (a kill may have come between)
            self.write_metrics()
        if not st.done:
            self._preflight()
        rising = RisingLoss()
        with interrupt_flag() as flag:
            while not st.done:
                if st.batch == 0:
                    seed_everything(opts.seed, st.epoch, self.ranks.rank)
                    self.objective.start_epoch(st.epoch)
                    self.carry = None  # e.g. a recurrent state: reset at the start of each epoch
                    st.loss_sum, st.loss_count, st.epoch_tokens, st.epoch_seconds = 0.0, 0, 0, 0.0
                rising.new_epoch()
                self.model.train()
                t_last = last_log = time.perf_counter()
                c_last = time.process_time()
                with bar(total=nb, desc=f"epoch {st.epoch + 1}", unit="batch", initial=st.batch,
                         disable=not (progress_enabled() and self.ranks.is_main)) as pbar:
                    while st.batch < nb:
                        if scheduled:
                            self.lr_used = self.scheduled(st.step)
                            set_lr(self.optimizers, self.lr_used)
                        try:
                            loss, n = self.step(self.data.batch(st.epoch, st.batch))
                        except (MemoryError, RuntimeError) as e:
                            raise out_of_memory(e, self) or e
                        if diverged(loss):
                            raise UserError(self.diverged_message(loss))
                        t_last, c_last, last_log = self._account_step(loss, n, t_last, c_last, last_log, rising, nb)
                        pbar.update(1)
                        pbar.set_postfix(loss=f"{st.loss_sum / max(st.loss_count, 1):.3f}",
                                         tok_s=f"{st.epoch_tokens / max(st.epoch_seconds, 1e-9):.0f}", refresh=False)
                        if opts.valid_every and st.batch % opts.valid_every == 0 and st.batch < nb \
                                and not stopped_by(opts, st):  # a budget's own validation: the epoch's end
                            self.validate_within_epoch()  # before a stop: a resumed run must not skip the point
                            if st.done:
                                break  # the plateau rule stopped the run at this point
                            t_last, c_last = time.perf_counter(), time.process_time()
                        stop = bool(flag["set"]) or (self.stop_when is not None and bool(self.stop_when(st)))
                        stop = self.ranks.any(stop, self.device)  # one rank's Ctrl-C stops them all at this step
                        if stop:
                            self.save_checkpoint()
                            raise TrainingInterrupted(f"interrupted at step {st.step}; resume with " + said(
                                f"--resume {self.run_dir}", f"sampledlm.resume_lm({self.run_dir!r})"),
                                                      flag.get("signal") or signal.SIGINT)
                        if opts.checkpoint_every and st.step % opts.checkpoint_every == 0 and st.batch < nb:
                            self.save_checkpoint()
                        if stopped_by(opts, st):
                            break  # a budget (--max-steps, --max-time) is spent: this (partial) epoch ends here
                if not st.done:
                    self.end_epoch()
                t_last = time.perf_counter()
        self.finish()
        return st

    def _account_step(self, loss: float, n: int, t_last: float, c_last: float, last_log: float, rising: RisingLoss,
                      nb: int) -> tuple[float, float, float]:
        """A finished step's counts, clocks, divergence warning, TensorBoard points and progress line; returns the
        clocks' new ``(t_last, c_last, last_log)``."""
        st, opts = self.state, self.opts
        st.batch, st.step = st.batch + 1, st.step + 1
        st.loss_sum += loss * n
        st.loss_count += n
        st.epoch_tokens += n
        now = time.perf_counter()
        st.epoch_seconds += now - t_last
        st.wall_seconds += now - t_last
        c_now = time.process_time()
        st.cpu_seconds += c_now - c_last
        low = rising.update(st.loss_sum / max(st.loss_count, 1))
        if low is not None:
            with tqdm.external_write_mode(file=sys.stderr):  # the line above the bar, not through it
                self.log(f"warning: the running training loss of epoch {st.epoch + 1} "
                         f"rose from {low:.3f} to {st.loss_sum / st.loss_count:.3f} (step {st.step}): "
                         f"the run may be diverging; a smaller --lr (this run: {st.lr:g}) may be "
                         "needed. Training goes on.")
        if self.tb is not None and st.step % TB_EVERY == 0:
            self.tb.add_scalar("train/loss", st.loss_sum / max(st.loss_count, 1), st.step)
            self.tb.add_scalar("train/lr", self.last_lr(), st.step)
            self.tb.add_scalar("train/tokens_per_s", st.epoch_tokens / max(st.epoch_seconds, 1e-9), st.step)
        if not progress_enabled() and now - last_log >= LOG_SECONDS and st.batch < nb:
            last_log = now
            self.log(progress_line(st, nb, opts.epochs, opts.max_steps, opts.max_time, opts.time_clock))
        return now, c_now, last_log

    def diverged_message(self, value: float, what: str = "loss") -> str:
        st = self.state
        where = f"training diverged at epoch {st.epoch + 1}, step {st.step + 1} ({what} {value:g}); "
        if runs.latest_checkpoint(self.run_dir) is None:
            return (where + f"no checkpoint had been written yet, so {self.run_dir} holds no model; run the same "
                    "command with a smaller --lr or a --clip to start it again")
        return (where + f"the weights were left as they were and the last checkpoint in {self.run_dir} is intact "
                f"(--resume {self.run_dir} would diverge again); start a new run with a smaller --lr or a --clip")

    def end_epoch(self) -> None:
        """Validate at the epoch's end (or where a budget stopped it), then move to the next epoch."""
        st, opts = self.state, self.opts
        self._validation_point()
        st.epoch += 1
        st.batch = 0
        if st.epoch >= opts.epochs or stopped_by(opts, st):  # its epochs, or a budget (--max-steps, --max-time)
            st.done = True
        self.save_checkpoint()
        self.write_metrics()

    def validate_within_epoch(self) -> None:
        """``--valid-every``: validate at this step and go on with the epoch (a corpus whose epoch is long gets its
        learning curve, best model and, under the plateau schedule, its halvings from these points)."""
        self._validation_point()
        self.model.train()
        self.save_checkpoint()
        self.write_metrics()

    def _validation_point(self) -> None:
        """Exact validation perplexity now: the best weights kept, a metrics record (``epoch_fraction`` where the
        epoch is not over), and under the plateau schedule a halving (or the end) when it did not improve."""
        st, opts = self.state, self.opts
        t0, c0 = time.perf_counter(), time.process_time()
        nb = self.data.num_batches()
        where = f"epoch {st.epoch + 1}" + (f" at step {st.step:,} ({100 * st.batch / nb:.0f}%)" if 0 < st.batch < nb
                                           else "")
        with announced(f"{where}: validating") if self.ranks.is_main else contextlib.nullcontext():
            with sum_precision(opts.valid_sum_precision):
                valid = self.valid_perplexity()
        if not math.isfinite(valid):  # finite training losses, yet the model gives some validation word p = 0
            raise UserError(self.diverged_message(valid, "validation perplexity"))
        train_ppl = None
        if opts.train_eval > 0:  # the exact training likelihood (Botev et al. 2017 fig. 3), a prefix bounds its cost
            train_ppl = perplexity(self.model, self.objective, self.train_ids[:opts.train_eval],
                                   batch_size=opts.eval_batch)
        st.wall_seconds += time.perf_counter() - t0
        st.cpu_seconds += time.process_time() - c0
        improved, before = valid < st.best_valid * (1.0 - opts.min_improvement), st.best_valid
        if valid < st.best_valid:
            st.best_valid = valid
            if self.ranks.is_main:
                runs.save_model_files(self.run_dir, self.model, self.objective, finalized=False)
        record = {
            "epoch": st.epoch + 1, "step": st.step, "train_loss": st.loss_sum / max(st.loss_count, 1),
            "valid_ppl": valid, "lr": self.last_lr(), "tokens_per_s": st.epoch_tokens / max(st.epoch_seconds, 1e-9),
            "wall_s": st.wall_seconds, "cpu_s": st.cpu_seconds,
        }
        if train_ppl is not None:
            record["train_ppl"] = train_ppl
        if 0 < st.batch < self.data.num_batches():  # within the epoch (--valid-every) or stopped in it (a budget)
            record["epoch_fraction"] = st.batch / self.data.num_batches()
        st.metrics.append(record)
        if self.tb is not None:
            for key in ("valid_ppl", "train_loss", "lr", "tokens_per_s", "train_ppl"):
                if key in record:
                    self.tb.add_scalar(f"epoch/{key}", record[key], st.step)
            self.tb.flush()
        self.log(f"{where}: train loss {record['train_loss']:.4f}  valid ppl {valid:.2f}  lr {record['lr']:g}  "
                 f"{record['tokens_per_s']:.0f} tok/s")
        if opts.lr_schedule == "plateau" and not improved and st.step >= opts.warmup:  # none while warming up
            plateau_rule(st, opts, self.optimizers, f"{where}: valid ppl {valid:.2f}", before, self.log)

    def scheduled(self, step: int) -> float:
        """The rate of optimiser step ``step`` under the run's schedule (``cosine-budget``: at the budget spent now)."""
        return scheduled_lr(self.state.lr, self.opts.lr_schedule, step, self.total_steps(),
                            budget_spent(self.opts, self.state), self.opts.warmup)

    def last_lr(self) -> float:
        """The rate the last step trained at (as set before it; the schedule's for it when none was set here)."""
        return self.lr_used if self.lr_used is not None else self.scheduled(max(self.state.step - 1, 0))

    def total_steps(self) -> int:
        """The steps the cosine schedule decays over: every epoch's, or ``--max-steps`` when that comes first."""
        total = self.opts.epochs * self.data.num_batches()
        return min(total, self.opts.max_steps) if self.opts.max_steps else total

    def write_metrics(self) -> None:
        """``metrics.jsonl`` every epoch; the plot at the end and otherwise at most every :data:`PLOT_EVERY_S`
        seconds (drawing it cost about 0.15 CPU s, the first time 0.5 s with matplotlib's import: on PTB's GRU
        with a sampled output, 1-2 % of a run whose epochs take 17 s)."""
        if not self.ranks.is_main:
            return
        with atomic_write(os.path.join(self.run_dir, "metrics.jsonl")) as f:
            f.write("".join(json.dumps(m) + "\n" for m in self.state.metrics))
        now = time.monotonic()
        if self.state.done or now - getattr(self, "plotted_at", -math.inf) >= PLOT_EVERY_S:
            self.plotted_at = now
            with contextlib.suppress(Exception):  # a missing font or backend must not stop training
                plot_learning_curve(self.state.metrics, os.path.join(self.run_dir, "learning_curve.png"))

    def finish(self) -> None:
        """Reload the best weights, ``objective.finalize`` once, save the final model."""
        st = self.state
        if st.finalized:
            return
        self.ranks.barrier()  # rank 0's best model is on disk before any rank reads it
        best = os.path.join(self.run_dir, "model.safetensors")
        meta = runs.load_model_files(best, self.model, self.objective) if os.path.exists(best) else {}
        self.model.eval()
        # A kill after the final model was written but before the checkpoint recorded it leaves a
        # finalized model.safetensors: it is complete (one file), so it is not finalized twice.
        if meta.get("finalized") != "true":
            self.objective.finalize(self.model)
            meta = {}
            if getattr(self.objective, "calibrate_on_valid", False):
                meta["log_z_shift"] = f"{self.calibrate_log_z():.9g}"
            if self.ranks.is_main:
                runs.save_model_files(self.run_dir, self.model, self.objective, finalized=True, meta=meta)
        st.finalized = True
        self.save_checkpoint()

    def calibrate_log_z(self) -> float:
        """Self-normalisation's calibration (:func:`~sampledlm.neural.lm.calibrate_log_z`) on the validation
        text; returns the shift."""
        from .lm import calibrate_log_z

        shift = calibrate_log_z(self.model, self.objective, self.valid_ids, batch_size=self.opts.eval_batch)
        self.log(f"self-normalisation: output biases shifted by {shift:+.4f}, so the mean log Z on the validation "
                 "text is 0 (exact probabilities unchanged)")
        return shift
