"""Output objectives: interchangeable training losses over a scorer's outputs (see :mod:`.base`).

``OBJECTIVES`` maps each ``--objective`` name to its class; :func:`make_objective` builds one
from the user's options, refusing options that do not apply to it.

=================  =============================================  =================================
name               class (module)                                 paper
=================  =============================================  =================================
``softmax``        :class:`SoftmaxObjective` (softmax)            exact cross-entropy, O(V h)
``binary``         :class:`Binary` (binary)                       seed 000 eq. 5-9, α-subsampled
``is``             :class:`ImportanceSampling` (sampled)          seed 001 eq. 11, 16
``css-is``         :class:`CSSImportance` (sampled)               seed 001 eq. 17-21, §6.2
``css-bernoulli``  :class:`CSSBernoulli` (sampled)                seed 001 eq. 7-9, 18, 23
``nce``            :class:`NCE` (nce)                             seed 003; seed 001 §5.2
``neg``            :class:`NegativeSampling` (nce)                seed 001 eq. 29
``blackout``       :class:`BlackOut` (nce)                        seed 001 eq. 30-31
``ranking``        :class:`Ranking` (ranking)                     seed 001 eq. 26-28
=================  =============================================  =================================

:class:`SampledOutput` wraps any of them with its own output layer as a drop-in PyTorch module.
"""

from __future__ import annotations

import inspect

import numpy as np

from ..errors import UserError
from .base import OutputObjective, Scorer  # noqa: F401
from .binary import Binary
from .nce import NCE, BlackOut, NegativeSampling
from .ranking import Ranking
from .sampled import CSSBernoulli, CSSImportance, ImportanceSampling
from .module import SampledOutput  # noqa: F401  (user-facing module; imports make_objective lazily)
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
    return cls(counts=counts, **given)
