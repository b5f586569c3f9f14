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

from ..data.alias import vose_alias


def noise_distribution(counts: np.ndarray, power: float) -> np.ndarray:
    """``P_n(w) = count(w)^power / sum_v count(v)^power`` as float64 ``[V]``."""
    p = np.asarray(counts, dtype=np.float64) ** power
    return p / p.sum()


def alias_table(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(threshold [V] uint64, alias [V] int32)`` for sampling from ``p`` (:func:`~sampledlm.data.alias.vose_alias`,
    the keep probability as a 32-bit threshold)."""
    prob, alias = vose_alias(p)
    threshold = np.minimum(np.round(prob * 2.0**32), 2.0**32).astype(np.uint64)
    return threshold, alias.astype(np.int32)


def alias_probabilities(threshold: np.ndarray, alias: np.ndarray) -> np.ndarray:
    """The distribution an alias table samples from (for tests): ``[V]`` float64."""
    n = len(threshold)
    keep = threshold.astype(np.float64) / 2.0**32
    p = keep / n
    np.add.at(p, alias, (1.0 - keep) / n)
    return p
