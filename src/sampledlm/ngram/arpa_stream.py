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
    from .arpa_lines import ByteLines, WordBytes, join_texts  # numba: loaded only when bounded estimation writes

    for w in words:
        if not w or any(ch.isspace() for ch in w):
            raise UserError(f"{path}: cannot write word {w!r} to an ARPA file: it is empty or contains whitespace")
    W = len(words)
    wb = WordBytes(words)
    none = np.zeros(0, np.int64)
    every = np.arange(W, dtype=np.int64)
    word_lines = join_texts(wb.buf, none, none, wb.buf, wb.start, every, False)  # the words as lines
    with atomic_write(path, "wb") as f:
        f.write(b"\n\\data\\\n")
        f.write("".join(f"ngram {k}={c}\n" for k, c in enumerate(kept, 1)).encode())
        for k in range(1, order + 1):
            f.write(f"\n\\{k}-grams:\n".encode())
            prev = ByteLines(sp.path(f"text_{k - 1}")) if k > 2 else None
            out = open(sp.path(f"text_{k}"), "wb") if 1 < k < order else None
            for s, logp in sp.chunks(f"logp_{k}", max(MIN_LINES, sp.window // 3)):  # texts cost ~3x
                n = len(logp)
                if k == 1:
                    text = join_texts(wb.buf, none, none, wb.buf, wb.start, every[s : s + n], False)
                else:  # the prefix's text (order k-1, read in step: ctx never decreases) + " " + the last word
                    keys = sp.read(f"keys_{k}", s, n)
                    ctx, last = keys // W, keys % W
                    if k == 2:
                        text = join_texts(*word_lines, ctx, wb.buf, wb.start, last, True)
                    else:
                        pbuf, pstart, base = prev.span(int(ctx[0]), int(ctx[-1]))
                        text = join_texts(pbuf, pstart, ctx - base, wb.buf, wb.start, last, True)
                    if out is not None:
                        out.write(text[0])  # the array's own buffer: no copy
                _fmt_ok(logp)
                bow = sp.read(f"bow_{k}", s, n) if k < order else None
                if bow is not None:
                    _fmt_ok(bow)
                keep = None
                if k >= 2 and thresholds[k - 1] > 0:
                    keep = sp.read(f"cnt_{k}", s, n) > thresholds[k - 1]
                f.write(_lines(logp, bow, text, keep))
                bar.update(n)
            if out is not None:
                out.close()
            if prev is not None:
                prev.close()
                sp.remove(f"text_{k - 1}")
        f.write(b"\n\\end\\\n")


def _lines(logp: np.ndarray, bow: np.ndarray | None, text: tuple[np.ndarray, np.ndarray],
           keep: np.ndarray | None) -> np.ndarray | bytes:
    """The window's ARPA lines: compiled when the numbers allow (:func:`.arpa_lines.formattable`),
    else Python's ``%.8f`` (the same bytes)."""
    from .arpa_lines import formattable, lines
    if formattable(logp) and (bow is None or formattable(bow)):
        return lines(logp, bow if bow is not None else logp, bow is not None, *text,
                     keep if keep is not None else np.zeros(0, np.bool_), keep is not None)
    texts = text[0].tobytes().decode("utf-8").split("\n")[:-1]
    lp, bw = logp.tolist(), None if bow is None else bow.tolist()
    if keep is not None:
        mask = keep.tolist()
        lp, texts = list(itertools.compress(lp, mask)), list(itertools.compress(texts, mask))
        bw = list(itertools.compress(bw, mask)) if bw is not None else None
    if bw is not None:
        return (("%.8f\t%s\t%.8f\n" * len(texts)) % tuple(itertools.chain.from_iterable(zip(lp, texts, bw)))).encode()
    return (("%.8f\t%s\n" * len(texts)) % tuple(itertools.chain.from_iterable(zip(lp, texts)))).encode()
