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

import asyncio
import contextlib
import logging
import shutil
import socket
import struct
import tempfile
import threading

import numpy as np

from ...data.vocab import EOS_ID
from ...errors import UserError
from .counts import NgramCounts, OrderCounts, count_ngrams
from ..tables import lookup_grams


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


SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # the address schemes Dask's comms speak (inproc is in-process only)
FORM = "give it as tcp://HOST:PORT or HOST:PORT, e.g. tcp://10.0.0.5:8786"
CONNECT_TIMEOUT = 10.0  # seconds to reach the scheduler and get its answer
WORKER_WAIT = 60  # seconds a scheduler may take to have a worker


def scheduler_address(scheduler: str) -> tuple[str, str, int]:
    """``(address, host, port)`` of ``--scheduler`` given as ``[SCHEME://]HOST:PORT`` (tcp:// when left out;
    an IPv6 host in brackets), or a :class:`UserError` naming the address and the form expected."""
    text = scheduler.strip()
    if not text:
        raise UserError(f"--scheduler {scheduler!r}: an empty address; {FORM} (or leave out --scheduler for a "
                        f"local cluster)")
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower() if sep else "tcp"
    rest = rest if sep else text
    if scheme not in SCHEMES:
        hint = " (that is a web address, e.g. the dashboard's; the scheduler listens on its own port, 8786 by " \
               "default)" if scheme in ("http", "https") else ""
        raise UserError(f"--scheduler {scheduler}: unknown address scheme '{scheme}://'{hint}; {FORM}")
    if rest.startswith("["):  # [IPv6]:PORT
        host, close, port = rest[1:].partition("]")
        if not close or not port.startswith(":"):
            raise UserError(f"--scheduler {scheduler}: not an address; {FORM} ([IPv6]:PORT for an IPv6 host)")
        port = port[1:]
    else:
        host, colon, port = rest.rpartition(":")
        if not colon:
            raise UserError(f"--scheduler {scheduler}: the address has no port; {FORM}")
        if ":" in host:
            raise UserError(f"--scheduler {scheduler}: not an address; {FORM} ([IPv6]:PORT for an IPv6 host)")
    if not host or any(c.isspace() or c in "/?#@" for c in host):
        raise UserError(f"--scheduler {scheduler}: {'no host' if not host else f'bad host {host!r}'}; {FORM}")
    if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise UserError(f"--scheduler {scheduler}: port {port!r} is not a number 1 .. 65535; {FORM}")
    return f"{scheme}://{rest}", host, int(port)


def _one_line(e: BaseException) -> str:
    """A short account of why a connection to a would-be scheduler failed, for a one-line message."""
    from distributed.comm.core import CommClosedError

    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer in {CONNECT_TIMEOUT:g} s"
    if isinstance(e, CommClosedError):
        return "it closed the connection"
    if isinstance(e, (MemoryError, struct.error, ValueError, KeyError, IndexError, UnicodeError)) \
            or type(e).__module__.startswith("msgpack"):  # garbage taken for frame lengths (3 EiB), for msgpack
        return "its reply is not Dask's protocol"
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def check_scheduler(scheduler: str) -> str:
    """The normalized address of a Dask scheduler that answers at ``scheduler``; else a :class:`UserError`
    within about :data:`CONNECT_TIMEOUT` (at once when the address is malformed or the port refuses)."""
    address, host, port = scheduler_address(scheduler)
    scheme = address.split("://", 1)[0]
    from distributed.security import Security

    args = Security().get_connection_args("client")
    if scheme in ("tls", "wss") and args.get("ssl_context") is None:
        raise UserError(f"--scheduler {scheduler}: a {scheme}:// address needs Dask's TLS settings (the client's "
                        f"certificate, key and CA file: distributed.comm.tls.* in the Dask configuration)")
    if scheme != "ucx":  # a TCP port under the comm: a refusal or an unknown host shows at once
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
        except socket.gaierror as e:
            raise UserError(f"cannot reach the Dask scheduler at {address} (unknown host {host}: "
                            f"{e.strerror or e})") from None
        except OSError as e:
            why = f"no answer in {CONNECT_TIMEOUT:g} s" if isinstance(e, TimeoutError) else e.strerror or str(e)
            raise UserError(f"cannot reach the Dask scheduler at {address} ({why})") from None

    async def identity() -> dict:
        from distributed.core import rpc

        async with rpc(address, timeout=CONNECT_TIMEOUT, connection_args=args) as r:
            return await r.identity()  # a Worker's takes no n_workers

    async def bounded() -> dict:  # Dask's own timeout covers the connection, not the handshake after it
        return await asyncio.wait_for(identity(), CONNECT_TIMEOUT)

    box: dict = {}

    def probe() -> None:  # in a thread with a loop of its own, whatever loop runs in the caller's
        try:
            box["info"] = asyncio.run(bounded())
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=probe, name="sampledlm-dask-probe", daemon=True)
    thread.start()
    thread.join()  # Ctrl-C interrupts the wait as it is (KeyboardInterrupt); the daemon thread ends on its own
    e = box.get("error")
    if isinstance(e, Exception):  # garbage, a closed connection, a timeout: anything but a Dask scheduler
        raise UserError(f"{address} does not answer as a Dask scheduler ({_one_line(e)})") from None
    if e is not None:
        raise e
    info = box["info"]
    if not isinstance(info, dict) or info.get("type") != "Scheduler":
        what = f"a Dask {info['type']}, not the scheduler" if isinstance(info, dict) and info.get("type") else \
            "an unexpected reply"
        raise UserError(f"{address} does not answer as a Dask scheduler ({what})")
    return address


