"""ARPA n-gram lines formatted in bulk by compiled loops: the bytes ``%.8f\\t<words>[\\t%.8f]\\n``.

The writers of :mod:`.arpa_stream` (bounded estimation) spend most of their time turning numbers and
words into text; these kernels build a window of lines as one byte buffer instead.

Texts are byte buffers with line starts: ``buf`` (uint8) holds texts each followed by ``\\n`` and
``start`` (int64, [n + 1]) where text i is ``buf[start[i] : start[i + 1] - 1]``. The vocabulary is
:class:`WordBytes` (no separators: word w is ``buf[start[w] : start[w + 1]]``).

Numbers: every value is a double that is exactly some m / 10^8 rounded to the nearest double (the
estimators round to 8 decimals, :data:`.arpa.DECIMALS`). ``%.8f`` of such a value prints m, and
``rint(|v| * 10^8)`` recovers m, so the digits are written from that integer: the same bytes as
Python's ``"%.8f" % v``, including ``-0.00000000`` for a negative zero. That holds while the spacing
of doubles is far below 10^-8: below 2^20 (~10^6) it is 2^-32, and log-probabilities and back-off
weights stay within a few hundred. Nearer 10^9 ``%.8f`` prints the double's own binary digits
(``-999999999.89999998``), so callers check that the values are finite, rounded and below 2^20 in
magnitude (:func:`formattable`) and use Python's formatting otherwise.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

SCALE = 100_000_000  # 10^8: eight decimals
LIMIT = float(2**20)  # values at or above this magnitude go through Python's formatting


class WordBytes:
    """The vocabulary as UTF-8 bytes: ``buf`` and ``start`` ([W + 1]), word w = buf[start[w]:start[w+1]]."""

    def __init__(self, words: list[str]):
        enc = [w.encode("utf-8") for w in words]
        self.buf = np.frombuffer(b"".join(enc), dtype=np.uint8) if enc else np.zeros(0, np.uint8)
        self.start = np.zeros(len(enc) + 1, np.int64)
        np.cumsum([len(e) for e in enc], out=self.start[1:])


def in_range(values: np.ndarray) -> bool:
    """True when ``values`` are finite and below 2^20 in magnitude (module docstring)."""
    return not len(values) or bool(np.isfinite(values).all() and np.abs(values).max() < LIMIT)


def formattable(values: np.ndarray) -> bool:
    """True when :func:`lines` writes ``values`` exactly as ``%.8f`` would (finite, 8 decimals, < 2^20)."""
    return in_range(values) and bool(np.array_equal(np.round(values, 8), values))


@njit(cache=True, inline="always")
def _digits(ip):
    """Decimal digits of the integer ``ip`` >= 0."""
    digits = 1
    while ip >= 10:
        ip //= 10
        digits += 1
    return digits


@njit(cache=True, inline="always")
def _put_number(v, out, p):
    if v < 0.0 or (v == 0.0 and math.copysign(1.0, v) < 0.0):
        out[p] = 45  # '-'
        p += 1
        v = -v
    m = np.int64(np.rint(v * 1e8))
    ip, fp = m // SCALE, m % SCALE
    digits = _digits(ip)
    for d in range(digits - 1, -1, -1):
        out[p + d] = 48 + ip % 10
        ip //= 10
    p += digits
    out[p] = 46  # '.'
    for d in range(8, 0, -1):
        out[p + d] = 48 + fp % 10
        fp //= 10
    return p + 9


@njit(cache=True, inline="always")
def _number_size(v):
    neg = v < 0.0 or (v == 0.0 and math.copysign(1.0, v) < 0.0)
    return neg + _digits(np.int64(np.rint(abs(v) * 1e8)) // SCALE) + 9


@njit(cache=True, parallel=True, nogil=True)  # nogil: formats while arpa_stream's writer thread writes
def join_texts(pbuf, pstart, ctx, wbuf, wstart, last, has_prefix):
    """The texts of n n-grams: prefix line ``ctx[i]`` (of ``pbuf``/``pstart``), a space and word
    ``last[i]``; or the word alone when ``has_prefix`` is false. Returns (buf, start). The lines are
    sized, then written, in parallel (each to its own range of ``buf``)."""
    n = len(last)
    size = np.empty(n, np.int64)
    for i in prange(n):
        size[i] = wstart[last[i] + 1] - wstart[last[i]] + 1
        if has_prefix:
            size[i] += pstart[ctx[i] + 1] - pstart[ctx[i]]  # the prefix's text and its '\n' (becomes ' ')
    start = np.zeros(n + 1, np.int64)
    start[1:] = np.cumsum(size)
    buf = np.empty(start[n], np.uint8)
    for i in prange(n):
        p = start[i]
        if has_prefix:
            a, b = pstart[ctx[i]], pstart[ctx[i] + 1] - 1
            buf[p : p + b - a] = pbuf[a:b]
            p += b - a
            buf[p] = 32
            p += 1
        a, b = wstart[last[i]], wstart[last[i] + 1]
        buf[p : p + b - a] = wbuf[a:b]
        p += b - a
        buf[p] = 10
    return buf, start


@njit(cache=True, parallel=True, nogil=True)  # nogil: formats while arpa_stream's writer thread writes
def lines(logp, bow, has_bow, tbuf, tstart, keep, has_keep):
    """ARPA lines ``logp \\t text [\\t bow] \\n`` for the n-grams with ``keep`` (all without ``has_keep``):
    each line's exact size first, then every line written to its own range, in parallel."""
    n = len(logp)
    size = np.zeros(n, np.int64)
    for i in prange(n):
        if not has_keep or keep[i]:
            size[i] = _number_size(logp[i]) + 1 + tstart[i + 1] - tstart[i]
            if has_bow:
                size[i] += 1 + _number_size(bow[i])
    at = np.zeros(n + 1, np.int64)
    at[1:] = np.cumsum(size)
    out = np.empty(at[n], np.uint8)
    for i in prange(n):
        if has_keep and not keep[i]:
            continue
        p = _put_number(logp[i], out, at[i])
        out[p] = 9
        p += 1
        a, b = tstart[i], tstart[i + 1] - 1
        out[p : p + b - a] = tbuf[a:b]
        p += b - a
        if has_bow:
            out[p] = 9
            p += 1
            p = _put_number(bow[i], out, p)
        out[p] = 10
    return out


