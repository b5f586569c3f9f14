"""Starting and resuming a neural run in its directory (:func:`new_run`, :func:`resume_run`); the loop itself is
:mod:`.loop`, its settings :mod:`.train_options`, its optimisers :mod:`.optim`, its plots and TensorBoard scalars
:mod:`.reporting` (their names are re-exported here, where they lived before)."""

from __future__ import annotations

import json
import os

import torch

from . import rundir as runs
from .. import provenance, store
from ..config import said
from ..errors import UserError
from .distributed import Ranks

from .loop import (DIVERGED_LOSS, LOG_SECONDS, PLOT_EVERY_S, Trainer, TrainingInterrupted,  # noqa: F401
                   diverged)
from .run_state import TrainState, interrupt_flag, seed_everything  # noqa: F401
from .optim import clip_gradients, make_optimizers, scheduled_lr, set_lr  # noqa: F401
from .reporting import open_tensorboard, plot_learning_curve  # noqa: F401
from .train_options import LR_SCHEDULES, TB_EVERY, TrainOptions, stopped_by, train_options_for  # noqa: F401


# --- starting and resuming runs --------------------------------------------------------------
def _load_streams(config: dict, vocab):
    from ..data.corpus import load_ids
    from ..data.tokenizer import TextOptions

    data = config["data"]
    opts = TextOptions(**data.get("text_options", {}))
    return load_ids(data["train"], vocab, opts), load_ids(data["valid"], vocab, opts)


#: a text with at least this share of its tokens outside the vocabulary is warned about (as rescoring does)
OOV_WARNING = 0.10


def _warn_unknown_words(config: dict, streams, log) -> None:
    """A warning for each text of a new run with :data:`OOV_WARNING` or more of its words ``<unk>``: a ``--valid``
    text all outside the vocabulary gives a perplexity of ``<unk>`` alone, a ``--vocab`` that matches no training
    word a model of it."""
    import numpy as np

    from ..data.vocab import EOS_ID, UNK_ID

    for role, ids in zip(("train", "valid"), streams):
        ids = np.asarray(ids)
        words = len(ids) - int(np.count_nonzero(ids == EOS_ID))
        share = int(np.count_nonzero(ids == UNK_ID)) / max(words, 1)
        if words and share >= OOV_WARNING and log is not None:
            log(f"warning: {config['data'][role]}: {100 * share:.1f} % of its {words:,} words are outside the "
                f"vocabulary (read as <unk>)" + (": is it the language and tokenisation the vocabulary was made from "
                                                 "(--vocab, or --train with --min-count and --max-size)?"
                                                 if share >= 0.5 else ""))


def _check_same_texts(run_dir: str, config: dict) -> None:
    """A resumed run reads the texts it began with: each one ``provenance.json`` hashed when the run began is
    hashed again, and a changed one is refused (its batches, the cosine's length and the model card would silently
    follow the new text)."""
    began = (provenance.read(run_dir) or {}).get("data") or {}
    for role in ("train", "valid"):
        was, path = began.get(role), config["data"].get(role)
        what = provenance.change_of(was, path) if isinstance(path, str) else None
        if what:
            raise UserError(f"{path}: the --{role} text of {run_dir} changed since the run began (then "
                            f"{was.get('bytes', 0):,} bytes, sha256 {was['sha256'][:12]}; {what}); a resumed run "
                            f"reads the text it began with: put it back, or start a new run from this one's weights "
                            f"with --init-from {run_dir}")


def _last_lr(trainer: Trainer) -> float:
    """The learning rate of the run's last recorded epoch (its start rate when none is)."""
    metrics = trainer.state.metrics
    return metrics[-1].get("lr", trainer.state.lr) if metrics else trainer.state.lr


