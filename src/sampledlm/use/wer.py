"""Word error rate: the Levenshtein alignment of a hypothesis to its reference.

    errors = substitutions + deletions + insertions     (the fewest that turn ref into hyp)
    WER    = sum of errors / sum of reference words      (over a whole set, not a mean of ratios)

Every edit costs 1 (NIST sclite's and Kaldi's compute-wer's convention); among alignments with the
fewest errors the counts reported are those of one of them (substitutions preferred on ties).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Errors:
    """Edit counts of one or more aligned sentences, and the reference length."""

    sub: int = 0
    dele: int = 0
    ins: int = 0
    ref_words: int = 0

    @property
    def errors(self) -> int:
        return self.sub + self.dele + self.ins

    @property
    def wer(self) -> float:
        """Errors per reference word (an empty reference: 0 if nothing was inserted, else inf)."""
        if self.ref_words == 0:
            return 0.0 if self.errors == 0 else float("inf")
        return self.errors / self.ref_words

    def __add__(self, other: "Errors") -> "Errors":
        return Errors(self.sub + other.sub, self.dele + other.dele, self.ins + other.ins,
                      self.ref_words + other.ref_words)


def align(ref: Sequence[str], hyp: Sequence[str]) -> Errors:
    """The fewest edits turning ``ref`` into ``hyp`` (dynamic programming, O(len(ref) * len(hyp)))."""
    n, m = len(ref), len(hyp)
    # each cell: (errors, sub, del, ins) of the best alignment of ref[:i] with hyp[:j]
    prev = [(j, 0, 0, j) for j in range(m + 1)]
    for i in range(1, n + 1):
        cur = [(i, 0, i, 0)]
        r = ref[i - 1]
        for j in range(1, m + 1):
            d = prev[j - 1]
            if r == hyp[j - 1]:
                best = d
            else:
                best = (d[0] + 1, d[1] + 1, d[2], d[3])
            up = prev[j]
            if up[0] + 1 < best[0]:
                best = (up[0] + 1, up[1], up[2] + 1, up[3])
            left = cur[j - 1]
            if left[0] + 1 < best[0]:
                best = (left[0] + 1, left[1], left[2], left[3] + 1)
            cur.append(best)
        prev = cur
    _, s, dl, ins = prev[m]
    return Errors(s, dl, ins, n)


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Levenshtein distance in words."""
    return align(ref, hyp).errors


def corpus_errors(refs: Sequence[Sequence[str]], hyps: Sequence[Sequence[str]]) -> Errors:
    """The summed alignment of sentence pairs (WER = ``.wer``)."""
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references for {len(hyps)} hypotheses")
    total = Errors()
    for r, h in zip(refs, hyps):
        total = total + align(r, h)
    return total
