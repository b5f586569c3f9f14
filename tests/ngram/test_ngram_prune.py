"""Pruning: count thresholds (lmplz --prune) and relative-entropy pruning (Stolcke 1998) keep valid back-off models."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import encode_sentences, run_cli, synthetic_sentences, write_corpus

from sampledlm.data.vocab import Vocab
from sampledlm.errors import UserError
from sampledlm.ngram import train_ngram
from sampledlm.ngram.build.counts import count_ngrams
from sampledlm.ngram.build.prune import (compact, context_logprob10, entropy_prune, entropy_scores, history_logprob10,
                                   recompute_backoffs, threshold_for_size)


@pytest.fixture(scope="module")
def corpus():
    sents = synthetic_sentences(700, vocab_size=50, seed=11)
    vocab = Vocab.from_sentences(sents[:600])
    return vocab, encode_sentences(vocab, sents[:600]), encode_sentences(vocab, sents[600:])


@pytest.fixture(scope="module")
def kn4(corpus):
    vocab, train, _ = corpus
    return train_ngram(train, vocab, 4)


def sums_over_vocab(lm, train, rng, n=25):
    """sum_w p(w|h) for seen histories (from the text, <s>-started ones among them) and random ones."""
    V = lm.width - 1
    padded = np.concatenate([[lm.bos] * (lm.order - 1), train])
    hists = [padded[i : i + lm.order - 1] for i in rng.choice(len(train), n)]
    hists += [rng.integers(0, V, lm.order - 1) for _ in range(n // 2)]
    return np.array([(10 ** lm.logprob10_ids(np.tile(h, (V, 1)), np.arange(V))).sum() for h in hists])


def contexts_are_stored(lm):
    for k in range(2, lm.order + 1):
        ctx = np.asarray(lm.tables[k - 1].keys) // lm.width
        assert (ctx < len(lm.tables[k - 2])).all()
        assert np.all(np.diff(np.asarray(lm.tables[k - 1].keys)) > 0)


@pytest.mark.parametrize("fraction", [0.5, 0.1, 0.01])
def test_entropy_pruned_models_sum_to_one(kn4, corpus, fraction):
    vocab, train, _ = corpus
    scores = entropy_scores(kn4)
    pruned = entropy_prune(kn4, threshold_for_size(scores, fraction), scores)
    kept = sum(pruned.counts()[1:]) / sum(kn4.counts()[1:])
    assert fraction * 0.5 < kept < fraction * 1.6 + 0.01, kept
    assert pruned.counts()[0] == kn4.counts()[0], "unigrams are never pruned"
    contexts_are_stored(pruned)
    s = sums_over_vocab(pruned, train, np.random.default_rng(1))
    assert np.abs(s - 1).max() < 1e-6


def test_history_model_gives_the_contexts_probabilities(kn4, corpus):
    """P(h) from a history model (SRILM -prune-history-lm): the model itself gives its own chain's P(h);
    a Katz model gives other scores, and the pruned model still sums to one."""
    vocab, train, _ = corpus
    from sampledlm.ngram.build.prune import _words

    words = _words(kn4)
    for k in (1, 2, 3):
        own = context_logprob10(kn4, k, words[k - 1])
        assert np.allclose(history_logprob10(kn4, kn4, words[k - 1]), own, atol=1e-9)
    katz = train_ngram(train, vocab, 4, "katz")
    scores = entropy_scores(kn4, katz)
    assert not np.allclose(scores[2], entropy_scores(kn4)[2])
    pruned = entropy_prune(kn4, threshold_for_size(scores, 0.2), scores)
    contexts_are_stored(pruned)
    assert np.abs(sums_over_vocab(pruned, train, np.random.default_rng(2)) - 1).max() < 1e-6


def test_recomputed_backoffs_of_an_unpruned_interpolated_model_are_its_own(kn4):
    again = recompute_backoffs(kn4)
    for a, b in zip(kn4.tables[:-1], again.tables[:-1]):
        assert np.abs(np.asarray(a.bow) - b.bow).max() < 1e-6


def test_entropy_score_is_the_weighted_divergence_of_removing_that_ngram(kn4):
    """Score of one trigram = 10^(P(h) KL(p(.|h) || p'(.|h))) - 1 with p' the model without it (log10)."""
    scores = entropy_scores(kn4)
    rng = np.random.default_rng(3)
    k = 3
    W, V = kn4.width, kn4.width - 1
    checked = 0
    for i in rng.choice(len(kn4.tables[k - 1]), 40, replace=False):
        keep = [np.ones(len(t), bool) for t in kn4.tables]
        keep[k - 1][i] = False
        key = int(kn4.tables[k - 1].keys[i])
        hidx = key // W
        has_ext = np.flatnonzero(np.asarray(kn4.tables[k].keys) // W == i)
        if len(has_ext):
            continue  # a context of 4-grams: never pruned, its score is not used alone
        smaller = recompute_backoffs(compact(kn4, keep))
        h = np.array([int(kn4.tables[1].keys[hidx]) // W, int(kn4.tables[1].keys[hidx]) % W])
        p = 10 ** kn4.logprob10_ids(np.tile(h, (V, 1)), np.arange(V))
        q = 10 ** smaller.logprob10_ids(np.tile(h, (V, 1)), np.arange(V))
        lp1 = kn4.tables[0].logp.copy()
        lp1[kn4.bos] = lp1[kn4.eos]
        ph = 10 ** (lp1[h[0]] + kn4.tables[1].logp[hidx])
        kl = ph * float((p * (np.log10(p) - np.log10(q))).sum())
        assert scores[k - 1][i] == pytest.approx(10 ** kl - 1, rel=1e-3, abs=1e-12)
        checked += 1
    assert checked >= 3


def test_count_pruning_drops_rare_ngrams_and_sums_to_one(corpus):
    vocab, train, _ = corpus
    full = train_ngram(train, vocab, 4)
    lm = train_ngram(train, vocab, 4, prune=[0, 1, 1])
    counts = count_ngrams(train, len(vocab) + 1, 4, vocab.bos_id)
    assert lm.counts() == [len(counts.orders[0])] + [int((o.count > 1).sum()) for o in counts.orders[1:]]
    assert lm.counts() != full.counts()
    contexts_are_stored(lm)
    s = sums_over_vocab(lm, train, np.random.default_rng(2))
    assert np.abs(s - 1).max() < 1e-6
    assert lm.info["prune"] == [0, 1, 1, 1]


@pytest.mark.parametrize("bad,msg", [([1, 1], "unigrams cannot be pruned"), ([0, 2, 1], "must not decrease"),
                                     ([0, 0, 0, 0, 1], "5 thresholds")])
def test_bad_thresholds_are_refused(corpus, bad, msg):
    vocab, train, _ = corpus
    with pytest.raises(UserError, match=msg):
        train_ngram(train, vocab, 4, prune=bad)


def test_prune_command(tmp_path, capsys):
    write_corpus(tmp_path / "train.txt", synthetic_sentences(300, 40, seed=4))
    arpa = str(tmp_path / "kn3.arpa")
    assert run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "-o", arpa], capsys)[0] == 0
    code, _, err = run_cli(["ngram", "prune", arpa, "--keep", "0.2", "-o", str(tmp_path / "p.arpa")], capsys)
    assert code == 0 and "threshold" in err
    from sampledlm.ngram import read_arpa

    p = read_arpa(str(tmp_path / "p.arpa"), cache=False)
    assert "missing n-gram prefixes" not in p.info["added"]
    code, _, err = run_cli(["ngram", "prune", arpa, "-o", str(tmp_path / "q.arpa")], capsys)
    assert code == 1 and "exactly one of" in err
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--prune", "0,x",
                            "-o", str(tmp_path / "c.arpa")], capsys)
    assert code == 1 and "--prune" in err
    katz = str(tmp_path / "katz3.arpa")
    assert run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--smoothing", "katz", "-o", katz],
                   capsys)[0] == 0
    code, _, err = run_cli(["ngram", "prune", arpa, "--keep", "0.2", "--history-lm", katz,
                            "-o", str(tmp_path / "h.arpa")], capsys)
    assert code == 0 and "threshold" in err
    assert (tmp_path / "h.arpa").read_bytes() != (tmp_path / "p.arpa").read_bytes()
    code, _, err = run_cli(["ngram", "prune", arpa, "--keep", "0.2", "--history-lm", str(tmp_path / "none.arpa"),
                            "-o", str(tmp_path / "x.arpa")], capsys)
    assert code == 1 and "none.arpa" in err and not (tmp_path / "x.arpa").exists()
