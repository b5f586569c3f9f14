"""``sampledlm vocab`` and ``sampledlm stats``: corpus commands."""

from __future__ import annotations

import json

import click

from .common import CONTEXT, force_option, refuse_existing, text_options

@click.command(context_settings=CONTEXT)
@click.argument("train", metavar="TRAIN")
@click.option("-o", "--output", default="-", show_default=True, help="Vocabulary file to write (word<TAB>count); - for stdout.")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True, help="Words seen fewer times become <unk>.")
@click.option("--max-size", type=click.IntRange(min=2), default=None, help="Keep at most this many entries, </s> and <unk> included.")
@force_option("the vocabulary file")
@text_options
def vocab(train, output, min_count, max_size, force, opts):
    """Count TRAIN and write its vocabulary.

    \b
    Ids: </s>=0, <unk>=1, then words by count descending, then by word.
    Example:
      sampledlm vocab ptb.train.txt -o vocab.txt
      sampledlm vocab book.txt.gz --tokenizer raw --lowercase --gutenberg --min-count 2 -o vocab.txt
    """
    from ..data.corpus import build_vocab
    from ..data.textio import check_writable

    check_writable(output)
    refuse_existing(output, force)
    v = build_vocab(train, opts, min_count=min_count, max_size=max_size)
    v.save(output)
    click.echo(f"{len(v)} entries ({len(v) - 1} word types and </s>); <unk> count {int(v.counts[1])}", err=True)


@click.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--vocab", "vocab_path", default=None, help="Vocabulary file: report the OOV rate against it.")
@click.option("--top-k", type=click.IntRange(min=1), multiple=True, default=(100, 1000, 10000), show_default=True,
              help="Report the share of tokens covered by the k most frequent words (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per file instead of text.")
@text_options
def stats(files, vocab_path, top_k, as_json, opts):
    """Corpus statistics: tokens, types, sentences, OOV rate, top-k coverage.

    \b
    Tokens are words; </s> is not counted among them (there is one per sentence).
    Example:
      sampledlm stats ptb.train.txt
      sampledlm stats ptb.test.txt --vocab vocab.txt
    """
    from ..data.stats import corpus_stats, format_stats
    from ..data.vocab import Vocab

    v = Vocab.load(vocab_path) if vocab_path else None
    for path in files:
        s = corpus_stats(path, opts, vocab=v, top_k=top_k)
        click.echo(json.dumps(s) if as_json else format_stats(s))
