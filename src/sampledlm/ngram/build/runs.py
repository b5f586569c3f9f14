"""Sorted runs of one order's n-grams and their merge into that order's table.

Bounded estimation (:mod:`.external`) counts each window of the corpus into a run of unique sorted
keys; Dask counting (:mod:`.dask_bounded`) gets one run per shard. Either way the runs of order k
(``run{r}.keys`` / ``.cnt`` / ``.sfx`` / ``.bos`` in a :class:`~.spill.Spill`) are merged here into
``keys_k``, ``cnt_k``, ``sfx_k``, ``bos_k``, with every run element's rank in the merged table
written to ``rank_k`` so that callers can map run-local indices to global ones.
"""

from __future__ import annotations

import numpy as np

from .spill import Spill


def index_dtype(size: int) -> np.dtype:
    """The smallest of int32 / int64 that holds indices ``-1 .. size - 1`` (half the disk traffic of int64)."""
    return np.dtype(np.int32 if size < 2**31 - 1 else np.int64)


def merge_runs(sp: Spill, k: int, lengths: list[int]) -> None:
    """k-way merge of the sorted runs into the order-k table; writes each run element's rank to ``rank_k``.

    All runs' buffered elements up to the smallest last key among buffers that do not hold their
    run's end are merged at once: keys above that bound are in no run's past, so no n-gram's
    occurrences are ever split between two merge steps.
    """
    R = len(lengths)
    cap = max(sp.window // max(R, 1), 256)
    names = ("keys", "cnt", "sfx", "bos")
    sfx_dtype = sp.dtypes.get("run0.sfx", np.int64)  # order k-1's index dtype
    for name, dt in zip(names, (np.int64, np.int64, sfx_dtype, np.uint8)):
        sp.create(f"{name}_{k}", dt)
    cursor = [0] * R  # next element of each run to load
    taken = [0] * R  # elements of each run merged so far
    bufs: list[dict] = [{n: np.zeros(0, sp.dtypes.get(f"run{r}.{n}", np.int64)) for n in names} for r in range(R)]
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    base = 0
    big = np.iinfo(np.int64).max
    while True:
        for r in range(R):
            have = len(bufs[r]["keys"])
            if have < cap // 2 and cursor[r] < lengths[r]:
                m = min(cap - have, lengths[r] - cursor[r])
                for n in names:
                    bufs[r][n] = np.concatenate([bufs[r][n], sp.read(f"run{r}.{n}", cursor[r], m)])
                cursor[r] += m
        live = [r for r in range(R) if len(bufs[r]["keys"])]
        if not live:
            break
        bound = min((bufs[r]["keys"][-1] for r in live if cursor[r] < lengths[r]), default=big)
        take = {r: int(np.searchsorted(bufs[r]["keys"], bound, "right")) for r in live}
        parts = [r for r in live if take[r]]
        cat = {n: np.concatenate([bufs[r][n][: take[r]] for r in parts]) for n in names}
        order = np.argsort(cat["keys"], kind="stable")
        ks = cat["keys"][order]
        new = np.ones(len(ks), dtype=bool)
        new[1:] = ks[1:] != ks[:-1]
        first = np.flatnonzero(new)
        sp.append(f"keys_{k}", ks[first])
        sp.append(f"cnt_{k}", np.add.reduceat(cat["cnt"][order], first))
        sp.append(f"sfx_{k}", cat["sfx"][order][first])
        sp.append(f"bos_{k}", cat["bos"][order][first])
        rank = np.empty(len(ks), dtype=np.int64)
        rank[order] = base + np.cumsum(new) - 1
        off = 0
        for r in parts:
            sp.write_at(f"rank_{k}", starts[r] + taken[r], rank[off : off + take[r]])
            off += take[r]
            taken[r] += take[r]
            for n in names:
                bufs[r][n] = bufs[r][n][take[r]:]
        base += len(first)
    for r in range(R):
        sp.remove(*(f"run{r}.{n}" for n in names))
