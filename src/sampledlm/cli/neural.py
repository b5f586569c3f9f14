"""``sampledlm train`` and ``sampledlm eval``: neural language models from the command line (thin layer)."""

from __future__ import annotations

import json
import os
import sys

import click
from click.core import ParameterSource

from .common import CONTEXT, text_options
from ..errors import UserError

#: objective flags -> make_objective keyword (passed only when the user gave them)
OBJECTIVE_FLAGS = ("samples", "noise_power", "neg_rate", "neg_subset", "neg_groups", "margin", "sample_mode", "sampler", "learn_norm",
                   "exclude_true")
RESUME_OVERRIDES = ("epochs", "max_halvings")


def _echo(msg: str) -> None:
    click.echo(msg, err=True)


@click.command(context_settings=CONTEXT)
@click.option("--train", "train_path", help="Training text, one sentence per line.")
@click.option("--valid", "valid_path", help="Validation text: learning-rate schedule and best-model selection.")
@click.option("-o", "--output", "run_dir", help="Run directory to create (config, vocab, weights, metrics, plot).")
@click.option("--resume", "resume_dir", default=None, help="Continue the run in this directory from its last checkpoint.")
@click.option("--vocab", "vocab_path", default=None, help="Vocabulary file to use [default: built from --train].")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True, help="Building the vocabulary: rarer words become <unk>.")
@click.option("--max-size", type=click.IntRange(min=2), default=None, help="Building the vocabulary: keep at most this many entries.")
@click.option("--model", "model_type", type=click.Choice(["ffnn", "gru", "lstm"]), default="ffnn", show_default=True)
@click.option("--order", type=click.IntRange(min=2), default=None, help="ffnn: n-gram order n (history of n-1 words) [3].")
@click.option("--context-size", type=click.IntRange(min=1), default=None, help="ffnn: history length n-1 (alternative to --order).")
@click.option("--embed-dim", "-d", type=click.IntRange(min=1), default=None, help="Word embedding size d [ffnn 50, rnn 200].")
@click.option("--hidden", type=click.IntRange(min=1), multiple=True, help="Hidden size h [200]; ffnn: repeat for more tanh layers.")
@click.option("--direct", is_flag=True, default=None, help="ffnn: direct (skip) connections projection -> output.")
@click.option("--deep-output", type=click.IntRange(min=1), default=None, help="ffnn: a linear projection of this size before the output.")
@click.option("--layers", type=click.IntRange(min=1), default=None, help="rnn: stacked layers [1].")
@click.option("--proj", type=click.IntRange(min=1), default=None, help="rnn: output projection P to this size (seed 001 §6.2).")
@click.option("--tie", is_flag=True, default=None, help="rnn: tie input and output embeddings.")
@click.option("--dropout", type=click.FloatRange(0, 1, max_open=True), default=None, help="Dropout rate [0].")
@click.option("--objective", default="softmax", show_default=True, help="Output objective (softmax, or a sampled one).")
@click.option("--samples", type=click.IntRange(min=1), default=None, help="Objective option: candidates drawn per step.")
@click.option("--noise-power", type=float, default=None, help="Objective option: noise = unigram^power.")
@click.option("--neg-rate", type=float, default=None, help="Objective option: share alpha of negatives kept (binary).")
@click.option("--neg-subset", default=None, help="Objective option: fixed or variable negative subsets (binary).")
@click.option("--neg-groups", type=click.IntRange(min=1), default=None,
              help="Objective option: negative subsets drawn per mini-batch, example i uses subset i mod G (binary, variable) [8].")