def new_run(run_dir: str, config: dict, vocab, log=None, ranks: Ranks | None = None) -> Trainer:
    """Create ``run_dir`` (config.json, vocab.txt) and a trainer for a fresh run described by ``config``
    (under torchrun every rank builds the same trainer; rank 0 alone creates and writes the directory)."""
    ranks = ranks or Ranks.single()
    ranks.on_main(lambda: _check_new_run_dir(run_dir))  # rank 0 alone: another could find it half-written by rank 0
    opts = TrainOptions.from_dict(config["train"])
    opts.check()
    if opts.batch_size < ranks.world:  # a rank without rows fails inside its model, and every other rank with it
        raise UserError(f"--batch-size {opts.batch_size} is below the job's {ranks.world} ranks: each rank trains on "
                        f"its share of a batch's rows, so give at least one row a rank (--batch-size "
                        f"{ranks.world} or more)", every_rank=True)
    from .registry import model_class

    model_class(config["model"]["type"]).check_train_options(opts)
    train_ids, valid_ids = _load_streams(config, vocab)
    if ranks.is_main:
        _warn_unknown_words(config, (train_ids, valid_ids), log)
    torch.manual_seed(opts.seed)  # the initial weights depend on the seed only
    # a run started from another over the same vocabulary takes that run's classes or tree with its weights
    # (finetune.copy_weights): clustering this text again would cost minutes at a large V and could come out otherwise
    structure_given = config["data"].get("init_from", {}).get("vocabulary") == "same"
    model, objective = runs.build_from_config(config, vocab, fresh=not structure_given, train_ids=lambda: train_ids)
    objective.prepare(model)  # fresh weights only (e.g. biases at log unigram); a resumed run loads its own
    if len(train_ids) == 0 or len(valid_ids) == 0:
        raise UserError(f"{config['data']['train'] if len(train_ids) == 0 else config['data']['valid']}: no sentences")
    lock = ranks.on_main(lambda: _write_new_run_dir(run_dir, config, vocab))
    if not ranks.is_main:
        return Trainer(run_dir, model, objective, train_ids, valid_ids, opts, log=log, ranks=ranks)
    try:
        trainer = RunTrainer(run_dir, model, objective, train_ids, valid_ids, opts, log=log, ranks=ranks)
        runs.write_provenance(run_dir, config, _device_used(trainer))
    except BaseException:
        lock.__exit__(None, None, None)
        raise
    trainer.lock = lock
    return trainer


def _write_new_run_dir(run_dir: str, config: dict, vocab):
    """Make a new run's directory, take its lock (returned) and write its vocabulary and ``config.json``."""
    try:
        os.makedirs(run_dir, exist_ok=True)
    except OSError as e:
        raise UserError(f"{run_dir}: cannot create run directory ({e.strerror})") from None
    lock = _hold_lock(run_dir)
    try:
        for stale in ("model.safetensors", "objective.safetensors", "metrics.jsonl"):
            if os.path.exists(os.path.join(run_dir, stale)):
                os.remove(os.path.join(run_dir, stale))
        vocab.save(os.path.join(run_dir, "vocab.txt"))
        runs.write_json(os.path.join(run_dir, "config.json"), config)
    except BaseException:
        lock.__exit__(None, None, None)
        raise
    return lock


class RunTrainer(Trainer):
    """The :class:`~.loop.Trainer` of a run directory: when training finishes, the run's ``provenance.json`` and
    model card (:mod:`sampledlm.provenance`) get its final figures."""

    def finish(self) -> None:
        finished = self.state.finalized
        super().finish()
        if not finished and self.ranks.is_main:
            st = self.state
            best = min(st.metrics, key=lambda m: m["valid_ppl"]) if st.metrics else None
            inner = best is not None and "epoch_fraction" in best  # the best is a point within its epoch
            nb = self.data.num_batches()
            provenance.finish(self.run_dir, {"valid_ppl": st.best_valid if best else None,
                                             "best_epoch": best["epoch"] if best else None,
                                             "best_step": best["step"] if inner else None,
                                             "epochs": st.epoch if not st.batch else round(st.epoch + st.batch / nb, 3),
                                             "steps": st.step})


def _device_used(trainer: Trainer) -> str:
    """The device the trainer resolved (never "auto"), with its ranks under torchrun."""
    from .device import device_name

    where = device_name(trainer.device)
    return where + (f", {trainer.ranks.world} ranks" if trainer.ranks.active else "")


