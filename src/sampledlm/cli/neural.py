"""``sampledlm train``: neural language models from the command line (thin layer).

Every model, objective and training flag is generated from the configuration dataclasses
(:mod:`sampledlm.config`): the model's ``Config`` (``sampledlm.neural.ffnn``, ``.rnn``), the
objectives' options (``sampledlm.objectives``) and :class:`~sampledlm.neural.trainer.TrainOptions`.
"""

from __future__ import annotations

import os

import click
from click.core import ParameterSource

from ..errors import UserError
from ..neural.registry import MODELS
from ..neural.reporting import best_point
from ..neural.train_options import TrainOptions, stopped_by
from ..neural.settings import MODEL_FIELDS, OBJECTIVE_FIELDS, TRAIN_FIELDS, build_config
from ..objectives.registry import OBJECTIVES, option_help
from .common import CONTEXT, TEXT_FLAGS, deprecated, text_options, THREADS
from .grouped import GroupedCommand
from .configfile import config_option
from .options import dataclass_options, objective_flag_options

def _one_pass_defaults() -> dict[str, str]:
    """``{"dropout": "gru, lstm reading their text once (--epochs 1, >= 20,000 steps): 0.0"}`` for the help."""
    from ..neural.settings import ONE_PASS_STEPS

    by: dict = {}
    for name, cls in MODELS.items():
        if cls.one_pass_dropout is not None:
            by.setdefault(cls.one_pass_dropout, []).append(name)
    return {"dropout": "; ".join(f"{', '.join(names)} reading their text once (--epochs 1, >= {ONE_PASS_STEPS:,} "
                                 f"steps): {rate}" for rate, names in by.items())} if by else {}


MODEL_OPTIONS, _ = dataclass_options({name: cls.Config for name, cls in MODELS.items()}, None, _one_pass_defaults())


def _objective_train_defaults() -> dict[str, str]:
    """``{training setting: "nce, blackout on recurrent models: 0.004"}``: the objectives' own training defaults on a
    recurrent trunk (``sequence_train``), for the flags' help."""
    by: dict[str, dict] = {}
    for name, cls in OBJECTIVES.items():
        for key, value in cls.sequence_train.items():
            by.setdefault(key, {}).setdefault(value, []).append(name)
    longer: dict[str, list[str]] = {}  # sequence_train_long: the values that replace them on a long run
    for name, cls in OBJECTIVES.items():
        for above, values, _ in cls.sequence_train_long:
            for key, value in values.items():
                if key in TRAIN_FIELDS:  # an objective option's long-run value is in that option's own help
                    longer.setdefault(key, []).append(f"--objective {name} over {above:,} steps: {value}")
    short = _short_run_train()
    return {key: "; ".join([*(f"--objective {', '.join(names)} on recurrent models: {value}"
                              for value, names in by.get(key, {}).items()), *longer.get(key, []), *short.get(key, [])])
            for key in {*by, *longer, *short}}


def _short_run_train() -> dict[str, list[str]]:
    """``{"optimizer": ["gru under 20,000 planned steps, unless --optimizer is given: adamw"]}`` for the help."""
    from ..neural.settings import SHORT_RUN_STEPS

    out: dict[str, list[str]] = {}
    for name, cls in MODELS.items():
        for key, value in cls.short_run_train.items():
            out.setdefault(key, []).append(f"--model {name} under {SHORT_RUN_STEPS:,} planned steps (where "
                                           f"--optimizer is not given or is {cls.short_run_train['optimizer']}): "
                                           f"{value}")
    return out


TRAIN_OPTIONS, _ = dataclass_options({name: TrainOptions for name in MODELS},
                                     {name: cls.train_defaults for name, cls in MODELS.items()},
                                     _objective_train_defaults())