@click.option("--margin", type=float, default=None, help="Objective option: ranking margin.")
@click.option("--sample-mode", default=None, help="Objective option: how candidates are drawn / shared.")
@click.option("--sampler", default=None, help="Objective option: how noise words are drawn (e.g. alias).")
@click.option("--learn-norm", is_flag=True, default=None, help="Objective option: learn the normaliser (NCE).")
@click.option("--exclude-true/--include-true", default=None, help="Objective option: drop the true word from the negatives.")
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default="sgd", show_default=True)
@click.option("--lr", type=float, default=None, help="Learning rate [sgd 0.1 per mean batch loss, adam 0.001].")
@click.option("--momentum", type=float, default=0.0, show_default=True, help="SGD momentum.")
@click.option("--weight-decay", type=float, default=0.0, show_default=True)
@click.option("--clip", type=float, default=0.0, show_default=True, help="Clip the total gradient norm (0: off).")
@click.option("--batch-size", "-b", type=click.IntRange(min=1), default=None,
              help="ffnn: n-grams per batch [128]; rnn: BPTT rows [20].")
@click.option("--bptt", type=click.IntRange(min=1), default=35, show_default=True, help="rnn: segment length.")
@click.option("--epochs", type=click.IntRange(min=1), default=20, show_default=True, help="Maximum epochs.")
@click.option("--max-halvings", type=click.IntRange(min=0), default=4, show_default=True,
              help="Stop when validation fails to improve after this many learning-rate halvings.")
@click.option("--min-improvement", type=float, default=0.0, show_default=True, help="Relative valid-ppl gain that counts as improving.")
@click.option("--checkpoint-every", type=click.IntRange(min=0), default=0, show_default=True, help="Also checkpoint every N steps (0: epoch ends only).")
@click.option("--eval-batch", type=click.IntRange(min=1), default=None, help="Evaluation batch [ffnn 1024 histories, rnn 1 row].")
@click.option("--bf16", is_flag=True, help="Run the training forward pass in bfloat16 (autocast; ~2x faster on CPUs "
                                          "with AVX512-BF16). Weights, updates and evaluation stay float32.")
@click.option("--data-fraction", type=click.FloatRange(0.0, 1.0, min_open=True), default=1.0, show_default=True,
              metavar="ALPHA", help="ffnn: train each epoch on this random share of the training positions.")
@click.option("--data-subset", type=click.Choice(["fixed", "variable"]), default="variable", show_default=True,
              help="ffnn, with --data-fraction: the same share every epoch, or a fresh one.")
@click.option("--train-eval", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
              help="After each epoch also report the exact perplexity of the first N training tokens (0: off).")
