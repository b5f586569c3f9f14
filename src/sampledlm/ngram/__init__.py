"""Count-based n-gram language models: the Kneser-Ney family and friends, ARPA files, exact perplexity.

Two sides. The build side, ``build/``, estimates in KenLM's stages over int32 id streams
(:mod:`sampledlm.data.corpus`)::

    count (build/counts.py) -> adjust + discount (build/kneser_ney.py, smoothing.py, jelinek_mercer.py)
          -> interpolate (build/estimate.py) -> NgramLM (model.py) <-> ARPA file (arpa.py)

Kneser-Ney through one pipeline within a memory budget (build/external.py: sorted runs, spilled when they do not
fit), the other smoothings in memory, either with Dask's workers counting (build/distributed.py);
:func:`sampledlm.ngram.build.build` chooses from a :class:`~sampledlm.ngram.build.BuildConfig`. The query side
(ARPA files, binary directories, lookups, the LM) imports nothing of it.

API::

    from sampledlm.ngram import train_ngram, read_arpa
    lm = train_ngram(train_ids, vocab, order=5)            # interpolated modified Kneser-Ney
    write_arpa(lm, "model.arpa")
    lm = read_arpa("model.arpa")                           # ours or another tool's
    lnp = lm.stream_logprobs(test_ids, vocab)              # natural log, one per prediction
    ppl = math.exp(-lnp.mean())
    lm = ArpaLM.open("model.arpa.gz")                      # the common LanguageModel interface

    lm = sampledlm.train_ngram("train.txt", order=5)       # on words: a sampledlm.Model (score, perplexity, ...)
    from sampledlm.ngram.build import BuildConfig, build   # what ngram train does, from a file
    build(BuildConfig(order=5, memory="2G"), "train.txt", "kn5.arpa")
"""

from typing import TYPE_CHECKING

from .arpa import read_arpa, write_arpa
from .lm import ArpaLM
from .model import NgramLM

if TYPE_CHECKING:  # for static tools (type checkers, the API reference); at run time __getattr__ imports them
    from .build.estimate import DESCRIPTIONS, SMOOTHINGS, train_ngram

__all__ = ["ArpaLM", "NgramLM", "read_arpa", "write_arpa", "train_ngram", "SMOOTHINGS", "DESCRIPTIONS"]

_BUILD = ("train_ngram", "SMOOTHINGS", "DESCRIPTIONS")  # the estimator's names (build/estimate.py)


def __getattr__(name: str):
    """The estimator's names, imported on first use: importing the query side loads nothing of ``build/``
    (tests/shape/test_ngram_sides.py)."""
    if name in _BUILD:
        from .build import estimate

        return getattr(estimate, name)
    raise AttributeError(f"module 'sampledlm.ngram' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_BUILD))
