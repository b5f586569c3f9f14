"""Maximum-entropy LMs (Xu, Gunawardana & Khudanpur 2011): standard (softmax) and binarized, sparse features.

:mod:`.features` (history features, dictionary), :mod:`.kernels` (the hot loops),
:mod:`.scorer` (the model, exact evaluation, files), :mod:`.train` (SGD, lr halving),
:mod:`.shard` (vocabulary-sharded parallel training), :mod:`.lm` (:class:`MaxEntLM`, the
:class:`~sampledlm.lm.LanguageModel`); the command line is :mod:`sampledlm.cli.maxent`.
"""

import importlib

# Exported names, loaded on first use (PEP 562) so that `sampledlm maxent --help` and the rest of
# the command line start without importing torch and numba.
_EXPORTS = {
    "FEAT_I": "features", "FEAT_II": "features", "FeatureSet": "features", "FeatureSpec": "features",
    "MaxEntContext": "scorer", "MaxEntModel": "scorer",
    "TrainConfig": "train", "train": "train",
    "MaxEntLM": "lm", "load_maxent": "lm",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_EXPORTS[name]}", __name__)
    # Importing a submodule binds its name here (``train`` the module); the exports win, as they
    # would with eager ``from .train import train``.
    for export, source in _EXPORTS.items():
        if source == _EXPORTS[name]:
            globals()[export] = getattr(module, export)
    return globals()[name]
