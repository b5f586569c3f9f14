"""A neural run's training settings (:class:`TrainOptions`: each default, help text and range in one place;
the command line's flags come from it) and the model kind's defaults over them."""

from __future__ import annotations

from dataclasses import dataclass


from .. import config as cfgmod
from ..config import option
from .device import PRECISIONS


LR_SCHEDULES = ("plateau", "cosine", "cosine-budget")
TB_EVERY = 50  # optimiser steps between TensorBoard points of the training loss


@dataclass
class TrainOptions:
    """Training settings. A model class may override these defaults (``train_defaults``)."""

    optimizer: str = option("sgd", "sgd (the papers' choice), adam, or adamw (Adam with --weight-decay decoupled from "
                                   "the gradient, on weight matrices only)", choices=("sgd", "adam", "adamw"))
    lr: float = option(0.1, "learning rate (of the mean batch loss)", min=0.0, min_open=True)
    momentum: float = option(0.0, "SGD momentum", min=0.0, max=0.999)
    weight_decay: float = option(0.0, "L2 weight decay (adamw: w -= lr wd w each step, decoupled)", min=0.0)
    clip: float = option(0.0, "clip the total gradient norm to this (0: off)", min=0.0)
    batch_size: int = option(128, "n-grams per batch (feed-forward) or BPTT rows (recurrent)", min=1, short="-b")
    bptt: int = option(35, "recurrent models: BPTT segment length; transformer: training window (not for ffnn)",
                       min=1)
    epochs: int = option(20, "maximum epochs", min=1)
    max_time: float = option(0.0, "stop at the step that passes this many seconds of training, validation included "
                                  "(0: no limit): the partial epoch is validated and kept as a whole one is; a time "
                                  "budget (Chen et al. 2016 compare output layers this way)", min=0.0)
    max_steps: int = option(0, "stop after this many optimiser steps, within an epoch if need be (0: no limit): a "
                               "budget for a corpus whose epoch is long; the partial epoch is validated and kept as a "
                               "whole one is, and the cosine schedule decays to 0 by that step", min=0)
    time_clock: str = option("wall", "the clock of --max-time: wall seconds, or cpu (the training process's CPU "
                                     "seconds, fairer on a shared machine)", choices=("wall", "cpu"))
    lr_schedule: str = option("plateau", "plateau: halve the rate when validation stalls (--min-improvement, "
                                         "--max-halvings); cosine: decay it to 0 over --epochs, step by step; "
                                         "cosine-budget: the same, reaching 0 at the end of --max-time when that "
                                         "comes first (for a run the time budget will stop)",
                              choices=LR_SCHEDULES)
    warmup: int = option(0, "linear warm-up: the rate rises from lr/N to lr over the first N optimiser steps, then "
                            "follows --lr-schedule over the rest, plateau halving only after it (0: none; "
                            "Transformers are usually trained with one, Vaswani et al. 2017: a few per cent of the "
                            "steps; not with cosine-budget)", min=0)
    max_halvings: int = option(4, "stop when validation fails to improve after this many learning-rate halvings",
                               min=0)
    min_improvement: float = option(0.0, "relative validation-perplexity gain that counts as improving", min=0.0,
                                    max=1.0)
    seed: int = option(1, "one seed for all randomness", min=0, max=2**64 - 1)
    tensorboard: str | None = option(None, "also write TensorBoard scalars (loss, learning rate, tokens/s every "
                                           f"{TB_EVERY} steps; validation perplexity every epoch) to this directory "
                                           "(needs the tensorboard package: pip install 'sampledlm[tensorboard]')")
    checkpoint_every: int = option(0, "also checkpoint every N steps (0: at epoch ends only)", min=0)
    valid_every: int = option(0, "also validate after every N-th optimiser step of each epoch (0: at epoch ends only): "
                                 "for a corpus read less than a few times, the learning curve and the best model "
                                 "from points within an epoch; each point costs one exact validation, and under "
                                 "--lr-schedule plateau each counts for halving the rate (--min-improvement "
                                 "applies to each point)", min=0)
    eval_batch: int | None = option(None, "evaluation batch: histories, sentences, or (recurrent running text) "
                                          "tokens per call; it never changes the perplexity", min=1)
    valid_sum_precision: str = option("fp32", "the precision of the products inside the validation's normaliser "
                                              "sum over V, as eval's --sum-precision: bf16 about halves an exact "
                                              "validation over hundreds of thousands of words (13 CPU-minutes a "
                                              "pass of 280k tokens at V = 485k in fp32), ln P off by about 1e-5 a "
                                              "word", choices=("fp32", "bf16"))
    device: str = option("auto", "where to train: auto (the GPU when there is one), cpu, cuda or cuda:N")
    precision: str = option("fp32", "the training forward pass in fp32, or under bf16 / fp16 autocast (bf16: a GRU trains "
                                    "1.3-1.6x the words per CPU second on a CPU with AVX512-BF16, at the same "
                                    "perplexity; fp16 with loss scaling); weights, "
                                    "updates, the loss and every evaluation stay float32", choices=PRECISIONS)
    compile: bool = option(False, "compile the model's forward pass with torch.compile (slow to start; helps "
                                  "large models on a GPU)")
    train_eval: int = option(0, "at each validation (each epoch's end, each --valid-every point) also report the "
                                "exact perplexity of the first N training tokens",
                             min=0)
    data_fraction: float = option(1.0, "feed-forward: train each epoch on this random share of the positions",
                                  min=0.0, min_open=True, max=1.0)
    data_subset: str = option("variable", "with --data-fraction: the same share every epoch (fixed) or a fresh one",
                              choices=("fixed", "variable"))

    @classmethod
    def from_dict(cls, d: dict, path: str = "config.json") -> "TrainOptions":
        if isinstance(d, dict) and "bf16" in d:  # runs written before --precision: bf16 true/false
            d = dict(d)
            if d.pop("bf16") is True and d.get("precision", "fp32") == "fp32":
                d["precision"] = "bf16"
        return cfgmod.from_dict(cls, d, f"{path}: train")

    def check(self) -> None:
        from ..errors import UserError

        cfgmod.check(self)
        if self.momentum and self.optimizer != "sgd":  # Adam keeps moments of its own; the value would do nothing
            raise UserError(f"{cfgmod.setting_name('momentum')} applies to {cfgmod.setting_value('optimizer', 'sgd')} only "
                            f"(this run: {cfgmod.setting_value('optimizer', self.optimizer)})")
        if self.warmup and self.lr_schedule == "cosine-budget":  # its time share would count the warm-up's seconds
            raise UserError(f"{cfgmod.setting_name('warmup')} does not combine with "
                            f"{cfgmod.setting_value('lr_schedule', 'cosine-budget')} (the decay follows the time "
                            "spent, the warm-up's included); size --epochs to the budget and use "
                            f"{cfgmod.setting_value('lr_schedule', 'cosine')}")
        if self.lr_schedule == "cosine-budget" and not self.max_time > 0:  # nothing to decay over but the epochs
            raise UserError(f"{cfgmod.setting_value('lr_schedule', 'cosine-budget')} decays the rate over "
                            f"{cfgmod.setting_name('max_time')}: give one (or use "
                            f"{cfgmod.setting_value('lr_schedule', 'cosine')} to decay over the epochs)")


