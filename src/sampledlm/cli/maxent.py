"""``sampledlm maxent train|eval``: maximum-entropy LMs from the command line."""

from __future__ import annotations

import json
import os

import click
import numpy as np

from .common import CONTEXT, text_options
from ..errors import UserError


@click.group(context_settings=CONTEXT)
def maxent():
    """Maximum-entropy LMs: standard (softmax) or binarized, n-gram/skip/trigger features.

    \b
    Example:
      sampledlm maxent train train.txt valid.txt -o melm --features feat-i --objective binary
      sampledlm maxent eval melm test.txt
    """


@maxent.command(context_settings=CONTEXT)
@click.argument("train_path", metavar="TRAIN")
@click.argument("valid_path", metavar="VALID")
@click.option("-o", "--output", "out_dir", required=True, help="Model directory to write (config.json, vocab.txt, model.safetensors).")
@click.option("--vocab", "vocab_path", default=None, help="Vocabulary file [default: built from TRAIN].")
@click.option("--features", default="feat-i", show_default=True,
              help="Comma-separated: unigram, bigram, trigram, 4gram.., skip-bigram, skip-trigram, trigger; "
                   "or feat-i (n-grams to 3) / feat-ii (+ skip and trigger).")
@click.option("--objective", type=click.Choice(["binary", "softmax"]), default="binary", show_default=True,
              help="binary: independent logistic classifiers (renormalised, eq. 8). softmax: standard MELM.")
@click.option("--neg-rate", "alpha", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True,
              help="binary: fraction alpha of negatives kept. softmax: fraction of training positions used.")
@click.option("--neg-subset", type=click.Choice(["fixed", "variable"]), default="variable", show_default=True,
              help="binary: draw new negatives every epoch, or keep the same ones (the paper's MELM runs; worse on "
                   "PTB at small rates, see docs/results/maxent.md).")
@click.option("--lr", type=click.FloatRange(0, min_open=True), default=1.0, show_default=True, help="Initial learning rate.")
@click.option("--optimizer", type=click.Choice(["adagrad", "sgd"]), default="adagrad", show_default=True,
              help="adagrad: per-weight steps lr g / sqrt(1 + sum g^2). sgd: plain SGD (the paper: lr 0.1).")
@click.option("--average", type=click.Choice(["none", "epoch", "run", "auto"]), default="run", show_default=True,
              help="Evaluate and keep averaged weights: none (the last weights, as the paper); the mean over each "
                   "epoch; over every epoch from the 2nd (run); or (auto) since the last epoch at which the last "
                   "weights did better on VALID.")
@click.option("--epochs", type=click.IntRange(min=1), default=20, show_default=True, help="Most epochs.")
@click.option("--min-gain", type=float, default=0.003, show_default=True,
              help="Halve lr once validation improves by less than this (relative); stop at the next such epoch.")
@click.option("--l2", type=click.FloatRange(min=0), default=0.0, show_default=True, help="L2 (Gaussian prior) l2/2 |theta|^2 on feature weights, over the training set.")
@click.option("--hash-size", type=click.IntRange(min=1), default=None, help="Hash feature weights into this many slots.")
@click.option("--trigger-window", type=click.IntRange(min=2), default=20, show_default=True, help="Trigger words up to this many tokens back.")
@click.option("--trigger-gap", type=click.IntRange(min=0), default=2, show_default=True, help="Ignore the last this many tokens as triggers.")
@click.option("--trigger-pairs", type=click.IntRange(min=1), default=200_000, show_default=True, help="Trigger pairs kept (by mutual information).")
@click.option("--trigger-min-count", type=click.IntRange(min=1), default=3, show_default=True, help="Least count of a trigger pair.")
@click.option("--ranks", type=click.IntRange(min=1), default=1, show_default=True, help="Local processes (vocabulary shards; binary only).")
@click.option("--distributed", is_flag=True, help="Run as one rank of a torchrun job (RANK, WORLD_SIZE from the environment).")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed.")
@text_options
def train(train_path, valid_path, out_dir, vocab_path, features, objective, alpha, neg_subset, lr, optimizer, average,
          epochs, min_gain,
          l2, hash_size, trigger_window, trigger_gap, trigger_pairs, trigger_min_count, ranks, distributed, seed, opts):
    """Train a maximum-entropy LM on TRAIN, with lr halving on VALID perplexity.

    \b
    Feature counts, the epoch log and the exact validation perplexity go to config.json.
    Example (the paper's binary Feat-I, 5% of the negatives, 2 local processes):
      sampledlm maxent train ptb.train.txt ptb.valid.txt -o melm --neg-rate 0.05 --ranks 2
    Across machines (one command per machine, node rank 0 and 1):
      torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr HOST0 --master-port 29500 \\
        -m sampledlm maxent train train.txt valid.txt -o melm --distributed
    """
    from ..data.corpus import build_vocab, load_ids
    from ..data.vocab import Vocab
    from ..maxent.features import FeatureSpec
    from ..maxent.shard import ShardJob, run_from_env, train_sharded
    from ..maxent.train import TrainConfig

    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"{out_dir}: exists and is not a directory")
    spec = FeatureSpec.parse(features, trigger_window=trigger_window, trigger_gap=trigger_gap,
                             trigger_pairs=trigger_pairs, trigger_min_count=trigger_min_count)
    vocab = Vocab.load(vocab_path) if vocab_path else build_vocab(train_path, opts)
    train_ids = np.asarray(load_ids(train_path, vocab, opts))
    valid_ids = np.asarray(load_ids(valid_path, vocab, opts))
    cfg = TrainConfig(objective=objective, alpha=alpha, lr=lr, epochs=epochs, min_gain=min_gain, l2=l2, seed=seed,
                      fixed_negatives=neg_subset == "fixed", adagrad=optimizer == "adagrad", average=average)
    job = ShardJob(train_ids, valid_ids, vocab.counts, spec, cfg, hash_size, out_dir, vocab, log=True,
                   info={"train_file": os.path.abspath(train_path), "valid_file": os.path.abspath(valid_path)})
    if distributed:
        run_from_env(job)
        if int(os.environ.get("RANK", "0")) != 0:
            return
    else:
        train_sharded(job, ranks)
    with open(os.path.join(out_dir, "config.json"), encoding="utf-8") as fh:
        config = json.load(fh)
    counts = ", ".join(f"{k} {v:,}" for k, v in config["feature_counts"].items())
    click.echo(f"features: {counts}", err=True)
    click.echo(f"best valid ppl {config['training']['best_valid_ppl']:.2f}; model written to {out_dir}", err=True)


@maxent.command("eval", context_settings=CONTEXT)
@click.argument("model_dir", metavar="MODEL")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per file.")
@text_options
def eval_cmd(model_dir, files, as_json, opts):
    """Exact perplexity of a maxent MODEL on text FILEs (every word and </s> counted).

    \b
    Example:
      sampledlm maxent eval melm test.txt
    """
    from ..data.corpus import load_ids
    from ..maxent.scorer import MaxEntModel

    model, vocab = MaxEntModel.load(model_dir)
    for path in files:
        ids = np.asarray(load_ids(path, vocab, opts))
        if len(ids) == 0:
            raise UserError(f"{path}: no words found")
        ppl = model.perplexity(ids)
        r = {"file": path, "predictions": int(len(ids)), "perplexity": ppl}
        click.echo(json.dumps(r) if as_json else f"{path}: {len(ids):,} predictions, perplexity {ppl:.2f}")
