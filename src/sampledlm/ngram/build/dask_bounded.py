"""Stage 2 of bounded estimation (:mod:`.external`) on a Dask cluster: shards counted by the workers, their
tables merged into the spill in windows, so the client stays within its budget whatever the corpus size.

map:     the id stream is cut into shards at sentence ends, each small enough that its tables fit in a
         window; a worker counts its shard (:func:`.counts.count_ngrams`) and returns, per order k >= 2, the
         shard's own table -- keys ``local index(prefix) * W + last word``, the local index of each n-gram's
         suffix, whether it starts with ``<s>``, its count -- and the unigram counts.
reduce:  as each shard comes back its tables are spilled (one *run* per shard); then order by order, each
         run's local indices are turned into the global ones, a run's local order-(k-1) index i being the
         rank that the order-(k-1) merge gave its i-th n-gram (``rank_{k-1}``, read in windows: local
         prefixes come sorted, suffixes are gathered), and the runs are merged exactly as
         :func:`.runs.merge_runs` merges the runs of one process.

A shard's table is sorted as the whole corpus's is (its local order follows the words, as the global
one does), so a run's global keys come out sorted, and the merged table -- keys, counts, suffixes,
``<s>`` flags -- is the single-process one: the same ARPA bytes (a test checks it). At most
``2 x workers`` shards are in flight, and the client holds one shard's tables at a time.
"""

from __future__ import annotations

import time

import numpy as np

from ...data.vocab import EOS_ID
from ...errors import UserError
from .spill import Spill

FIELDS = (("keys", np.int64), ("sfx", np.int64), ("bos", np.uint8), ("cnt", np.int64))
SHARD_TOKENS = 1 << 20  # the largest shard: what a 1 GiB budget's window gives at order 5 (PTB: 2 shards)


def shard_tables(ids: np.ndarray, width: int, order: int, bos: int) -> tuple[np.ndarray, list[tuple]]:
    """The map step: ``(unigram counts [W], [(keys, suffix, starts with <s>, count) for k = 2..order])``."""
    from .counts import count_ngrams

    c = count_ngrams(np.asarray(ids), width, order, bos)
    tables = [(o.keys, o.suffix, (o.first == bos).astype(np.uint8), o.count) for o in c.orders[1:]]
    return c.orders[0].count, tables


def shards(chunks, size: int):
    """The stream's windows regrouped into shards of about ``size`` ids, each ending at a sentence end
    (the last one wherever the stream ends)."""
    carry = np.zeros(0, np.int32)
    for c in chunks:
        carry = np.concatenate([carry, np.asarray(c)])
        while len(carry) >= size:
            ends = np.flatnonzero(carry[size - 1:] == EOS_ID)  # the first sentence end at or after size
            if not len(ends):
                break
            cut = size + int(ends[0])
            yield carry[:cut]
            carry = carry[cut:]
    if len(carry):
        yield carry


def count_on_dask(sp: Spill, chunks, width: int, order: int, bos: int, scheduler: str | None, workers: int,
                  processes: bool = True, bar=None) -> tuple[np.ndarray, int, list[int], dict]:
    """Spill files ``keys_k``, ``cnt_k``, ``sfx_k``, ``bos_k`` (k = 2..order) of the stream ``chunks``, counted
    on Dask (module docstring). Returns ``(unigram counts, tokens, n-grams per order, report)``."""
    from .distributed import dask_client
    from .runs import index_dtype, merge_runs

    t0 = time.perf_counter()
    # a shard's tables: about order x its ids, in one window; and shards enough to keep the workers busy even
    # when the whole corpus would fit in one window
    size = max(min(sp.window // max(order, 1), SHARD_TOKENS), 1024)
    uni = np.zeros(width, dtype=np.int64)
    tokens, runs = 0, 0
    # a local cluster's scratch space inside the spill directory: --temp-dir, removed with the spill
    with dask_client(scheduler, workers, processes, sp.dir) as (client, n_workers):
        from dask.distributed import as_completed

        pending = as_completed()

        def take(future) -> None:
            nonlocal uni, runs
            u, tables = future.result()
            future.release()
            uni += u
            for k, table in enumerate(tables, 2):
                for (name, dtype), values in zip(FIELDS, table):
                    sp.append(f"sh{runs}.{name}_{k}", np.asarray(values, dtype=dtype))
            runs += 1

        for ids in shards(chunks, size):
            if ids.min() < 0 or ids.max() >= width - 1:
                raise UserError("training ids fall outside the vocabulary (was the stream encoded with another "
                                "vocabulary?)")
            tokens += len(ids)
            pending.add(client.submit(shard_tables, ids, width, order, bos, pure=False))
            if bar is not None:
                bar.update(len(ids))
            while pending.count() >= 2 * n_workers:
                take(next(pending))
        for future in pending:
            take(future)
    if tokens == 0:
        raise UserError("cannot train an n-gram model on an empty corpus")
    t_map = time.perf_counter() - t0
    sizes = [width]
    for k in range(2, order + 1):
        lengths = [sp.length(f"sh{r}.keys_{k}") for r in range(runs)]
        for r in range(runs):
            for s, keys in sp.chunks(f"sh{r}.keys_{k}"):
                sfx = sp.read(f"sh{r}.sfx_{k}", s, len(keys))
                if k > 2:  # local order-(k-1) indices -> the ranks the order-(k-1) merge gave them
                    off = prev_starts[r]
                    keys = sp.gather_sorted(f"rank_{k - 1}", keys // width + off).astype(np.int64) * width + keys % width
                    sfx = sp.gather(f"rank_{k - 1}", sfx + off)
                sp.append(f"run{r}.keys", keys)
                sp.append(f"run{r}.cnt", sp.read(f"sh{r}.cnt_{k}", s, len(keys)))
                sp.append(f"run{r}.sfx", sfx.astype(index_dtype(sizes[-1])))
                sp.append(f"run{r}.bos", sp.read(f"sh{r}.bos_{k}", s, len(keys)))
            for name, _ in FIELDS:
                sp.remove(f"sh{r}.{name}_{k}")
        sp.remove(f"rank_{k - 1}")
        sp.create(f"rank_{k}", index_dtype(sum(lengths)), sum(lengths))
        merge_runs(sp, k, lengths)
        prev_starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        sizes.append(sp.length(f"keys_{k}"))
    sp.remove(f"rank_{order}")
    return uni, tokens, sizes, {"engine": "dask", "workers": n_workers, "shards": runs,
                                "seconds_map": round(t_map, 3), "seconds_count": round(time.perf_counter() - t0, 3)}
