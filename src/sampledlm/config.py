"""Configuration as data: dataclass fields that carry their default, help text and valid range.

Every model, objective and training setting is declared once, as a dataclass field made with
:func:`option`; the command line generates its flags from these fields
(:mod:`sampledlm.cli.options`), ``config.json`` is their serialisation (:func:`to_dict`,
:func:`from_dict`), and :func:`check` enforces the ranges whether the values came from flags,
from a file or from Python.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import types
import typing
from typing import Any

from .errors import UserError

_PYTHON_NAMES = contextvars.ContextVar("python_names", default=False)
FLOAT32_MAX = 3.4028234663852886e38  # the largest float32: a larger setting overflows in the model's arithmetic


#: the ``recurrent`` of an :func:`option` with no default of its own on recurrent trunks
NO_RECURRENT_DEFAULT = object()


def option(default: Any, help: str, *, min: float | None = None, max: float | None = None,
           min_open: bool = False, max_open: bool = False, choices: tuple | None = None, flag: str | None = None, short: str | None = None,
           multiple: bool = False, negatable: str | None = None, recurrent: Any = NO_RECURRENT_DEFAULT,
           recurrent_unless: tuple[str, ...] = ()):
    """A dataclass field with its help text and range (``min``/``max`` inclusive unless ``min_open``/``max_open``).

    ``negatable``: a boolean's "off" flag when not ``--no-NAME``. ``recurrent``: the default on a recurrent trunk
    (an objective's option measured there to want another value), left out when the user gave one of the options
    named in ``recurrent_unless``."""
    meta = {"help": help, "min": min, "max": max, "min_open": min_open, "max_open": max_open, "choices": choices, "flag": flag,
            "short": short, "multiple": multiple, "negatable": negatable}
    if recurrent is not NO_RECURRENT_DEFAULT:
        meta |= {"recurrent": recurrent, "recurrent_unless": tuple(recurrent_unless)}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@contextlib.contextmanager
def python_names():
    """Within it, messages name settings as the Python API's keyword arguments (``epochs=0``), not as the
    command line's flags (``--epochs 0``): the API's training functions run inside it."""
    token = _PYTHON_NAMES.set(True)
    try:
        yield
    finally:
        _PYTHON_NAMES.reset(token)


def setting_name(name: str, flag: str | None = None) -> str:
    """How messages name the setting ``name`` (a field name): its flag (``--max-halvings``), or its keyword
    argument inside :func:`python_names`."""
    return name if _PYTHON_NAMES.get() else flag or "--" + name.replace("_", "-")


def said(cli: str, python: str) -> str:
    """The way out a message gives: ``cli`` (a command or flag) on the command line, ``python`` (a call or keyword)
    inside :func:`python_names`."""
    return python if _PYTHON_NAMES.get() else cli


def setting_value(name: str, value: Any, flag: str | None = None, quoted: bool = False) -> str:
    """A setting and its value as the user wrote it: ``--epochs 0`` on the command line, ``epochs=0`` in Python."""
    if _PYTHON_NAMES.get():
        return f"{name}={value!r}"
    return f"{setting_name(name, flag)} {value!r}" if quoted else f"{setting_name(name, flag)} {value}"


def check_value(name: str, value: Any, meta: dict) -> None:
    """Refuse a value outside the field's range or choices (the message names the flag or keyword)."""
    flag = meta.get("flag")
    if value is None:
        return
    values = value if isinstance(value, (list, tuple)) else [value]
    for v in values:
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            if not math.isfinite(v):
                raise UserError(f"{setting_value(name, v, flag)}: must be a finite number")
            if isinstance(v, float) and abs(v) > FLOAT32_MAX:
                raise UserError(f"{setting_value(name, v, flag)}: too large (the models compute in float32: at most {FLOAT32_MAX:.3g})")
            lo, hi = meta.get("min"), meta.get("max")
            if lo is not None and (v < lo or (meta.get("min_open") and v == lo)):
                raise UserError(f"{setting_value(name, v, flag)}: must be {'>' if meta.get('min_open') else '>='} {lo:g}")
            if hi is not None and (v > hi or (meta.get("max_open") and v == hi)):
                raise UserError(f"{setting_value(name, v, flag)}: must be {'<' if meta.get('max_open') else '<='} {hi:g}")
        choices = meta.get("choices")
        if choices and v not in choices:
            raise UserError(f"{setting_value(name, v, flag, quoted=True)}: choose from {', '.join(map(str, choices))}")


def check(obj) -> None:
    """Check every field of a dataclass instance against its declared range."""
    for f in dataclasses.fields(obj):
        check_value(f.name, getattr(obj, f.name), f.metadata)


#: JSON scalar checks by field type: (accepts the JSON value, what to call the expected type)
_SCALARS = {
    bool: (lambda v: isinstance(v, bool), "true or false"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    str: (lambda v: isinstance(v, str), "a string"),
}


def _coerce(f: dataclasses.Field, value: Any, where: str, hints: dict):
    """JSON -> field type, refusing values of the wrong JSON type with a one-line message."""
    kind = hints.get(f.name, Any)
    origin = typing.get_origin(kind)
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if value is None:
        if type(None) in typing.get_args(kind) or kind is Any:
            return None
        raise UserError(f"{where}: {f.name!r} may not be null")
    base = args[0] if origin in (typing.Union, types.UnionType) and len(args) == 1 else kind
    b_origin = typing.get_origin(base)
    if b_origin in (list, tuple):
        if not isinstance(value, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise UserError(f"{where}: {f.name!r} should be a list of numbers, found {value!r}")
        return list(value)
    check = _SCALARS.get(base)
    if check is not None:
        accepts, name = check
        if not accepts(value):
            raise UserError(f"{where}: {f.name!r} should be {name}, found {value!r}")
        return float(value) if base is float else value
    return value


def from_dict(cls, d: Any, where: str):
    """An instance of dataclass ``cls`` from a JSON object: unknown keys, wrong types and ranges refused."""
    if not isinstance(d, dict):
        raise UserError(f"{where}: expected a JSON object, found {type(d).__name__}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - set(names))
    if unknown:
        raise UserError(f"{where}: unknown option(s) {', '.join(unknown)}")
    hints = typing.get_type_hints(cls)
    obj = cls(**{k: _coerce(names[k], v, where, hints) for k, v in d.items()})
    check(obj)
    return obj


def to_dict(obj) -> dict:
    return dataclasses.asdict(obj)