class ByteLines:
    """The lines of a text file (a path, or a binary file object: closed with this), read forward in byte
    blocks: :meth:`span` (i, j) -> (buf, start, base) with line base + m at ``buf[start[m] : start[m + 1] - 1]``,
    holding at least lines i..j."""

    BLOCK = 1 << 22

    def __init__(self, path):
        self.f = path if hasattr(path, "read") else open(path, "rb")
        self.buf = np.zeros(0, np.uint8)
        self.start = np.zeros(1, np.int64)  # starts of the complete lines held, then the next line's start
        self.base = 0  # file line number of the first line held

    def _read(self) -> bool:
        data = self.f.read(self.BLOCK)
        if not data:
            return False
        new = np.frombuffer(data, np.uint8)
        ends = np.flatnonzero(new == 10) + (len(self.buf) + 1)
        self.buf = np.concatenate([self.buf, new])
        self.start = np.concatenate([self.start, ends])
        return True

    def _drop(self, count: int) -> None:
        cut = self.start[count]
        self.buf = self.buf[cut:]
        self.start = self.start[count:] - cut
        self.base += count

    def span(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray, int]:
        while self.base < i:  # lines before i are never asked for again
            held = len(self.start) - 1
            if held == 0 and not self._read():
                break
            self._drop(min(i - self.base, len(self.start) - 1))
        while self.base + len(self.start) - 1 <= j and self._read():
            pass
        return self.buf, self.start, self.base

    def close(self) -> None:
        self.f.close()
