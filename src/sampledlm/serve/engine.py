"""The model work behind the endpoints: one call per batch of items, in the server's worker thread.

``Engine.run(kind, items) -> results`` (one per item, the :mod:`.batcher`'s contract):

- ``"score"``: an item is a sentence's tokens; its result a :class:`~sampledlm.use.score.SentenceScore`
  from :func:`sampledlm.use.score.score_sentences`, the function ``sampledlm score`` uses (same numbers:
  n-gram and maxent models bit for bit; neural ones up to float32 rounding, which depends on which
  sentences share a bunch);
- ``"next"``: an item is ``(history ids, next-word ids)``; its result ``ln P(w | <s> history)`` of each
  word [k] (:meth:`~sampledlm.lm.LanguageModel.logprobs_after`: one forward pass for every history of the
  batch, the distinct ones computed once; a feed-forward model's contexts come from its history cache);
- ``"topk"``: an item is ``(history ids, k)``; its result ``(ids [k], ln P [k])``, most probable first,
  ties broken by id (:meth:`~sampledlm.lm.LanguageModel.next_logprobs_many`, at most ``TOPK_CHUNK``
  distributions ``[H, V]`` in memory at a time).
"""

from __future__ import annotations

import numpy as np

from ..lm import LanguageModel
from ..use.score import score_sentences

#: histories whose full distributions are held at once by a top-k call (bounds its memory: H x V floats)
TOPK_CHUNK = 64


class Engine:
    """A language model and the three kinds of batched work the server asks of it."""

    def __init__(self, lm: LanguageModel):
        self.lm = lm

    def run(self, kind: str, items: list) -> list:
        if kind == "score":
            return score_sentences(self.lm, items, with_orders=True)
        if kind == "next":
            return self.lm.logprobs_after([h for h, _ in items], [w for _, w in items])
        if kind == "topk":
            return self.top_k(items)
        raise ValueError(f"unknown kind of work {kind!r}")

    def top_k(self, items: list) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for s in range(0, len(items), TOPK_CHUNK):
            chunk = items[s : s + TOPK_CHUNK]
            lps = self.lm.next_logprobs_many([h for h, _ in chunk])
            for row, (_, k) in zip(lps, chunk):
                top = np.lexsort((np.arange(len(row)), -row))[:k] if k >= len(row) else _top(row, k)
                out.append((top, row[top]))
        return out

    def describe(self) -> dict:
        """Model, family, vocabulary size and device for /info."""
        lm = self.lm
        device = "cpu"
        model = getattr(lm, "model", None)
        params = getattr(model, "parameters", None)
        if callable(params):
            p = next(iter(params()), None)
            device = str(p.device) if p is not None else device
        info = {"model": lm.describe(), "family": lm.family, "vocab_size": len(lm.vocab), "device": device}
        if getattr(lm, "order", None):
            info["order"] = lm.order
        caches = [m.history_cache.stats() for m in getattr(lm, "models", [lm])
                  if getattr(m, "history_cache", None) is not None]
        info["history_cache"] = caches[0] if len(caches) == 1 else (caches or None)
        return info


def enable_history_cache(lm: LanguageModel, capacity: int) -> int:
    """Give every component of ``lm`` that can cache its history contexts (feed-forward models) an LRU of
    ``capacity`` entries; returns how many did."""
    return sum(bool(m.enable_history_cache(capacity)) for m in getattr(lm, "models", [lm])
               if hasattr(m, "enable_history_cache"))


def _top(row: np.ndarray, k: int) -> np.ndarray:
    """Ids of the k largest entries of ``row``, largest first, ties by smaller id."""
    cut = np.argpartition(-row, k - 1)[:k]
    kth = row[cut].min()
    cand = np.flatnonzero(row >= kth)  # every id tied with the k-th, so the tie-break is by id
    return cand[np.lexsort((cand, -row[cand]))][:k]
