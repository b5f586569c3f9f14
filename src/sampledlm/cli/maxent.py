"""``sampledlm maxent train|eval``: maximum-entropy LMs from the command line."""

from __future__ import annotations

import os

import click

from .common import CONTEXT, SEED, FiniteFloat, deprecated, given, text_options
from ..errors import UserError
from ..maxent.config import AVERAGES, TrainConfig
from ..maxent.run import TRIGGER_DEFAULTS
from .configfile import config_option

DEFAULTS = TrainConfig()  # every training flag's default is this dataclass's


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
@click.option("-o", "--output", "out_dir", required=True, help="Model directory to write (config.json, vocab.txt, weights).")
@click.option("--force", is_flag=True, help="Replace the maxent model already in the output directory (refused otherwise).")
@click.option("--init-from", "init_dir", default=None, metavar="MODEL",
              help="Start from a trained maxent model's weights (its objective, features and text options; this "
                   "command's training settings and text): domain adaptation. The text is read with MODEL's "
                   "vocabulary unless --vocab gives a new one (shared words keep their weights).")
@click.option("--vocab", "vocab_path", default=None, help="Vocabulary file [default: built from --train].")
@click.option("--features", default="feat-i", show_default=True,
              help="Comma-separated: unigram, bigram, trigram, 4gram.., skip-bigram, skip-trigram, trigger; "
                   "or feat-i (n-grams to 3) / feat-ii (+ skip and trigger).")
@click.option("--objective", type=click.Choice(["binary", "softmax"]), default=DEFAULTS.objective, show_default=True,
              help="binary: independent logistic classifiers (renormalised, eq. 8). softmax: standard MELM.")
@click.option("--neg-rate", "alpha", type=FiniteFloat(0, 1, min_open=True), default=DEFAULTS.alpha, show_default=True,
              help="binary: fraction alpha of negatives kept. softmax: fraction of training positions used.")
@click.option("--neg-subset", type=click.Choice(["fixed", "variable"]),
              default="fixed" if DEFAULTS.fixed_negatives else "variable", show_default=True,
              help="binary: draw new negatives every epoch, or keep the same ones (the paper's MELM runs; worse on "
                   "PTB at small rates, see docs/results/xu-melm.md).")
@click.option("--lr", type=FiniteFloat(0, min_open=True), default=DEFAULTS.lr, show_default=True, help="Initial learning rate.")
@click.option("--optimizer", type=click.Choice(["adagrad", "sgd"]), default="adagrad" if DEFAULTS.adagrad else "sgd",
              show_default=True,
              help="adagrad: per-weight steps lr g / sqrt(1 + sum g^2). sgd: plain SGD (the paper: lr 0.1).")
@click.option("--average", type=click.Choice(list(AVERAGES)), default=DEFAULTS.average, show_default=True,
              help="Evaluate and keep averaged weights: none (the last weights, as the paper); the mean over each "
                   "epoch; over every epoch from the 2nd (run); or (auto) since the last epoch at which the last "
                   "weights did better on --valid.")
@click.option("--epochs", type=click.IntRange(min=1), default=DEFAULTS.epochs, show_default=True, help="Most epochs.")
@click.option("--min-improvement", type=FiniteFloat(min=0, max=1, max_open=True), default=None,
              help="Relative valid-ppl gain that counts as improving: below it lr is halved, and training stops "
                   f"at the next such epoch.  [default: {DEFAULTS.min_gain}]")
@click.option("--min-gain", "min_gain_deprecated", type=FiniteFloat(max=1, max_open=True), default=None, hidden=True)
@click.option("--l2", type=FiniteFloat(min=0), default=DEFAULTS.l2, show_default=True,
              help="L2 (Gaussian prior) l2/2 |theta|^2 on feature weights, over the training set.")
