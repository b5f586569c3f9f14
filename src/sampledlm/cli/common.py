"""What every command shares: click context settings and the text-reading flags."""

from __future__ import annotations

import functools
import math

import click

from ..data.tokenizer import TextOptions
from ..outputs import refuse_existing, remove_if_empty, writing_directory  # noqa: F401 (the commands import them here)

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class FiniteFloat(click.FloatRange):
    """The one type of every number-with-a-fraction flag: refuses nan and inf, which ``float()`` accepts and
    ``click.FloatRange`` lets through every bound (``--lm-weight nan`` would score everything nan)."""

    name = "float"

    def __init__(self, min=None, max=None, min_open=False, max_open=False):
        super().__init__(min=min, max=max, min_open=min_open, max_open=max_open)

    def convert(self, value, param, ctx):
        rv = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(rv, param, ctx)

    def _describe_range(self) -> str:
        return "" if self.min is None and self.max is None else super()._describe_range()


#: A seed flag: what numpy and torch accept (a negative seed is a traceback in numpy).
SEED = click.IntRange(0, 2**32 - 1)
#: ``--threads``: torch's CPU threads; bounded (torch.set_num_threads(99999) ends the process with a segfault)
THREADS = click.IntRange(1, 1024)


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


TEXT_FLAGS = ("tokenizer", "lowercase", "numbers", "gutenberg", "sentences", "encoding_errors")


def text_flags_given() -> bool:
    """Whether the running command was given any text flag (:func:`text_options`) on its command line."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and any(ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE
                                   for p in TEXT_FLAGS if p in ctx.params)


def given(name: str) -> bool:
    """Whether the running command's parameter ``name`` was given (on the command line or by ``--config``) rather
    than left to its default: a flag that does not apply is refused only when the user gave it."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, click.core.ParameterSource.DEFAULT)


def keep_source_settings(where: str, what: str, theirs: dict, here: dict | None = None) -> None:
    """``--init-from WHERE``: refuse, in one line naming the flag, a setting given on the command line or by
    ``--config`` that differs from the source's (``theirs``: parameter name -> the source's value; ``here``: the
    values to compare where they are not the parameters' own, a parsed ``--features`` say). ``what``: what comes
    from the source, for the message."""
    from ..errors import UserError

    ctx = click.get_current_context()
    here = {**ctx.params, **(here or {})}
    given = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.DEFAULT_MAP)
    for p in ctx.command.params:
        if p.name in theirs and ctx.get_parameter_source(p.name) in given and here[p.name] != theirs[p.name]:
            flag = next((o for o in p.opts if o.startswith("--")), p.opts[0])
            raise UserError(f"--init-from {where}: {what} come from that run ({flag} {_shown(theirs[p.name])} there, "
                            f"{_shown(here[p.name])} here); leave {flag} out")


def _shown(value) -> str:
    if isinstance(value, (tuple, list)):
        return ",".join(map(_shown, value))
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def deprecated(message: str) -> None:
    """One line on stderr for an old flag or form that still works (``sampledlm: warning: ...``)."""
    click.echo(f"sampledlm: warning: {message}", err=True)


def mix_options(f):
    """The flags that mix models, the same in every command that reads a model: ``--mix MODEL2`` (repeat for more;
    ``--interpolate`` is a hidden alias, the old name in ``eval``), ``--weights``, ``--interp-valid``. The command
    receives ``others`` (the extra models, in order), ``weights`` and ``interp_valid``."""
    decorators = [
        click.option("--mix", "others", multiple=True, metavar="MODEL2",
                     help="Another model (any family) to interpolate with; repeat for more."),
        click.option("--interpolate", "others_alias", multiple=True, metavar="MODEL2", hidden=True),
        click.option("--weights", default=None, metavar="W1,W2,...|auto",
                     help="Interpolation weights, MODEL's first (summing to 1; with two models one number "
                          "is MODEL's, 0.4 meaning 0.4,0.6), or 'auto': EM on --interp-valid [auto]."),
        click.option("--interp-valid", default=None,
                     help="Held-out text for --weights auto [default: MODEL's validation file]."),
    ]

    def wrapper(**kw):
        others, alias = kw.pop("others"), kw.pop("others_alias")
        if others and alias:
            from ..errors import UserError

            raise UserError("give the models to mix with --mix only (--interpolate is its old name)")
        if alias:
            deprecated("--interpolate is deprecated; use --mix")
        return f(others=tuple(others) or tuple(alias), **kw)

    functools.update_wrapper(wrapper, f)  # keeps the flags declared below this decorator (f.__click_params__)
    for d in reversed(decorators):
        wrapper = d(wrapper)
    return wrapper


def say_fitted_weights(lm, paths: list[str]) -> None:
    """One stderr line with the weights EM chose for a ``--mix`` run whose output does not show them (score,
    generate, rescore): which mixture made the output is part of the result."""
    from ..use.mixing import fitted_weights_note

    note = fitted_weights_note(lm, paths)
    if note:
        click.echo(note, err=True)


def force_option(what: str):
    """``--force``: replace ``what`` when the output already exists (every writer refuses otherwise)."""
    return click.option("--force", is_flag=True, help=f"Replace {what} if the output exists (refused otherwise).")


def device_option(f):
    """``--device``: where neural models run (n-gram and maximum-entropy models ignore it; its spelling is checked
    for every model, so that a mistyped value is not accepted in silence where it is not used)."""
    return click.option("--device", default="auto", show_default=True, metavar="auto|cpu|cuda|cuda:N",
                        callback=_check_device_spelling,
                        help="Where neural models run: auto is the GPU when torch sees one "
                             "(or the device $SAMPLEDLM_DEVICE names).")(f)


def _check_device_spelling(ctx, param, value):
    from ..errors import UserError

    name = (value or "auto").strip().lower()
    if name in ("auto", "cpu", "cuda") or (name.startswith("cuda:") and name[5:].isdigit()):
        return value
    raise UserError(f"--device {value}: choose auto, cpu, cuda or cuda:N")
