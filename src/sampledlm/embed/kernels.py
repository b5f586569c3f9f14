"""The compiled hot loop of word2vec: skip-gram and CBOW, negative sampling and hierarchical softmax.

One call of :func:`train_batch` trains on a batch of *chunks*, runs of whole sentences of about
10,000 words; ``prange`` hands the chunks to the threads, which update the shared weights without
a lock (Hogwild: Recht et al. 2011; as word2vec and gensim do: two threads rarely touch the same row at once, and a
lost update costs nothing measurable). Inside a chunk everything follows Mikolov et al. (2013)
and their ``word2vec.c``:

- frequent-word subsampling: word ``w`` is kept with probability ``keep[w] / 2**32`` (computed in
  :mod:`.vocab`), drawn afresh each time it occurs;
- the window is shrunk at random per centre word: ``b`` uniform in ``[0, window)``, the context is
  the ``window - b`` words on each side, inside the (subsampled) sentence;
- skip-gram: each context word ``c`` predicts the centre word ``w``: ``l1 = W_in[c]`` ``[dim]``;
  CBOW: the mean of the context vectors predicts ``w``: ``l1 = mean_c W_in[c]``;
- negative sampling (Mikolov et al. 2013b): the loss is
  ``-log sigma(v'_w . l1) - sum_{k=1..K} log sigma(-v'_{n_k} . l1)``, ``n_k`` from the noise
  distribution (an alias table, drawn in O(1): :mod:`.noise`); a sample equal to ``w`` is skipped;
- hierarchical softmax (Morin & Bengio 2005): ``-sum_j log sigma((1 - 2 code_j) u_{point_j} . l1)``
  along ``w``'s path in the Huffman tree (:mod:`.huffman`); a node with ``|u . l1| >= 6`` is
  skipped, as in word2vec.c;
- the gradient step for the output vector ``v`` (a negative sample or a tree node) with label
  ``y`` is ``g = (y - sigma(v . l1)) * alpha``, ``v += g l1``, ``e += g v`` (before the update),
  and at the end ``W_in[c] += e`` (skip-gram) or ``W_in[c] += e`` for every context word (CBOW).
  sigma comes from word2vec's table of 1,000 values over [-6, 6]; beyond it the negative-sampling
  gradient is clipped (``sigma = 0`` or ``1``), as word2vec.c does.

The learning rate decays linearly with the words seen: a chunk starting at word ``s`` of epoch
``e`` uses ``alpha = alpha0 - (alpha0 - min_alpha) * (e * N + s) / (epochs * N)``.
Random numbers come from a splitmix64 stream per chunk seeded by ``(seed, epoch, chunk)``, so a
run with one thread is reproducible bit for bit, whatever the batch size.

Shapes: ``W_in [V, dim]``, ``W_neg [V, dim]`` (or ``[1, dim]`` unused), ``W_hs [V - 1, dim]`` (or
``[1, dim]``), all float32 and C-contiguous; ``codes [V, L] uint8``, ``points [V, L] int32``,
``codelens [V] int32``; ``ids [N] int32`` (the corpus, words outside the vocabulary dropped),
``sent_start [S + 1] int64``, ``chunk_sent [C + 1] int64`` (the first sentence of each chunk).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, uint64

MAX_EXP = 6.0
EXP_TABLE_SIZE = 1000
_MASK32 = (1 << 32) - 1


def exp_table() -> np.ndarray:
    """word2vec's sigmoid table: ``sigma(x)`` at ``EXP_TABLE_SIZE`` points of ``[-MAX_EXP, MAX_EXP)``."""
    x = (np.arange(EXP_TABLE_SIZE, dtype=np.float64) / EXP_TABLE_SIZE * 2.0 - 1.0) * MAX_EXP
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


@njit(inline="always", cache=True)
def _next(state):
    """splitmix64: returns (new state, 64 random bits)."""
    state = state + uint64(0x9E3779B97F4A7C15)
    z = state
    z = (z ^ (z >> uint64(30))) * uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> uint64(27))) * uint64(0x94D049BB133111EB)
    return state, z ^ (z >> uint64(31))


@njit(inline="always", cache=True)
def context_range(i, n, window, r):
    """word2vec's shrunk window: ``b = r mod window``; the context of position ``i`` in a sentence of ``n``
    words is ``[lo, hi)`` without ``i``: up to ``window - b`` words on each side."""
    b = np.int64(r % uint64(window))
    return max(0, i - window + b), min(n, i + window - b + 1)


@njit(cache=True)
def random_stream(seed, n):
    """``n`` draws of the kernel's generator from ``seed`` (for tests): ``[n]`` uint64."""
    out = np.empty(n, dtype=np.uint64)
    state = uint64(seed)
    for k in range(n):
        state, out[k] = _next(state)
    return out


@njit(inline="always", cache=True)
def _output_step(l1, out, row, label, alpha, neu1e, table, dim, clip):
    """One output vector ``out[row]`` against ``l1``: update ``out[row]``, accumulate into ``neu1e``.

    ``clip``: outside [-6, 6] use sigma = 0/1 (negative sampling) instead of skipping (tree nodes)."""
    f = np.float32(0.0)
    for d in range(dim):
        f += l1[d] * out[row, d]
    if f >= MAX_EXP:
        if not clip:
            return
        g = (label - np.float32(1.0)) * alpha
    elif f <= -MAX_EXP:
        if not clip:
            return
        g = label * alpha
    else:
        g = (label - table[int((f + MAX_EXP) * (EXP_TABLE_SIZE / MAX_EXP / 2.0))]) * alpha
    for d in range(dim):
        neu1e[d] += g * out[row, d]
        out[row, d] += g * l1[d]


