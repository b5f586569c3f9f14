"""``sampledlm maxent train|eval``: maximum-entropy LMs from the command line."""

from __future__ import annotations

import contextlib
import os

import click

from .common import CONTEXT, FiniteFloat, deprecated, text_options
from ..errors import TrainingInterrupted, UserError
from ..maxent.run import MaxentRun
from .configfile import config_option
from .options import dataclass_options

MAXENT_OPTIONS, _ = dataclass_options({"maxent": MaxentRun})  # every training flag, from its one declaration


@click.group(context_settings=CONTEXT)
def maxent():
    """Maximum-entropy LMs: standard (softmax) or binarized, n-gram/skip/trigger features.

    \b
    Example:
      sampledlm maxent train --train train.txt --valid valid.txt -o melm --features feat-i --objective binary
      sampledlm maxent eval melm --test test.txt
    """


@maxent.command(context_settings=CONTEXT)
@click.argument("positional", nargs=-1, metavar="[TRAIN VALID]")
@click.option("--train", "train_path", default=None, help="Training text, one sentence per line.")
@click.option("--valid", "valid_path", default=None, help="Validation text: learning-rate schedule and the model kept.")
@click.option("-o", "--output", "out_dir", default=None, help="Model directory to write (config.json, vocab.txt, weights).")
@click.option("--resume", "resume_dir", default=None, metavar="DIR",
              help="Go on with the training stopped in DIR (what -o named: Ctrl-C, a crash, kill -9) from its last "
                   "finished epoch, with the texts and settings it began with (give no other option).")
@click.option("--force", is_flag=True, help="Replace the maxent model already in the output directory (refused otherwise).")
@click.option("--init-from", "init_dir", default=None, metavar="MODEL",
              help="Start from a trained maxent model's weights (its objective, features and text options; this "
                   "command's training settings and text): domain adaptation. The text is read with MODEL's "
                   "vocabulary unless --vocab gives a new one (shared words keep their weights).")
@click.option("--vocab", "vocab_path", default=None, help="Vocabulary file [default: built from --train].")
@MAXENT_OPTIONS
@click.option("--min-gain", "min_gain_deprecated", type=FiniteFloat(max=1, max_open=True), default=None, hidden=True)
@click.option("--ranks", type=click.IntRange(1, 1024), default=1, show_default=True, help="Local processes (vocabulary shards; binary only).")
@click.option("--distributed", is_flag=True, help="Run as one rank of a torchrun job (RANK, WORLD_SIZE from the environment).")
@config_option
@text_options
def train(positional, train_path, valid_path, out_dir, resume_dir, force, init_dir, vocab_path, min_gain_deprecated,
          ranks, distributed, opts, **settings):
    """Train a maximum-entropy LM on --train, with lr halving on --valid perplexity.

    \b
    Feature counts, the epoch log and the exact validation perplexity go to config.json.
    An existing model directory is refused unless --force is given; the directory is locked
    while it is written, and a run that fails (bad input, training diverged) saves nothing.
    Each epoch's state is saved in the directory: a stopped run goes on with --resume DIR
    and ends with the model an unbroken run makes.
    The older form `maxent train TRAIN VALID -o DIR` still works but is deprecated.
    Example (the paper's binary Feat-I, 5% of the negatives, 2 local processes):
      sampledlm maxent train --train ptb.train.txt --valid ptb.valid.txt -o melm --neg-rate 0.05 --ranks 2
    Adapting a model to a domain's text:
      sampledlm maxent train --init-from melm --train domain.txt --valid domain-valid.txt --lr 0.5 -o melm-domain
    Across machines (one command per machine, node rank 0 and 1):
      torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr HOST0 --master-port 29500 \\
        -m sampledlm maxent train --train train.txt --valid valid.txt -o melm --distributed
    """
    from ..maxent.run import MaxentRun, resume_directory, train_directory
    from .common import given, keep_source_settings

    if resume_dir is not None:
        others = [p.opts[0] for p in click.get_current_context().command.params
                  if p.name not in ("resume_dir", "config") and p.name and given(p.name)]
        if positional or others:
            raise UserError(f"--resume {resume_dir} goes on with the texts and settings its run began with: give no "
                            f"other option (got {', '.join(others) or ' '.join(positional)})")
        with _resume_hint(resume_dir):
            resume_directory(resume_dir, log=lambda line: click.echo(line, err=True))
        return
    if out_dir is None:
        raise click.UsageError("Missing option '-o' / '--output' (or --resume DIR to go on with a stopped run).")
    train_path, valid_path = _train_files(positional, train_path, valid_path)
    if min_gain_deprecated is not None:
        if settings["min_improvement"] is not None:
            raise UserError("--min-gain is the old name of --min-improvement: give only one of them")
        deprecated("--min-gain is deprecated; use --min-improvement")
        settings["min_improvement"] = min_gain_deprecated
    # None = not given: MaxentRun's default, or the library's (the objective's, the source model's with --init-from)
    values = {k: v for k, v in settings.items() if v is not None}
    with _resume_hint(out_dir):
        train_directory(train_path, valid_path, out_dir, MaxentRun(**values), opts, force=force, init_dir=init_dir,
                        vocab_path=vocab_path, ranks=ranks, distributed=distributed,
                        check_source=lambda where, what, theirs, here: keep_source_settings(where, what, theirs, here),
                        log=lambda line: click.echo(line, err=True))