RESUME_OVERRIDES = ("epochs", "max_halvings", "device", "checkpoint_every")
#: reproductions of papers' protocols: options a plain run does not need
REPRODUCTION = ("max_time", "time_clock", "data_fraction", "data_subset", "train_eval", "true_term", "sampler")
HELP_GROUPS = [
    ("Input and output", ("train_path", "valid_path", "run_dir", "resume_dir", "init_dir", "config_file")),
    ("Model", ("model_type", "context_size", *MODEL_FIELDS)),
    ("Training", ("threads", *(f for f in TRAIN_FIELDS if f not in REPRODUCTION))),
    ("Output objective (most options name the objectives they apply to; one given where it does not apply is refused)",
     ("objective", *(f for f in OBJECTIVE_FIELDS if f not in REPRODUCTION))),
    ("Vocabulary and text", ("vocab_path", "min_count", "max_size", *TEXT_FLAGS)),
    ("Reproducing papers' protocols (time budgets, data subsets, estimator variants)", REPRODUCTION),
]


def _echo(msg: str) -> None:
    """A note or warning, said once for a torchrun job (by rank 0: every rank resolves the same settings)."""
    if os.environ.get("RANK", "0") == "0":
        click.echo(msg, err=True)


@click.command(cls=GroupedCommand, groups=HELP_GROUPS, context_settings=CONTEXT)
@click.option("--train", "train_path", help="Training text, one sentence per line.")
@click.option("--valid", "valid_path", help="Validation text: learning-rate schedule and best-model selection.")
@click.option("-o", "--output", "run_dir", help="Run directory to create (config, vocab, weights, metrics, plot).")
@click.option("--resume", "resume_dir", default=None, help="Continue the run in this directory from its last checkpoint "
                                                         "(a finished run too, given a larger --epochs).")
@click.option("--init-from", "init_dir", default=None, metavar="RUN",
              help="Start from a trained run's weights (its model and objective; this command's training settings "
                   "and text): domain adaptation. The text is read with RUN's vocabulary unless --vocab, "
                   "--min-count or --max-size makes a new one (shared words keep their rows).")
@click.option("--vocab", "vocab_path", default=None, help="Vocabulary file to use [default: built from --train].")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True, help="Building the vocabulary: rarer words become <unk>.")
@click.option("--max-size", type=click.IntRange(min=3), default=None, help="Building the vocabulary: keep at most this many entries, </s> and <unk> included [default: no limit].")
@click.option("--model", "model_type", type=click.Choice(list(MODELS)), default="ffnn", show_default=True,
              help="Model: feed-forward n-gram (Bengio et al. 2003), recurrent (gru, lstm) or Transformer.")
@MODEL_OPTIONS
@click.option("--context-size", type=click.IntRange(min=1), default=None, help="ffnn: history length n-1 (alternative to --order).")
@click.option("--objective", type=click.Choice(list(OBJECTIVES)), default="softmax", show_default=True,
              help="Output objective: the exact softmax or a sampled approximation (evaluation is always exact).")
