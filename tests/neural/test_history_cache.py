"""The LRU of history contexts: bounded, least recently used out first, copies rows."""

from __future__ import annotations

import pytest
import torch

from sampledlm.neural.cache import HistoryCache


def test_lru_order_and_bound():
    c = HistoryCache(2)
    c.store([(1,), (2,)], torch.tensor([[1.0], [2.0]]))
    rows, missing = c.lookup([(1,)])  # (1,) is now the most recent
    assert missing == [] and rows[0].item() == 1.0
    c.store([(3,)], torch.tensor([[3.0]]))  # (2,) leaves
    rows, missing = c.lookup([(1,), (2,), (3,)])
    assert missing == [1] and rows[1] is None and len(c) == 2
    assert c.stats()["hits"] == 3 and c.stats()["misses"] == 1


def test_stored_rows_are_copies():
    batch = torch.tensor([[1.0, 2.0]])
    c = HistoryCache(4)
    c.store([("a",)], batch)
    batch[0, 0] = 9.0
    assert c.lookup([("a",)])[0][0].tolist() == [1.0, 2.0]


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        HistoryCache(0)