@contextlib.contextmanager
def dask_client(scheduler: str | None, workers: int, processes: bool = True, local_directory: str | None = None):
    """``(client, number of workers)`` of the cluster at ``scheduler``, or of a local cluster of ``workers``
    processes (threads with ``processes=False``) started here and closed on exit; its scheduler's and workers'
    scratch space is a directory made in ``local_directory`` (default: the system's temporary directory) and
    removed on exit. ``scheduler`` is None for a local cluster; any string must be a scheduler's address."""
    try:
        import dask
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise UserError('--engine dask needs Dask: pip install "dask[distributed]"') from None
    cluster, scratch = None, None
    try:
        if scheduler is not None:
            address = check_scheduler(scheduler)
            try:
                client = Client(address, timeout=f"{CONNECT_TIMEOUT:g}s")
            except Exception as e:  # it answered the probe: a scheduler that fails us now
                raise UserError(f"cannot connect to the Dask scheduler at {address} ({_one_line(e)})") from None
            try:  # a scheduler without workers would hold the shards forever
                client.wait_for_workers(1, timeout=WORKER_WAIT)
            except Exception:
                client.close()
                raise UserError(f"the Dask scheduler at {address} has no workers (none joined in {WORKER_WAIT:g} s); "
                                f"start some with: dask worker {address}") from None
        else:
            try:
                scratch = tempfile.mkdtemp(prefix="dask-", dir=local_directory)
            except OSError as e:
                raise UserError(f"--temp-dir {local_directory or tempfile.gettempdir()}: cannot create a directory "
                                f"there for the Dask cluster ({e.strerror or e})") from None
            # the scheduler takes its directory from the config, the workers from local_directory
            # the workers log only what is fatal: on Ctrl-C their warnings and errors (a cancelled task, a lost
            # scheduler) reached the terminal; a failure of theirs reaches the client as the task's exception
            with dask.config.set({"temporary-directory": scratch}), _environment(DASK_LOGGING__DISTRIBUTED="critical"):
                cluster = _local_cluster(LocalCluster, n_workers=workers, threads_per_worker=1, processes=processes,
                                         dashboard_address=None, local_directory=scratch, silence_logs=logging.ERROR)
            client = Client(cluster)
        with client:
            yield client, max(len(client.scheduler_info().get("workers", {})), 1)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: its one line, not the cluster's shutdown warnings
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        raise
    finally:
        if cluster is not None:
            cluster.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def _environment(**values):
    """``os.environ`` with ``values`` set while the block runs (for the processes it starts), then as it was."""
    import os

    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _local_cluster(make, **options):
    """``make(**options)`` (a ``LocalCluster``); one stopped while it starts (Ctrl-C) is closed here and taken off
    Dask's list of clusters to close at exit, whose hook fails on a cluster that never finished starting
    (``AssertionError: Status.init``, with its traceback)."""
    from distributed.deploy.spec import SpecCluster

    known = getattr(SpecCluster, "_instances", None)
    before = set(known) if known is not None else set()
    try:
        return make(**options)
    except BaseException:
        for half_built in set(known or ()) - before:
            known.discard(half_built)
            with contextlib.suppress(Exception):
                half_built.close(timeout=5)
        raise


def count_with_dask(ids: np.ndarray, width: int, order: int, bos: int, scheduler: str | None = None,
                    workers: int = 2, shards: int | None = None, processes: bool = True,
                    temp_dir: str | None = None) -> tuple[NgramCounts, dict]:
    """Count on a Dask cluster (module docstring): ``(counts, report)``; ``scheduler`` an address or None
    (a local cluster of ``workers`` worker processes, or threads with ``processes=False``, whose scratch space
    lies in a run directory under ``temp_dir`` -- default the system's temporary directory -- removed after,
    or by the next run if this one is killed: :class:`.spill.Spill`)."""
    import time

    from .spill import Spill

    t0 = time.perf_counter()
    with (Spill(temp_dir, 1) if scheduler is None else contextlib.nullcontext()) as sp, \
            dask_client(scheduler, workers, processes, sp.dir if sp is not None else None) as (client, n_workers):
        bounds = shard_bounds(ids, shards or 2 * n_workers)
        futures = [client.submit(count_shard, np.asarray(ids[a:b]), width, order, bos, pure=False)
                   for a, b in bounds]
        results = client.gather(futures)
    t_map = time.perf_counter() - t0
    merged = [merge_tables([r[k] for r in results]) for k in range(order)]
    counts = build_counts(merged, width, bos)
    return counts, {"engine": "dask", "workers": n_workers, "shards": len(bounds), "seconds_map": round(t_map, 3),
                    "seconds_count": round(time.perf_counter() - t0, 3)}