@objective_flag_options(option_help(), OBJECTIVE_FIELDS)
@TRAIN_OPTIONS
@click.option("--threads", type=THREADS, default=None, help="Torch CPU threads [torch default; with --resume, the run's own]; waiting threads sleep (OMP_WAIT_POLICY=PASSIVE, unless you set it: ACTIVE spins, about 15 % faster on idle cores, far slower on busy ones).")
@click.option("--bf16", "bf16_alias", is_flag=True, default=False, hidden=True, help="The earlier name of --precision bf16.")
@config_option
@text_options
def train(opts, train_path, valid_path, run_dir, resume_dir, init_dir, vocab_path, min_count, max_size, model_type,
          context_size, objective, threads, bf16_alias, **flags):
    """Train a neural LM (feed-forward, recurrent or Transformer) into a run directory.

    Every epoch ends with the exact validation perplexity. Defaults are per model kind and,
    on recurrent models, per objective: each option's help lists them, and the run's
    config.toml records every value with where it came from (given, --model, --objective,
    default). Ctrl-C writes a checkpoint; --resume continues with the same numbers. A run
    killed before its first checkpoint is started again by running the same command.

    \b
    --device auto trains on the GPU when torch sees one; --precision bf16 or fp16 runs the
    forward pass under autocast. Several processes (GPUs, or CPU ranks over gloo) train one
    model with torchrun; rank 0 writes the run directory:
      torchrun --nproc-per-node 2 -m sampledlm train --train train.txt --valid valid.txt -o gru2
    Example:
      sampledlm train --train train.txt --valid valid.txt -o ffnn3
      sampledlm train --train train.txt --valid valid.txt --model gru -o gru
      sampledlm train --train train.txt --valid valid.txt --objective css-is --samples 250 -o ffnn3-css
      sampledlm train --resume ffnn3
      sampledlm train --resume ffnn3 --epochs 20          # a finished run, trained further
      sampledlm train --init-from gru --train domain.txt --valid domain-valid.txt --lr 0.001 -o gru-domain
    """
    import torch

    from ..neural.trainer import resume_run

    from ..neural.device import resolve_device
    from ..neural.distributed import Ranks

    if resume_dir and not threads:
        threads = _recorded_threads(resume_dir)  # a run's thread count is one of its own settings
    if threads:
        torch.set_num_threads(threads)
    if bf16_alias:
        if flags.get("precision") not in (None, "bf16"):
            raise UserError(f"--bf16 and --precision {flags['precision']} disagree (--bf16 is --precision bf16)")
        deprecated("--bf16 is deprecated; use --precision bf16")
        flags["precision"] = "bf16"
    ctx = click.get_current_context()
    ranks = Ranks.from_env(resolve_device(flags.get("device") or "auto"))
    say = _echo if ranks.is_main else (lambda msg: None)  # rank 0 speaks for the run
    created = False
    if init_dir and resume_dir:
        raise UserError("--init-from starts a new run from another; --resume continues a run: give one of them")
    if resume_dir:
        given = [p for p in ctx.params if p not in ("resume_dir", "threads") + RESUME_OVERRIDES
                 and ctx.get_parameter_source(p) not in (None, ParameterSource.DEFAULT)]  # a --config file's too
        if given:
            source = "" if ctx.get_parameter_source(given[0]) == ParameterSource.COMMANDLINE else " from --config"
            raise UserError(f"--resume continues a run with its own settings; only --epochs, --max-halvings, "
                            f"--device, --checkpoint-every and --threads may be given with it (got {_flag(ctx, given[0])}{source})")
        over = {k: flags[k] for k in RESUME_OVERRIDES if flags.get(k) is not None}
        trainer = resume_run(resume_dir, over, log=say, refuse_finished=True, ranks=ranks)
        if over.get("epochs") is not None and ranks.is_main:  # config.toml repeats what the run now is
            from .configfile import amend_setting

            amend_setting(resume_dir, "epochs", over["epochs"], f"--resume --epochs {over['epochs']} (a cosine run "
                          "extended so restarts its decay: one run of this many epochs is not the same)")
        say(f"resuming {resume_dir} at epoch {trainer.state.epoch + 1}, step {trainer.state.step}")
    else:
        trainer, created = _start_run(ctx, opts, flags, say, ranks)
        resume_dir = run_dir
    try:
        state = trainer.train()
    except BaseException as e:
        ranks.close(together=False)
        if not isinstance(e, KeyboardInterrupt) and resume_dir == run_dir:  # a failure, not a Ctrl-C or a kill
            _remove_unstarted(run_dir, created)
        raise
    ranks.close()
    limit = stopped_by(trainer.opts, state)
    say(f"best valid ppl {state.best_valid:.2f} ({best_point(state.metrics)}); model in {resume_dir}"
        + (f" (training ended at its {limit}, after epoch {state.epoch} of {trainer.opts.epochs})" if limit else ""))