@click.option("--hash-size", type=click.IntRange(min=1), default=None, help="Hash feature weights into this many slots.")
@click.option("--trigger-window", type=click.IntRange(min=2), default=TRIGGER_DEFAULTS["trigger_window"], show_default=True, help="Trigger words up to this many tokens back.")
@click.option("--trigger-gap", type=click.IntRange(min=0), default=TRIGGER_DEFAULTS["trigger_gap"], show_default=True, help="Ignore the last this many tokens as triggers.")
@click.option("--trigger-pairs", type=click.IntRange(min=1), default=TRIGGER_DEFAULTS["trigger_pairs"], show_default=True, help="Trigger pairs kept (by mutual information).")
@click.option("--trigger-min-count", type=click.IntRange(min=1), default=TRIGGER_DEFAULTS["trigger_min_count"], show_default=True, help="Least count of a trigger pair.")
@click.option("--trigger-min-lift", type=FiniteFloat(min=1), default=TRIGGER_DEFAULTS["trigger_min_lift"], show_default=True,
              help="Keep a trigger pair (v, w) only when v in the window makes w more than this many times likelier.")
@click.option("--ranks", type=click.IntRange(min=1), default=1, show_default=True, help="Local processes (vocabulary shards; binary only).")
@click.option("--distributed", is_flag=True, help="Run as one rank of a torchrun job (RANK, WORLD_SIZE from the environment).")
@click.option("--seed", type=SEED, default=DEFAULTS.seed, show_default=True, help="Random seed.")
@config_option
@text_options
def train(positional, train_path, valid_path, out_dir, force, init_dir, vocab_path, features, objective, alpha, neg_subset, lr,
          optimizer, average, epochs, min_improvement, min_gain_deprecated, l2, hash_size, trigger_window, trigger_gap,
          trigger_pairs, trigger_min_count, trigger_min_lift, ranks, distributed, seed, opts):
    """Train a maximum-entropy LM on --train, with lr halving on --valid perplexity.

    \b
    Feature counts, the epoch log and the exact validation perplexity go to config.json.
    An existing model directory is refused unless --force is given; the directory is locked
    while it is written, and a run that fails (bad input, training diverged) saves nothing.
    The older form `maxent train TRAIN VALID -o DIR` still works but is deprecated.
    Example (the paper's binary Feat-I, 5% of the negatives, 2 local processes):
      sampledlm maxent train --train ptb.train.txt --valid ptb.valid.txt -o melm --neg-rate 0.05 --ranks 2
    Adapting a model to a domain's text:
      sampledlm maxent train --init-from melm --train domain.txt --valid domain-valid.txt --lr 0.5 -o melm-domain
    Across machines (one command per machine, node rank 0 and 1):
      torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr HOST0 --master-port 29500 \\
        -m sampledlm maxent train --train train.txt --valid valid.txt -o melm --distributed
    """
    from ..maxent.run import MaxentRun, train_directory
    from .common import keep_source_settings

    train_path, valid_path = _train_files(positional, train_path, valid_path)
    if min_gain_deprecated is not None:
        if min_improvement is not None:
            raise UserError("--min-gain is the old name of --min-improvement: give only one of them")
        deprecated("--min-gain is deprecated; use --min-improvement")
        min_improvement = min_gain_deprecated
    values = dict(features=features, objective=objective, alpha=alpha, neg_subset=neg_subset, lr=lr,
                  optimizer=optimizer, average=average, epochs=epochs, min_improvement=min_improvement, l2=l2,
                  hash_size=hash_size, trigger_window=trigger_window, trigger_gap=trigger_gap,
                  trigger_pairs=trigger_pairs, trigger_min_count=trigger_min_count,
                  trigger_min_lift=trigger_min_lift, seed=seed)
    for name in ("alpha", "neg_subset", "trigger_window", "trigger_gap", "trigger_pairs", "trigger_min_count",
                 "trigger_min_lift"):  # None = not given: the library knows which default applies
        if not given(name):
            values[name] = None
    train_directory(train_path, valid_path, out_dir, MaxentRun(**values), opts, force=force, init_dir=init_dir,
                    vocab_path=vocab_path, ranks=ranks, distributed=distributed,
                    check_source=lambda where, what, theirs, here: keep_source_settings(where, what, theirs, here),
                    log=lambda line: click.echo(line, err=True))


def _train_files(positional, train_path, valid_path) -> tuple[str, str]:
    if positional:
        if train_path or valid_path:
            raise UserError("give the texts either as --train/--valid or as TRAIN VALID (deprecated), not both")
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
