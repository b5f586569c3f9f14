"""The ``sampledlm`` command line: a thin layer that parses flags and calls the library.

Errors the user can fix (:class:`~sampledlm.errors.UserError`, bad flags) print one line,
``sampledlm: error: ...``, and exit with status 1 (2 for a usage error); nothing else is
printed and no partial output file is left. Results go to stdout, progress and summaries
to stderr.
"""

from __future__ import annotations

import os
import sys
import warnings

import click

from .. import __version__
from ..errors import InputWarning, Terminated, TrainingInterrupted, UserError

from .common import CONTEXT


#: command name -> "module:attribute"; a command's module (and what it imports: torch, numba) loads
#: only when that command runs, so `sampledlm ngram eval` does not pay for torch's import
COMMANDS = {
    "vocab": "corpus:vocab",
    "stats": "corpus:stats",
    "classes": "corpus:classes",
    "samples": "corpus:samples",
    "train": "neural:train",
    "eval": "eval:eval_cmd",
    "calibrate": "calibrate:calibrate",
    "score": "score:score",
    "generate": "generate:generate",
    "rescore": "rescore:rescore",
    "serve": "serve:serve",
    "ngram": "ngram:ngram",
    "maxent": "maxent:maxent",
    "embed": "embed:embed",
    "export": "export:export",
    "demo": "demo:demo",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use (click's documented pattern)."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.lazy) | set(super().list_commands(ctx)))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy:
            return super().get_command(ctx, name)
        import importlib

        module, attr = self.lazy[name].split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings=CONTEXT)
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


def main(argv: list[str] | None = None, command: click.Command | None = None, prog_name: str = "sampledlm") -> None:
    """Console-script entry point: run ``command`` (default: the ``sampledlm`` group) and turn user errors into
    one-line messages. ``python -m benchmarks`` runs its own command through here too.

    Every way a command can end is handled here, for every command and every writer, without leaning on how a
    click release treats them: a reader that stops reading (``| head``) ends the command quietly with status 0, a
    full disk behind standard output is one line and status 1, ^C is status 130."""
    passive_thread_wait()
    huge_page_tensors()
    ours = raise_on_stop_signals()
    try:
        _main(argv, command, prog_name)
    finally:
        import signal

        # an in-process caller (a test, a script calling main) gets its default back; a handler a command set on
        # top stays (the server ignores late signals while it exits)
        for signum, handler in ours.items():
            if signal.getsignal(signum) is handler:
                signal.signal(signum, signal.SIG_DFL)


def _say_input_warnings(message, category, filename, lineno, file=None, line=None, *, shown) -> None:
    """``warnings.showwarning`` for a command: an :class:`InputWarning` as one line (``sampledlm: warning: ...``),
    any other warning as Python shows it (``shown``: the handler this replaced)."""
    if issubclass(category, InputWarning):
        click.echo(f"sampledlm: warning: {message}", err=True)
    else:
        shown(message, category, filename, lineno, file, line)


def _main(argv: list[str] | None, command: click.Command | None, prog_name: str) -> None:
    import functools

    shown = warnings.showwarning
    warnings.showwarning = functools.partial(_say_input_warnings, shown=shown)
    try:
        _main_raising(argv, command, prog_name)
    finally:
        warnings.showwarning = shown


def _main_raising(argv: list[str] | None, command: click.Command | None, prog_name: str) -> None:
    try:
        rc = _invoke(command or cli, argv, prog_name)
        sys.stdout.flush()  # a full disk behind stdout shows here, as a message, not at interpreter exit
    except UserError as e:
        if not (e.every_rank and os.environ.get("RANK", "0") != "0"):  # torchrun: rank 0 says it for all
            click.echo(f"sampledlm: error: {e}", err=True)
        sys.exit(1)
    except click.exceptions.Abort as e:  # a prompt's ^C (click raises Abort there)
        cause = str(e.__cause__ or "")
        click.echo(f"sampledlm: {cause}" if cause else "sampledlm: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except EOFError as e:  # a truncated file read by a library that raises EOFError
        click.echo(f"sampledlm: error: a file ended too soon ({e or 'end of file'})", err=True)
        sys.exit(1)
    except KeyboardInterrupt as e:  # training raises one that says where its checkpoint is and how to resume
        _interrupted(e)
    except SystemError as e:  # ^C inside compiled code (numba) surfaces as "returned a result with an exception set"
        _interrupted(_interrupt_in(e) or _reraise(e))
    except BrokenPipeError:
        _drop_stdout()
        sys.exit(0)
    except OSError as e:  # writing the results to standard output failed (e.g. ENOSPC on a redirected stdout)
        from ..data.textio import write_error

        err = write_error(_failed_write_target(e), e)
        if err is None:
            raise
        click.echo(f"sampledlm: error: {err}", err=True)
        _drop_stdout()
        sys.exit(1)
    sys.exit(rc if isinstance(rc, int) else 0)


def _interrupted(e: KeyboardInterrupt):
    try:
        if not (isinstance(e, TrainingInterrupted) and os.environ.get("RANK", "0") != "0"):  # rank 0's checkpoint
            click.echo(f"sampledlm: {e}" if str(e) else "sampledlm: interrupted", err=True)
    except OSError:  # a hang-up: the terminal is gone (its clean-up is done; the status still says why)
        pass
    sys.exit(getattr(e, "exit_code", 130))  # 143 after a SIGTERM


def _interrupt_in(e: BaseException) -> KeyboardInterrupt | None:
    """The interrupt an exception was raised in the middle of handling, if any (its cause or context chain)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _reraise(e: BaseException):
    raise e


def raise_on_stop_signals() -> dict:
    """Make SIGTERM, and SIGHUP (the terminal closed), raise :class:`~sampledlm.errors.Terminated` (an interrupt) in
    this process, each unless a handler is already set (``nohup`` sets SIGHUP's to ignore, and it stays so); commands
    that stop in their own way (training's checkpoint, the server's drain) set theirs on top. Without it the signal
    killed a command outright: an n-gram build left its spill directory and hidden partial output (hundreds of MB),
    a build from standard input left its copy, and nothing was printed. A child process that inherits the handler (a
    fork) dies by the signal as before. Returns the handlers set, by signal."""
    import signal

    main_pid = os.getpid()
    names = {signal.SIGTERM: "terminated (SIGTERM)"}
    if hasattr(signal, "SIGHUP"):  # not on Windows
        names[signal.SIGHUP] = "hung up (SIGHUP: the terminal closed)"

    def on_signal(signum, frame):
        if os.getpid() != main_pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        raise Terminated(names[signum], signum)

    ours = {}
    for signum in names:
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, on_signal)
            ours[signum] = on_signal
    return ours


def passive_thread_wait(environ=os.environ, modules=sys.modules) -> bool:
    """Make torch's OpenMP threads sleep, not spin, while they wait for work (``OMP_WAIT_POLICY=PASSIVE``),
    unless the user chose a policy (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``) or torch is already loaded (its
    OpenMP runtime reads the variable once, when it starts). Returns whether it set the variable.

    Why: a spinning thread whose sibling has been descheduled burns its core's time. On cores shared with other
    jobs, 2 threads then train slower than 1 (V = 485k, NCE, 2 cores with one busy process beside: 45.9 wall s
    spinning against 24.0 sleeping; with two busy processes 77.3 against 32.5). On idle cores sleeping costs
    about 15 % of wall time at 2 threads and saves CPU (benchmarks/notes/thread-wait-2026-11-29.md);
    ``OMP_WAIT_POLICY=ACTIVE`` restores spinning. One thread never waits, so it is unaffected."""
    if "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ or "torch" in modules:
        return False
    environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


def huge_page_tensors(environ=os.environ, modules=sys.modules) -> bool:
    """Ask torch's CPU allocator for transparent huge pages on its large tensors (``THP_MEM_ALLOC_ENABLE=1``: a
    buffer of 2 MB or more is 2 MB-aligned and ``madvise(MADV_HUGEPAGE)``-d), unless the user chose
    (``THP_MEM_ALLOC_ENABLE`` set) or torch is already loaded (its allocator reads the variable once). Returns
    whether it set the variable.

    Why: at V = 485k a GRU's tables and their Adam moments are gigabytes whose rows a step reaches at random, and a
    fresh process first touches them page by page. With 4 KB pages, a 1M-token run of faster-rnnlm's model
    (NCE-20 a position, 128 rows a step, bf16) took 1.1M page faults and 23-26 s of system time of its 59 s; with
    huge pages 0.17M and 20-21 s, and its training loop ran 1.19-1.32x the words per CPU second (alternated, the
    machine otherwise still; benchmarks/notes/large-vocab-findings.md, 2026-12-04). The kernel uses them only
    where ``/sys/kernel/mm/transparent_hugepage/enabled`` allows ``madvise``; elsewhere nothing changes."""
    if "THP_MEM_ALLOC_ENABLE" in environ or "torch" in modules:
        return False
    environ["THP_MEM_ALLOC_ENABLE"] = "1"
    return True


def _invoke(command: click.Command, argv: list[str] | None, prog_name: str):
    """Parse ``argv`` and run ``command``, letting every exception through to :func:`main` (click's own ``main``
    turns some of them into exits of its own, differently from one release to the next). ``--help`` and
    ``--version`` return their exit status; shell completion (``_SAMPLEDLM_COMPLETE=bash_source sampledlm``) is
    click's."""
    complete_var = f"_{prog_name.replace('-', '_').replace(' ', '_')}_COMPLETE".upper()
    if os.environ.get(complete_var):
        return command.main(args=argv, prog_name=prog_name, complete_var=complete_var)
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        with command.make_context(prog_name, args) as ctx:
            return command.invoke(ctx)
    except click.exceptions.Exit as e:
        return e.exit_code


def _failed_write_target(e: OSError) -> str:
    """What an OSError that reached the entry point failed to write: the file it names, numba's cache of
    compiled code when the write came from there (its first call compiles and caches a kernel), else standard
    output (the commands write every file of their own through :func:`sampledlm.data.textio.atomic_write`,
    which names it)."""
    if getattr(e, "filename", None):
        return str(e.filename)
    tb = e.__traceback__
    while tb is not None:
        if "numba" in tb.tb_frame.f_code.co_filename.replace("\\", "/").split("/"):
            where = os.environ.get("NUMBA_CACHE_DIR") or "__pycache__ beside the package's modules"
            return f"numba's cache of compiled code ({where}; set NUMBA_CACHE_DIR to move it)"
        tb = tb.tb_next
    return "standard output"


def _drop_stdout() -> None:
    """Point standard output at /dev/null once writing to it has failed (a closed pipe, a full disk), so that the
    interpreter's last flush of what is still buffered cannot fail again after the one-line error ("Exception
    ignored ... OSError", exit 120), as Python's documentation advises for SIGPIPE."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture): nothing to flush there
        pass
