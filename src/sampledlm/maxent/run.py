"""Training a maximum-entropy LM into a directory: the library's side of ``sampledlm maxent train`` and of
:func:`sampledlm.train_maxent` (the command line parses flags and prints; every rule is here)."""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable

from ..config import option, setting_name, setting_value
from ..errors import UserError
from .config import AVERAGES, TrainConfig
from .features import FeatureSpec

#: the trigger features' settings and their defaults (None given: these), from :class:`.features.FeatureSpec`
TRIGGER_DEFAULTS = {f.name: f.default for f in dataclasses.fields(FeatureSpec) if f.name.startswith("trigger_")}


_TRAIN = TrainConfig()
MAX_RANKS = 1024  # local processes: each a Python process with its own copy of the features


def _default(text) -> str:
    return f" [default: {text}]"


@dataclasses.dataclass
class MaxentRun:
    """What ``maxent train`` is given, each setting declared once with its help and range (the command line makes
    its flags from these fields); None = not given (the default then applies: :class:`.config.TrainConfig`'s,
    :data:`TRIGGER_DEFAULTS`, or the source model's with ``init_dir``). A setting that does not apply is refused
    only when given."""

    features: str = option("feat-i", "Comma-separated: unigram, bigram, trigram, 4gram.., skip-bigram, skip-trigram, "
                                     "trigger; or feat-i (n-grams to 3) / feat-ii (+ skip and trigger).")
    objective: str = option(_TRAIN.objective, "binary: independent logistic classifiers (renormalised, eq. 8). "
                                              "softmax: standard MELM.", choices=("binary", "softmax"))
    alpha: float | None = option(None, "binary: fraction alpha of negatives kept. softmax: fraction of training "
                                       "positions used." + _default(_TRAIN.alpha),
                                 min=0.0, max=1.0, min_open=True, flag="--neg-rate")
    neg_subset: str | None = option(None, "binary: draw new negatives every epoch, or keep the same ones (the paper's "
                                          "MELM runs; worse on PTB at small rates, see docs/results/xu-melm.md)."
                                    + _default("fixed" if _TRAIN.fixed_negatives else "variable"),
                                    choices=("fixed", "variable"))
    lr: float = option(_TRAIN.lr, "Initial learning rate.", min=0.0, min_open=True)
    optimizer: str = option("adagrad" if _TRAIN.adagrad else "sgd", "adagrad: per-weight steps lr g / sqrt(1 + sum "
                            "g^2). sgd: plain SGD (the paper: lr 0.1).", choices=("adagrad", "sgd"))
    average: str = option(_TRAIN.average, "Evaluate and keep averaged weights: none (the last weights, as the paper); "
                                          "the mean over each epoch; over every epoch from the 2nd (run); or (auto) "
                                          "since the last epoch at which the last weights did better on --valid.",
                          choices=tuple(AVERAGES))
    epochs: int = option(_TRAIN.epochs, "Most epochs.", min=1)
    min_improvement: float | None = option(None, "Relative valid-ppl gain that counts as improving: below it lr is "
                                                 "halved, and training stops at the next such epoch."
                                           + _default(_TRAIN.min_gain), min=0.0, max=1.0, max_open=True)
    l2: float = option(_TRAIN.l2, "L2 (Gaussian prior) l2/2 |theta|^2 on feature weights, over the training set.",
                       min=0.0)
    hash_size: int | None = option(None, "Hash feature weights into this many slots." + _default("no hashing"), min=1)
    trigger_window: int | None = option(None, "Trigger words up to this many tokens back."
                                        + _default(TRIGGER_DEFAULTS["trigger_window"]), min=2)
    trigger_gap: int | None = option(None, "Ignore the last this many tokens as triggers."
                                     + _default(TRIGGER_DEFAULTS["trigger_gap"]), min=0)
    trigger_pairs: int | None = option(None, "Trigger pairs kept (by mutual information)."
                                       + _default(TRIGGER_DEFAULTS["trigger_pairs"]), min=1)
    trigger_min_count: int | None = option(None, "Least count of a trigger pair."
                                           + _default(TRIGGER_DEFAULTS["trigger_min_count"]), min=1)
    trigger_min_lift: float | None = option(None, "Keep a trigger pair (v, w) only when v in the window makes w more "
                                                  "than this many times likelier."
                                            + _default(TRIGGER_DEFAULTS["trigger_min_lift"]), min=1.0)
    seed: int = option(_TRAIN.seed, "Random seed.", min=0, max=2**32 - 1)


