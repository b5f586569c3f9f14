"""Stage 5 of bounded estimation (:mod:`.external`): the ARPA file written from spilled tables, in windows.

Byte for byte what :func:`.arpa.write_arpa` writes for the same model: the same header, the same
``%.8f`` fields, the n-grams in the same (key) order. An n-gram's text is its prefix's text plus its
last word, as in :func:`.arpa.ngram_texts`; the prefix texts of order k-1 are kept in a spill file (held in
memory when the budget allows) and read forward in step with the order-k keys (whose prefixes never go back), so
only a window of them is worked on at a time. A small model is written by :func:`.arpa.write_arpa` instead
(:func:`write_arpa_held`).
"""

from __future__ import annotations

import functools
import itertools
import queue
import threading

import numpy as np

from ...errors import UserError
from .spill import Spill

MIN_LINES = 1024  # the smallest window of lines written at once
# a model of up to this many n-grams is written by :func:`.arpa.write_arpa` (Python's %-formatting, the same
# bytes), when held in memory: below it that is faster than loading the compiled kernels (about 1 s; PTB KN5,
# 2.3M n-grams, takes 2.7 s in Python), and `ngram train` of a small text never imports numba
PYTHON_LINES = 1 << 20
PYTHON_BYTES_PER_LINE = 400  # what write_arpa holds per n-gram: its text, the numbers as floats, the lines


def _fmt_ok(values: np.ndarray) -> None:
    if not np.array_equal(np.round(values, 8), values):
        raise AssertionError("bounded estimation produced a value that is not rounded to 8 decimals")


class BackgroundWriter:
    """Runs file writes on a thread of its own, in the order given, so that the next window is formatted
    (by compiled loops that release the GIL) while the last one is written. At most ``depth`` calls
    wait; an error in the thread is raised by the next call or by :meth:`close`."""

    def __init__(self, depth: int = 1):
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="arpa-writer", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            call = self.q.get()
            if call is None:
                return
            if self.error is None or isinstance(call, threading.Event):
                try:
                    call.set() if isinstance(call, threading.Event) else call()
                except BaseException as e:  # noqa: BLE001 -- handed to the main thread
                    self.error = e

    def _put(self, call) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(call)

    def write(self, f, data) -> None:
        self._put(functools.partial(f.write, data))

    def sync(self) -> None:
        """Wait until every call queued so far has run."""
        done = threading.Event()
        self._put(done)
        done.wait()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        """Run what is queued, then stop the thread."""
        self.q.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


def write_arpa_held(sp: Spill, path: str, words: list[str], order: int, thresholds: list[int]) -> None:
    """The ARPA file of a small model (:data:`PYTHON_LINES`): its tables gathered from the spill into an
    :class:`~.model.NgramLM` (as the binary directory is written, :func:`.binary_stream.spilled_arrays`) and
    written by :func:`.arpa.write_arpa`."""
    from ..arpa import write_arpa
    from ..model import NgramLM, NgramTable
    from .binary_stream import spilled_arrays

    arrays = spilled_arrays(sp, len(words), order, thresholds)

    def whole(name: str, k: int) -> np.ndarray:
        parts = list(arrays(name, k))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64 if name == "keys" else np.float64)

    tables = [NgramTable(whole("keys", k), whole("logp", k), whole("bow", k)) for k in range(1, order + 1)]
    write_arpa(NgramLM(words, tables), path)


def write_arpa_streaming(sp: Spill, path: str, words: list[str], order: int, thresholds: list[int], kept: list[int],
                         bar) -> None:
    """The ARPA file, byte for byte what :func:`.arpa.write_arpa` writes for the same model."""
    from ...data.textio import atomic_write
    from ..arpa_lines import WordBytes, join_texts  # numba: loaded only when bounded estimation writes

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
        writer = BackgroundWriter()
        try:
            _write_orders(sp, f, writer, wb, word_lines, W, order, thresholds, bar)
        finally:
            writer.close()
        f.write(b"\n\\end\\\n")


def _write_orders(sp: Spill, f, writer: BackgroundWriter, wb, word_lines, W: int, order: int, thresholds: list[int],
                  bar) -> None:
    """The n-gram sections, order by order, each window's lines handed to ``writer``."""
    from ..arpa_lines import ByteLines, join_texts

    none = np.zeros(0, np.int64)
    every = np.arange(W, dtype=np.int64)
    for k in range(1, order + 1):
        writer.write(f, f"\n\\{k}-grams:\n".encode())
        prev = ByteLines(sp.reader(f"text_{k - 1}")) if k > 2 else None
        out = sp.writer(f"text_{k}") if 1 < k < order else None
        try:
            # texts cost ~3x the window's numbers, and a window is formatted while the last is written
            for s, logp in sp.chunks(f"logp_{k}", max(MIN_LINES, sp.window // 4)):
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
                        writer.write(out, text[0])  # the array's own buffer: no copy
                bow = sp.read(f"bow_{k}", s, n) if k < order else None
                keep = None
                if k >= 2 and thresholds[k - 1] > 0:
                    keep = sp.read(f"cnt_{k}", s, n) > thresholds[k - 1]
                writer.write(f, _lines(logp, bow, text, keep))
                bar.update(n)
        finally:
            writer.sync()  # text_k complete before order k+1 reads it
            if out is not None:
                out.close()
            if prev is not None:
                prev.close()
        if prev is not None:
            sp.remove(f"text_{k - 1}")


def _lines(logp: np.ndarray, bow: np.ndarray | None, text: tuple[np.ndarray, np.ndarray],
           keep: np.ndarray | None) -> np.ndarray | bytes:
    """The window's ARPA lines: compiled when the numbers allow (:func:`.arpa_lines.formattable`),
    else Python's ``%.8f`` (the same bytes)."""
    from ..arpa_lines import formattable, lines
    if formattable(logp) and (bow is None or formattable(bow)):
        return lines(logp, bow if bow is not None else logp, bow is not None, *text,
                     keep if keep is not None else np.zeros(0, np.bool_), keep is not None)
    _fmt_ok(logp)  # formattable() failed on the range, not the rounding (which the estimator guarantees)
    if bow is not None:
        _fmt_ok(bow)
    texts = text[0].tobytes().decode("utf-8").split("\n")[:-1]
    lp, bw = logp.tolist(), None if bow is None else bow.tolist()
    if keep is not None:
        mask = keep.tolist()
        lp, texts = list(itertools.compress(lp, mask)), list(itertools.compress(texts, mask))
        bw = list(itertools.compress(bw, mask)) if bw is not None else None
    if bw is not None:
        return (("%.8f\t%s\t%.8f\n" * len(texts)) % tuple(itertools.chain.from_iterable(zip(lp, texts, bw)))).encode()
    return (("%.8f\t%s\n" * len(texts)) % tuple(itertools.chain.from_iterable(zip(lp, texts)))).encode()
