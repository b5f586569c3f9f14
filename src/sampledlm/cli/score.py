"""``sampledlm score``: per-sentence (and per-word) scores of a text under any model or mixture."""

from __future__ import annotations

import json

import click

from .common import CONTEXT, device_option, mix_options, say_fitted_weights, text_flags_given, text_options, THREADS


@click.command("score", context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@click.argument("text", metavar="FILE")
@mix_options
@click.option("--per-word", is_flag=True, help="Every word's probability (and, for n-gram models, the order used).")
@click.option("--jsonl", is_flag=True, help="One JSON object per sentence on stdout (blank lines hold none, so "
              "'sentence' counts non-blank lines); the file totals go to stderr.")
@click.option("--bunch", type=click.IntRange(min=1), default=None,
              help="Sentences per bunch (recurrent) or distinct histories per bunch (feed-forward); 1: one at a time.")
@click.option("--threads", type=THREADS, default=None, help="Torch CPU threads.")
@device_option
@text_options
def score(model, text, others, weights, interp_valid, per_word, jsonl, bunch, threads, device, opts):
    """Score every sentence of FILE: log10 and natural-log probability, words, OOVs, perplexity.

    \b
    Each sentence is read on its own after <s>; its words and its </s> are predicted and counted, and
    words outside the vocabulary are <unk> (counted as OOVs). The file totals therefore give
    'sampledlm eval --per-sentence's perplexity. The plain output follows SRILM's 'ngram -ppl -debug 1'
    ('-debug 2' with --per-word, '[3gram]' being the n-gram order an ARPA model used).
    Sentences are sorted by length into bunches for recurrent models, and a feed-forward model
    computes each distinct history once (Schwenk 2007).
    Example:
      sampledlm score kn3.arpa test.txt
      sampledlm score kn3.arpa test.txt --per-word
      sampledlm score gru test.txt --mix kn3.arpa --weights 0.7,0.3 --jsonl > scores.jsonl
    """
    from ..use.mixing import open_models
    from ..use.score import Totals, format_sentence, format_totals, score_file

    if threads:
        import torch

        torch.set_num_threads(threads)
    lm = open_models([model, *others], weights, interp_valid, batch_size=bunch, device=device)
    say_fitted_weights(lm, [model, *others])
    shown = "standard input" if text == "-" else text
    totals = Totals()
    for s in score_file(lm, text, with_orders=per_word, opts=opts if text_flags_given() else None):
        totals.add(s)
        click.echo(json.dumps(s.to_dict(per_word)) if jsonl else format_sentence(s, per_word))
    if totals.sentences == 0:
        from ..errors import UserError

        raise UserError(f"{shown}: no sentences to score")
    if jsonl:
        click.echo(json.dumps({"file": text, **totals.to_dict()}), err=True)
    else:
        click.echo(format_totals(text, totals), nl=False)
