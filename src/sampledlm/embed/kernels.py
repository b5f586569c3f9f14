"""The compiled hot loop of word2vec: skip-gram and CBOW, negative sampling and hierarchical softmax.

One call of :func:`train_batch` trains on a batch of *chunks*, runs of whole sentences of about
10,000 words. Each of the ``threads`` threads takes the next chunk in corpus order from a shared
counter (an atomic fetch-and-add) whenever it is free, so the threads read the corpus front to
back side by side, one chunk apart, as gensim's workers take its jobs of 10,000 words from one
queue; the threads update the shared weights without a lock (Hogwild: Recht et al. 2011; as
word2vec and gensim do). Each thread has its own work buffers (the subsampled sentence, ``neu1``,
``neu1e``), rows at least two cache lines apart, so no thread writes a line another one reads.
Inside a chunk everything follows Mikolov et al. (2013) and their ``word2vec.c``:

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

The learning rate decays linearly with the words seen over the whole run (all threads together),
as gensim's does with the words of the jobs handed out: a chunk starting at word ``s`` of epoch
``e`` uses ``alpha = alpha0 - (alpha0 - min_alpha) * (e * N + s) / (epochs * N)``
(:func:`chunk_alpha`); since chunks are handed out in corpus order, ``e * N + s`` is the number of
words handed out before the chunk, within ``threads - 1`` chunks of the number already trained.

Why the order matters: reading the corpus in two far-apart streams (the first and the second half
of a batch side by side, which is what a static split of the batch between two threads gives) is
a different order of updates, and on a corpus of unlike parts (news, then a novel) the similarity
scores depend on that order; reading it front to back side by side scores as one thread does.

Random numbers come from a splitmix64 stream per chunk, started at a hash of ``(seed, epoch,
chunk)`` (:func:`chunk_state`), so the streams of two chunks, two epochs or two seeds are
unrelated, and a run with one thread is reproducible bit for bit, whatever the batch size.

Shapes: ``W_in [V, dim]``, ``W_neg [V, dim]`` (or ``[1, dim]`` unused), ``W_hs [V - 1, dim]`` (or
``[1, dim]``), all float32 and C-contiguous; ``codes [V, L] uint8``, ``points [V, L] int32``,
``codelens [V] int32``; ``ids [N] int32`` (the corpus, words outside the vocabulary dropped),
``sent_start [S + 1] int64``, ``chunk_sent [C + 1] int64`` (the first sentence of each chunk).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types, uint64
from numba.core import cgutils
from numba.extending import intrinsic

MAX_EXP = 6.0
EXP_TABLE_SIZE = 1000
_MASK32 = (1 << 32) - 1
LINE = 64  # bytes of a cache line


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


@njit(cache=True)
def _hash(x):
    """splitmix64's output function of ``x`` (a bijection of 64-bit words that mixes every bit)."""
    return _next(uint64(x))[1]


@njit(cache=True)
def chunk_state(seed, epoch, chunk):
    """The start of chunk ``chunk``'s random stream in epoch ``epoch`` of a run with ``seed``: seed, epoch and
    chunk hashed one after the other, so no two of them start on the same stream (nor one draw apart)."""
    return _hash(_hash(_hash(uint64(seed)) ^ uint64(epoch)) ^ uint64(chunk))


@njit(inline="always", cache=True)
def chunk_alpha(alpha0, min_alpha, epoch, chunk_word, c, total_words):
    """The learning rate of chunk ``c`` of epoch ``epoch``: linear in the words of the run before it."""
    progress = (epoch * chunk_word[-1] + chunk_word[c]) / total_words
    return np.float32(max(min_alpha, alpha0 - (alpha0 - min_alpha) * progress))