#: where a run started from Python with sentences in memory keeps them as text files (``sampledlm.train_lm``), so
#: that it resumes as a run from files does
TEXTS = "texts"
#: what a run directory holds (``.``-names: its lock and the temporary files of atomic writes; provenance.json and
#: README.md, the model card, since 0.2.0)
RUN_FILES = frozenset({"config.json", "config.toml", "vocab.txt", "model.safetensors", "objective.safetensors",
                       "metrics.jsonl", "learning_curve.png", "checkpoint.json", "checkpoints", *provenance.NAMES,
                       TEXTS})


def _check_new_run_dir(run_dir: str) -> None:
    """A new run's directory is new, empty, or a run of ours that stopped before its first checkpoint (killed or
    diverged in epoch 1: nothing in it is worth keeping, so it is started again). Anything else is refused: the
    files of a new run would replace what is there."""
    if not os.path.exists(run_dir):
        return
    if not os.path.isdir(run_dir):
        raise UserError(f"{run_dir}: exists and is not a directory; choose another -o")
    names = {n for n in os.listdir(run_dir) if not n.startswith(".")}
    if not names - {TEXTS}:  # empty, or the texts a run from Python wrote just before it starts
        return
    cpath = os.path.join(run_dir, "config.json")
    family = None
    if os.path.isfile(cpath):  # another family's model directory is never taken for a run that stopped early
        try:
            with open(cpath, encoding="utf-8") as f:
                family = json.load(f).get("family")
        except (OSError, ValueError, AttributeError):
            family = ""  # unreadable: something else
        if family != "neural":
            raise UserError(f"{run_dir}: holds {'a ' + str(family) + ' model' if family else 'something else'}, "
                            "not a neural run; choose another -o")
    others = sorted(names - RUN_FILES)
    if family is None or others:
        raise UserError(f"{run_dir}: exists and holds {(others or sorted(names))[0]}, which a new run would not "
                        "keep; choose another -o (a new directory, or an empty one)")
    if runs.latest_checkpoint(run_dir) is not None:
        raise UserError(f"{run_dir}: already holds a run; continue it with --resume {run_dir} (in Python: "
                        f"sampledlm.resume_lm({run_dir!r})) or choose another -o")
    model = os.path.join(run_dir, "model.safetensors")
    if os.path.isfile(model) and _finalized(model):
        raise UserError(f"{run_dir}: holds a trained model (its checkpoints are gone, so it cannot be resumed); "
                        "choose another -o")


def _finalized(path: str) -> bool:
    """Whether the model file at ``path`` is a finished run's (its header says so; an unreadable one is not)."""
    from safetensors import safe_open

    try:
        with safe_open(path, "pt") as f:
            return (f.metadata() or {}).get("finalized") == "true"
    except Exception:  # noqa: BLE001 - a torn or foreign file: what a killed run may leave
        return False


def _hold_lock(run_dir: str):
    """Take the run directory's lock for the rest of this process (released when it exits)."""
    lock = store.lock_directory(run_dir)
    lock.__enter__()
    return lock


def resume_run(run_dir: str, overrides: dict | None = None, log=None, refuse_finished: bool = False,
               ranks: Ranks | None = None) -> Trainer:
    """A trainer that continues ``run_dir`` from its latest checkpoint.

    ``overrides`` may change ``epochs`` and ``max_halvings`` (to train longer) and ``device`` (a run
    moves between a GPU and a CPU); the rest of the configuration is the run's own. Under torchrun
    every rank reads the checkpoint (the run directory must be on a file system they share).
    """
    ranks = ranks or Ranks.single()
    cfg_path = os.path.join(run_dir, "config.json")
    if not os.path.isdir(run_dir):
        raise store.no_run_directory(run_dir)
    config = runs.check_config(runs.read_json(cfg_path), cfg_path)
    lock = ranks.on_main(lambda: _hold_lock(run_dir))  # first: a run still training is said to be, not "stopped"
    try:
        if runs.latest_checkpoint(run_dir) is None:
            raise UserError(f"{run_dir}: the run stopped before its first checkpoint, so there is nothing to resume; "
                            "start it again with the same " + said(f"'sampledlm train ... -o {run_dir}' command",
                                                                   f"sampledlm.train_lm(..., {run_dir!r}) call"))
        return _resume_locked(run_dir, cfg_path, config, overrides, lock, log, refuse_finished, ranks)
    except BaseException:
        if lock is not None:
            lock.__exit__(None, None, None)
        raise


