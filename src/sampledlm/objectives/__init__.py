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

from .base import OutputObjective, Scorer  # noqa: F401
from .module import SampledOutput  # noqa: F401
from .output import OutputLayer  # noqa: F401
from .registry import OBJECTIVES, make_objective, objective_options  # noqa: F401
