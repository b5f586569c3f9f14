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


@pytest.mark.parametrize("seed,order,prune", [(1, 3, None), (2, 5, None), (3, 4, [0, 1, 2]), (4, 1, None)])
def test_bounded_counting_on_dask_writes_the_single_process_bytes(tmp_path, seed, order, prune):
    """--engine dask with --memory: shards counted by two workers, their tables merged into the spill
    (dask_bounded) under a budget that cuts the corpus into many shards: the same ARPA bytes as one process."""
    pytest.importorskip("dask.distributed", reason='Dask is optional: pip install "dask[distributed]"')
    from sampledlm.ngram.external import array_chunks, parse_memory, train_bounded

    sents = synthetic_sentences(900, vocab_size=60, seed=seed)
    vocab = Vocab.from_sentences(sents)
    ids = encode_sentences(vocab, sents)
    if seed % 2:
        ids = ids[:-1]  # a stream that does not end with </s>
    a, b = tmp_path / "one.arpa", tmp_path / "dask.arpa"
    train_bounded(array_chunks(ids, 500), vocab, order, str(a), parse_memory("1K"), str(tmp_path), "mkn", prune)
    info = train_bounded(array_chunks(ids, 500), vocab, order, str(b), parse_memory("1K"), str(tmp_path), "mkn",
                         prune, dask=(None, 2, False))
    assert info["dask"]["workers"] == 2 and info["dask"]["shards"] > 4
    assert a.read_bytes() == b.read_bytes()
    assert [n for n in tmp_path.iterdir() if n.name.startswith("sampledlm-ngram.")] == []


def test_cli_dask_with_memory_on_two_worker_processes(tmp_path, capsys):
    """The command line: a local cluster of two worker processes, bounded merge, the local model's bytes."""
    pytest.importorskip("dask.distributed", reason='Dask is optional: pip install "dask[distributed]"')
    write_corpus(tmp_path / "train.txt", synthetic_sentences(400, 30, seed=1))
    base = ["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "3", "--memory", "2K",
            "--temp-dir", str(tmp_path)]
    assert run_cli(base + ["-o", str(tmp_path / "local.arpa")], capsys)[0] == 0
    code, _, err = run_cli(base + ["-o", str(tmp_path / "dask.arpa"), "--engine", "dask", "--workers", "2"], capsys)
    assert code == 0, err
    assert "counted by 2 workers" in err
    assert (tmp_path / "local.arpa").read_bytes() == (tmp_path / "dask.arpa").read_bytes()
