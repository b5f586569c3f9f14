"""Stages 3 and 4 of bounded estimation (:mod:`.external`), over spill files in windows: adjusted counts and
their counts-of-counts (the discounts), then per order the context weights and the interpolated probabilities,
added in the order the in-memory estimator (:mod:`.estimate`) adds them.
"""

from __future__ import annotations

import numpy as np

from .estimate import _log10
from .spill import Spill



# --- stages 3 and 4: adjust, discount, interpolate -----------------------------------------------------
def adjusted(sp: Spill, k: int, n: int, bos_id: int) -> None:
    """``a_k`` (int64): raw counts at the highest order and for n-grams starting with <s>, else N1+(. w_1..w_k)."""
    if k == n:  # the raw counts themselves (cnt_k stays: count pruning reads it)
        sp.link(f"cnt_{k}", f"a_{k}")
        return
    m = sp.length(f"keys_{k}")
    sp.create(f"cont_{k}", np.int64, m)
    for _, sfx in sp.chunks(f"sfx_{k + 1}"):
        sp.count_at(f"cont_{k}", sfx)
    sp.create(f"a_{k}", np.int64)
    for s, cont in sp.chunks(f"cont_{k}"):
        bos = sp.read(f"bos_{k}", s, len(cont)).astype(bool)
        sp.append(f"a_{k}", np.where(bos, sp.read(f"cnt_{k}", s, len(cont)), cont))
    sp.remove(f"cont_{k}")


def counts_of_counts(sp: Spill, name: str) -> np.ndarray:
    n = np.zeros(5, dtype=np.int64)
    for _, a in sp.chunks(name):
        n += np.bincount(a[(a >= 1) & (a <= 4)], minlength=5)
    return n


def grouped_sums(sp: Spill, k: int, values):
    """Per context of order k (runs of equal ``keys // W``): sums of each value stream, added in index order.

    ``values(s, a, cnt)`` -> list of float arrays for the window at ``s``. Yields ``(ctx ids, [sums])``
    in increasing ctx; a context cut by a window boundary carries its partial sum into the next window
    as its first addend, so each sum is formed exactly as ``np.bincount`` forms it over the whole array.
    """
    pending = None
    for s, keys in sp.chunks(f"keys_{k}"):
        a = sp.read(f"a_{k}", s, len(keys))
        cnt = sp.read(f"cnt_{k}", s, len(keys))
        ctx = keys // sp.W
        vals = values(s, a, cnt)
        if pending is not None:
            if ctx[0] == pending[0]:
                ctx = np.concatenate([[pending[0]], ctx])
                vals = [np.concatenate([[p], v]) for p, v in zip(pending[1], vals)]
            else:
                yield np.array([pending[0]]), [np.array([p]) for p in pending[1]]
        new = np.ones(len(ctx), dtype=bool)
        new[1:] = ctx[1:] != ctx[:-1]
        gid = np.cumsum(new) - 1
        ids = ctx[new]
        sums = [np.bincount(gid, weights=v, minlength=len(ids)).astype(np.float64) for v in vals]
        pending = (ids[-1], [x[-1] for x in sums])
        if len(ids) > 1:
            yield ids[:-1], [x[:-1] for x in sums]
    if pending is not None:
        yield np.array([pending[0]]), [np.array([p]) for p in pending[1]]


def context_weights(sp: Spill, k: int, d: np.ndarray, prune_at: int) -> None:
    """``denom_k`` and ``gamma_k`` over every order-(k-1) n-gram (contexts without extensions: 0 and 1)."""
    m_ctx = sp.length(f"keys_{k - 1}") if k > 2 else sp.W

    def values(s, a, cnt):
        a = a.astype(np.float64)
        disc = d[np.minimum(a, 3).astype(np.int64)] * (a > 0)
        if prune_at > 0:
            disc = np.where(cnt <= prune_at, a, disc)
        return [a, disc]

    sp.create(f"denom_{k}", np.float64)
    sp.create(f"gamma_{k}", np.float64)
    done = 0
    for ids, (denom, mass) in grouped_sums(sp, k, values):
        full_d = np.zeros(int(ids[-1]) + 1 - done)
        full_m = np.zeros(len(full_d))
        full_d[ids - done] = denom
        full_m[ids - done] = mass
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = np.where(full_d > 0, full_m / full_d, 1.0)
        sp.append(f"denom_{k}", full_d)
        sp.append(f"gamma_{k}", gamma)
        done = int(ids[-1]) + 1
    if done < m_ctx:
        for s in range(done, m_ctx, sp.window):
            e = min(s + sp.window, m_ctx)
            sp.append(f"denom_{k}", np.zeros(e - s))
            sp.append(f"gamma_{k}", np.ones(e - s))


def interpolate_order(sp: Spill, k: int, d: np.ndarray, bar) -> None:
    """``prob_k`` = alpha + gamma(h) p(w|h'); then ``logp_k``, and ``bow_{k-1}`` = log10 gamma_k."""
    sp.create(f"prob_{k}", np.float64)
    sp.create(f"logp_{k}", np.float64)
    for s, keys in sp.chunks(f"keys_{k}"):
        a = sp.read(f"a_{k}", s, len(keys)).astype(np.float64)
        ctx = keys // sp.W
        denom = sp.gather_sorted(f"denom_{k}", ctx)
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = np.where(a > 0, (a - d[np.minimum(a, 3).astype(np.int64)]) / denom, 0.0)
        lower = sp.gather(f"prob_{k - 1}", sp.read(f"sfx_{k}", s, len(keys)))
        p = alpha + sp.gather_sorted(f"gamma_{k}", ctx) * lower
        sp.append(f"prob_{k}", p)
        sp.append(f"logp_{k}", _log10(p))
        bar.update(len(keys))
    sp.create(f"bow_{k - 1}", np.float64)
    for _, g in sp.chunks(f"gamma_{k}"):
        sp.append(f"bow_{k - 1}", _log10(g))
    sp.remove(f"denom_{k}", f"gamma_{k}", f"prob_{k - 1}", f"sfx_{k}", f"a_{k}")
