"""Walker's alias table (Walker 1977), built by Vose's method (Vose 1991): i.i.d. draws from a discrete
distribution over V outcomes in O(1) each, after O(V) work once.

Split the V columns of height ``V p(w)`` so that each holds at most two outcomes: its own, kept with probability
``prob[k]``, and ``alias[k]``. A draw picks a column k uniformly and a uniform u; it returns k if u < prob[k], else
alias[k]. The objectives' noise samplers (torch) and word2vec's negative sampler (numba) both use this one table.
"""

from __future__ import annotations

import numpy as np


def vose_alias(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(prob [V] float64, alias [V] int64)`` for sampling from ``p`` (any non-negative weights, not all 0)."""
    n = len(p)
    scaled = (np.asarray(p, dtype=np.float64) * (n / np.sum(p))).tolist()
    prob = np.ones(n, dtype=np.float64)
    alias = np.arange(n, dtype=np.int64)
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = scaled[g] + scaled[s] - 1.0
        (small if scaled[g] < 1.0 else large).append(g)
    # what is left has scaled == 1 up to rounding: its own column, always kept
    return prob, alias