def _start_run(ctx, opts, flags: dict, say, ranks):
    """``(trainer, created)`` of a new run (``-o``), from its settings or ``--init-from`` another run: its config
    resolved (the notes said), its directory made and its settings stored in ``config.toml``."""
    p = ctx.params
    train_path, valid_path, run_dir, init_dir = p["train_path"], p["valid_path"], p["run_dir"], p["init_dir"]
    vocab_path, min_count, max_size = p["vocab_path"], p["min_count"], p["max_size"]
    model_type, context_size, objective = p["model_type"], p["context_size"], p["objective"]
    from ..neural.trainer import new_run

    for flag, val in (("--train", train_path), ("--valid", valid_path), ("-o/--output", run_dir)):
        if not val:  # a command-line mistake: usage and status 2, as click's own missing options
            raise click.UsageError(f"{flag} is required (or --resume RUN_DIR)", ctx)
    if init_dir:
        source, config, vocab = init_config(ctx, init_dir, opts, train_path, valid_path, vocab_path, min_count,
                                            max_size, flags)
        from ..data.vocabmap import announce

        say(announce(init_dir, config["data"]["init_from"]))
    else:
        notes: list[str] = []
        sources: dict[str, str] = {}
        try:
            config, vocab = build_config(opts, train_path, valid_path, vocab_path, min_count, max_size,
                                         model_type, context_size, objective, flags, notes, sources)
        finally:  # what was settled before a refusal is said too, as before
            for note in notes:
                _echo(note)
    _warn_idle_flags(ctx, config)
    created = ranks.is_main and not os.path.exists(run_dir)
    try:
        trainer = new_run(run_dir, config, vocab, log=say, ranks=ranks)
        if init_dir:
            from ..neural.finetune import copy_into_trainer

            copy_into_trainer(source, trainer, vocab, init_dir)
        if ranks.is_main:
            _store_settings(ctx, run_dir, init_dir, config, None if init_dir else sources)
    except Exception:
        _remove_unstarted(run_dir, created)
        raise
    return trainer, created


#: (setting, when it would do nothing in the resolved config, what it needs): typed on the command line, warned of
IDLE_FLAGS = (
    ("max_halvings", lambda c: c["train"]["lr_schedule"] != "plateau", "--lr-schedule plateau"),
    ("min_improvement", lambda c: c["train"]["lr_schedule"] != "plateau", "--lr-schedule plateau"),
    ("time_clock", lambda c: not c["train"].get("max_time"), "--max-time"),
    ("data_subset", lambda c: c["train"].get("data_fraction", 1.0) >= 1.0, "--data-fraction below 1"),
    ("input_cutoffs", lambda c: not c["model"].get("adaptive_input"), "--adaptive-input"),
    ("input_factor", lambda c: not c["model"].get("adaptive_input"), "--adaptive-input"),
)


def _warn_idle_flags(ctx, config: dict) -> None:
    """A warning for a flag typed for a new run that its resolved settings never read (``--max-halvings`` under the
    GRU's cosine schedule). Not refused, as ``--momentum`` with Adam is: reproduction scripts give them beside
    schedules that ignore them, and a run's own config.toml (read by ``--config``) records them all."""
    for name, idle, needs in IDLE_FLAGS:
        if name in ctx.params and ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE and idle(config):
            this = (f"this run: --lr-schedule {config['train']['lr_schedule']}" if "schedule" in needs
                    else "this run has none")
            _echo(f"warning: {_flag(ctx, name)} has no effect without {needs} ({this})")


