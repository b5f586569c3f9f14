"""Output objectives: interchangeable training losses over a scorer's outputs (see :mod:`.base`).

``OBJECTIVES`` maps each ``--objective`` name to its class; :func:`make_objective` builds one
from the user's options, refusing options that do not apply to it.

=================  =============================================  ============================
name               class (module)                                 paper
=================  =============================================  ============================
``softmax``        :class:`SoftmaxObjective` (softmax)            exact cross-entropy, O(V h)
``binary``         :class:`Binary` (binary)                       Xu et al. 2011 eq. 5-9      
``is``             :class:`ImportanceSampling` (sampled)          Bengio & Senécal 2003      
``css-is``         :class:`CSSImportance` (sampled)               Botev et al. 2017 eq. 17-21
``css-bernoulli``  :class:`CSSBernoulli` (sampled)                Botev et al. 2017 eq. 7-9  
``nce``            :class:`NCE` (nce)                             Mnih & Teh 2012; Labeau 2014
``neg``            :class:`NegativeSampling` (nce)                Mikolov et al. 2013        
``blackout``       :class:`BlackOut` (nce)                        Ji et al. 2016             
``ranking``        :class:`Ranking` (ranking)                     Collobert & Weston 2008    
``class``          :class:`ClassSoftmax` (classes)                Mikolov et al. 2011
``hsm``            :class:`HierarchicalSoftmax` (hsm)             Morin & Bengio 2005
``adaptive``       :class:`AdaptiveSoftmax` (adaptive)            Grave et al. 2017
``selfnorm``       :class:`SelfNormalised` (selfnorm)             Devlin et al. 2014
``shortlist``      :class:`ShortList` (shortlist)                 Schwenk 2007
=================  =============================================  ============================

:class:`SampledOutput` wraps any of them with its own output layer as a drop-in PyTorch module.
"""

from __future__ import annotations

from .base import OutputObjective, Scorer  # noqa: F401
from .module import SampledOutput, optimizer_pair  # noqa: F401
from .output import OutputLayer  # noqa: F401
from .registry import OBJECTIVES, make_objective, objective_options  # noqa: F401
