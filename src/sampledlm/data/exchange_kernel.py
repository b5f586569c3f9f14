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
def exchange_pass(order, cls, size, m, row, col, r_ptr, r_nbr, r_cnt, l_ptr, l_nbr, l_cnt, u_right, u_left):
    """One pass of the exchange algorithm over ``order``; updates the state in place, returns the moves."""
    c_total = m.shape[0]
    r = np.zeros(c_total, dtype=np.int64)
    lft = np.zeros(c_total, dtype=np.int64)
    rc = np.empty(c_total, dtype=np.int64)
    lc = np.empty(c_total, dtype=np.int64)
    moved = 0
    for w in order:
        a = cls[w]
        if size[a] == 1:
            continue
        nr, s = by_class(w, r_ptr, r_nbr, r_cnt, cls, r, rc)  # bigrams (w, v) by v's class; s: (w, w)
        nl, _ = by_class(w, l_ptr, l_nbr, l_cnt, cls, lft, lc)  # bigrams (v, w) by v's class
        # take w out of class a
        for i in range(nr):
            m[a, rc[i]] -= r[rc[i]]
        for i in range(nl):
            m[lc[i], a] -= lft[lc[i]]
        m[a, a] -= s
        row[a] -= u_right[w]
        col[a] -= u_left[w]
        best, best_gain = a, -1e300
        for k in range(c_total):
            g = 0.0
            for i in range(nr):
                c = rc[i]
                if c != k:
                    g += xlogx(m[k, c] + r[c]) - xlogx(m[k, c])
            for i in range(nl):
                c = lc[i]
                if c != k:
                    g += xlogx(m[c, k] + lft[c]) - xlogx(m[c, k])
            g += xlogx(m[k, k] + r[k] + lft[k] + s) - xlogx(m[k, k])
            g -= xlogx(row[k] + u_right[w]) - xlogx(row[k])
            g -= xlogx(col[k] + u_left[w]) - xlogx(col[k])
            if g > best_gain + 1e-9 or (k == a and g >= best_gain - 1e-9):
                best, best_gain = k, g
        # put it into class best
        for i in range(nr):
            m[best, rc[i]] += r[rc[i]]
        for i in range(nl):
            m[lc[i], best] += lft[lc[i]]
        m[best, best] += s
        row[best] += u_right[w]
        col[best] += u_left[w]
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

