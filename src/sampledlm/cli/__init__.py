"""The ``sampledlm`` command line: a thin layer that parses flags and calls the library.

Errors the user can fix (:class:`~sampledlm.errors.UserError`, bad flags) print one line,
``sampledlm: error: ...``, and exit with status 1 (2 for a usage error); nothing else is
printed and no partial output file is left. Results go to stdout, progress and summaries
to stderr.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from ..errors import UserError

from .common import CONTEXT


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


def _register_commands() -> None:
    """Every command group lives in a module of its own (one line each)."""
    from .bench import bench
    from .corpus import stats, vocab
    from .demo import demo
    from .maxent import maxent
    from .eval import eval_cmd
    from .neural import train
    from .ngram import ngram

    for command in (vocab, stats, train, eval_cmd, ngram, maxent, demo, bench):
        cli.add_command(command)


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run ``cli`` and turn user errors into one-line messages."""
    try:
        rc = cli.main(args=argv, prog_name="sampledlm", standalone_mode=False)
        sys.stdout.flush()  # a full disk behind stdout shows here, as a message, not at interpreter exit
    except UserError as e:
        click.echo(f"sampledlm: error: {e}", err=True)
        sys.exit(1)
    except click.exceptions.Abort as e:  # click turns KeyboardInterrupt into Abort; the training's says how to resume
        cause = str(e.__cause__ or "")
        click.echo(f"sampledlm: {cause}" if cause else "sampledlm: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt as e:  # training raises one that says where its checkpoint is and how to resume
        click.echo(f"sampledlm: {e}" if str(e) else "sampledlm: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except OSError as e:  # writing the results to standard output failed (e.g. ENOSPC on a redirected stdout)
        from ..data.textio import write_error

        err = write_error("standard output", e)
        if err is None:
            raise
        click.echo(f"sampledlm: error: {err}", err=True)
        sys.exit(1)
    sys.exit(rc if isinstance(rc, int) else 0)
