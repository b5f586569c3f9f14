"""sampledlm: language models over large vocabularies without paying for the whole vocabulary per word.

From Python, on words (:mod:`sampledlm.api`)::

    import sampledlm
    lm = sampledlm.load("kn3.arpa")          # or a run directory, a binary directory, a list (a mixture)
    lm.score("the company said"), lm.perplexity(["it rose", "they fell"]), lm.generate(3, seed=1)

Layers, bottom up:

- :mod:`sampledlm.data.textio`    reading text (plain, .gz, .xz, stdin) with file:line errors; atomic writes
- :mod:`sampledlm.data.tokenizer`  whitespace and raw-text tokenisation, Project Gutenberg stripping
- :mod:`sampledlm.data.vocab`     counting, cut-offs, the specials ``</s>``, ``<unk>``, ``<s>``
- :mod:`sampledlm.data.corpus`    text -> int32 id streams, cached as memory-mapped ``.npy``
- :mod:`sampledlm.data.batches`  n-gram windows and BPTT streams over id streams
- :mod:`sampledlm.ngram`     count-based n-gram models and ARPA files
- :mod:`sampledlm.neural.registry`    neural and maximum-entropy *scorers*
- :mod:`sampledlm.objectives` interchangeable *output objectives* (softmax, binary, IS, CSS, NCE, ...)
"""

from .errors import InputWarning, UserError  # noqa: F401

try:  # the installed distribution's version (pyproject.toml), also for an editable install
    from importlib.metadata import PackageNotFoundError, version as _version

    __version__ = _version("sampledlm")
except PackageNotFoundError:  # run from a checkout's src/ without installing
    __version__ = "0+unknown"

__all__ = ["load", "Model", "train_ngram", "train_lm", "resume_lm", "train_maxent", "resume_maxent", "train_embeddings",
           "UserError", "InputWarning", "__version__"]


#: what :func:`__getattr__` serves from :mod:`sampledlm.api` and :mod:`sampledlm.api_train` (the training
#: functions), and the subpackages it imports on first use
_TRAINING = ("train_ngram", "train_lm", "resume_lm", "train_maxent", "resume_maxent", "train_embeddings")
_API = ("load", "Model", *_TRAINING)
_LAZY_MODULES = ("ngram", "neural", "maxent", "embed", "api", "lm")


def __getattr__(name: str):
    """``sampledlm.load``, ``sampledlm.Model`` (:mod:`sampledlm.api`) and the family packages, imported on first
    use so that the command line starts without numpy."""
    import importlib

    # by name, as maxent/__init__.py does: the package root depends on no layer (every module imports it first)
    if name in _API:
        return getattr(importlib.import_module(".api_train" if name in _TRAINING else ".api", __name__), name)
    if name in _LAZY_MODULES:  # sampledlm.ngram.X without an import
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'sampledlm' has no attribute {name!r}")


def __dir__() -> list[str]:
    """What the package offers, the names :func:`__getattr__` imports on first use included (``dir(sampledlm)``
    and tab completion list ``load`` and ``Model`` before they are imported)."""
    return sorted(set(globals()) | set(_API) | set(_LAZY_MODULES))
