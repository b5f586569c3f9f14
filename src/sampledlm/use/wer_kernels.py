"""Compiled loops of lattice weight tuning (numba when installed, else plain Python).

:func:`grid_errors` runs, for each candidate weight setting, a Viterbi search over an expanded lattice's
recorded link scores and counts the Levenshtein errors of the best path against the reference: the
whole grid of :func:`sampledlm.use.lattice.tune_lattices` costs one pass over the links per setting.
"""

from __future__ import annotations

import numpy as np

try:  # numba is optional: without it the kernels run as (slow) Python, fine for tiny tests
    from numba import njit
except ImportError:  # pragma: no cover
    def njit(*args, **kw):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f


@njit(cache=True)
def edit_distance_ids(ref, hyp, n_hyp):
    """The Levenshtein distance between ``ref`` and ``hyp[:n_hyp]`` (word ids)."""
    n = len(ref)
    prev = np.arange(n_hyp + 1)
    cur = np.empty(n_hyp + 1, dtype=np.int64)
    for i in range(1, n + 1):
        cur[0] = i
        r = ref[i - 1]
        for j in range(1, n_hyp + 1):
            best = prev[j - 1] + (0 if r == hyp[j - 1] else 1)
            if prev[j] + 1 < best:
                best = prev[j] + 1
            if cur[j - 1] + 1 < best:
                best = cur[j - 1] + 1
            cur[j] = best
        for j in range(n_hyp + 1):
            prev[j] = cur[j]
    return prev[n_hyp]


@njit(cache=True)
def grid_errors(src, dst, am, lm_new, lm_first, wid, num_states, final, ref, cand, total):
    """``total[g] +=`` the errors of the best path under ``cand[g]`` = (am_scale, lm_weight, word_penalty,
    first_pass_weight); links in a topological order, state 0 the start; ``wid[j] < 0``: epsilon link."""
    best = np.empty(num_states)
    back = np.empty(num_states, dtype=np.int64)
    path = np.empty(len(src) + 1, dtype=np.int64)
    for g in range(cand.shape[0]):
        a, lw, wp, b = cand[g, 0], cand[g, 1], cand[g, 2], cand[g, 3]
        for s in range(num_states):
            best[s] = -np.inf
            back[s] = -1
        best[0] = 0.0
        for j in range(len(src)):
            v = best[src[j]]
            if v == -np.inf:
                continue
            v += a * am[j] + lw * ((1.0 - b) * lm_new[j] + b * lm_first[j])
            if wid[j] >= 0:
                v += wp
            if v > best[dst[j]]:
                best[dst[j]] = v
                back[dst[j]] = j
        n = 0
        node = final
        while node != 0:
            j = back[node]
            if wid[j] >= 0:
                path[n] = wid[j]
                n += 1
            node = src[j]
        path[:n] = path[:n][::-1].copy()
        total[g] += edit_distance_ids(ref, path, n)