@intrinsic
def _fetch_add(typingctx, ary, idx, val):
    """Atomically ``ary[idx] += val`` for a 1-D int64 array; returns the value before."""
    if not (isinstance(ary, types.Array) and ary.ndim == 1 and ary.dtype == types.int64
            and isinstance(idx, types.Integer) and isinstance(val, types.Integer)):
        return None
    sig = types.int64(ary, idx, val)

    def codegen(context, builder, signature, args):
        aryty, idxty, valty = signature.args
        arr, i, v = args
        a = context.make_array(aryty)(context, builder, arr)
        i = context.cast(builder, i, idxty, types.intp)
        v = context.cast(builder, v, valty, types.int64)
        ptr = cgutils.get_item_pointer(context, builder, aryty, a, [i])
        return builder.atomic_rmw("add", ptr, v, "seq_cst")

    return sig, codegen


@njit(cache=True)
def fetch_add(ary, idx, val):
    """``_fetch_add`` for tests: atomically ``ary[idx] += val``, returns the value before."""
    return _fetch_add(ary, idx, val)


@njit(cache=True)
def padded(n, itemsize):
    """Elements per row of a per-thread buffer of ``n`` items: ``n`` rounded up to whole cache lines, plus two
    lines, so rows of two threads never share a line (nor a pair of lines the hardware prefetches together)."""
    per_line = LINE // itemsize
    return (n + per_line - 1) // per_line * per_line + 2 * per_line


@njit(cache=True)
def work_buffers(threads, dim, max_sentence):
    """One row per thread: the subsampled sentence ``[threads, >= max_sentence] int32``, and ``neu1`` and
    ``neu1e`` ``[threads, >= dim] float32`` (the first ``max_sentence`` or ``dim`` items of a row are used)."""
    sens = np.empty((threads, padded(max_sentence, 4)), dtype=np.int32)
    neu1s = np.empty((threads, padded(dim, 4)), dtype=np.float32)
    neu1es = np.empty((threads, padded(dim, 4)), dtype=np.float32)
    return sens, neu1s, neu1es


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
                max_sentence, threads, trace):
    """Train on chunks ``c0 .. c1 - 1`` on ``threads`` threads; returns the words kept by subsampling per chunk.

    The threads take the chunks one at a time, in corpus order, from a shared counter. ``trace [c1 - c0, 2]``
    int64 gets, for each chunk, the thread (``0 .. threads - 1``) that trained it and the number of earlier
    chunks of the batch still in training when it started (at most ``threads - 1``: the threads read the corpus
    side by side). ``chunk_word [C + 1]``: the word offset of each chunk in the epoch (for the learning rate);
    ``total_words`` = epochs x words per epoch."""
    dim = w_in.shape[1]
    kept = np.zeros(c1 - c0, dtype=np.int64)
    # allocated here, one padded row per thread: an allocation inside the prange body would be hoisted out of
    # the loop by numba and shared by the threads
    sens, neu1s, neu1es = work_buffers(threads, dim, max_sentence)
    counters = np.zeros(2 * LINE // 8, dtype=np.int64)  # [0]: chunks handed out, [LINE // 8]: chunks finished
    done = LINE // 8  # (a line apart)
    for t in prange(threads):
        while True:
            k = _fetch_add(counters, 0, 1)
            if k >= c1 - c0:
                break
            trace[k, 1] = k - _fetch_add(counters, done, 0)
            c = c0 + k
            alpha = chunk_alpha(alpha0, min_alpha, epoch, chunk_word, c, total_words)
            kept[k] = _train_chunk(ids, sent_start, chunk_sent[c], chunk_sent[c + 1], w_in, w_neg, w_hs, keep,
                                   alias_prob, alias_idx, codes, points, codelens, table, window, negative, alpha,
                                   chunk_state(seed, epoch, c), sg, hs, sens[t], neu1s[t], neu1es[t])
            trace[k, 0] = t
            _fetch_add(counters, done, 1)
    return kept


def sigmoid_reference(x: float) -> float:
    """Plain sigmoid, for tests of the table."""
    return 1.0 / (1.0 + math.exp(-x))