def _resume_locked(run_dir, cfg_path, config, overrides, lock, log, refuse_finished, ranks) -> Trainer:
    epochs_before = config["train"].get("epochs")
    for k, v in (overrides or {}).items():
        if v is not None:
            config["train"][k] = v
    vocab = runs.load_vocab_checked(run_dir, config)
    _check_same_texts(run_dir, config)
    opts = TrainOptions.from_dict(config["train"], cfg_path)
    try:
        model, objective = runs.build_from_config(config, vocab)
    except UserError as e:  # a field of config.json that the model or objective refuses: name the file, as eval does
        raise UserError(f"{cfg_path}: {e}") from None
    train_ids, valid_ids = _load_streams(config, vocab)
    trainer = RunTrainer(run_dir, model, objective, train_ids, valid_ids, opts, log=log, ranks=ranks)
    ckpt = runs.latest_checkpoint(run_dir)
    if ckpt is None:
        raise UserError(f"{run_dir}: no checkpoint to resume from (checkpoint.json missing)")
    trainer.load_checkpoint(ckpt)
    trainer.lock = lock
    more = (overrides or {}).get("epochs") is not None and overrides["epochs"] > trainer.state.epoch
    limit = stopped_by(opts, trainer.state)
    if refuse_finished and trainer.state.finalized and limit:  # more epochs would take one step, or one epoch, each
        raise UserError(f"{run_dir}: training ended at its {limit}, which --resume does not change; start another run "
                        f"from it with --init-from {run_dir} (and a new budget)")
    if refuse_finished and trainer.state.finalized and not more:  # before config.json is touched
        st, nb = trainer.state, trainer.data.num_batches()
        n = f"{st.epoch} epoch{'s' if st.epoch != 1 else ''}" if not st.batch else \
            f"{st.epoch + st.batch / nb:.2f} epochs (at step {st.step:,}, where validation stopped it)"
        raise UserError(f"{run_dir}: training already finished after {n} (best valid ppl "
                        f"{trainer.state.best_valid:.2f}); give a larger --epochs to train it further, or start "
                        f"another run from it with --init-from {run_dir}")
    if ranks.is_main:  # a new session of training: its date and device (a run from before 0.2.0: begun now)
        runs.write_provenance(run_dir, config, _device_used(trainer), resumed=True)
    if opts.lr_schedule != "plateau" and opts.epochs != epochs_before and ranks.is_main and log is not None:
        st = trainer.state  # the cosine is spread over the new total: its rate at this step is not the last one
        log(f"note: --epochs {overrides['epochs']} spreads the cosine schedule over {overrides['epochs']} epochs, so "
            f"training goes on at lr {trainer.scheduled(st.step):g}, the "
            f"schedule's rate at step {st.step:,} (its last epoch ended at lr {_last_lr(trainer):g})")
    if trainer.state.finalized and more:
        # a finished run trained further: from its final (best) weights, its optimiser's last state, the
        # learning rate it ended with (a cosine's: its rate over the new epochs); finishing is undone (binary's
        # calibration), and done again at the end
        trainer.objective.unfinalize(trainer.model)
        trainer.state.finalized = trainer.state.done = False
    if overrides and any(v is not None for v in overrides.values()):
        if ranks.is_main:
            runs.write_json(cfg_path, config)
        st = trainer.state
        if st.done and not st.finalized and st.epoch < opts.epochs:
            st.done = False  # more epochs were asked for
        if not st.done and st.batch == 0 and st.epoch >= opts.epochs:
            st.done = True  # fewer epochs: stop here (the best weights so far become the final model)
    return trainer
