"""The word2vec kernel's parallel structure: how the threads split the work (each chunk once, in corpus order),
their own work buffers (no shared cache line), their random streams (unrelated across chunks, epochs and seeds),
and the learning rate (linear in the words of the whole run)."""

from __future__ import annotations

import itertools

import numba
import numpy as np
import pytest

from sampledlm.embed import kernels
from sampledlm.embed.noise import alias_table, noise_distribution
from sampledlm.embed.train import set_threads
from sampledlm.embed.vocab import EmbedVocab


def _streams(triples, n=2000):
    return {t: kernels.random_stream(np.uint64(kernels.chunk_state(*t)), n) for t in triples}


def test_chunk_streams_are_unrelated_across_seeds_epochs_and_chunks():
    # neighbours in every coordinate: a stream that is another one shifted by a few draws shares most of its values
    triples = [(s, e, c) for s in (0, 1, 2, 3) for e in (0, 1, 2) for c in (0, 1, 2, 63, 64)]
    streams = _streams(triples)
    for a, b in itertools.combinations(triples, 2):
        assert len(np.intersect1d(streams[a], streams[b])) == 0, (a, b)
    # and a stream's own draws look uniform: the top bit is set about half the time
    top = np.concatenate(list(streams.values())) >> np.uint64(63)
    assert abs(top.mean() - 0.5) < 0.01


def test_a_seed_does_not_start_one_draw_into_the_next_seeds_stream():
    """splitmix64 steps its state by the golden-ratio constant; a state of ``seed x`` that constant makes seed
    ``s + 1``'s stream seed ``s``'s shifted by one draw."""
    a, b = (kernels.random_stream(np.uint64(kernels.chunk_state(s, 0, 0)), 100) for s in (1, 2))
    assert not np.array_equal(a[1:], b[:-1])
    assert len(np.intersect1d(a, b)) == 0


@pytest.mark.parametrize("dim,max_sentence", [(100, 37), (16, 16), (7, 1), (300, 10_000)])
def test_work_buffers_of_threads_share_no_cache_line(dim, max_sentence):
    threads = 4
    sens, neu1s, neu1es = kernels.work_buffers(threads, dim, max_sentence)
    assert sens.shape[1] >= max_sentence and neu1s.shape[1] >= dim and neu1es.shape[1] >= dim
    for buf, used in ((sens, max_sentence), (neu1s, dim), (neu1es, dim)):
        for t in range(threads - 1):
            last = buf[t, used - 1:].ctypes.data  # the last item thread t uses
            first = buf[t + 1].ctypes.data  # the first item of thread t + 1
            assert first // kernels.LINE - last // kernels.LINE >= 2, (buf.dtype, t)


def test_fetch_add_is_atomic_under_threads():
    @numba.njit(parallel=True)
    def hammer(counter, n, threads):
        got = np.zeros((threads, n), dtype=np.int64)
        for t in numba.prange(threads):
            for i in range(n):
                got[t, i] = kernels.fetch_add(counter, 0, 1)
        return got

    threads = set_threads(2)
    counter = np.zeros(1, dtype=np.int64)
    n = 200_000
    got = hammer(counter, n, threads)
    assert counter[0] == threads * n
    assert np.array_equal(np.sort(got.ravel()), np.arange(threads * n))  # every ticket handed out once


def _batch_args(n_chunks=48, chunk_len=200, V=30, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.zipf(1.5, size=n_chunks * chunk_len).clip(max=V) - 1
    ids = ids.astype(np.int32)
    counts = np.bincount(ids, minlength=V) + 1
    vocab = EmbedVocab([f"w{i}" for i in range(V)], counts)
    sent_start = np.arange(0, len(ids) + 1, 20, dtype=np.int64)  # sentences of 20 words, 10 per chunk
    chunk_sent = np.arange(0, len(sent_start), chunk_len // 20, dtype=np.int64)
    chunk_word = sent_start[chunk_sent]
    thr, alias = alias_table(noise_distribution(vocab.counts, 0.75))
    return ids, sent_start, chunk_sent, chunk_word, vocab.keep_thresholds(1e-2), thr, alias, n_chunks


def _run_batch(threads, args, dim=8, epoch=0, seed=7):
    ids, sent_start, chunk_sent, chunk_word, keep, thr, alias, n = args
    V = len(keep)
    w_in = np.random.default_rng(1).random((V, dim), dtype=np.float32) - np.float32(0.5)
    w_neg = np.zeros((V, dim), np.float32)
    w_hs = np.zeros((1, dim), np.float32)
    trace = np.full((n, 2), -1, dtype=np.int64)
    kept = kernels.train_batch(ids, sent_start, chunk_sent, chunk_word, 0, n, w_in, w_neg, w_hs, keep, thr, alias,
                               np.zeros((1, 1), np.uint8), np.zeros((1, 1), np.int32), np.zeros(V, np.int32),
                               kernels.exp_table(), 3, 3, 0.025, 2.5e-6, 2.0 * len(ids), seed, epoch, True, False, 20,
                               threads, trace)
    return kept, trace, w_in


def test_each_chunk_is_trained_once_by_one_thread_in_corpus_order():
    args = _batch_args()
    n = args[-1]
    kept1, trace1, w1 = _run_batch(1, args)
    assert (trace1[:, 0] == 0).all() and (trace1[:, 1] == 0).all()
    threads = set_threads(2)
    kept2, trace2, _ = _run_batch(threads, args)
    # every chunk trained exactly once, with its own random stream: the same words kept as on one thread
    assert np.array_equal(kept2, kept1) and kept1.min() > 0
    assert set(trace2[:, 0].tolist()) <= set(range(threads))
    # corpus order: when a chunk starts, every earlier chunk has started and at most threads - 1 of them are still
    # in training (a static split of the batch would start chunk n / 2 with none of the first half finished)
    assert trace2[:, 1].min() >= 0 and trace2[:, 1].max() <= threads - 1
    # one thread is reproducible bit for bit
    assert np.array_equal(_run_batch(1, args)[2], w1)


def test_the_learning_rate_falls_linearly_with_the_words_of_the_whole_run():
    chunk_word = np.array([0, 10, 25, 40], dtype=np.int64)  # 3 chunks of one epoch of 40 words
    epochs, a0, amin = 2, 0.025, 0.025e-4
    total = float(epochs * chunk_word[-1])

    @numba.njit
    def alpha(epoch, c):
        return kernels.chunk_alpha(a0, amin, epoch, chunk_word, c, total)

    got = [alpha(e, c) for e in range(epochs) for c in range(3)]
    words_before = [e * 40 + chunk_word[c] for e in range(epochs) for c in range(3)]
    want = [np.float32(a0 - (a0 - amin) * w / total) for w in words_before]
    assert got == pytest.approx(want, rel=1e-6)
    assert got[0] == pytest.approx(a0) and all(x > y for x, y in zip(got, got[1:]))
