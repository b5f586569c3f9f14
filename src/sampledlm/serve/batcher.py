"""Dynamic batching: the queries of requests that arrive together go to the model in one call.

Schwenk (2007) made a neural LM usable inside a recogniser by bunching its requests: one forward
pass over many histories costs little more than one over a single history (a matrix product
instead of a matrix-vector product, one call overhead instead of many). A server sees the same
thing across clients:

    requests --submit(kind, items)--> queue --(gather: <= wait_ms after the first, <= max_batch items)-->
        one run(kind, all items) in the worker thread --> each request's slice of the results

The gathering runs on the server's asyncio event loop; the model runs in a single worker thread
(one model call at a time, so the event loop keeps reading and answering other connections, and
requests keep queueing during a call, which is when batching pays most). The window is adaptive:
the first request waits for others only while requests already received are still being read and
checked (:meth:`Batcher.arriving`), so a lone client pays no wait at all. Items are whatever the
engine's ``run(kind, items) -> results`` takes (one result per item, in order); the batcher never
looks inside them. A request is never split across two calls; a request larger than ``max_batch``
goes alone. ``enabled=False`` sends every request to the model by itself (the baseline of the
bench page).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class BatchStats:
    """Counters for /info: model calls, items and requests served, the largest call."""

    calls: int = 0
    items: int = 0
    requests: int = 0
    largest: int = 0
    by_kind: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"calls": self.calls, "items": self.items, "requests": self.requests, "largest_call": self.largest,
                "mean_items_per_call": self.items / self.calls if self.calls else None}


class Closed(Exception):
    """The batcher is shutting down and takes no new work."""


class Batcher:
    """Gathers ``submit``ted items of one kind into calls of ``run(kind, items)`` (module docstring)."""

    def __init__(self, run: Callable[[str, list], list], *, wait_ms: float = 2.0, max_batch: int = 256,
                 enabled: bool = True):
        self.run, self.wait, self.max_batch, self.enabled = run, wait_ms / 1000.0, max_batch, enabled
        self.queue: collections.deque = collections.deque()
        self.stats = BatchStats()
        self.closed = False
        self.incoming = 0  # requests received and being read or checked (not yet submitted)
        self._arrived: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sampledlm-model")

    @contextlib.contextmanager
    def arriving(self):
        """Marks a request being read and checked: the batch being gathered may wait for it."""
        self.incoming += 1
        try:
            yield
        finally:
            self.incoming -= 1
            if self._arrived is not None:
                self._arrived.set()

    def start(self) -> None:
        """Start gathering (call from the event loop)."""
        self._arrived = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def submit(self, kind: str, items: list) -> list:
        """The results of ``items`` (one per item), computed with other requests' items of the same kind."""
        if self.closed:
            raise Closed("the server is shutting down")
        fut = asyncio.get_running_loop().create_future()
        self.queue.append((kind, items, fut))
        self._arrived.set()
        return await fut

    async def close(self) -> None:
        """Finish what is queued, then stop (the worker thread ends)."""
        self.closed = True
        if self._task is not None:
            self._arrived.set()
            await self._task
        self._pool.shutdown(wait=True)

    async def _next_batch(self) -> list:
        """The jobs of the next call: the oldest job, then the queued jobs of its kind and those that arrive
        within the wait window while others are being read, up to ``max_batch`` items (jobs of other kinds
        wait for the next call)."""
        loop = asyncio.get_running_loop()
        first = self.queue.popleft()
        jobs, n = [first], len(first[1])
        if not self.enabled:
            return jobs
        deadline = loop.time() + self.wait
        while n < self.max_batch:
            nxt = next((j for j in self.queue if j[0] == first[0]), None)
            if nxt is not None:
                if n + len(nxt[1]) > self.max_batch:
                    break
                self.queue.remove(nxt)
                jobs.append(nxt)
                n += len(nxt[1])
                continue
            left = deadline - loop.time()
            if left <= 0 or self.closed or not self.incoming:  # nothing on its way: go now
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), left)
            except asyncio.TimeoutError:
                break
        return jobs

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.queue:
                if self.closed:
                    return
                self._arrived.clear()
                await self._arrived.wait()
                continue
            jobs = await self._next_batch()
            jobs = [j for j in jobs if not j[2].done()]  # a client that went away
            if not jobs:
                continue
            kind = jobs[0][0]
            items = [it for _, its, _ in jobs for it in its]
            try:
                results = await loop.run_in_executor(self._pool, self.run, kind, items)
                if len(results) != len(items):
                    raise RuntimeError(f"{kind}: {len(results)} results for {len(items)} items")
            except Exception as e:  # noqa: BLE001 -- every waiting request gets the error, the server stays up
                for _, _, fut in jobs:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            st = self.stats
            st.calls += 1
            st.items += len(items)
            st.requests += len(jobs)
            st.largest = max(st.largest, len(items))
            st.by_kind[kind] = st.by_kind.get(kind, 0) + 1
            at = 0
            for _, its, fut in jobs:
                if not fut.done():
                    fut.set_result(results[at : at + len(its)])
                at += len(its)