def train_directory(train_path: str, valid_path: str, out_dir: str, run: MaxentRun, text_options, *,
                    force: bool = False, init_dir: str | None = None, vocab_path: str | None = None, ranks: int = 1,
                    distributed: bool = False, check_source: Callable[[str, str, dict, dict], None] | None = None,
                    log: Callable[[str], None] = lambda line: None, resume=None,
                    keep_texts: tuple[str, ...] = ()) -> dict | None:
    """Train on ``train_path`` (learning rate halved on ``valid_path``'s perplexity) and write the model to
    ``out_dir``; returns its config.json (None on a torchrun rank other than 0, which writes nothing).

    ``init_dir``: start from that model (its objective, features and text options;
    ``check_source(init_dir, what, theirs, here)`` may refuse a given setting that differs). ``ranks``: local
    processes (vocabulary shards); ``distributed``: one rank of a torchrun job. Every epoch's state is saved in
    ``out_dir`` (:mod:`.checkpoint`; not with ``distributed``); ``resume`` (the saved vocabulary) goes on from it:
    :func:`resume_directory` gives the rest as the run began; ``keep_texts``: the roles whose files are temporary
    (kept with the state for a resumed run)."""
    import numpy as np

    from .. import provenance, store
    from ..data.corpus import build_vocab, load_ids
    from ..data.vocab import Vocab
    from ..outputs import writing_directory
    from . import checkpoint
    from .shard import ShardJob, run_from_env, train_sharded
    from .shard import check as check_job

    triggers = {k: (TRIGGER_DEFAULTS[k] if getattr(run, k) is None else getattr(run, k)) for k in TRIGGER_DEFAULTS}
    writer = _check_ranks(ranks, distributed, log) == 0  # this process writes the directory (rank 0)
    if writer and resume is None:
        check_output(out_dir, force)
    spec = FeatureSpec.parse(run.features, **triggers)
    objective, hash_size, alpha = run.objective, run.hash_size, run.alpha
    start = None
    if init_dir:
        start, spec, objective, hash_size, alpha, text_options, vocab = _init_from(init_dir, spec, vocab_path, alpha,
                                                                                   check_source, resume)
    _check_applies(run, spec, objective)
    if start is None:
        vocab = resume or (Vocab.load(vocab_path) if vocab_path else build_vocab(train_path, text_options))
    elif writer and resume is None:
        from ..data.vocabmap import announce

        log(announce(init_dir, start.origin))
    train_ids = np.asarray(load_ids(train_path, vocab, text_options))
    valid_ids = np.asarray(load_ids(valid_path, vocab, text_options))
    for path, ids in ((train_path, train_ids), (valid_path, valid_ids)):
        if len(ids) == 0:
            raise UserError(f"{path}: no sentences (empty file or blank lines only)")
    cfg = _train_config(run, objective, alpha)
    job = ShardJob(train_ids, valid_ids, vocab.counts, spec, cfg, hash_size, out_dir if writer else None, vocab,
                   # one process: its epoch lines go to ``log`` (the API's is silent); ranks in processes of their
                   # own print theirs (a function does not cross into a spawned process)
                   log=log if ranks == 1 and not distributed else True,
                   info={"train_file": os.path.abspath(train_path), "valid_file": os.path.abspath(valid_path),
                         **({"init_from": start.origin} if start else {})},
                   text_options=text_options.to_dict(), start=start, checkpoint_dir=None if distributed else out_dir)
    check_job(job, int(os.environ["WORLD_SIZE"]) if distributed else ranks)  # before the directory is touched
    if not writer:  # a torchrun rank other than 0: rank 0 writes (and locks) the directory
        run_from_env(job)
        return None
    began = {"train": os.path.abspath(train_path), "valid": os.path.abspath(valid_path), "settings":
             dataclasses.asdict(run), "ranks": ranks, "init_dir": init_dir, "text_options": text_options.to_dict()}
    with writing_directory(out_dir, store.lock_directory):
        began["data"] = data = provenance.data_records({"train": train_path, "valid": valid_path})
        if resume is None:
            check_output(out_dir, force, clean=True)  # again, now that no other process can write here
            if not distributed:
                checkpoint.write_run(out_dir, began, vocab, keep_texts)
        else:
            checkpoint.read_run(out_dir)  # still there, now that the directory is locked
        try:
            run_from_env(job) if distributed else train_sharded(job, ranks)
        except UserError:  # bad input, training diverged: nothing to go on with, nothing kept (Ctrl-C keeps it)
            checkpoint.remove(out_dir)
            raise
        world = int(os.environ.get("WORLD_SIZE", "1")) if distributed else ranks
        config = _write_card(out_dir, f"features {','.join(spec.names)}, {objective} objective, vocabulary of "
                                      f"{len(vocab):,} words", data, world)
        checkpoint.remove(out_dir)  # the model is written: its training state is no longer needed
    log(f"features: {', '.join(f'{k} {v:,}' for k, v in config['feature_counts'].items())}")
    log(f"best valid ppl {config['training']['best_valid_ppl']:.2f}; model written to {out_dir}")
    return config


