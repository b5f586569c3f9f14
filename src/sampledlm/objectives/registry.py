"""The ``--objective`` names and :func:`make_objective` (adding an objective = one file + one line here)."""

from __future__ import annotations

import inspect

import numpy as np

from ..config import check_value
from ..errors import UserError
from .base import OutputObjective
from .adaptive import AdaptiveSoftmax
from .binary import Binary
from .classes import ClassSoftmax
from .hsm import HierarchicalSoftmax
from .options import OPTION_HELP
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
    """The keyword options a class accepts, with their defaults."""
    sig = inspect.signature(cls.__init__)
    return {k: p.default for k, p in sig.parameters.items()
            if k not in ("self", "counts") and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def make_objective(name: str, counts: np.ndarray | None = None, **options) -> OutputObjective:
    """Build objective ``name``; ``options`` (None values are ignored) must be ones it accepts."""
    if name not in OBJECTIVES:
        raise UserError(f"unknown objective {name!r}; choose from {', '.join(OBJECTIVES)}")
    cls = OBJECTIVES[name]
    accepted = objective_options(cls)
    given = {k: v for k, v in options.items() if v is not None}
    wrong = sorted(set(given) - set(accepted))
    if wrong:
        flags = ", ".join("--" + w.replace("_", "-") for w in wrong)
        raise UserError(f"{flags} do(es) not apply to objective {name!r}")
    for k, v in given.items():
        check_value(k, v, OPTION_HELP.get(k, {}))
    return cls(counts=counts, **given)
