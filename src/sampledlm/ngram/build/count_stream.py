"""Stages 1 and 2 of bounded estimation (:mod:`.external`), over spill files in windows: the id stream padded into
sentences (:func:`pad`), then the table of each order counted from sorted runs (:func:`count_order`).
"""

from __future__ import annotations

import numpy as np

from ...data.vocab import EOS_ID
from ...errors import UserError
from .counts import group_keys
from .runs import index_dtype, merge_runs
from .spill import Spill



# --- stage 1: pad ----------------------------------------------------------------------------------------
def pad(sp: Spill, chunks, width: int, bos: int) -> tuple[np.ndarray, int]:
    """Write ``padded`` (int32 ids) and ``pos`` (uint8, place in sentence, capped at 255); unigram counts."""
    sp.create("padded", np.int32)
    sp.create("pos", np.uint8)
    uni = np.zeros(width, dtype=np.int64)
    at_start, last_pos, last_id, n_tokens = True, 0, EOS_ID, 0
    for ids in chunks:
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            continue
        if ids.min() < 0 or ids.max() >= width - 1:
            raise UserError("training ids fall outside the vocabulary (was the stream encoded with another vocabulary?)")
        n_tokens += len(ids)
        starts = np.zeros(len(ids), dtype=bool)
        starts[1:] = ids[:-1] == EOS_ID
        starts[0] = at_start
        where = np.flatnonzero(starts)
        padded = np.insert(ids, where, bos)
        is_start = np.zeros(len(padded), dtype=bool)
        is_start[where + np.arange(len(where))] = True
        idx = np.arange(len(padded), dtype=np.int64)
        last = np.maximum.accumulate(np.where(is_start, idx, -1))
        pos = np.where(last >= 0, idx - last, last_pos + 1 + idx)
        sp.append("padded", padded)
        sp.append("pos", np.minimum(pos, 255).astype(np.uint8))
        uni += np.bincount(padded, minlength=width)
        at_start, last_pos, last_id = bool(ids[-1] == EOS_ID), int(pos[-1]), int(ids[-1])
    if n_tokens == 0:
        raise UserError("cannot train an n-gram model on an empty corpus")
    if last_id != EOS_ID:  # a stream not ending with </s> gets one (pad_stream's rule)
        sp.append("padded", np.array([EOS_ID]))
        sp.append("pos", np.array([min(last_pos + 1, 255)], dtype=np.uint8))
        uni[EOS_ID] += 1
    return uni, n_tokens


# --- stage 2: count --------------------------------------------------------------------------------------
def count_order(sp: Spill, k: int, width: int, need_index: bool, bar) -> int:
    """Order-k table files (``keys_k``, ``cnt_k``, ``sfx_k``, ``bos_k``) and, if ``need_index``, ``idx_k``."""
    prev = "padded" if k == 2 else f"idx_{k - 1}"
    total = sp.length("padded")
    runs = []  # (start position, positions, uniques)
    for s in range(0, total, sp.window):
        n = min(sp.window, total - s)
        pos = sp.read("pos", s, n)
        cur = sp.read(prev, s, n)
        before = sp.read(prev, s - 1, 1) if s else np.full(1, -1, cur.dtype)
        shifted = np.concatenate([before, cur[:-1]])  # index of the (k-1)-gram ending one position earlier
        at = np.flatnonzero(pos >= k - 1)
        keys = shifted[at].astype(np.int64) * width + sp.read("padded", s, n)[at]
        uniq, first_at, inv, cnt = group_keys(keys)
        r = len(runs)
        sp.append(f"run{r}.keys", uniq)
        sp.append(f"run{r}.cnt", cnt.astype(np.int64))
        sp.append(f"run{r}.sfx", cur[at[first_at]])
        sp.append(f"run{r}.bos", (pos[at[first_at]] == k - 1).astype(np.uint8))
        if need_index:  # each position's place among its run's uniques (< window: int32)
            loc = np.full(n, -1, dtype=np.int32)
            loc[at] = inv.reshape(-1)
            sp.append(f"loc_{k}", loc)
        runs.append((s, n, len(uniq)))
        bar.update(n)
    if not any(u for _, _, u in runs):  # no sentence this long: the caller refuses the order
        return 0
    ranks_dtype = index_dtype(sum(u for _, _, u in runs))  # the table has at most that many n-grams
    sp.create(f"rank_{k}", ranks_dtype, sum(u for _, _, u in runs))
    merge_runs(sp, k, [u for _, _, u in runs])
    if need_index:
        sp.create(f"idx_{k}", ranks_dtype)
        off = 0
        for r, (s, n, u) in enumerate(runs):
            loc = sp.read(f"loc_{k}", s, n)
            ranks = sp.read(f"rank_{k}", off, u)
            sp.append(f"idx_{k}", np.where(loc >= 0, ranks[np.maximum(loc, 0)], -1).astype(ranks_dtype))
            off += u
        sp.remove(f"loc_{k}")
    sp.remove(f"rank_{k}")
    if k > 2:
        sp.remove(f"idx_{k - 1}")
    return sp.length(f"keys_{k}")
