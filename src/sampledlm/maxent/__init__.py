"""Maximum-entropy LMs (Xu, Gunawardana & Khudanpur): standard (softmax) and binarized, sparse features.

:mod:`.features` (history features, dictionary), :mod:`.kernels` (the hot loops),
:mod:`.scorer` (the model, exact evaluation, files), :mod:`.train` (SGD, lr halving),
:mod:`.shard` (vocabulary-sharded parallel training), :mod:`.cli` (``sampledlm maxent``).
"""

from .features import FEAT_I, FEAT_II, FeatureSet, FeatureSpec  # noqa: F401
from .scorer import MaxEntContext, MaxEntModel  # noqa: F401
from .train import TrainConfig, train  # noqa: F401