@click.option("--seed", type=int, default=1, show_default=True, help="One seed for all randomness.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Torch CPU threads [torch default]; 1 is often fastest on a busy machine.")
@text_options
def train(opts, train_path, valid_path, run_dir, resume_dir, vocab_path, min_count, max_size, model_type, order,
          context_size, embed_dim, hidden, direct, deep_output, layers, proj, tie, dropout, objective, optimizer, lr,
          momentum, weight_decay, clip, batch_size, bptt, epochs, max_halvings, min_improvement, checkpoint_every,
          eval_batch, bf16, data_fraction, data_subset, train_eval, seed, threads, **objective_flags):
    """Train a feed-forward or recurrent neural LM into a run directory.

    \b
    Every epoch ends with the exact validation perplexity; the learning rate is halved when it
    stops improving. Ctrl-C writes a checkpoint; --resume continues with the same numbers.
    Example:
      sampledlm train --train train.txt --valid valid.txt --model ffnn --order 3 -d 50 --hidden 200 -o ffnn3
      sampledlm train --train train.txt --valid valid.txt --model gru --hidden 256 --optimizer adam -o gru
      sampledlm train --resume ffnn3
    """
    import torch

    from ..neural.trainer import new_run, resume_run

    if threads:
        torch.set_num_threads(threads)
    ctx = click.get_current_context()
    if resume_dir:
        given = [p for p in ctx.params if p not in ("resume_dir", "threads") + RESUME_OVERRIDES
                 and ctx.get_parameter_source(p) == ParameterSource.COMMANDLINE]
        if given:
            raise UserError(f"--resume continues a run with its own settings; only --epochs, --max-halvings and "
                            f"--threads may be given with it (got --{given[0].replace('_', '-')})")
        over = {k: ctx.params[k] for k in RESUME_OVERRIDES if ctx.get_parameter_source(k) == ParameterSource.COMMANDLINE}
        trainer = resume_run(resume_dir, over, log=_echo)
        if trainer.state.finalized:
            raise UserError(f"{resume_dir}: training already finished (best valid ppl {trainer.state.best_valid:.2f}); "
                            "start a new run to train longer")
        _echo(f"resuming {resume_dir} at epoch {trainer.state.epoch + 1}, step {trainer.state.step}")
    else:
        for flag, val in (("--train", train_path), ("--valid", valid_path), ("-o/--output", run_dir)):
            if not val:
                raise UserError(f"{flag} is required (or --resume RUN_DIR)")
        config = build_config(opts, train_path, valid_path, vocab_path, min_count, max_size, model_type, order,
                              context_size, embed_dim, hidden, direct, deep_output, layers, proj, tie, dropout,
                              objective, objective_flags, dict(
                                  optimizer=optimizer, lr=lr, momentum=momentum, weight_decay=weight_decay, clip=clip,
                                  batch_size=batch_size, bptt=bptt, epochs=epochs, max_halvings=max_halvings,
                                  min_improvement=min_improvement, seed=seed, checkpoint_every=checkpoint_every,
                                  eval_batch=eval_batch, bf16=bf16, train_eval=train_eval,
                                  data_fraction=data_fraction, data_subset=data_subset))
        trainer = new_run(run_dir, config["config"], config["vocab"], log=_echo)
        resume_dir = run_dir
    state = trainer.train()
    _echo(f"best valid ppl {state.best_valid:.2f} after {len(state.metrics)} epochs; model in {resume_dir}")


def build_config(opts, train_path, valid_path, vocab_path, min_count, max_size, model_type, order, context_size,
                 embed_dim, hidden, direct, deep_output, layers, proj, tie, dropout, objective, objective_flags, train):
    from ..data.corpus import build_vocab
    from ..neural.registry import model_spec
    from ..objectives import make_objective
    from ..neural.rundir import make_config
    from ..data.vocab import Vocab

    if order is not None and context_size is not None and order != context_size + 1:
        raise UserError(f"--order {order} and --context-size {context_size} disagree (order = context size + 1)")
    if context_size is not None:
        order = context_size + 1
    if model_type == "ffnn":
        spec = model_spec("ffnn", order=order, embed_dim=embed_dim, hidden=list(hidden) or None, direct=direct,
                          deep_output=deep_output, dropout=dropout, layers=layers, proj=proj, tie=tie)
    else:
        if len(hidden) > 1:
            raise UserError("--hidden is given once for a recurrent model (use --layers for depth)")
        spec = model_spec(model_type, embed_dim=embed_dim, hidden=hidden[0] if hidden else None, layers=layers,
                          dropout=dropout, proj=proj, tie=tie, order=order, direct=direct, deep_output=deep_output)
    obj_opts = {k: objective_flags.get(k) for k in OBJECTIVE_FLAGS}
    vocab = Vocab.load(vocab_path) if vocab_path else build_vocab(train_path, opts, min_count=min_count, max_size=max_size)
    make_objective(objective, counts=vocab.counts, **obj_opts)  # refuses options that do not apply, early
    if train["batch_size"] is None:
        train["batch_size"] = 128 if model_type == "ffnn" else 20
    if train["lr"] is None:
        train["lr"] = 0.1 if train["optimizer"] == "sgd" else 1e-3
    data = {"train": os.path.abspath(train_path), "valid": os.path.abspath(valid_path), "text_options": opts.to_dict()}
    return {"config": make_config(spec, objective, obj_opts, train, data, vocab), "vocab": vocab}


