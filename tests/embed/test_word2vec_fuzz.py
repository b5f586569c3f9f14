"""Property-based tests of the word2vec readers: a file we write reads back bit for bit; mutations of it (see
:mod:`tests.campaigns.mutate`) and random bytes either read as usable vectors (finite, one per word, words without
white space) or stop with a UserError naming the file; never another exception or a huge allocation."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="property-based tests need hypothesis (the test extra)")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.campaigns.mutate import BAD_TOKENS, KINDS, RAW, Op, mutate  # noqa: E402
from sampledlm.embed.formats import load_vectors, save_vectors  # noqa: E402
from sampledlm.embed.vectors import WordVectors  # noqa: E402
from sampledlm.errors import UserError  # noqa: E402

ops = st.lists(st.builds(Op, st.sampled_from(KINDS), st.integers(0, 1 << 30), st.integers(0, 1 << 30),
                         st.sampled_from(BAD_TOKENS) | st.text(max_size=8),
                         st.sampled_from(RAW) | st.binary(max_size=12)), min_size=1, max_size=3)
words = st.lists(st.sampled_from(["a", "b", "the", "café", "中文", "x1", "<unk>"]), min_size=1, max_size=6, unique=True)


def vectors_for(ws, seed):
    return WordVectors(ws, np.random.default_rng(seed).normal(size=(len(ws), 3)).astype(np.float32))


@pytest.mark.parametrize("binary", [False, True])
@given(ws=words, seed=st.integers(0, 1000))
def test_round_trip_bit_for_bit(tmp_path_factory, binary, ws, seed):
    wv = vectors_for(ws, seed)
    path = str(tmp_path_factory.mktemp("w2v") / ("v.bin" if binary else "v.txt"))
    save_vectors(path, wv, binary=binary)
    back = load_vectors(path)
    assert back.words == ws and np.array_equal(back.vectors, wv.vectors)


@pytest.mark.parametrize("binary", [False, True])
@given(ws=words, seed=st.integers(0, 1000), ops=ops, raw=st.none() | st.binary(max_size=200))
def test_damaged_files_read_or_stop_with_an_error_naming_the_file(tmp_path_factory, binary, ws, seed, ops, raw):
    path = str(tmp_path_factory.mktemp("w2v") / ("v.bin" if binary else "v.txt"))
    save_vectors(path, vectors_for(ws, seed), binary=binary)
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(raw if raw is not None else mutate(data, ops))
    try:
        wv = load_vectors(path)
    except UserError as e:
        assert str(e).startswith(path), str(e)
        return
    assert len(wv.words) == wv.vectors.shape[0] >= 1 and np.isfinite(wv.vectors).all()
    assert all(w and not any(c.isspace() for c in w) for w in wv.words)