def check_warmup_fits(opts: TrainOptions, total_steps: int) -> None:
    """Refuse a warm-up as long as the run (its planned steps: the epochs', or ``--max-steps``): the rate would never
    reach ``--lr`` and the schedule would never start."""
    from ..errors import UserError

    if opts.warmup and opts.warmup >= total_steps:
        raise UserError(f"{cfgmod.setting_value('warmup', opts.warmup)} is not shorter than the run's {total_steps:,} "
                        f"planned steps: the rate would never reach {cfgmod.setting_value('lr', opts.lr)}; give a "
                        "warm-up of a few per cent of them")


def budget_spent(opts: TrainOptions, st) -> float:
    """The share of ``--max-time`` the run has spent on its clock (validation included, as the stop counts it);
    0 without one."""
    return time_spent(opts, st) / opts.max_time if opts.max_time > 0 else 0.0


def time_spent(opts: TrainOptions, st) -> float:
    """The run's seconds on the clock of ``--max-time`` (``--time-clock``)."""
    return st.cpu_seconds if opts.time_clock == "cpu" else st.wall_seconds


def stopped_by(opts: TrainOptions, st) -> str | None:
    """The budget that ended a run before its epochs (``--max-steps 1000``, ``--max-time 0.5 s (cpu clock)``), or None
    when its epochs (or the plateau rule) did."""
    if st.epoch >= opts.epochs:
        return None
    if opts.max_steps and st.step >= opts.max_steps:
        return f"--max-steps {opts.max_steps:,} (step {st.step:,})"
    spent = time_spent(opts, st)
    if opts.max_time > 0 and spent >= opts.max_time:
        return f"--max-time {opts.max_time:g} s ({opts.time_clock} clock, {spent:,.1f} s spent)"
    return None


def train_options_for(model_type: str, given: dict) -> TrainOptions:
    """The training options of a new run: the model kind's defaults, then the user's (None = default)."""
    from .registry import model_class

    values = dict(model_class(model_type).train_defaults)
    values.update({k: v for k, v in given.items() if v is not None})
    return TrainOptions.from_dict(values, "training options")


#: training settings a resume may change (``train --resume RUN --epochs N``, a run moved between devices)
#: what a resumed run may change: how long it trains, where, and how often it checkpoints (none changes its numbers)
RESUMABLE_CHANGES = frozenset({"epochs", "max_halvings", "device", "checkpoint_every"})


def check_resumed_options(saved_path: str, opts: TrainOptions, run_dir: str) -> None:
    """Refuse a resume whose config.json's training settings ``opts`` are not those its checkpoint was written with
    (``saved_path``, the checkpoint's ``options.json``): an edited ``batch_size`` met the saved recurrent state in a
    torch traceback, an edited ``lr`` was ignored. Checkpoints written before this check hold no ``options.json``;
    theirs are taken as they are."""
    import dataclasses
    import os

    from ..errors import UserError
    from .rundir import read_json

    if not os.path.exists(saved_path):
        return
    saved, now = read_json(saved_path), dataclasses.asdict(opts)
    for key in sorted(set(saved) & set(now) - RESUMABLE_CHANGES):
        if saved[key] != now[key]:
            raise UserError(f"{os.path.join(run_dir, 'config.json')}: train.{key} is {now[key]!r}, but the run's "
                            f"checkpoint was trained with {saved[key]!r}; a run goes on with the settings it began "
                            f"with (only epochs, max_halvings, device and checkpoint_every may change): put {saved[key]!r} "
                            f"back, or start a new run from this one with --init-from")
