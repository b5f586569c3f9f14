"""PTB integration: interpolated modified Kneser-Ney matches KenLM's lmplz (skipped when PTB is absent)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sampledlm.data.corpus import build_vocab, load_ids
from sampledlm.ngram import read_arpa, write_arpa, train_ngram

LMPLZ_TRIGRAM = 148.28  # lmplz -o 3 on ptb.train, <unk> renamed to an ordinary word; test perplexity


@pytest.mark.ptb
def test_modified_kneser_ney_trigram_matches_lmplz(ptb_dir, tmp_path, monkeypatch):
    vocab = build_vocab(str(ptb_dir / "ptb.train.txt"))
    train = load_ids(str(ptb_dir / "ptb.train.txt"), vocab)
    test = load_ids(str(ptb_dir / "ptb.test.txt"), vocab)
    assert len(test) == 82_430
    lm = train_ngram(train, vocab, 3)
    lnp = lm.stream_logprobs(test, vocab)
    ppl = math.exp(-lnp.mean())
    assert abs(ppl - LMPLZ_TRIGRAM) / LMPLZ_TRIGRAM < 0.005, ppl
    path = str(tmp_path / "kn3.arpa")
    write_arpa(lm, path)
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))
    np.testing.assert_array_equal(read_arpa(path).stream_logprobs(test, vocab), lnp)
    kenlm = pytest.importorskip("kenlm")
    km = kenlm.Model(path)
    total = sum(km.score(line.strip()) for line in open(ptb_dir / "ptb.test.txt") if line.strip())
    assert 10 ** (-total / len(test)) == pytest.approx(ppl, rel=1e-5)