@njit(inline="always", cache=True)
def _predict(word, l1, neu1e, alpha, state, w_neg, w_hs, negative, alias_prob, alias_idx, nwords,
             codes, points, codelens, table, dim, hs):
    """Train the output side for centre word ``word`` from hidden vector ``l1``; gradient into ``neu1e``."""
    for d in range(dim):
        neu1e[d] = np.float32(0.0)
    if hs:
        for j in range(codelens[word]):
            _output_step(l1, w_hs, points[word, j], np.float32(1.0) - np.float32(codes[word, j]), alpha,
                         neu1e, table, dim, False)
    if negative > 0:
        _output_step(l1, w_neg, word, np.float32(1.0), alpha, neu1e, table, dim, True)
        for _ in range(negative):
            state, r = _next(state)
            i = np.int64(((r >> uint64(32)) * uint64(nwords)) >> uint64(32))
            target = i if (r & uint64(_MASK32)) < alias_prob[i] else alias_idx[i]
            if target == word:
                continue
            _output_step(l1, w_neg, target, np.float32(0.0), alpha, neu1e, table, dim, True)
    return state


@njit(nogil=True, fastmath=True, cache=True)
def _train_chunk(ids, sent_start, s0, s1, w_in, w_neg, w_hs, keep, alias_prob, alias_idx, codes, points, codelens,
                 table, window, negative, alpha, state, sg, hs, sen, neu1, neu1e):
    """Train on sentences ``s0 .. s1 - 1``; returns the number of words kept by subsampling."""
    dim = w_in.shape[1]
    nwords = alias_prob.shape[0]
    kept = 0
    for s in range(s0, s1):
        # subsample the sentence into sen[:n]
        n = 0
        for p in range(sent_start[s], sent_start[s + 1]):
            w = ids[p]
            state, r = _next(state)
            if (r & uint64(_MASK32)) < keep[w]:
                sen[n] = w
                n += 1
        kept += n
        for i in range(n):
            word = sen[i]
            state, r = _next(state)
            lo, hi = context_range(i, n, window, r)
            if sg:
                for c in range(lo, hi):
                    if c == i:
                        continue
                    l1 = w_in[sen[c]]
                    state = _predict(word, l1, neu1e, alpha, state, w_neg, w_hs, negative, alias_prob, alias_idx,
                                     nwords, codes, points, codelens, table, dim, hs)
                    for d in range(dim):
                        l1[d] += neu1e[d]
            else:
                cw = hi - lo - 1
                if cw <= 0:
                    continue
                for d in range(dim):
                    neu1[d] = np.float32(0.0)
                for c in range(lo, hi):
                    if c != i:
                        row = w_in[sen[c]]
                        for d in range(dim):
                            neu1[d] += row[d]
                inv = np.float32(1.0) / np.float32(cw)
                for d in range(dim):
                    neu1[d] *= inv
                state = _predict(word, neu1, neu1e, alpha, state, w_neg, w_hs, negative, alias_prob, alias_idx,
                                 nwords, codes, points, codelens, table, dim, hs)
                for c in range(lo, hi):
                    if c != i:
                        row = w_in[sen[c]]
                        for d in range(dim):
                            row[d] += neu1e[d]
    return kept


@njit(parallel=True, nogil=True, fastmath=True, cache=True)
def train_batch(ids, sent_start, chunk_sent, chunk_word, c0, c1, w_in, w_neg, w_hs, keep, alias_prob, alias_idx,
                codes, points, codelens, table, window, negative, alpha0, min_alpha, total_words, seed, epoch, sg, hs,
                max_sentence):
    """Train on chunks ``c0 .. c1 - 1`` in parallel; returns the words kept by subsampling per chunk.

    ``chunk_word [C + 1]``: the word offset of each chunk in the epoch (for the learning rate);
    ``total_words`` = epochs x words per epoch."""
    dim = w_in.shape[1]
    kept = np.zeros(c1 - c0, dtype=np.int64)
    # work buffers, one row per chunk, allocated here: an allocation inside the prange body would be hoisted
    # out of the loop by numba and could be shared by the threads
    sens = np.empty((c1 - c0, max_sentence), dtype=np.int32)
    neu1s = np.empty((c1 - c0, dim), dtype=np.float32)
    neu1es = np.empty((c1 - c0, dim), dtype=np.float32)
    for k in prange(c1 - c0):
        c = c0 + k
        progress = (epoch * chunk_word[-1] + chunk_word[c]) / total_words
        alpha = np.float32(max(min_alpha, alpha0 - (alpha0 - min_alpha) * progress))
        # a chunk's own random stream: mixes seed, epoch and chunk index
        state = uint64(seed) * uint64(0x9E3779B97F4A7C15) + uint64(epoch) * uint64(0xD1B54A32D192ED03) \
            + uint64(c) * uint64(0x8CB92BA72F3D8DD7)
        state, _ = _next(state)
        kept[k] = _train_chunk(ids, sent_start, chunk_sent[c], chunk_sent[c + 1], w_in, w_neg, w_hs, keep,
                               alias_prob, alias_idx, codes, points, codelens, table, window, negative, alpha, state,
                               sg, hs, sens[k], neu1s[k], neu1es[k])
    return kept


def sigmoid_reference(x: float) -> float:
    """Plain sigmoid, for tests of the table."""
    return 1.0 / (1.0 + math.exp(-x))
