"""Mini-batches over an id stream (see :mod:`sampledlm.data.corpus` for the stream layout).

Two views of the same stream, both predicting *every* token of it exactly once per epoch
(every word and every ``</s>``, never ``<s>``), as the counting convention requires:

**n-gram windows** (feed-forward and maximum-entropy models). For the token at stream
position ``i`` the history is the ``n-1`` preceding ids *within its sentence*, padded on the
left with ``<s>`` (``vocab.bos_id``) at the sentence start::

    histories[k] = [w_{i-n+1}, ..., w_{i-1}]   shape [B, n-1], oldest first, int64
    targets[k]   = w_i                          shape [B], int64

**BPTT streams** (recurrent models; the Mikolov / Zaremba convention). The stream, with one
``</s>`` prepended as the first input, is cut into ``B`` contiguous rows; row ``b`` is then
read in segments of ``T`` steps. Sentences follow each other in a row with ``</s>`` between
them, so a recurrent state is carried across sentences and segments of a row and reset only
at the start of an epoch (or evaluation)::

    x[b, t]    input id                           shape [B, T], int64
    y[b, t]    id to predict (the next token)     shape [B, T], int64
    mask[b, t] True where y is a real token        shape [B, T], bool

The last row is padded (``mask`` False) when the stream does not divide evenly into ``B``
rows, so evaluation with any batch size counts exactly ``len(stream)`` predictions. The last
segment may be shorter than ``T``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import numpy as np

from .vocab import EOS_ID

if TYPE_CHECKING:
    import torch


def sentence_positions(ids: np.ndarray, eos_id: int = EOS_ID) -> np.ndarray:
    """Position of each token within its sentence (0 for a sentence's first token); int64 ``[N]``."""
    ids = np.asarray(ids)
    n = len(ids)
    idx = np.arange(n, dtype=np.int64)
    is_start = np.empty(n, dtype=bool)
    if n:
        is_start[0] = True
        is_start[1:] = ids[:-1] == eos_id
    last_start = np.maximum.accumulate(np.where(is_start, idx, 0))
    return idx - last_start


def ngram_histories(ids: np.ndarray, positions: np.ndarray, order: int, bos_id: int, at: np.ndarray | None = None) -> np.ndarray:
    """Histories of the tokens at stream positions ``at`` (all when None): int64 ``[len(at), order-1]``.

    ``positions`` is :func:`sentence_positions` of ``ids``. Column ``j`` holds the word
    ``order-1-j`` places back, or ``bos_id`` where that lies before the sentence start.
    """
    ids = np.asarray(ids)
    at = np.arange(len(ids), dtype=np.int64) if at is None else np.asarray(at, dtype=np.int64)
    hist = np.empty((len(at), max(order - 1, 0)), dtype=np.int64)
    pos = np.asarray(positions)[at]
    for j in range(order - 1):
        back = order - 1 - j
        src = np.maximum(at - back, 0)
        hist[:, j] = np.where(pos >= back, ids[src], bos_id)
    return hist


class NgramBatches:
    """Iterate ``(histories [B, n-1], targets [B])`` torch int64 batches over a stream.

    ``shuffle=True`` visits positions in a random order drawn from ``generator`` (a
    ``numpy.random.Generator``, so one seed gives one order); otherwise in stream order.
    The last batch may be smaller than ``batch_size``.
    """

    def __init__(self, ids: np.ndarray, order: int, bos_id: int, batch_size: int, shuffle: bool = False,
                 generator: np.random.Generator | None = None):
        self.ids = np.asarray(ids)
        self.positions = sentence_positions(self.ids)
        self.order, self.bos_id, self.batch_size = order, bos_id, batch_size
        self.shuffle = shuffle
        self.generator = generator or np.random.default_rng(0)

    def __len__(self) -> int:
        return (len(self.ids) + self.batch_size - 1) // self.batch_size

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        import torch  # imported here so that n-gram-only paths never load torch

        n = len(self.ids)
        order = self.generator.permutation(n) if self.shuffle else np.arange(n)
        for start in range(0, n, self.batch_size):
            at = order[start : start + self.batch_size]
            hist = ngram_histories(self.ids, self.positions, self.order, self.bos_id, at)
            yield torch.from_numpy(hist), torch.from_numpy(self.ids[at].astype(np.int64))


def bptt_rows(ids: np.ndarray, batch_size: int, eos_id: int = EOS_ID) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole stream as ``(x, y, mask)``, each ``[B, L]`` with ``L = ceil(len(ids) / B)``."""
    import torch

    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    rows = max(1, (n + batch_size - 1) // batch_size)
    total = batch_size * rows
    x = np.full(total, eos_id, dtype=np.int64)
    y = np.full(total, eos_id, dtype=np.int64)
    mask = np.zeros(total, dtype=bool)
    if n:
        x[0] = eos_id
        x[1:n] = ids[: n - 1]
        y[:n] = ids
        mask[:n] = True
    shape = (batch_size, rows)
    return (torch.from_numpy(x.reshape(shape)), torch.from_numpy(y.reshape(shape)),
            torch.from_numpy(mask.reshape(shape)))


def bptt_batches(ids: np.ndarray, batch_size: int, bptt: int, eos_id: int = EOS_ID) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Yield ``(x, y, mask)`` segments of ``bptt`` steps, each ``[B, <=T]`` (see module docstring)."""
    x, y, mask = bptt_rows(ids, batch_size, eos_id)
    for t in range(0, x.shape[1], bptt):
        yield x[:, t : t + bptt], y[:, t : t + bptt], mask[:, t : t + bptt]


def num_bptt_segments(n_tokens: int, batch_size: int, bptt: int) -> int:
    rows = max(1, (n_tokens + batch_size - 1) // batch_size)
    return (rows + bptt - 1) // bptt
