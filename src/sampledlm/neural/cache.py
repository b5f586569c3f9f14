"""A bounded least-recently-used cache of a model's hidden states, keyed by the history that produced them.

A feed-forward LM reads only the last ``n-1`` words, so the hidden state ``ctx(h) [h_out]`` of a
history is a pure function of that ``(n-1)``-word key: a decoder asks about the same few histories
again and again (every hypothesis of a beam that ends in the same two words), and Schwenk (2007)
caches them. Recurrent states depend on the whole history and are not cached.

    cache = HistoryCache(capacity=20_000)
    rows, missing = cache.lookup(keys)        # rows[i]: a tensor [h_out] or None
    cache.store(keys_of_missing, ctx_rows)    # ctx_rows [m, h_out]

Memory: at most ``capacity * h_out`` floats (20,000 x 200 float32 = 16 MB). Not thread-safe: one
worker thread owns it (the server runs every model call in one thread).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable, Sequence

import torch


class HistoryCache:
    """LRU of ``key -> ctx row`` with at most ``capacity`` entries; ``hits``/``misses`` count lookups."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError("a history cache needs a capacity of at least 1")
        self.capacity = capacity
        self.rows: OrderedDict[Hashable, torch.Tensor] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self.rows)

    def lookup(self, keys: Sequence[Hashable]) -> tuple[list[torch.Tensor | None], list[int]]:
        """The cached row of every key (None when absent; a hit becomes the most recent entry) and the
        indices of the keys that missed."""
        out: list[torch.Tensor | None] = []
        missing = []
        for i, k in enumerate(keys):
            row = self.rows.get(k)
            if row is None:
                missing.append(i)
                self.misses += 1
            else:
                self.rows.move_to_end(k)
                self.hits += 1
            out.append(row)
        return out, missing

    def store(self, keys: Sequence[Hashable], ctx: torch.Tensor) -> None:
        """Keep ``ctx[i]`` (copied, so the batch it came from can be freed) under ``keys[i]``; the least
        recently used entries leave when the cache is full."""
        for k, row in zip(keys, ctx):
            self.rows[k] = row.detach().clone()
            self.rows.move_to_end(k)
        while len(self.rows) > self.capacity:
            self.rows.popitem(last=False)

    def stats(self) -> dict:
        total = self.hits + self.misses
        return {"capacity": self.capacity, "entries": len(self.rows), "hits": self.hits, "misses": self.misses,
                "hit_rate": self.hits / total if total else None}