def _check_ranks(ranks, distributed: bool, log: Callable[[str], None]) -> int:
    """This process's rank (0 unless ``distributed``), once ``ranks`` and a torchrun environment are found sound:
    checked before anything is written (a bad value left a half-made directory that a corrected run was refused)."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= MAX_RANKS:
        raise UserError(f"ranks {ranks!r}: give a whole number of local processes from 1 to {MAX_RANKS}")
    if distributed:
        if ranks > 1:
            raise UserError("--distributed runs this process as one rank of a torchrun job; --ranks starts ranks on "
                            "this machine: give one of them")
        from ..neural.distributed import rank_from_env, world_size_from_env

        if "WORLD_SIZE" not in os.environ:
            raise UserError("--distributed runs one rank of a torchrun job, and RANK and WORLD_SIZE are not set: "
                            "start it with torchrun --nproc-per-node N -m sampledlm maxent train ... --distributed, "
                            "or use --ranks N for processes on this machine")
        return rank_from_env(world_size_from_env())
    if os.environ.get("WORLD_SIZE", "1") not in ("", "0", "1"):  # every torchrun rank would lock the same directory
        raise UserError(f"this process is one of torchrun's ranks (WORLD_SIZE={os.environ['WORLD_SIZE']}): add "
                        "--distributed, so that each trains its shard of the words; or run without torchrun")
    cpus = os.cpu_count() or 1
    if ranks > cpus:
        log(f"note: {ranks} ranks on {cpus} CPUs: the ranks take turns on the CPUs, so training is slower than with "
            f"--ranks {cpus}")
    return 0


def _check_applies(run: MaxentRun, spec: FeatureSpec, objective: str) -> None:
    """Refuse a setting given for features or an objective this run does not have."""
    trigger_given = [f for f in TRIGGER_DEFAULTS if getattr(run, f) is not None]
    if trigger_given and "trigger" not in spec.names:
        raise UserError(f"{setting_name(trigger_given[0])} shapes trigger features, which "
                        f"{setting_value('features', ','.join(spec.names))} does not use (add trigger, or feat-ii)")
    if objective != "binary" and run.neg_subset is not None:
        raise UserError(f"{setting_name('neg_subset')} chooses the binary objective's negatives; the {objective} "
                        "objective has none")


def _train_config(run: MaxentRun, objective: str, alpha: float | None) -> TrainConfig:
    return TrainConfig(objective=objective, alpha=TrainConfig.alpha if alpha is None else alpha, lr=run.lr,
                       epochs=run.epochs,
                       min_gain=TrainConfig.min_gain if run.min_improvement is None else run.min_improvement,
                       l2=run.l2, seed=run.seed, fixed_negatives=run.neg_subset == "fixed",
                       adagrad=run.optimizer == "adagrad", average=run.average)


def _write_card(out_dir: str, what: str, data: dict, world: int) -> dict:
    """The model card (provenance.json) of the model just written to ``out_dir``; returns its config.json."""
    from .. import provenance, store

    provenance.remove(out_dir)  # a model replaced (--force): its card goes once the new model is written (not
    config = store.read_json(os.path.join(out_dir, "config.json"))  # before: a failed run kept the old one)
    prov = provenance.new("maxent", f"A maximum-entropy language model: {what}", data,
                          "cpu" + (f", {world} processes" if world > 1 else ""),
                          figures={"valid_ppl": config["training"]["best_valid_ppl"]})
    prov["finished"] = prov["created"]
    provenance.write(out_dir, prov)
    return config


def resume_directory(out_dir: str, log: Callable[[str], None] = lambda line: None) -> dict:
    """Go on with the training stopped in ``out_dir`` from its last finished epoch, with the texts, settings and
    ranks it began with (``.checkpoint/run.json``); returns the model's config.json as :func:`train_directory`."""
    from ..data.tokenizer import TextOptions
    from .checkpoint import committed_epoch, read_run

    began, vocab = read_run(out_dir)
    _check_same_texts(out_dir, began)
    log(f"{out_dir}: resuming after epoch {committed_epoch(out_dir)}" if committed_epoch(out_dir)
        else f"{out_dir}: no epoch had finished; starting its first again")
    return train_directory(began["train"], began["valid"], out_dir, MaxentRun(**began["settings"]),
                           TextOptions.from_dict(began["text_options"], out_dir), init_dir=began.get("init_dir"),
                           ranks=int(began.get("ranks", 1)), log=log, resume=vocab)


