"""sampledlm: language models over large vocabularies without paying for the whole vocabulary per word.

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

__version__ = "0.1.0"

from .errors import UserError  # noqa: F401
