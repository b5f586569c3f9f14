import numpy as np
import pytest
import torch

from sampledlm.data.batches import NgramBatches, bptt_batches, bptt_rows, ngram_histories, sentence_positions
from sampledlm.data.corpus import encode_file, load_ids, sentence_count


def test_stream_layout(abc_corpus):
    p, v = abc_corpus
    ids = encode_file(str(p), v)
    assert ids.dtype == np.int32
    assert v.decode(ids.tolist()) == ["a", "b", "c", "</s>", "d", "</s>", "b", "a", "</s>"]
    assert sentence_count(ids) == 3


def test_cache_is_memory_mapped_and_invalidated(abc_corpus, tmp_path):
    p, v = abc_corpus
    first = load_ids(str(p), v)
    assert isinstance(first, np.memmap)
    assert np.array_equal(load_ids(str(p), v), first)
    import os
    import time

    p.write_text("a a\n", encoding="utf-8")
    os.utime(p, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    assert v.decode(load_ids(str(p), v).tolist()) == ["a", "a", "</s>"]


def test_history_padding_with_bos(abc_corpus):
    p, v = abc_corpus
    ids = encode_file(str(p), v)
    h = ngram_histories(ids, sentence_positions(ids), order=3, bos_id=v.bos_id)
    words = [v.decode(row) for row in h.tolist()]
    assert words == [["<s>", "<s>"], ["<s>", "a"], ["a", "b"], ["b", "c"],
                     ["<s>", "<s>"], ["<s>", "d"],
                     ["<s>", "<s>"], ["<s>", "b"], ["b", "a"]]
    assert ngram_histories(ids, sentence_positions(ids), order=1, bos_id=v.bos_id).shape == (9, 0)


def test_ngram_batches_cover_every_position_once(abc_corpus):
    p, v = abc_corpus
    ids = encode_file(str(p), v)
    seen = []
    for hist, tgt in NgramBatches(ids, 3, v.bos_id, batch_size=4, shuffle=True, generator=np.random.default_rng(3)):
        assert hist.shape == (len(tgt), 2) and hist.dtype == torch.int64
        seen.extend(tgt.tolist())
    assert sorted(seen) == sorted(ids.tolist())


@pytest.mark.parametrize("batch,bptt", [(1, 4), (2, 3), (4, 100), (16, 2)])
def test_bptt_shapes_and_exact_prediction_count(batch, bptt):
    ids = np.array([5, 6, 0, 7, 0, 8, 9, 10, 0, 6, 0], dtype=np.int32)
    x, y, m = bptt_rows(ids, batch)
    assert x.shape == y.shape == m.shape == (batch, -(-len(ids) // batch))
    assert int(m.sum()) == len(ids)
    # inputs are the targets shifted by one, with </s> as the first input
    assert y[m].tolist() == ids.tolist()
    flat_x = x.reshape(-1)[: len(ids)].tolist()
    assert flat_x == [0] + ids[:-1].tolist()
    segs = list(bptt_batches(ids, batch, bptt))
    assert all(s[0].shape[0] == batch and s[0].shape[1] <= bptt for s in segs)
    assert sum(int(s[2].sum()) for s in segs) == len(ids)