@contextlib.contextmanager
def _resume_hint(out_dir: str):
    """An interrupt (Ctrl-C, SIGTERM) that leaves epoch checkpoints in ``out_dir`` says how to go on from them, as
    the neural ``train`` does."""
    try:
        yield
    except KeyboardInterrupt as e:
        from ..maxent.checkpoint import folder

        if isinstance(e, TrainingInterrupted) or not os.path.isfile(os.path.join(folder(out_dir), "run.json")):
            raise
        raise TrainingInterrupted(f"{e or 'interrupted'}; resume with: sampledlm maxent train --resume {out_dir}",
                                  signum=getattr(e, "exit_code", 130) - 128) from e


def _train_files(positional, train_path, valid_path) -> tuple[str, str]:
    if positional:
        if train_path or valid_path:
            given = f"{'--train ' + train_path if train_path else '--valid ' + valid_path} and {positional[0]!r}"
            raise UserError(f"give the texts either as --train/--valid or as TRAIN VALID (deprecated), not both "
                            f"(got {given}); use --train FILE --valid FILE")
        if len(positional) != 2:
            raise UserError(f"expected TRAIN VALID, got {len(positional)} file name(s); use --train FILE --valid FILE")
        deprecated("`maxent train TRAIN VALID` is deprecated; use --train TRAIN --valid VALID")
        return positional[0], positional[1]
    for flag, val in (("--train", train_path), ("--valid", valid_path)):
        if not val:
            raise UserError(f"{flag} FILE is required")
    return train_path, valid_path


@maxent.command("eval", context_settings=CONTEXT)
@click.argument("model_dir", metavar="MODEL")
@click.argument("files", nargs=-1, metavar="[FILE...]")
@click.option("--test", "tests", multiple=True, help="Text to evaluate, one sentence per line (repeat for several).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per file.")
@text_options
def eval_cmd(model_dir, files, tests, as_json, opts):
    """Exact perplexity of a maxent MODEL on --test text: 'sampledlm eval' by another name, one
    summary per file.

    \b
    The text is read as the model's training text was (its config.json records how); text
    flags given here override that. Files may also follow MODEL (the older form).
    Example:
      sampledlm maxent eval melm --test test.txt
    """
    from .common import text_flags_given
    from .eval import evaluate

    from .. import store

    paths = list(tests) + list(files)
    if not paths:
        raise UserError("--test FILE is required")
    if os.path.isfile(model_dir):
        raise UserError(f"{model_dir}: is a file, not a maxent model directory (`sampledlm eval` reads any model)")
    family = store.read_config(model_dir)[1]
    if family != "maxent":
        raise UserError(f"{model_dir}: holds a {family} model; `maxent eval` reads maxent models "
                        "(`sampledlm eval` reads any)")
    for path in paths:
        evaluate(model_dir, path, as_json=as_json, opts=opts if text_flags_given() else None)
