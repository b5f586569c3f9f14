"""Training maximum-entropy LMs: SGD over shuffled positions, lr halving on validation perplexity.

The schedule (Xu, Gunawardana & Khudanpur 2011, sec. 3.1, after Mikolov): start at ``lr`` (paper: 0.1);
after each epoch compute the exact validation perplexity; when it fails to improve by ``min_gain``
(relative; ``--min-improvement`` on the command line, the name the neural trainer uses),
halve the learning rate each following epoch (weights that made validation worse are rolled
back to the best ones), and stop when it fails to improve again, or after ``epochs``.

Averaging (``average``; default ``run``, measured against the last iterate in docs/results/xu-melm.md,
"Averaged weights"; ``none`` is the paper's last iterate): the model evaluated
after an epoch, and kept, can be the mean of the parameters over that epoch's positions (``epoch``), over every position since the
start of epoch 2 (``run``; the first epoch moves far from the unigram start), or (``auto``) over
every position since the last epoch end at which the last iterate scored better on validation
than the average (the average then restarts there: it stops holding early, far-off iterates,
so it starts in effect once the last iterate has slowed down; one more validation pass per epoch).
Polyak-Ruppert averaging, computed sparsely by the kernels (see :func:`.kernels.averaged`).
Training itself continues from the raw (last) parameters; a rollback restores them and the
averages together.

``binary`` keeps every position, each one a positive for its word and a negative, kept at rate
``alpha``, for every other word. ``softmax`` at ``alpha < 1`` trains on a fixed random fraction
alpha of the positions (the paper's subsampled standard MELM, fig. 2): see :func:`train_positions`.

A shard (``owned`` words, see :mod:`.shard`) trains exactly the classifiers of its words; the
validation normaliser is the sum of every shard's partial sum (``reduce``), so all ranks take
the same learning-rate decisions.

Divergence: a validation perplexity that is not a finite number >= 1 (weights overflowed, e.g. a
far too large ``lr``) stops training with a :class:`~sampledlm.errors.UserError` instead of
keeping a broken or untrained model.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from ..errors import UserError
from ..lm import perplexity_from_nll
from . import kernels
from .config import TrainConfig
from .scorer import MaxEntModel, log_alpha




def train_positions(n: int, cfg: TrainConfig) -> np.ndarray:
    """Stream positions used for training: all, or a fixed random fraction alpha for a subsampled softmax."""
    if cfg.objective == "softmax" and cfg.alpha < 1.0:
        rng = np.random.default_rng([cfg.seed, 7])
        return np.sort(rng.choice(n, size=max(1, int(round(cfg.alpha * n))), replace=False)).astype(np.int64)
    return np.arange(n, dtype=np.int64)


def train(model: MaxEntModel, train_ids: np.ndarray, valid_ids: np.ndarray, cfg: TrainConfig,
          owned: np.ndarray | None = None, reduce: Callable[[np.ndarray], np.ndarray] | None = None,
          log: Callable[[str], None] | None = None, checkpoint=None) -> list[dict]:
    """Train ``model`` in place (binary models are left uncalibrated; call ``calibrate``); returns the epoch log.

    ``checkpoint`` (a :class:`.checkpoint.Checkpointer`): the state is saved after every epoch, and a run that has
    a saved state goes on from it, to the same model an unbroken run makes."""
    V = model.num_words
    owned = np.ones(V, bool) if owned is None else owned
    reduce = reduce or (lambda x: x)
    log = log or (lambda s: None)
    f = model.features
    train_ids = np.asarray(train_ids)
    if len(train_ids) == 0 or len(valid_ids) == 0:
        raise UserError(f"the {'training' if len(train_ids) == 0 else 'validation'} text is empty: nothing to "
                        f"{'train on' if len(train_ids) == 0 else 'choose the learning rate and the model by'}")
    at = train_positions(len(train_ids), cfg)
    ctx = model.context(train_ids, at)
    targets = train_ids[at].astype(np.int64)
    valid_ppl = _validation(model, valid_ids, owned, reduce, cfg)
    rng = np.random.default_rng([cfg.seed, 1])
    # L2: the penalty l2/2 theta^2 of a pair of context g is spread over the n_g training positions where
    # g is active, so each update adds (l2 / n_g) theta to the pair's gradient.
    l2g = cfg.l2 / np.maximum(np.bincount(ctx.hfeat, minlength=f.num_history_features), 1) if cfg.l2 > 0 else np.zeros(0)
    adagrad = (np.zeros(V if cfg.adagrad else 0), np.zeros(len(model.theta) if cfg.adagrad else 0))
    run = _Run(model, cfg)
    saved = checkpoint.load() if checkpoint is not None else None
    if saved is None:
        p = _Progress(lr=cfg.lr, best=valid_ppl(0, cfg.lr), best_state=run.state(),
                      best_params=(model.u.copy(), model.theta.copy()))
        p.history.append({"epoch": 0, "lr": p.lr, "valid_ppl": p.best, "seconds": 0.0})
        log(f"epoch 0: valid ppl {p.best:.2f}")
    else:
        p = _Progress.restore(*saved, run, rng, adagrad)
        log(f"resumed after epoch {p.epoch} (best valid ppl {p.best:.2f}, lr {p.lr:g})")
    while not p.stopped and p.epoch < cfg.epochs:
        epoch, lr, t0 = p.epoch + 1, p.lr, time.perf_counter()
        averaged_now = run.epoch(epoch, rng.permutation(len(at)).astype(np.int64), lr, (l2g, *adagrad),
                                 (at, ctx, targets, owned))
        ppl = run.evaluate(averaged_now, lambda: valid_ppl(epoch, lr))
        secs = time.perf_counter() - t0
        p.history.append({"epoch": epoch, "lr": lr, "valid_ppl": ppl, "seconds": secs})
        log(f"epoch {epoch}: lr {lr:g} valid ppl {ppl:.2f} ({secs:.1f} s)")
        p.after_epoch(epoch, ppl, cfg.min_gain, run, model)
        if checkpoint is not None:
            checkpoint.save(epoch, *p.snapshot(run, rng, adagrad))
    model.u[:], model.theta[:] = p.best_params
    model.info["training"] = {"config": asdict(cfg), "epochs": p.history, "best_valid_ppl": p.best}
    return p.history


@dataclass
class _Progress:
    """The schedule's state between epochs: the rate and whether it is being halved, the best epoch's perplexity,
    its :class:`_Run` state and evaluated weights, the epoch log; what a checkpoint holds besides the arrays."""

    lr: float
    best: float
    best_state: list
    best_params: tuple
    epoch: int = 0
    halving: bool = False
    stopped: bool = False
    history: list = field(default_factory=list)

    def after_epoch(self, epoch: int, ppl: float, min_gain: float, run: "_Run", model: MaxEntModel) -> None:
        """Keep or roll back the epoch's weights; halve the rate once validation stops improving by ``min_gain``,
        and stop when it fails to again."""
        self.epoch = epoch
        gained = ppl < self.best * (1.0 - min_gain)
        if ppl < self.best:
            self.best, self.best_state, self.best_params = ppl, run.state(), (model.u.copy(), model.theta.copy())
        else:  # roll back to the best epoch's weights (and its averages)
            run.restore(self.best_state)
        if not gained:
            self.stopped = self.halving
            self.halving = True
        if self.halving and not self.stopped:
            self.lr /= 2

    def snapshot(self, run: "_Run", rng: np.random.Generator, adagrad: tuple) -> tuple[dict, dict]:
        """``(arrays, meta)`` of a checkpoint: everything the next epoch reads. After :meth:`after_epoch` the run's
        state is the best epoch's (just kept, or rolled back to), so ``best_state`` is not saved twice."""
        names = ("raw_u", "raw_theta", "sums_u", "sums_theta")
        arrays = {**dict(zip(names, (*run.raw, *run.sums))),
                  "best_u": self.best_params[0], "best_theta": self.best_params[1],
                  "adagrad_u": adagrad[0], "adagrad_theta": adagrad[1]}
        meta = {"lr": self.lr, "best": self.best, "halving": self.halving, "stopped": self.stopped,
                "history": self.history, "age": run.age, "rng": rng.bit_generator.state}
        return arrays, meta

    @classmethod
    def restore(cls, arrays: dict, meta: dict, run: "_Run", rng: np.random.Generator, adagrad: tuple) -> "_Progress":
        names = ("raw_u", "raw_theta", "sums_u", "sums_theta")
        run.restore([*(arrays[k] for k in names), int(meta["age"])])
        for mine, name in zip(adagrad, ("adagrad_u", "adagrad_theta")):
            mine[:] = arrays[name]
        rng.bit_generator.state = meta["rng"]
        return cls(lr=float(meta["lr"]), best=float(meta["best"]), best_state=run.state(),
                   best_params=(arrays["best_u"].copy(), arrays["best_theta"].copy()), epoch=int(meta["epoch"]),
                   halving=bool(meta["halving"]), stopped=bool(meta["stopped"]), history=list(meta["history"]))


