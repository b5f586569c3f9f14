"""The exchange algorithm's compiled pass (:func:`sampledlm.data.clusters.exchange_classes`), in a module of its own
so that numba is imported only when classes are made. The functions live at module level: numba caches a
module-level function once, where a function defined inside another gets a new cache entry in every process."""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def xlogx(x):
    return x * math.log(x) if x > 0 else 0.0


TABLE_SIZE = 1 << 16  # x log x of the counts below this is read from a table (512 KB: it stays in a core's cache)


@numba.njit(cache=True, nogil=True)
def xlogx_table(n):
    """``xlogx(i)`` for ``i`` in ``0 .. n-1``."""
    t = np.empty(n)
    for i in range(n):
        t[i] = xlogx(i)
    return t


@numba.njit(cache=True, nogil=True)
def xl(x, table):
    """``xlogx(x)`` of a count: the table's entry (the same number) where it has one."""
    return table[x] if x < table.shape[0] else xlogx(x)


@numba.njit(cache=True, nogil=True)
def by_class(w, ptr, nbr, cnt, cls, acc, seen):
    """Add w's bigram counts with each other word into ``acc[class]``; list the classes met in ``seen``.
    Returns (how many classes, the count of the pair (w, w))."""
    n, self_count = 0, 0
    for j in range(ptr[w], ptr[w + 1]):
        v = nbr[j]
        if v == w:
            self_count += cnt[j]
            continue
        c = cls[v]
        if acc[c] == 0:
            seen[n] = c
            n += 1
        acc[c] += cnt[j]
    return n, self_count


@numba.njit(cache=True, nogil=True)
def log_tables(m, row, col):
    """``m``'s transpose, x log x of ``m``, its transpose, ``row`` and ``col``, and x log x of the small counts
    (:func:`xlogx_table`): the passes' cached terms."""
    c_total = m.shape[0]
    mt = np.empty_like(m)
    xm = np.empty((c_total, c_total))
    xmt = np.empty((c_total, c_total))
    xrow = np.empty(c_total)
    xcol = np.empty(c_total)
    for k in range(c_total):
        xrow[k] = xlogx(row[k])
        xcol[k] = xlogx(col[k])
        for c in range(c_total):
            mt[c, k] = m[k, c]
            xm[k, c] = xlogx(m[k, c])
            xmt[c, k] = xm[k, c]
    return mt, xm, xmt, xrow, xcol, xlogx_table(TABLE_SIZE)


@numba.njit(cache=True, nogil=True)
def shift(m, mt, xm, xmt, i, j, delta, table):
    """``m[i, j] += delta``, its transpose and their x log x kept in step."""
    m[i, j] += delta
    mt[j, i] = m[i, j]
    xm[i, j] = xl(m[i, j], table)
    xmt[j, i] = xm[i, j]


@numba.njit(cache=True, nogil=True)
def move_word(m, mt, xm, xmt, row, col, xrow, xcol, k, sign, rc, nr, r, lc, nl, lft, s, ur, ul, table):
    """Put a word's counts into class ``k`` (``sign`` +1) or take them out of it (-1)."""
    for i in range(nr):
        shift(m, mt, xm, xmt, k, rc[i], sign * r[rc[i]], table)
    for i in range(nl):
        shift(m, mt, xm, xmt, lc[i], k, sign * lft[lc[i]], table)
    shift(m, mt, xm, xmt, k, k, sign * s, table)
    row[k] += sign * ur
    col[k] += sign * ul
    xrow[k] = xl(row[k], table)
    xcol[k] = xl(col[k], table)


