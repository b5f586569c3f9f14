"""A simulated recogniser: a seeded noisy channel that turns reference sentences into scored n-best lists.

For each hypothesis the channel rewrites the reference word by word (independently per hypothesis):

- with probability ``sub`` a word is replaced by a *confusable* word: one of the vocabulary words that
  share its first two letters and differ in length by at most two (similar spelling), or any word
  when it has none;
- with probability ``dele`` it is deleted; with probability ``ins`` a short word (three letters or fewer)
  is inserted after it.

Its acoustic score is ``sum over the reference words of N(0, 1)`` for a kept word and ``N(-gap, 1)`` for
an edited one (each insertion also ``N(-gap, 1)``): the channel prefers the truth but its noise often
ranks a wrong hypothesis first, which is what a language model has to fix. Lists hold distinct word
strings, ordered by acoustic score; the reference itself is in a list only when the channel drew it.
All draws come from ``numpy.random.default_rng(seed)``.

:meth:`Channel.lattice` builds the recogniser's *acoustic* lattice of a sentence instead: a chain of
one slot per reference word, each holding the word (score ``N(0, 1)``) and ``competitors`` confusable
words (``N(-gap, 1)`` each), with probability ``dele`` an empty link (a deletion, ``N(-gap, 1)``) and with
probability ``ins`` a detour through an inserted short word before the slot's words. Its links carry
acoustic scores only; expanding it with an n-gram model (:func:`sampledlm.use.lattice.expand`) gives
the first pass's lattice with LM scores, and its best paths the first pass's n-best list.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .slf import Lattice, Link
from .nbest import Hypothesis, NBest


class Channel:
    """The noisy channel of the module docstring over a vocabulary ``words``."""

    def __init__(self, words: list[str], sub: float = 0.15, dele: float = 0.03, ins: float = 0.03, gap: float = 1.0,
                 seed: int = 1):
        self.words = [w for w in words if not w.startswith("<")]
        self.sub, self.dele, self.ins, self.gap = sub, dele, ins, gap
        self.rng = np.random.default_rng(seed)
        by_prefix = defaultdict(list)
        for w in self.words:
            by_prefix[w[:2]].append(w)
        self.prefix = by_prefix
        self.short = [w for w in self.words if len(w) <= 3] or self.words

    def confusable(self, word: str) -> str:
        near = [w for w in self.prefix.get(word[:2], []) if w != word and abs(len(w) - len(word)) <= 2]
        pool = near or self.words
        return pool[int(self.rng.integers(len(pool)))]

    def corrupt(self, ref: list[str]) -> tuple[list[str], float]:
        """One hypothesis and its acoustic score."""
        out, am = [], 0.0
        for w in ref:
            u = self.rng.random()
            if u < self.sub:
                out.append(self.confusable(w))
                am += self.rng.normal(-self.gap, 1.0)
            elif u < self.sub + self.dele:
                am += self.rng.normal(-self.gap, 1.0)
            else:
                out.append(w)
                am += self.rng.normal(0.0, 1.0)
            if self.rng.random() < self.ins:
                out.append(self.short[int(self.rng.integers(len(self.short)))])
                am += self.rng.normal(-self.gap, 1.0)
        return out, am

    def nbest(self, uid: str, ref: list[str], n: int = 10, draws: int | None = None) -> NBest:
        """Up to ``n`` distinct hypotheses (from ``draws`` channel draws, default 3n), best acoustic score first."""
        seen: dict[tuple, float] = {}
        for _ in range(draws or 3 * n):
            words, am = self.corrupt(ref)
            key = tuple(words)
            seen[key] = max(seen.get(key, -np.inf), am)
        ranked = sorted(seen.items(), key=lambda kv: -kv[1])[:n]
        return NBest(uid, [Hypothesis(list(w), float(am), 0.0) for w, am in ranked], list(ref))

    def lattice(self, uid: str, ref: list[str], competitors: int = 3) -> Lattice:
        """The acoustic lattice of ``ref`` (module docstring): nodes 0..len(ref) along the chain, detours after."""
        rng, n = self.rng, len(ref)
        links, extra = [], n + 1
        for i, w in enumerate(ref):
            links.append(Link(i, i + 1, w, float(rng.normal(0.0, 1.0))))
            for c in sorted({self.confusable(w) for _ in range(competitors)} - {w}):
                links.append(Link(i, i + 1, c, float(rng.normal(-self.gap, 1.0))))
            if rng.random() < self.dele:
                links.append(Link(i, i + 1, None, float(rng.normal(-self.gap, 1.0))))
            if rng.random() < self.ins:
                short = self.short[int(rng.integers(len(self.short)))]
                links.append(Link(i, extra, short, float(rng.normal(-self.gap, 1.0))))
                links.append(Link(extra, i + 1, w, float(rng.normal(0.0, 1.0))))
                extra += 1
        lat = Lattice(uid, extra, links, start=0, end=n)
        lat.ref = list(ref)
        return lat
