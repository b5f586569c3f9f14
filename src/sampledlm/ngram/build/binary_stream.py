"""Stage 5 of bounded estimation (:mod:`.external`), binary form: the model directory of :mod:`.mapped`
written from the spilled tables, in windows, instead of an ARPA file.

The spill already holds what a binary directory stores, order by order in key order: ``keys_k``
(``ctx * W + word``), ``logp_k`` and ``bow_k`` (log10, rounded to 8 decimals as the ARPA file holds
them). They are copied a window at a time. With count pruning (``--prune``) the n-grams seen at most
``t_k`` times are left out and the keys of the next order renumbered: an n-gram's context index
becomes its rank among the kept n-grams of order k-1 (a file ``kept_{k-1}`` of those ranks, read in
step since contexts come in key order). The arrays equal those of
:func:`.mapped.write_binary` for the in-memory model (a test checks it), so nothing is parsed:
a model whose ARPA file would need tens of GB to read loads at once.
"""

from __future__ import annotations

import numpy as np

from .spill import Spill


def _renumbered(sp: Spill, k: int, threshold: int) -> None:
    """``kept_k`` (int64 [M_k]): each order-k n-gram's index among the kept ones (-1: pruned)."""
    sp.create(f"kept_{k}", np.int64)
    base = 0
    for _, cnt in sp.chunks(f"cnt_{k}"):
        keep = cnt > threshold
        sp.append(f"kept_{k}", np.where(keep, base + np.cumsum(keep) - 1, -1))
        base += int(keep.sum())


def spilled_arrays(sp: Spill, W: int, order: int, thresholds: list[int]):
    """``arrays(name, k)``: windows of order k's ``keys``, ``logp`` or ``bow`` as the model stores them, count
    pruning applied (module docstring; the ``kept_k`` files are written first)."""
    for k in range(2, order):
        if thresholds[k - 1] > 0:
            _renumbered(sp, k, thresholds[k - 1])

    def arrays(name: str, k: int):
        if k == 1:
            yield {"keys": np.arange(W, dtype=np.int64), "logp": sp.read("logp_1"),
                   "bow": sp.read("bow_1") if order > 1 else np.zeros(W)}[name]
            return
        t = thresholds[k - 1]
        for s, cnt in sp.chunks(f"cnt_{k}"):
            n = len(cnt)
            if name == "keys":
                out = sp.read(f"keys_{k}", s, n)
                if k > 2 and thresholds[k - 2] > 0:  # contexts renumbered among the kept (k-1)-grams
                    out = sp.gather_sorted(f"kept_{k - 1}", out // W) * W + out % W
            elif name == "logp":
                out = sp.read(f"logp_{k}", s, n)
            else:
                out = sp.read(f"bow_{k}", s, n) if k < order else np.zeros(n)
            yield out[cnt > t] if t > 0 else out

    return arrays


def write_binary_streaming(sp: Spill, out_dir: str, words: list[str], order: int, thresholds: list[int],
                           kept: list[int], info: dict, locked: bool = False) -> None:
    """The binary model directory of the spilled model (module docstring); ``kept``: n-grams per order;
    ``locked``: the caller holds the directory's lock (:func:`.mapped.lock_directory`)."""
    from ..mapped import lock_directory, write_binary_arrays

    arrays = spilled_arrays(sp, len(words), order, thresholds)
    if locked:
        write_binary_arrays(out_dir, words, kept, info, arrays, locked=True)
    else:
        with lock_directory(out_dir):
            write_binary_arrays(out_dir, words, kept, info, arrays, locked=True)
