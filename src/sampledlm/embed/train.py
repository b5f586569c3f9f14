"""Training word vectors: word2vec's skip-gram and CBOW (Mikolov et al. 2013a, 2013b).

Python prepares everything once (vocabulary, id stream, subsampling thresholds, noise alias
table, Huffman tree, initial weights) and then calls the compiled kernel
(:func:`.kernels.train_batch`) on batches of chunks, so the progress bar can show words/s and the
current learning rate between calls. Defaults are word2vec.c's: CBOW, negative sampling with 5
negatives, dim 100, window 5, sample 1e-3, min-count 5, 5 epochs, alpha 0.05 for CBOW and 0.025
for skip-gram decaying linearly to ``alpha * 1e-4``.

Initial weights as in word2vec.c: ``W_in`` uniform in ``[-0.5, 0.5) / dim``, output vectors zero.
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

import numpy as np

from .. import progress
from ..config import check, option
from ..errors import UserError
from .huffman import huffman_codes
from .noise import alias_table, noise_distribution
from .vocab import Corpus, EmbedVocab

CHUNK_WORDS = 10_000  # words per chunk of sentences (one task of a thread), as gensim's jobs
BATCH_CHUNKS = 64  # chunks per kernel call (progress is reported between calls)


@dataclass
class Word2VecConfig:
    """word2vec's options, with its defaults."""

    model: str = option("cbow", "skipgram: each word predicts its context; cbow: the mean context predicts the word.",
                        choices=("skipgram", "cbow"))
    objective: str = option("neg", "neg: negative sampling; hs: hierarchical softmax over a Huffman tree by count.",
                            choices=("neg", "hs"))
    dim: int = option(100, "Vector size.", min=1, max=10_000)
    window: int = option(5, "Largest context on each side; each word uses a random 1..WINDOW (word2vec's rule).",
                         min=1, max=1000)
    negative: int = option(5, "Negative samples per prediction (neg; 5-20 for small corpora, 2-5 for large).",
                           min=1, max=1000)
    noise_power: float = option(0.75, "Noise distribution: unigram counts raised to this power.", min=0.0, max=10.0)
    sample: float = option(1e-3, "Subsampling threshold t of frequent words (0: keep every word).", min=0.0, max=1.0)
    min_count: int = option(5, "Drop words seen fewer times.", min=1)
    epochs: int = option(5, "Passes over the corpus.", min=1, max=10_000)
    alpha: float | None = option(None, "Starting learning rate, decayed linearly to alpha * 1e-4 "
                                 "(none: 0.05 for cbow, 0.025 for skipgram, as word2vec).", min=0.0, min_open=True, max=10.0)
    threads: int = option(2, "Worker threads (Hogwild: no lock, as word2vec and gensim; with more than one, the "
                             "threads' interleaving makes runs differ slightly whatever the seed).", min=1, max=1024)
    seed: int = option(1, "Random seed (initial vectors, subsampling, windows, negatives).", min=0, max=2**63 - 1)

    @property
    def start_alpha(self) -> float:
        return self.alpha if self.alpha is not None else (0.05 if self.model == "cbow" else 0.025)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["alpha"] = self.start_alpha
        return d


@dataclass
class TrainResult:
    w_in: np.ndarray  # [V, dim] float32: the word vectors
    w_out: np.ndarray  # [V, dim] (negative sampling) or [V - 1, dim] (tree nodes) float32
    seconds: float  # training time (kernel calls), not counting the one-off preparation
    cpu_seconds: float  # process CPU time of the kernel calls (all threads)
    words: int  # corpus words x epochs (vocabulary words; words/s = words / seconds)
    kept: int  # words left after subsampling, over all epochs

    @property
    def words_per_second(self) -> float:
        return self.words / self.seconds if self.seconds > 0 else float("inf")


def _chunks(corpus: Corpus, chunk_words: int) -> tuple[np.ndarray, np.ndarray]:
    """``(chunk_sent [C + 1], chunk_word [C + 1])``: runs of whole sentences of ~``chunk_words`` words."""
    starts = corpus.sent_start
    targets = np.arange(0, corpus.words, chunk_words, dtype=np.int64)
    idx = np.unique(np.searchsorted(starts, targets, side="left"))
    idx = idx[idx < corpus.sentences]
    if len(idx) == 0 or idx[0] != 0:
        idx = np.concatenate([[0], idx])
    chunk_sent = np.concatenate([idx, [corpus.sentences]]).astype(np.int64)
    return chunk_sent, starts[chunk_sent].astype(np.int64)


