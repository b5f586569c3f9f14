"""Output objectives: interchangeable training losses over a scorer's outputs (see :mod:`.base`).

``OBJECTIVES`` maps each ``--objective`` name to its class.
"""

from .base import OutputObjective, Scorer  # noqa: F401
from .softmax import SoftmaxObjective

OBJECTIVES: dict[str, type[OutputObjective]] = {
    "softmax": SoftmaxObjective,
}
