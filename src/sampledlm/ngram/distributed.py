"""Counting n-grams on a Dask cluster (a MapReduce job, as Brants et al. 2007 count for web-scale models).

    map:     the id stream is cut into shards at sentence ends; each Dask task counts its shard
             (:func:`.counts.count_ngrams`) and returns, per order k, its n-grams as word-id rows
             [M_k, k] sorted lexicographically, with their counts
    reduce:  the client merges the sorted shard tables of each order (equal rows add their counts)
             and rebuilds the :class:`~.counts.NgramCounts` the estimator consumes: keys
             ``index(prefix) * W + last word``, suffix indices, first words (:mod:`.tables`)

An n-gram never crosses a sentence end, so the shards' counts add up to exactly the counts of the
whole stream: the model (and its ARPA bytes) equals the single-process one. Shards travel to the
workers with their tasks and the counts come back as task results, so workers on other machines
need no shared file system. Dask is optional (``pip install "dask[distributed]"``); without
``scheduler`` a :class:`~dask.distributed.LocalCluster` of ``workers`` processes is started.

Why Dask rather than Spark: the shards are NumPy arrays and the counting is NumPy code; Dask ships
them between Python processes without a JVM or a conversion, and ``dask-scheduler`` /
``dask-worker`` on a few machines is the whole cluster set-up.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..data.vocab import EOS_ID
from ..errors import UserError
from .counts import NgramCounts, OrderCounts, count_ngrams
from .tables import lookup_grams


def shard_bounds(ids: np.ndarray, shards: int) -> list[tuple[int, int]]:
    """``shards`` (at most) slices of the stream, each ending at a sentence end (or the stream's end)."""
    n = len(ids)
    cuts = [0]
    for i in range(1, shards):
        target = max(i * n // shards, cuts[-1])
        ends = np.flatnonzero(np.asarray(ids[target : min(n, target + (1 << 20))]) == EOS_ID)
        cut = target + int(ends[0]) + 1 if len(ends) else n
        if cut > cuts[-1] and cut < n:
            cuts.append(cut)
    cuts.append(n)
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]


def count_shard(ids: np.ndarray, width: int, order: int, bos: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The map step: per order, (word rows [M_k, k] int32 sorted lexicographically, counts int64)."""
    c = count_ngrams(np.asarray(ids), width, order, bos)
    out, words = [], np.arange(width, dtype=np.int64)[:, None]
    for k, o in enumerate(c.orders, 1):
        if k > 1:
            words = np.concatenate([words[o.ctx], (o.keys % width)[:, None]], axis=1)
        keep = o.count > 0  # order 1 lists every word; send only those seen
        out.append((words[keep].astype(np.int32), o.count[keep]))
    return out


def merge_tables(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The reduce step for one order: sorted shard tables -> one sorted table, counts of equal rows added."""
    rows = np.concatenate([p[0] for p in parts]).astype(np.int64)
    counts = np.concatenate([p[1] for p in parts])
    if not len(rows):
        return rows, counts
    order = np.lexsort(rows.T[::-1])
    rows, counts = rows[order], counts[order]
    new = np.ones(len(rows), dtype=bool)
    new[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    first = np.flatnonzero(new)
    return rows[first], np.add.reduceat(counts, first)


def build_counts(merged: list[tuple[np.ndarray, np.ndarray]], width: int, bos: int) -> NgramCounts:
    """:class:`NgramCounts` (what :func:`.counts.count_ngrams` returns) from merged word-row tables."""
    rows1, c1 = merged[0]
    words = np.arange(width, dtype=np.int64)
    uni = np.zeros(width, dtype=np.int64)
    uni[rows1[:, 0]] = c1
    orders = [OrderCounts(words, np.zeros(width, np.int64), np.zeros(width, np.int64), words, uni)]
    keys = [words]
    for k in range(2, len(merged) + 1):
        rows, cnt = merged[k - 1]
        ctx = lookup_grams(keys, rows[:, :-1], width)
        suffix = lookup_grams(keys, rows[:, 1:], width)
        if len(rows) and ((ctx < 0).any() or (suffix < 0).any()):
            raise AssertionError(f"merged {k}-gram counts lack a prefix or suffix")
        table = ctx * width + rows[:, -1]
        orders.append(OrderCounts(table, ctx, suffix, rows[:, 0].copy(), cnt.astype(np.int64)))
        keys.append(table)
    return NgramCounts(orders, width, bos)


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int, processes: bool = True):
    """``(client, number of workers)`` of the cluster at ``scheduler``, or of a local cluster of ``workers``
    processes (threads with ``processes=False``) started here and closed on exit."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise UserError('--engine dask needs Dask: pip install "dask[distributed]"') from None
    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="20s")
            except OSError as e:
                raise UserError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({e})") from None
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                                   dashboard_address=None)
            client = Client(cluster)
        with client:
            yield client, max(len(client.scheduler_info().get("workers", {})), 1)
    finally:
        if cluster is not None:
            cluster.close()


def count_with_dask(ids: np.ndarray, width: int, order: int, bos: int, scheduler: str | None = None,
                    workers: int = 2, shards: int | None = None, processes: bool = True) -> tuple[NgramCounts, dict]:
    """Count on a Dask cluster (module docstring): ``(counts, report)``; ``scheduler`` an address or None
    (a local cluster of ``workers`` worker processes, or threads with ``processes=False``)."""
    import time

    t0 = time.perf_counter()
    with dask_client(scheduler, workers, processes) as (client, n_workers):
        bounds = shard_bounds(ids, shards or 2 * n_workers)
        futures = [client.submit(count_shard, np.asarray(ids[a:b]), width, order, bos, pure=False)
                   for a, b in bounds]
        results = client.gather(futures)
    t_map = time.perf_counter() - t0
    merged = [merge_tables([r[k] for r in results]) for k in range(order)]
    counts = build_counts(merged, width, bos)
    return counts, {"engine": "dask", "workers": n_workers, "shards": len(bounds), "seconds_map": round(t_map, 3),
                    "seconds_count": round(time.perf_counter() - t0, 3)}