def set_threads(threads: int) -> int:
    """Run numba's parallel loops on ``threads`` threads (at most what numba started with); the number used."""
    import numba

    n = min(threads, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(n)
    return n


def initial_vectors(num_words: int, cfg: Word2VecConfig) -> np.ndarray:
    """A fresh run's word vectors ``[V, dim]`` float32: uniform in ``[-0.5, 0.5) / dim`` (word2vec.c), by ``cfg.seed``."""
    rng = np.random.default_rng(cfg.seed)
    return (rng.random((num_words, cfg.dim), dtype=np.float32) - np.float32(0.5)) / np.float32(cfg.dim)


def output_shape(num_words: int, cfg: Word2VecConfig) -> tuple[int, int]:
    """The output side's shape: a vector per word (negative sampling) or per inner tree node (``hs``)."""
    return (num_words if cfg.objective == "neg" else max(num_words - 1, 1), cfg.dim)


def train(vocab: EmbedVocab, corpus: Corpus, cfg: Word2VecConfig, desc: str = "training",
          init: np.ndarray | None = None, init_out: np.ndarray | None = None) -> TrainResult:
    """Train word vectors on ``corpus`` (ids of ``vocab``) with ``cfg``; see the module docstring. ``init``,
    ``init_out``: the word vectors and the output side to start from [default: a fresh run's]."""
    from .kernels import exp_table, train_batch

    check(cfg)
    if corpus.words == 0:
        raise UserError("the corpus has no word of the vocabulary to train on")
    V, dim = len(vocab), cfg.dim
    w_in = initial_vectors(V, cfg) if init is None else np.ascontiguousarray(init, dtype=np.float32).copy()
    hs, neg = cfg.objective == "hs", cfg.objective == "neg"
    w_out = np.zeros(output_shape(V, cfg), dtype=np.float32) if init_out is None \
        else np.ascontiguousarray(init_out, dtype=np.float32).copy()
    w_neg = w_out if neg else np.zeros((1, dim), dtype=np.float32)
    w_hs = w_out if hs else np.zeros((1, dim), dtype=np.float32)
    if hs:
        codes, points, lens = huffman_codes(vocab.counts)
    else:
        codes, points, lens = np.zeros((1, 1), np.uint8), np.zeros((1, 1), np.int32), np.zeros(V, np.int32)
    threshold, alias = alias_table(noise_distribution(vocab.counts, cfg.noise_power))
    keep = vocab.keep_thresholds(cfg.sample)
    table = exp_table()
    chunk_sent, chunk_word = _chunks(corpus, CHUNK_WORDS)
    n_chunks = len(chunk_sent) - 1
    max_sentence = int(np.diff(corpus.sent_start).max())
    threads = set_threads(cfg.threads)
    a0 = float(cfg.start_alpha)
    min_alpha = a0 * 1e-4
    total = float(cfg.epochs * corpus.words)
    kept = 0
    seconds = cpu = 0.0
    args = (keep, threshold, alias, codes, points, lens, table, cfg.window, cfg.negative if neg else 0, a0, min_alpha,
            total, cfg.seed)
    trace = np.zeros((BATCH_CHUNKS, 2), dtype=np.int64)  # which thread trained each chunk (for tests; unused here)
    # compiles (or loads from numba's cache) outside the clock
    train_batch(corpus.ids, corpus.sent_start, chunk_sent, chunk_word, 0, 0, w_in, w_neg, w_hs, *args, 0,
                cfg.model == "skipgram", hs, max_sentence, threads, trace)
    with progress.bar(total=int(total), desc=desc, unit="w") as pb:
        for epoch in range(cfg.epochs):
            for c0 in range(0, n_chunks, BATCH_CHUNKS):
                c1 = min(n_chunks, c0 + BATCH_CHUNKS)
                t0, p0 = time.perf_counter(), time.process_time()
                k = train_batch(corpus.ids, corpus.sent_start, chunk_sent, chunk_word, c0, c1, w_in, w_neg, w_hs,
                                *args, epoch, cfg.model == "skipgram", hs, max_sentence, threads, trace)
                seconds += time.perf_counter() - t0
                cpu += time.process_time() - p0
                kept += int(k.sum())
                done = int(chunk_word[c1] - chunk_word[c0])
                pb.update(done)
                if pb.n:
                    lr = max(min_alpha, a0 - (a0 - min_alpha) * (epoch * corpus.words + chunk_word[c1]) / total)
                    pb.set_postfix_str(f"epoch {epoch + 1}/{cfg.epochs}, {pb.n / max(seconds, 1e-9):,.0f} words/s, "
                                       f"alpha {lr:.5f}", refresh=False)
            if not np.isfinite(w_in).all():
                raise UserError(f"training diverged in epoch {epoch + 1} (non-finite vectors): lower --alpha")
    return TrainResult(w_in, w_neg if neg else w_hs, seconds, cpu, int(total), kept)


def warm_up() -> None:
    """Compile the kernel's variants on a tiny corpus (numba caches nothing across processes here)."""
    vocab = EmbedVocab(["a", "b", "c"], [3, 2, 1])
    corpus = Corpus(np.array([0, 1, 2, 0, 1, 0], dtype=np.int32), np.array([0, 6], dtype=np.int64), 6)
    for model in ("skipgram", "cbow"):
        for objective in ("neg", "hs"):
            train(vocab, corpus, Word2VecConfig(model=model, objective=objective, dim=4, epochs=1, min_count=1,
                                                threads=1))