@click.command("eval", context_settings=CONTEXT)
@click.argument("run_dir", metavar="RUN_DIR")
@click.option("--test", "test_path", required=True, help="Text to evaluate, one sentence per line.")
@click.option("--interpolate", "arpa", default=None, help="An ARPA n-gram model to interpolate with.")
@click.option("--weight", default=None, help="Weight of the NEURAL model in the interpolation (0..1), or 'auto' (EM on --interp-valid).")
@click.option("--interp-valid", default=None, help="Validation text for --weight auto [default: the run's validation file].")
@click.option("--per-sentence", is_flag=True, help="Print one line per sentence: ln-prob, predictions, perplexity, text.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Evaluation batch [ffnn 1024 histories, rnn 1 row].")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Torch CPU threads.")
def eval_cmd(run_dir, test_path, arpa, weight, interp_valid, per_sentence, batch_size, as_json, threads):
    """Exact perplexity of a trained run on a test file (every word and </s> counted).

    \b
    With --interpolate the neural model is mixed linearly with an n-gram model:
    P = W * P_neural + (1 - W) * P_ngram; --weight auto tunes W by EM on validation text.
    Example:
      sampledlm eval ffnn3 --test test.txt
      sampledlm eval ffnn3 --test test.txt --interpolate kn3.arpa --weight auto
      sampledlm eval ffnn3 --test test.txt --per-sentence > scores.tsv
    """
    import torch

    from ..data.corpus import load_ids
    from ..neural.evaluate import em_weight, interpolate, perplexity_of, sentence_scores, stream_logprobs
    from ..neural.rundir import load_run
    from ..data.tokenizer import TextOptions

    if threads:
        torch.set_num_threads(threads)
    if (weight is not None or interp_valid) and not arpa:
        raise UserError("--weight and --interp-valid need --interpolate MODEL.arpa")
    model, objective, vocab, config = load_run(run_dir)
    opts = TextOptions(**config["data"].get("text_options", {}))
    ids = load_ids(test_path, vocab, opts)
    lp = stream_logprobs(model, objective, ids, batch_size=batch_size)
    result = {"run": run_dir, "test": test_path, "predictions": int(len(ids)), "ppl": perplexity_of(lp)}
    final = lp
    if arpa:
        from ..ngram import read_arpa

        lm = read_arpa(arpa)
        ng = lm.stream_logprobs(ids, vocab)
        result["ngram_ppl"] = perplexity_of(ng)
        if weight is None or weight == "auto":
            vpath = interp_valid or config["data"]["valid"]
            vids = load_ids(vpath, vocab, opts)
            w = em_weight(stream_logprobs(model, objective, vids, batch_size=batch_size), lm.stream_logprobs(vids, vocab))
            result["weight_from"] = vpath
        else:
            try:
                w = float(weight)
            except ValueError:
                raise UserError(f"--weight {weight!r}: give a number in [0, 1] or 'auto'") from None
            if not 0.0 <= w <= 1.0:
                raise UserError(f"--weight {w}: must lie in [0, 1]")
        final = interpolate(lp, ng, w)
        result.update(weight=w, interpolated_ppl=perplexity_of(final))
    if per_sentence:
        import math

        tot, cnt = sentence_scores(final, ids)
        click.echo("ln_prob\tpredictions\tppl\tsentence")
        from ..data.tokenizer import iter_sentences

        for (t, c), words in zip(zip(tot.tolist(), cnt.tolist()), iter_sentences(test_path, opts)):
            click.echo(f"{t:.4f}\t{c}\t{math.exp(-t / c):.2f}\t{' '.join(words)}")
    if as_json:
        click.echo(json.dumps(result), file=sys.stderr if per_sentence else None)
    else:
        msg = f"{test_path}: {result['predictions']} predictions, ppl {result['ppl']:.2f}"
        if arpa:
            msg += f"; n-gram {result['ngram_ppl']:.2f}; interpolated (W={result['weight']:.3f}) {result['interpolated_ppl']:.2f}"
        click.echo(msg, err=per_sentence)
