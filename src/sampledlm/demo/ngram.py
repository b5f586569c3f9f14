"""The n-gram steps of ``sampledlm demo``: an add-one bigram and interpolated modified Kneser-Ney trigram."""

from __future__ import annotations

import os
import time

from .common import DemoData, Result
from ..ngram.arpa import write_arpa
from ..ngram.build.estimate import train_ngram


def addone_bigram_step(data: DemoData) -> list[Result]:
    """The simplest smoothed model: add-one bigram, P(w|v) = (c(v,w)+1) / (c(v)+V) (``addk`` with k = 1)."""
    t0 = time.perf_counter()
    lm = train_ngram(data.ids["train"], data.vocab, 2, "addk", k=1.0)
    return [Result("add-one bigram", lm.perplexity(data.ids["valid"], data.vocab),
                   lm.perplexity(data.ids["test"], data.vocab), time.perf_counter() - t0)]


def kneser_ney_step(data: DemoData) -> list[Result]:
    """Interpolated modified Kneser-Ney trigram, written as an ARPA file (left in ``data.extra["kn3_arpa"]``)."""
    t0 = time.perf_counter()
    lm = train_ngram(data.ids["train"], data.vocab, 3, "mkn")
    path = os.path.join(data.directory, "kn3.arpa")
    write_arpa(lm, path)
    data.extra["kn3_arpa"] = path
    note = f"{sum(lm.counts()):,} n-grams, kn3.arpa"
    return [Result("modified Kneser-Ney trigram", lm.perplexity(data.ids["valid"], data.vocab),
                   lm.perplexity(data.ids["test"], data.vocab), time.perf_counter() - t0, note)]
