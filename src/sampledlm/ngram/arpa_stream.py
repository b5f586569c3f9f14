"""Stage 5 of bounded estimation (:mod:`.external`): the ARPA file written from spilled tables, in windows.

Byte for byte what :func:`.arpa.write_arpa` writes for the same model: the same header, the same
``%.8f`` fields, the n-grams in the same (key) order. An n-gram's text is its prefix's text plus its
last word, as in :func:`.arpa.ngram_texts`; the prefix texts of order k-1 are kept in a spill file
and read forward in step with the order-k keys (whose prefixes never go back), so only a window of
them is in memory.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import UserError
from .spill import Spill

MIN_LINES = 1024  # the smallest window of lines written at once


def _fmt_ok(values: np.ndarray) -> None:
    if not np.array_equal(np.round(values, 8), values):
        raise AssertionError("bounded estimation produced a value that is not rounded to 8 decimals")


def write_arpa_streaming(sp: Spill, path: str, words: list[str], order: int, thresholds: list[int], kept: list[int],
                         bar) -> None:
    """The ARPA file, byte for byte what :func:`.arpa.write_arpa` writes for the same model."""
    from ..data.textio import atomic_write

    for w in words:
        if not w or any(ch.isspace() for ch in w):
            raise UserError(f"{path}: cannot write word {w!r} to an ARPA file: it is empty or contains whitespace")
    W = len(words)
    with atomic_write(path) as f:
        f.write("\n\\data\\\n")
        f.write("".join(f"ngram {k}={c}\n" for k, c in enumerate(kept, 1)))
        for k in range(1, order + 1):
            f.write(f"\n\\{k}-grams:\n")
            prev = _Lines(sp.path(f"text_{k - 1}")) if k > 2 else None
            out = open(sp.path(f"text_{k}"), "w", encoding="utf-8", newline="\n") if 1 < k < order else None
            for s, logp in sp.chunks(f"logp_{k}", max(MIN_LINES, sp.window // 3)):  # strings cost ~3x
                n = len(logp)
                if k == 1:
                    text = words[s : s + n]
                else:  # the prefix's text (order k-1, read in step: ctx never decreases) + " " + the last word
                    keys = sp.read(f"keys_{k}", s, n)
                    ctx, last = (keys // W).tolist(), (keys % W).tolist()
                    if k == 2:
                        text = [words[c] + " " + words[w] for c, w in zip(ctx, last)]
                    else:
                        lines, base = prev.span(ctx[0], ctx[-1])
                        text = [lines[c - base] + " " + words[w] for c, w in zip(ctx, last)]
                    if out is not None:
                        out.write("\n".join(text) + "\n")
                _fmt_ok(logp)
                lp = logp.tolist()
                bow = sp.read(f"bow_{k}", s, n).tolist() if k < order else None
                if k < order:
                    _fmt_ok(np.asarray(bow))
                if k >= 2 and thresholds[k - 1] > 0:
                    keep = (sp.read(f"cnt_{k}", s, n) > thresholds[k - 1]).tolist()
                    lp, text = list(itertools.compress(lp, keep)), list(itertools.compress(text, keep))
                    bow = list(itertools.compress(bow, keep)) if bow is not None else None
                if bow is not None:
                    f.write(("%.8f\t%s\t%.8f\n" * len(text)) % tuple(itertools.chain.from_iterable(zip(lp, text, bow))))
                else:
                    f.write(("%.8f\t%s\n" * len(text)) % tuple(itertools.chain.from_iterable(zip(lp, text))))
                bar.update(n)
            if out is not None:
                out.close()
            if prev is not None:
                prev.close()
                sp.remove(f"text_{k - 1}")
        f.write("\n\\end\\\n")


class _Lines:
    """The lines of a text file, read forward in windows: :meth:`span` (i, j) -> lines i..j and i's offset."""

    def __init__(self, path: str):
        self.f = open(path, encoding="utf-8", newline="\n")
        self.buf: list[str] = []
        self.base = 0  # file line number of buf[0]

    def span(self, i: int, j: int) -> tuple[list[str], int]:
        if i > self.base:  # lines before i are never asked for again
            drop = min(i - self.base, len(self.buf))
            skip = i - self.base - drop
            self.buf = self.buf[drop:]
            if skip:
                for _ in itertools.islice(self.f, skip):
                    pass
            self.base = i
        need = j + 1 - (self.base + len(self.buf))
        if need > 0:
            self.buf += [ln[:-1] for ln in itertools.islice(self.f, need)]
        return self.buf, self.base

    def close(self) -> None:
        self.f.close()