@numba.njit(cache=True, nogil=True)
def gains(g, mt, xmt, cs, n, add, table):
    """Add one side's neighbour terms to every class's gain: ``g[k] += f(mt[c, k] + add[c]) - xmt[c, k]`` for the
    ``n`` classes ``c = cs[i]`` in turn, ``k != c`` (``f``: x log x).

    Walking one class c's row of ``mt`` for every k reads it contiguously; the loop the other way round (every c for
    one k) read one scattered count per c and k, which for a rare word next to 3 classes and 1,393 candidate classes
    is 4,000 cache misses. Each ``g[k]`` still adds the same terms in the same order, so the classes are the same."""
    for i in range(n):
        c = cs[i]
        v = add[c]
        row, xrow = mt[c], xmt[c]
        for k in range(c):
            g[k] += xl(row[k] + v, table) - xrow[k]
        for k in range(c + 1, g.shape[0]):
            g[k] += xl(row[k] + v, table) - xrow[k]


@numba.njit(cache=True, nogil=True)
def exchange_pass(order, cls, size, m, row, col, tables, r_ptr, r_nbr, r_cnt, l_ptr, l_nbr, l_cnt, u_right, u_left):
    """The exchange algorithm over the words ``order`` (a pass, or a stretch of one); updates the state in place
    (``tables``: :func:`log_tables` of ``m, row, col``, kept in step), returns the moves.

    The gain of class k for word w is a sum over the classes next to w of ``f(m[k, c] + r[c]) - f(m[k, c])``
    (and the same with w's left neighbours in ``m[c, k]``), plus the diagonal, row and column terms. ``f`` of the
    counts as they stand is kept in tables (``xm``, ``xrow``, ...) updated where a move changes a count, and the
    left side reads a transposed copy so that both sums walk one row: half the logarithms and contiguous reads.
    The sums add the same numbers in the same order as computing every ``f`` afresh, so the classes are the
    same. A word that is not in the text (no bigrams) has gain 0 everywhere and stays where it is: skipped.
    """
    c_total = m.shape[0]
    mt, xm, xmt, xrow, xcol, table = tables
    r = np.zeros(c_total, dtype=np.int64)
    lft = np.zeros(c_total, dtype=np.int64)
    rc = np.empty(c_total, dtype=np.int64)
    lc = np.empty(c_total, dtype=np.int64)
    g = np.empty(c_total)
    moved = 0
    for w in order:
        a = cls[w]
        if size[a] == 1 or (r_ptr[w] == r_ptr[w + 1] and l_ptr[w] == l_ptr[w + 1]):
            continue
        nr, s = by_class(w, r_ptr, r_nbr, r_cnt, cls, r, rc)  # bigrams (w, v) by v's class; s: (w, w)
        nl, _ = by_class(w, l_ptr, l_nbr, l_cnt, cls, lft, lc)  # bigrams (v, w) by v's class
        ur, ul = u_right[w], u_left[w]
        move_word(m, mt, xm, xmt, row, col, xrow, xcol, a, -1, rc, nr, r, lc, nl, lft, s, ur, ul, table)
        g[:] = 0.0
        gains(g, mt, xmt, rc, nr, r, table)  # m[k, c] is mt[c, k]: each neighbour class's terms read one row
        gains(g, m, xm, lc, nl, lft, table)  # and mt[k, c] is m[c, k]
        best, best_gain = a, -1e300
        for k in range(c_total):
            gk = g[k] + (xl(m[k, k] + r[k] + lft[k] + s, table) - xm[k, k])
            gk -= xl(row[k] + ur, table) - xrow[k]
            gk -= xl(col[k] + ul, table) - xcol[k]
            if gk > best_gain + 1e-9 or (k == a and gk >= best_gain - 1e-9):
                best, best_gain = k, gk
        move_word(m, mt, xm, xmt, row, col, xrow, xcol, best, 1, rc, nr, r, lc, nl, lft, s, ur, ul, table)
        if best != a:
            cls[w] = best
            size[a] -= 1
            size[best] += 1
            moved += 1
        for i in range(nr):
            r[rc[i]] = 0
        for i in range(nl):
            lft[lc[i]] = 0
    return moved
