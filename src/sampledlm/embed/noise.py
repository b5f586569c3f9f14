"""The noise distribution of negative sampling as an alias table (Walker 1977; Vose 1991).

word2vec draws negatives from the unigram distribution raised to a power, ``P_n(w) ∝ count(w)^0.75``
(Mikolov et al. 2013b), through a table of 10^8 word ids. An alias table gives exactly the same
distribution in two arrays of ``V`` entries (a few hundred KB: it stays in the CPU cache) and one
random number per draw: pick a column ``i`` uniformly, keep ``i`` with probability ``prob[i]``,
else take ``alias[i]``.

``prob`` is stored as a 32-bit threshold (``prob[i] * 2**32``, a uint64 so ``2**32`` means
"always keep"), compared with 32 random bits in the kernel.
"""

from __future__ import annotations

import numpy as np


def noise_distribution(counts: np.ndarray, power: float) -> np.ndarray:
    """``P_n(w) = count(w)^power / sum_v count(v)^power`` as float64 ``[V]``."""
    p = np.asarray(counts, dtype=np.float64) ** power
    return p / p.sum()


def alias_table(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(threshold [V] uint64, alias [V] int32)`` for sampling from ``p`` (Vose's method)."""
    n = len(p)
    scaled = np.asarray(p, dtype=np.float64) * n / np.sum(p)
    alias = np.arange(n, dtype=np.int32)
    prob = np.ones(n, dtype=np.float64)
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        prob[s] = scaled[s]
        alias[s] = g
        scaled[g] = scaled[g] + scaled[s] - 1.0
        (small if scaled[g] < 1.0 else large).append(g)
    # what is left has scaled == 1 up to rounding: always keep
    threshold = np.minimum(np.round(prob * 2.0**32), 2.0**32).astype(np.uint64)
    return threshold, alias


def alias_probabilities(threshold: np.ndarray, alias: np.ndarray) -> np.ndarray:
    """The distribution an alias table samples from (for tests): ``[V]`` float64."""
    n = len(threshold)
    keep = threshold.astype(np.float64) / 2.0**32
    p = keep / n
    np.add.at(p, alias, (1.0 - keep) / n)
    return p
