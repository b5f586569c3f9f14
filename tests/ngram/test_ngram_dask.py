"""Counting on Dask: shards counted by two workers and merged give exactly the single-process counts and model."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import encode_sentences, run_cli, synthetic_sentences, write_corpus

from sampledlm.data.vocab import Vocab
from sampledlm.ngram import train_ngram
from sampledlm.ngram.counts import count_ngrams
from sampledlm.ngram.distributed import build_counts, count_shard, merge_tables, shard_bounds
from sampledlm.ngram.estimate import estimate


@pytest.fixture(scope="module")
def corpus():
    sents = synthetic_sentences(1500, vocab_size=80, seed=8)
    vocab = Vocab.from_sentences(sents)
    return vocab, encode_sentences(vocab, sents)


def same_counts(a, b):
    for x, y in zip(a.orders, b.orders):
        for f in ("keys", "ctx", "suffix", "first", "count"):
            assert np.array_equal(getattr(x, f), getattr(y, f)), f


@pytest.mark.parametrize("shards", [1, 3, 7])
def test_map_and_reduce_equal_the_single_process_counts(corpus, shards):
    vocab, ids = corpus
    W = len(vocab) + 1
    bounds = shard_bounds(ids, shards)
    assert len(bounds) == shards and all(ids[b - 1] == 0 for _, b in bounds), "shards end at sentence ends"
    parts = [count_shard(ids[a:b], W, 4, vocab.bos_id) for a, b in bounds]
    merged = build_counts([merge_tables([p[k] for p in parts]) for k in range(4)], W, vocab.bos_id)
    same_counts(count_ngrams(ids, W, 4, vocab.bos_id), merged)


def test_two_worker_local_cluster_gives_the_single_process_model(corpus):
    pytest.importorskip("dask.distributed", reason='Dask is optional: pip install "dask[distributed]"')
    from sampledlm.ngram.distributed import count_with_dask

    vocab, ids = corpus
    counts, report = count_with_dask(ids, len(vocab) + 1, 3, vocab.bos_id, workers=2, processes=False)
    assert report["workers"] == 2 and report["shards"] == 4
    a, b = train_ngram(ids, vocab, 3), estimate(counts, vocab)
    for x, y in zip(a.tables, b.tables):
        assert np.array_equal(x.keys, y.keys) and np.array_equal(x.logp, y.logp) and np.array_equal(x.bow, y.bow)


def test_cli_refuses_dask_with_memory(tmp_path, capsys):
    write_corpus(tmp_path / "train.txt", synthetic_sentences(50, 20, seed=1))
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--engine", "dask",
                            "--memory", "1G", "-o", str(tmp_path / "x.arpa")], capsys)
    assert code == 1 and "leave out --memory" in err
