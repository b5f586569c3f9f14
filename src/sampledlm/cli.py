"""The ``sampledlm`` command line: a thin layer that parses flags and calls the library.

Errors the user can fix (:class:`~sampledlm.errors.UserError`, bad flags) print one line,
``sampledlm: error: ...``, and exit with status 1 (2 for a usage error); nothing else is
printed and no partial output file is left. Results go to stdout, progress and summaries
to stderr.
"""

from __future__ import annotations

import json
import sys

import click

from . import __version__
from .errors import UserError
from .tokenizer import TextOptions

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def text_options(f):
    """The flags that say how to read text; the command receives ``opts: TextOptions``."""
    decorators = [
        click.option("--tokenizer", type=click.Choice(["whitespace", "raw"]), default="whitespace", show_default=True,
                     help="whitespace: pre-tokenised text (PTB). raw: split punctuation off words."),
        click.option("--lowercase", is_flag=True, help="Lower-case all text."),
        click.option("--numbers", is_flag=True, help="Replace every number by <num>."),
        click.option("--gutenberg", is_flag=True, help="Keep only the text between the Project Gutenberg START/END markers."),
        click.option("--sentences", type=click.Choice(["lines", "split"]), default=None,
                     help="lines: one sentence per line. split: join paragraphs and cut after . ! ? "
                          "[default: lines for whitespace, split for raw]"),
        click.option("--encoding-errors", type=click.Choice(["strict", "replace"]), default="strict", show_default=True,
                     help="strict: stop at invalid UTF-8 naming file and line. replace: use U+FFFD."),
    ]

    def wrapper(**kw):
        opts = TextOptions(
            tokenizer=kw.pop("tokenizer"), lowercase=kw.pop("lowercase"), numbers=kw.pop("numbers"),
            gutenberg=kw.pop("gutenberg"), sentences=kw.pop("sentences"), encoding_errors=kw.pop("encoding_errors"),
        )
        return f(opts=opts, **kw)

    wrapper.__name__ = f.__name__
    wrapper.__doc__ = f.__doc__
    for d in reversed(decorators):
        wrapper = d(wrapper)
    return wrapper


@click.group(context_settings=CONTEXT)
@click.version_option(__version__, prog_name="sampledlm")
def cli():
    """sampledlm: train and evaluate language models over large vocabularies.

    \b
    N-gram baselines (Kneser-Ney family, ARPA files), feed-forward and recurrent neural LMs
    and maximum-entropy LMs, trained with the full softmax or a sampled output objective,
    always evaluated with exact, normalised perplexity.

    \b
    Start with:  sampledlm demo
    Every command explains itself:  sampledlm COMMAND --help
    """


@cli.command(context_settings=CONTEXT)
@click.argument("train", metavar="TRAIN")
@click.option("-o", "--output", default="-", show_default=True, help="Vocabulary file to write (word<TAB>count); - for stdout.")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True, help="Words seen fewer times become <unk>.")
@click.option("--max-size", type=click.IntRange(min=2), default=None, help="Keep at most this many entries, </s> and <unk> included.")
@text_options
def vocab(train, output, min_count, max_size, opts):
    """Count TRAIN and write its vocabulary.

    \b
    Ids: </s>=0, <unk>=1, then words by count descending, then by word.
    Example:
      sampledlm vocab ptb.train.txt -o vocab.txt
      sampledlm vocab book.txt.gz --tokenizer raw --lowercase --gutenberg --min-count 2 -o vocab.txt
    """
    from .corpus import build_vocab
    from .textio import check_writable

    check_writable(output)
    v = build_vocab(train, opts, min_count=min_count, max_size=max_size)
    v.save(output)
    click.echo(f"{len(v)} entries ({len(v) - 1} word types and </s>); <unk> count {int(v.counts[1])}", err=True)


@cli.command(context_settings=CONTEXT)
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
    from .stats import corpus_stats, format_stats
    from .vocab import Vocab

    v = Vocab.load(vocab_path) if vocab_path else None
    for path in files:
        s = corpus_stats(path, opts, vocab=v, top_k=top_k)
        click.echo(json.dumps(s) if as_json else format_stats(s))


@cli.command(context_settings=CONTEXT)
@click.option("-o", "--output", "out_dir", default=None, help="Directory for the demo's corpus and models [default: a temporary directory].")
@click.option("--seed", type=int, default=1, show_default=True, help="Random seed.")
def demo(out_dir, seed):
    """Run the whole pipeline on a built-in corpus: no download, no data needed.

    \b
    The corpus is the documentation text that ships with every Python installation
    (pydoc_data.topics), tokenised and split into train/valid/test. The demo reports corpus
    statistics, then trains and evaluates the baselines and models the toolkit offers.
    Example:
      sampledlm demo
      sampledlm demo -o demo-run
    """
    from .demo import run_demo

    run_demo(out_dir, seed=seed)


def _register_commands() -> None:
    """Command groups that live beside their library code (one line each)."""
    from .ngram.cli import ngram; cli.add_command(ngram)  # noqa: E702
    from .neural_cli import eval_cmd, train; cli.add_command(train); cli.add_command(eval_cmd)  # noqa: E702
    from .maxent.cli import maxent; cli.add_command(maxent)  # noqa: E702
    from .bench_cli import bench; cli.add_command(bench)  # noqa: E702


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run ``cli`` and turn user errors into one-line messages."""
    try:
        rc = cli.main(args=argv, prog_name="sampledlm", standalone_mode=False)
    except UserError as e:
        click.echo(f"sampledlm: error: {e}", err=True)
        sys.exit(1)
    except click.exceptions.Abort:
        click.echo("sampledlm: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("sampledlm: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    sys.exit(rc if isinstance(rc, int) else 0)