def _store_settings(ctx, run_dir: str, init_dir: str | None, config: dict, sources: dict | None = None) -> None:
    """``RUN/config.toml``: this run's settings, defaults resolved, for ``--config`` to repeat it (with another
    ``-o``), each with a comment saying where its value came from (``sources``). A run started ``--init-from`` keeps
    only what such a run may set (its shape comes from the source)."""
    from .common import TEXT_FLAGS
    from .configfile import write_settings

    skip = {"run_dir", "resume_dir", "bf16_alias"}
    if init_dir:
        skip |= {"model_type", "context_size", "objective", *MODEL_FIELDS, *OBJECTIVE_FIELDS, *TEXT_FLAGS}
    resolved = {**{k: v for k, v in config["model"].items() if k in MODEL_FIELDS},
                **{k: v for k, v in config["train"].items() if k in TRAIN_FIELDS},
                **{k: v for k, v in config["objective"].get("options", {}).items() if k in OBJECTIVE_FIELDS},
                "train_path": config["data"]["train"], "valid_path": config["data"]["valid"]}
    if ctx.params.get("vocab_path"):
        resolved["vocab_path"] = os.path.abspath(ctx.params["vocab_path"])
    if init_dir:
        resolved["init_dir"] = os.path.abspath(init_dir)
    if sources:  # a value read from --config FILE was given there, not on the command line
        sources = {k: ("--config" if v == "given" and ctx.get_parameter_source(k) == ParameterSource.DEFAULT_MAP
                       else v) for k, v in sources.items()}
    write_settings(run_dir, ctx, skip, resolved=resolved, sources=sources, header=f"sampledlm train settings of {run_dir}; repeat the run with\n"
                                              f"sampledlm train --config {os.path.join(run_dir, 'config.toml')} "
                                              "-o NEW_RUN")


def _remove_unstarted(run_dir: str, created: bool) -> None:
    """A run directory this command created and that holds no checkpoint yet (training failed: a full disk, a
    divergence in epoch 1) holds nothing worth keeping: removed, so nothing half-written is left behind."""
    import shutil

    from ..neural.rundir import latest_checkpoint

    try:
        if created and os.path.isdir(run_dir) and latest_checkpoint(run_dir) is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    except UserError:  # a damaged pointer: leave it for the user to look at
        pass


def init_config(ctx, init_dir, opts, train_path, valid_path, vocab_path, min_count, max_size, flags: dict):
    """``(source, config, vocab)`` of a run started from ``init_dir``: the flags that shape the model are refused
    here (they come from that run), the rest is :func:`sampledlm.neural.settings.init_config`'s."""
    from ..neural.settings import init_config as resolve
    from .common import TEXT_FLAGS

    shape = [p for p in ("model_type", "context_size", "objective", *MODEL_FIELDS, *OBJECTIVE_FIELDS, *TEXT_FLAGS)
             if p in ctx.params and ctx.get_parameter_source(p) in (ParameterSource.COMMANDLINE,
                                                                    ParameterSource.DEFAULT_MAP)]
    if shape:
        raise UserError(f"--init-from {init_dir}: the model, its objective and how text is read come from that run "
                        f"(got {_flag(ctx, shape[0])}); give training settings only (--lr, --epochs, ...)")
    new_vocab = any(ctx.get_parameter_source(p) == ParameterSource.COMMANDLINE for p in ("min_count", "max_size"))
    notes: list[str] = []
    try:
        return resolve(init_dir, train_path, valid_path, vocab_path, min_count if new_vocab else None,
                       max_size if new_vocab else None, flags, notes)
    finally:
        for note in notes:
            _echo(note)


def _recorded_threads(run_dir: str) -> int | None:
    """The ``threads`` a run recorded in ``RUN/config.toml`` (None where it recorded none or the file is unreadable:
    torch's default then). Resuming a one-thread run with torch's default would run its products on every core, and
    on a busy machine its OpenMP threads wait for each other: a Transformer resumed beside another training went
    from about 4,100 to 650 words a second."""
    from .configfile import recorded_setting

    value = recorded_setting(run_dir, "threads")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _flag(ctx, name: str) -> str:
    """The flag a user typed for the parameter ``name`` (``valid_path`` -> ``--valid``)."""
    for p in ctx.command.params:
        if p.name == name and p.opts:
            return max(p.opts, key=lambda o: (o.startswith("--"), len(o)))
    return "--" + name.replace("_", "-")
