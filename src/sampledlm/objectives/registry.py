"""The ``--objective`` names and :func:`make_objective` (adding an objective = one file + one line here)."""

from __future__ import annotations

import dataclasses
import typing

import numpy as np

from ..config import check_value, setting_name
from ..errors import UserError
from .base import OutputObjective
from .adaptive import AdaptiveSoftmax
from .binary import Binary
from .classes import ClassSoftmax
from .hsm import HierarchicalSoftmax
from .nce import NCE, BlackOut, NegativeSampling
from .ranking import Ranking
from .selfnorm import SelfNormalised
from .shortlist import ShortList
from .sampled import CSSBernoulli, CSSImportance, ImportanceSampling
from .softmax import SoftmaxObjective

OBJECTIVES: dict[str, type[OutputObjective]] = {
    "softmax": SoftmaxObjective,
    "binary": Binary,
    "is": ImportanceSampling,
    "css-is": CSSImportance,
    "css-bernoulli": CSSBernoulli,
    "nce": NCE,
    "neg": NegativeSampling,
    "blackout": BlackOut,
    "ranking": Ranking,
    "class": ClassSoftmax,
    "hsm": HierarchicalSoftmax,
    "adaptive": AdaptiveSoftmax,
    "selfnorm": SelfNormalised,
    "shortlist": ShortList,
}


def objective_options(cls: type[OutputObjective]) -> dict[str, object]:
    """The options a class accepts (the fields of its ``Options``), with their defaults."""
    return {f.name: (f.default if f.default is not dataclasses.MISSING else f.default_factory())
            for f in dataclasses.fields(cls.Options)}


def option_help() -> dict[str, dict]:
    """``{option: its help, type and range}`` over every objective, the help ending in each objective's default
    and recurrent default where they differ: what the command line makes its flags from."""
    out: dict[str, dict] = {}
    defaults: dict[str, dict] = {}
    for name, cls in OBJECTIVES.items():
        hints = typing.get_type_hints(cls.Options)
        for f in dataclasses.fields(cls.Options):
            if f.name not in out:
                kind = hints[f.name]
                args = [a for a in typing.get_args(kind) if a is not type(None)]
                out[f.name] = {**f.metadata, "type": kind if not args else args[0]}
                if typing.get_origin(out[f.name]["type"]) is list:
                    out[f.name]["type"] = typing.get_args(out[f.name]["type"])[0]
            d = defaults.setdefault(f.name, {})
            d.setdefault(("", _show(objective_options(cls)[f.name])), []).append(name)
            if "recurrent" in f.metadata:
                d.setdefault(("on recurrent models ", _show(f.metadata["recurrent"])), []).append(name)
    for option, d in defaults.items():
        plain = [(shown, names) for (where, shown), names in d.items() if not where]
        recurrent = [(shown, names) for (where, shown), names in d.items() if where]
        if "default" in out[option]["help"] and not recurrent and [s for s, _ in plain] == ["none"]:
            continue  # the help says what "not given" means
        text = ("; ".join(f"{s} ({', '.join(n)})" for s, n in plain) if len(plain) > 1 else plain[0][0])
        if recurrent:
            text += "; on recurrent models " + ", ".join(f"{s} ({', '.join(n)})" for s, n in recurrent)
        longer = [f"{_show(values[option])} ({name}) over {above:,} steps" for name, cls in OBJECTIVES.items()
                  for above, values, _ in cls.sequence_train_long if option in values]
        if longer:
            text += "; " + ", ".join(longer)
        out[option]["help"] = out[option]["help"] + f" [default: {text}]"
    return out


def _show(value) -> str:
    return ("on" if value is True else "off" if value is False else "none" if value is None else
            " ".join(map(str, value)) if isinstance(value, (list, tuple)) else f"{value:,}" if isinstance(value, int)
            else str(value))


def _not_applying(option: str, value, name: str) -> str:
    """``--include-true applies to --objective neg, blackout, ranking only (this run: is)``: the flag as typed (a
    boolean's off form too) and the objectives that take it."""
    takers = [n for n, c in OBJECTIVES.items() if option in {f.name for f in dataclasses.fields(c.Options)}]
    field = next((f for c in map(OBJECTIVES.get, takers) for f in dataclasses.fields(c.Options) if f.name == option),
                 None)
    flag = setting_name(option)
    if value is False and flag.startswith("--"):
        off = field.metadata.get("negatable") if field is not None else None
        flag = ("--" + off.lstrip("-")) if off else "--no-" + flag[2:]
    where = f"applies to {setting_name('objective')} {', '.join(takers)} only" if takers else "applies to no objective"
    return f"{flag} {where} (this run: {name})"


def objective_settings(name: str, **options):
    """The options of objective ``name`` as its ``Options`` dataclass, checked (unknown names, ranges, rules between
    options) without building the objective; ``options`` with None values are left at their defaults."""
    if name not in OBJECTIVES:
        raise UserError(f"unknown objective {name!r}; choose from {', '.join(OBJECTIVES)}")
    cls = OBJECTIVES[name]
    fields = {f.name: f for f in dataclasses.fields(cls.Options)}
    given = {k: v for k, v in options.items() if v is not None}
    wrong = sorted(set(given) - set(fields))
    if wrong:
        raise UserError(_not_applying(wrong[0], given[wrong[0]], name))
    for k, v in given.items():
        check_value(k, v, dict(fields[k].metadata))
    return cls.Options(**given)


def make_objective(name: str, counts: np.ndarray | None = None, **options) -> OutputObjective:
    """Build objective ``name``; ``options`` (None values are ignored) must be ones it accepts."""
    objective_settings(name, **options)
    return OBJECTIVES[name](counts=counts, **{k: v for k, v in options.items() if v is not None})
