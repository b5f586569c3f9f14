"""The demo's step for word embeddings: word2vec skip-gram on the training text, nearest neighbours,
and the feed-forward model's projections beside them."""

from __future__ import annotations

import os
import time


from ..embed.formats import save_vectors
from ..embed.train import Word2VecConfig, train
from ..embed.vectors import WordVectors
from ..embed.vocab import read_corpus
from ..errors import UserError
from .common import DemoData, Result, say

PROBES = ("function", "list", "string", "file", "class")


def embed_step(data: DemoData) -> list[Result]:
    """Train skip-gram vectors (negative sampling) on train.txt; print neighbours by them and by the FFNN's projections."""
    from ..data.tokenizer import TextOptions

    t0 = time.perf_counter()
    vocab, corpus = read_corpus([(data.train, TextOptions())], min_count=5)
    cfg = Word2VecConfig(model="skipgram", dim=50, epochs=5, threads=2, seed=data.seed)
    r = train(vocab, corpus, cfg)
    wv = WordVectors(vocab.words, r.w_in, vocab.counts)
    save_vectors(os.path.join(data.directory, "word2vec.bin"), wv)
    say(f"\n== word embeddings (sampledlm embed): skip-gram, negative sampling, {len(vocab):,} words x {cfg.dim}, "
               f"{r.words_per_second:,.0f} words/s, {time.perf_counter() - t0:.1f} s ==")
    ffnn = None
    ffnn_dir = os.path.join(data.directory, "ffnn3-softmax")
    if os.path.isdir(ffnn_dir):
        from ..embed.export import lm_vectors

        ffnn = lm_vectors(ffnn_dir, "input")
    for w in PROBES:
        try:
            line = f"{w:<9} word2vec: {', '.join(n for n, _ in wv.neighbors(w, 5))}"
            if ffnn is not None:
                line += f"  | FFNN projections: {', '.join(n for n, _ in ffnn.neighbors(w, 5))}"
        except UserError:
            continue
        say(line)
    return []