def _check_same_texts(out_dir: str, began: dict) -> None:
    """A resumed run reads the texts it began with: each one hashed again and refused where it changed."""
    from .. import provenance

    for role in ("train", "valid"):
        was = (began.get("data") or {}).get(role) or {}
        what = provenance.change_of(was, began[role])
        if what:
            raise UserError(f"{began[role]}: the --{role} text of {out_dir} changed since its training began (then "
                            f"{was.get('bytes', 0):,} bytes; {what}); a resumed run reads the text it began with: "
                            f"put it back, or start again with --force")


def _init_from(init_dir: str, spec, vocab_path: str | None, alpha: float | None, check_source, vocab_now=None):
    """``(start, spec, objective, hash_size, alpha, text options, vocabulary)`` of a run started from the model in
    ``init_dir`` (:mod:`sampledlm.maxent.finetune`): the source's objective, features and text options, its
    ``--neg-rate`` unless one is given, its vocabulary unless ``vocab_path`` (or a resumed run's ``vocab_now``)
    gives one."""
    from ..data.tokenizer import TextOptions
    from ..data.vocab import Vocab
    from .finetune import Start, source_model

    source, src_vocab = source_model(init_dir)
    theirs = source.features.spec
    text = TextOptions.from_dict(source.text_options, init_dir)
    if check_source is not None:
        check_source(init_dir, "the objective, features and how text is read",
                     {"objective": source.objective, "features": theirs.names,
                      "hash_size": source.features.hash_size, "trigger_window": theirs.trigger_window,
                      "trigger_gap": theirs.trigger_gap, "trigger_pairs": theirs.trigger_pairs,
                      "trigger_min_count": theirs.trigger_min_count,
                      "trigger_min_lift": theirs.trigger_min_lift, **text.to_dict()},
                     {"features": spec.names})
    vocab = vocab_now or (Vocab.load(vocab_path) if vocab_path else src_vocab)
    return (Start.of(source, src_vocab, vocab, init_dir), theirs, source.objective, source.features.hash_size,
            source.alpha if alpha is None else alpha, text, vocab)


#: What a ``maxent train`` killed while saving leaves: its weights file (written first), perhaps vocab.txt, temporary
#: files, and no config.json yet.
_INTERRUPTED_SAVE = re.compile(r"^(vocab\.txt|model-[0-9a-f]{12}\.safetensors|\..+\.tmp)$")


def check_output(out_dir: str, force: bool, clean: bool = False) -> None:
    """Refuse to overwrite: an existing model needs --force; a non-empty non-model directory is never written.
    A save that was interrupted before its config.json (the commit point) holds no model: it is started
    again (``clean``, under the directory's lock: its files are removed first). A training stopped with its epochs'
    state saved (:mod:`.checkpoint`) is resumed, or started over with ``force``."""
    from .. import store

    if not os.path.exists(out_dir):
        return
    if not os.path.isdir(out_dir):
        raise UserError(f"{out_dir}: exists and is not a directory")
    from . import checkpoint

    entries = [e for e in os.listdir(out_dir) if e not in (".lock", checkpoint.FOLDER)]
    has_model = os.path.exists(os.path.join(out_dir, "config.json"))
    stopped = os.path.isfile(os.path.join(checkpoint.folder(out_dir), "run.json")) and not has_model
    if stopped and all(_INTERRUPTED_SAVE.match(e) for e in entries):
        if not force:
            epoch = checkpoint.committed_epoch(out_dir)
            when = f"after epoch {epoch}" if epoch else "before its first epoch ended"
            raise UserError(f"{out_dir}: holds a maxent training stopped {when}: go on with it by "
                            f"`sampledlm maxent train --resume {out_dir}` (in Python: "
                            f"sampledlm.resume_maxent({out_dir!r})), or give --force to start it over")
        if clean:
            for e in entries:
                os.remove(os.path.join(out_dir, e))
            checkpoint.remove(out_dir)
        return
    if clean and not has_model:
        checkpoint.remove(out_dir)  # a state folder without its run.json: killed before it was written
    if not entries:
        return
    if not os.path.exists(os.path.join(out_dir, "config.json")) and all(_INTERRUPTED_SAVE.match(e) for e in entries) \
            and any(e.startswith(("model-", ".model-")) for e in entries):  # the save writes the weights first
        if clean:
            for e in entries:
                os.remove(os.path.join(out_dir, e))
        return
    family = None
    if os.path.isfile(os.path.join(out_dir, "config.json")):
        try:
            family = store.read_config(out_dir)[1]
        except UserError:
            family = None
    if family == "maxent":
        if not force:
            raise UserError(f"{out_dir}: already holds a maxent model; give --force (in Python: "
                            "force=True) to replace it, or choose another -o")
        if clean:
            checkpoint.remove(out_dir)  # a finished run's state, left by a kill between the model and its removal
        return
    what = f"holds a {family} model" if family else "is not empty"
    raise UserError(f"{out_dir}: {what}; choose another -o (--force only replaces a maxent model)")