def _validation(model: MaxEntModel, valid_ids: np.ndarray, owned: np.ndarray, reduce, cfg: TrainConfig):
    """``valid_ppl(epoch, lr)``: the exact validation perplexity of the model's current weights (every shard's
    partial sums reduced); a :class:`UserError` when it is not a finite number >= 1 (training diverged)."""
    vctx = model.context(valid_ids)
    vtargets = np.asarray(valid_ids, dtype=np.int64)
    shift = log_alpha(cfg.alpha) if cfg.objective == "binary" else 0.0  # calibrated in flight (Binary.log_prob)

    def valid_ppl(epoch: int, lr: float) -> float:
        num, den = model.eval_sums(vctx, vtargets, owned, shift)
        num, den = reduce(np.stack([num, den]))
        with np.errstate(all="ignore"):
            mean = float(-(num - np.log(den)).mean())
        ppl = perplexity_from_nll(mean)
        if not (math.isfinite(ppl) and ppl >= 1.0 - 1e-9):
            raise UserError(f"training diverged at epoch {epoch} (validation perplexity {ppl:g}"
                            f"{', learning rate ' + format(lr, 'g') if epoch else ''}); nothing was saved: "
                            "try a smaller --lr")
        return ppl

    return valid_ppl


class _Run:
    """The parameters the kernels move (``raw``: the last iterate) and the running sums of their average over
    ``age`` positions; the model holds what is evaluated (raw, or their average)."""

    def __init__(self, model: MaxEntModel, cfg: TrainConfig):
        self.model, self.cfg = model, cfg
        self.raw = [model.u.copy(), model.theta.copy()]
        self.averaging = cfg.average != "none"
        self.sums = [np.zeros(model.num_words if self.averaging else 0),
                     np.zeros(len(model.theta) if self.averaging else 0)]
        self.age = 0  # positions in the current average

    def state(self) -> list:
        return [self.raw[0].copy(), self.raw[1].copy(), self.sums[0].copy(), self.sums[1].copy(), self.age]

    def restore(self, state: list) -> None:
        (self.raw[0][:], self.raw[1][:], self.sums[0][:], self.sums[1][:], self.age) = state

    def epoch(self, epoch: int, order: np.ndarray, lr: float, step_state: tuple, data: tuple) -> bool:
        """One pass of the kernels over the positions in ``order``; whether the weights are averaged this epoch.
        ``step_state``: (per-pair L2 factors, AdaGrad sums of u and theta); ``data``: (positions, their
        contexts, targets, owned words)."""
        cfg, f = self.cfg, self.model.features
        at, ctx, targets, owned = data
        averaged_now = self.averaging and not (cfg.average == "run" and epoch == 1)
        if cfg.average == "epoch" or (cfg.average == "run" and epoch == 2):
            self.sums[0][:], self.sums[1][:], self.age = 0.0, 0.0, 0
        acc = self.sums if averaged_now else [np.zeros(0), np.zeros(0)]
        weights = kernels.Weights(self.raw[0], self.raw[1])
        st = kernels.step(lr, *step_state, acc[0], acc[1], self.age, cfg.block)
        if cfg.objective == "softmax":
            kernels.softmax_epoch(order, targets, ctx.active, f.pairs, weights, st)
        else:
            neg = kernels.negatives(at, owned, cfg.alpha, cfg.seed, 0 if cfg.fixed_negatives else epoch)
            kernels.binary_epoch(order, targets, ctx.active, f.pairs, weights, st, neg)
        if averaged_now:
            self.age += len(order)
        return averaged_now

    def evaluate(self, averaged_now: bool, valid_ppl: Callable[[], float]) -> float:
        """The model set to the weights evaluated after an epoch (the average, or the last iterate), and their
        validation perplexity; with ``auto`` averaging the better of the two, the average restarting if it lags."""
        model, raw, sums = self.model, self.raw, self.sums
        if not averaged_now:
            model.u[:], model.theta[:] = raw
            return valid_ppl()
        model.u[:], model.theta[:] = kernels.averaged(raw[0], sums[0], self.age), kernels.averaged(raw[1], sums[1], self.age)
        ppl = valid_ppl()
        if self.cfg.average == "auto":
            avg_params = (model.u.copy(), model.theta.copy())
            model.u[:], model.theta[:] = raw
            last = valid_ppl()
            if last < ppl:  # the average lags: restart it from here
                ppl, self.age = last, 0
                sums[0][:], sums[1][:] = 0.0, 0.0
            else:
                model.u[:], model.theta[:] = avg_params
        return ppl
