"""Count-based n-gram language models: the Kneser-Ney family and friends, ARPA files, exact perplexity.

Estimation runs in KenLM's stages over int32 id streams (:mod:`sampledlm.data.corpus`)::

    count (counts.py) -> adjust + discount (kneser_ney.py, smoothing.py, jelinek_mercer.py)
          -> interpolate (estimate.py) -> NgramLM (model.py) <-> ARPA file (arpa.py)

API::

    from sampledlm.ngram import train_ngram, read_arpa
    lm = train_ngram(train_ids, vocab, order=5)            # interpolated modified Kneser-Ney
    write_arpa(lm, "model.arpa")
    lm = read_arpa("model.arpa")                           # ours or another tool's
    lnp = lm.stream_logprobs(test_ids, vocab)              # natural log, one per prediction
    ppl = math.exp(-lnp.mean())
    lm = ArpaLM.open("model.arpa.gz")                      # the common LanguageModel interface
"""

from .arpa import read_arpa, write_arpa
from .estimate import DESCRIPTIONS, SMOOTHINGS, train_ngram
from .lm import ArpaLM
from .model import NgramLM

__all__ = ["ArpaLM", "NgramLM", "read_arpa", "write_arpa", "train_ngram", "SMOOTHINGS", "DESCRIPTIONS"]
