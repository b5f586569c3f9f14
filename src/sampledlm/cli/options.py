"""Click options generated from the configuration dataclasses (:mod:`sampledlm.config`).

Each field becomes one flag with the field's help; the default shown is the field's own (or,
for settings whose default depends on the model kind, every kind's). Flags default to None
("not given") so that the library fills in the one true default.
"""

from __future__ import annotations

import dataclasses
import typing

import click

from .common import FiniteFloat


def _click_type(kind, meta):
    if meta.get("choices"):
        return click.Choice([str(c) for c in meta["choices"]])
    lo, hi = meta.get("min"), meta.get("max")
    if kind is int:
        return click.IntRange(min=None if lo is None else int(lo), max=None if hi is None else int(hi))
    if kind is float:
        return FiniteFloat(min=lo, max=hi, min_open=bool(meta.get("min_open")), max_open=bool(meta.get("max_open")))
    return click.STRING


def _base_type(hint):
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (list, tuple):
        return args[0], True
    if args and typing.get_origin(hint) is not None:
        return _base_type(args[0])
    return hint, False


def field_option(name: str, hint, meta: dict, default_text: str = "") -> callable:
    """One click option for a field (None default: the library applies the real one)."""
    kind, is_list = _base_type(hint)
    flag = meta.get("flag") or "--" + name.replace("_", "-")
    decls = [flag] + ([meta["short"]] if meta.get("short") else [])
    help_text = meta.get("help", "")
    if default_text and "[default:" not in help_text:  # a help that says its default itself says it once
        help_text += f" [{default_text}]"
    if kind is bool:
        neg = meta.get("negatable")
        decl = f"{flag}/--{neg}" if neg else f"{flag}/--no-{flag[2:]}"
        return click.option(decl, name, default=None, help=help_text)
    return click.option(*decls, name, type=_click_type(kind, meta), default=None, multiple=is_list or meta.get("multiple", False),
                        help=help_text)


def dataclass_options(classes: dict[str, type], overrides: dict[str, dict] | None = None,
                      more_defaults: dict[str, str] | None = None):
    """Flags for the union of the fields of ``classes`` ({label: dataclass}); each help text shows every
    label's default (and ``overrides[label][field]`` where a label overrides it), then ``more_defaults[field]``
    (defaults set elsewhere, e.g. by an objective on a recurrent trunk)."""
    fields: dict[str, tuple] = {}
    defaults: dict[str, list[str]] = {}
    for label, cls in classes.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            fields.setdefault(f.name, (hints[f.name], dict(f.metadata)))
            d = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            d = (overrides or {}).get(label, {}).get(f.name, d)
            defaults.setdefault(f.name, []).append((label, d))

    def text(name):
        vals = defaults[name]
        show = lambda v: "off" if v is False else "on" if v is True else "none" if v is None else (
            " ".join(map(str, v)) if isinstance(v, list) else str(v))
        more = f"; {more_defaults[name]}" if name in (more_defaults or {}) else ""
        if len({show(v) for _, v in vals}) == 1 or len(classes) == 1:
            return f"default: {show(vals[0][1])}{more}"
        return "default: " + ", ".join(f"{label} {show(v)}" for label, v in vals) + more

    decorators = [field_option(n, h, m, text(n)) for n, (h, m) in fields.items()]

    def apply(f):
        for d in reversed(decorators):
            f = d(f)
        return f

    return apply, list(fields)


def objective_flag_options(option_help: dict[str, dict], names: list[str]):
    """Flags for the objectives' options (defaults live in each objective; see its --help)."""
    decorators = []
    for name in names:
        meta = option_help[name]
        decorators.append(field_option(name, meta.get("type", str), meta, ""))

    def apply(f):
        for d in reversed(decorators):
            f = d(f)
        return f

    return apply
