"""N-gram estimation and query: normalisation of every smoothing, hand-computed values, the stages."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import encode_sentences as encode

from sampledlm.ngram import SMOOTHINGS, read_arpa, write_arpa, train_ngram
from sampledlm.ngram.build.counts import count_ngrams
from sampledlm.ngram.build.kneser_ney import adjusted_counts, discounts
from sampledlm.ngram.tables import lookup_grams
from sampledlm.data.vocab import Vocab


def probs_over_vocab(lm, hist: list[int]) -> np.ndarray:
    V = lm.width - 1  # every word but <s>
    h = np.tile(np.array(hist, dtype=np.int64), (V, 1)).reshape(V, len(hist))
    return 10 ** lm.logprob10_ids(h, np.arange(V))


def histories(vocab, ids, order, rng):
    """Seen histories (from training text, <s>-padded ones among them) and unseen ones (random words)."""
    bos = vocab.bos_id
    padded = np.concatenate([[bos] * (order - 1), ids])
    seen = [list(padded[i : i + order - 1]) for i in rng.choice(len(ids), 12, replace=False)]
    seen.append([bos] * (order - 1))
    unseen = [list(rng.integers(0, len(vocab), order - 1)) for _ in range(6)]
    unseen.append([bos] * max(order - 2, 0) + [len(vocab) - 1][: order - 1])  # the never-seen word as history
    return seen + unseen


@pytest.mark.parametrize("smoothing", sorted(SMOOTHINGS))
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_probabilities_sum_to_one_over_the_vocabulary(ngram_corpus, smoothing, order):
    vocab, train, valid = ngram_corpus
    lm = train_ngram(train, vocab, order, smoothing, valid_ids=valid)
    rng = np.random.default_rng(order)
    for hist in histories(vocab, train, order, rng):
        p = probs_over_vocab(lm, [int(x) for x in hist])
        assert abs(p.sum() - 1.0) < 1e-6, (smoothing, order, hist, p.sum())
        assert (p > 0).all(), "every word, even one never seen, has positive probability"


def tiny():
    """Corpus 'a b' 'a b' 'b a': ids </s>=0 <unk>=1 a=2 b=3 <s>=4; V = 4."""
    sents = [["a", "b"], ["a", "b"], ["b", "a"]]
    vocab = Vocab.from_sentences(sents)
    assert vocab.words == ["</s>", "<unk>", "a", "b"]
    return vocab, encode(vocab, sents)


def test_counting_pads_one_bos_and_finds_suffixes():
    vocab, ids = tiny()
    c = count_ngrams(ids, len(vocab) + 1, 3, vocab.bos_id)
    bi = c.orders[1]
    got = {tuple(vocab.decode([k // 5, k % 5])): int(n) for k, n in zip(bi.keys, bi.count)}
    assert got == {("<s>", "a"): 2, ("<s>", "b"): 1, ("a", "b"): 2, ("a", "</s>"): 1, ("b", "</s>"): 2, ("b", "a"): 1}
    assert c.orders[0].count[vocab.bos_id] == 3
    tri = c.orders[2]
    assert int(tri.count.sum()) == 6  # <s> a b, a b </s> (x2), <s> b a, b a </s>
    # the suffix of '<s> a b' is the bigram 'a b'
    k = lookup_grams(c.keys, np.array([[4, 2, 3]]), 5)[0]
    assert tri.suffix[k] == lookup_grams(c.keys, np.array([[2, 3]]), 5)[0]


def test_adjusted_counts_use_continuations_except_after_bos():
    vocab, ids = tiny()
    c = count_ngrams(ids, 5, 3, vocab.bos_id)
    a = adjusted_counts(c)

    def adj(*words):
        k = lookup_grams(c.keys, np.array([vocab.encode(words) if words[0] != "<s>" else [4] + vocab.encode(words[1:])]), 5)[0]
        return a[len(words) - 1][k]

    assert adj("<s>", "a") == 2  # raw count: nothing precedes <s>
    assert adj("a", "b") == 1  # N1+(. a b) = |{<s>}|
    assert adj("b", "</s>") == 1  # N1+(. b </s>) = |{a}|
    assert adj("a") == 2 and adj("b") == 2 and adj("</s>") == 2 and adj("<unk>") == 0
    assert a[0][4] == 0  # <s> is never predicted
    assert adj("<s>", "a", "b") == 2  # highest order: raw


def test_discounts_follow_chen_goodman_and_fall_back_on_small_data():
    a = np.array([1] * 10 + [2] * 5 + [3] * 3 + [4] * 2 + [9], dtype=float)
    d, fell = discounts(a)
    y = 10 / (10 + 2 * 5)
    assert not fell
    assert d[1:] == pytest.approx([1 - 2 * y * 5 / 10, 2 - 3 * y * 3 / 5, 3 - 4 * y * 2 / 3])
    d, fell = discounts(np.array([1.0, 2.0, 2.0]))
    assert fell and list(d[1:]) == [0.5, 1.0, 1.5]


def p(lm, vocab, hist, word):
    return 10 ** lm.logprob(hist, word)


def test_hand_computed_add_one_witten_bell_and_kneser_ney_bigrams():
    vocab, ids = tiny()
    add1 = train_ngram(ids, vocab, 2, "addk", k=1.0)
    assert p(add1, vocab, ["a"], "b") == pytest.approx(3 / 7)
    assert p(add1, vocab, ["a"], "<unk>") == pytest.approx(1 / 7)
    assert p(add1, vocab, ["<s>"], "a") == pytest.approx(3 / 7)
    # Witten-Bell: p1(w) = (c(w) + 3/4) / (9 + 3); p(b|a) = (2 + 2 p1(b)) / (3 + 2)
    wb = train_ngram(ids, vocab, 2, "wb")
    assert p(wb, vocab, [], "a") == pytest.approx(3.75 / 12)
    assert p(wb, vocab, ["a"], "b") == pytest.approx((2 + 2 * 3.75 / 12) / 5)
    assert p(wb, vocab, ["a"], "<unk>") == pytest.approx(2 * 0.75 / 12 / 5)
    # modified KN with fallback discounts (0.5, 1, 1.5): p1(a) = (2-1)/6 + 0.5/4 = 7/24
    kn = train_ngram(ids, vocab, 2, "mkn")
    assert kn.info["fallback_orders"] == [1, 2]
    assert p(kn, vocab, [], "a") == pytest.approx(7 / 24)
    assert p(kn, vocab, [], "<unk>") == pytest.approx(1 / 8)
    assert p(kn, vocab, ["a"], "b") == pytest.approx(1 / 3 + 0.5 * 7 / 24)  # (2-1)/3 + gamma(a) p1(b)
    assert p(kn, vocab, ["a"], "<unk>") == pytest.approx(0.5 / 8)
    assert p(kn, vocab, ["<s>"], "a") == pytest.approx(23 / 48)
    assert kn.tables[0].logp[vocab.bos_id] == -99.0


def test_katz_backs_off_with_leftover_mass():
    vocab, ids = tiny()
    lm = train_ngram(ids, vocab, 2, "katz")
    # seen bigrams keep discounted ML estimates; unseen ones get beta(a) p(w)
    seen = p(lm, vocab, ["a"], "b") + p(lm, vocab, ["a"], "</s>")
    assert seen < 1.0
    beta = 10 ** lm.tables[0].bow[vocab.index["a"]]
    assert p(lm, vocab, ["a"], "a") == pytest.approx(beta * p(lm, vocab, [], "a"))


def test_jelinek_mercer_needs_validation_text_and_learns_weights(ngram_corpus):
    vocab, train, valid = ngram_corpus
    from sampledlm.errors import UserError

    with pytest.raises(UserError, match="held-out"):
        train_ngram(train, vocab, 3, "jm")
    lm = train_ngram(train, vocab, 3, "jm", valid_ids=valid)
    lams = [x for lam in lm.info["lambdas"] for x in lam]
    assert all(0 <= x <= 1 for x in lams) and any(x != 0.5 for x in lams)
    fixed = train_ngram(train, vocab, 3, "addk")
    assert lm.perplexity(valid, vocab) < fixed.perplexity(valid, vocab)


def test_kneser_ney_beats_add_k_and_context_helps(ngram_corpus):
    vocab, train, valid = ngram_corpus
    ppl = {s: train_ngram(train, vocab, 3, s, valid_ids=valid).perplexity(valid, vocab) for s in SMOOTHINGS}
    assert ppl["mkn"] < ppl["addk"] and ppl["kn"] < ppl["addk"]
    assert all(math.isfinite(x) for x in ppl.values())
    # the text comes from a bigram process: a bigram model beats a unigram model by far
    assert train_ngram(train, vocab, 1).perplexity(valid, vocab) > 1.5 * train_ngram(train, vocab, 2).perplexity(valid, vocab)


def test_query_api_agrees_with_stream_scores(ngram_corpus):
    vocab, train, valid = ngram_corpus
    lm = train_ngram(train, vocab, 3)
    sent_ids = list(valid[: list(valid).index(0) + 1])
    words = vocab.decode(sent_ids[:-1])
    lnp = lm.stream_logprobs(np.array(sent_ids, dtype=np.int32), vocab)
    assert lm.score(words) == pytest.approx(lnp.sum() / math.log(10))
    hist = ["<s>", "<s>"] + words
    for i, w in enumerate(words + ["</s>"]):
        assert lm.logprob(hist[i : i + 2], w) == pytest.approx(lnp[i] / math.log(10))


def test_stream_logprobs_maps_words_by_string(ngram_corpus, tmp_path):
    vocab, train, valid = ngram_corpus
    lm = train_ngram(train, vocab, 3)
    path = tmp_path / "m.arpa"
    write_arpa(lm, str(path))
    other_words = ["</s>", "<unk>"] + list(reversed(vocab.words[2:])) + ["not-in-model"]
    other = Vocab(other_words, [0] * len(other_words))
    remap = np.array([other.index[w] for w in vocab.words], dtype=np.int32)
    mine = lm.stream_logprobs(valid, vocab)
    theirs = read_arpa(str(path)).stream_logprobs(remap[valid], other)
    np.testing.assert_array_equal(mine, theirs)
    # a vocabulary word the model lacks is scored as <unk>
    stream = np.array([other.index["not-in-model"], 0], dtype=np.int32)
    unk = np.array([other.index["<unk>"], 0], dtype=np.int32)
    np.testing.assert_array_equal(lm.stream_logprobs(stream, other), lm.stream_logprobs(unk, other))


@pytest.mark.parametrize("smoothing", ["mkn", "katz"])
def test_orders_beyond_five(ngram_corpus, smoothing):
    vocab, train, valid = ngram_corpus
    lm = train_ngram(train, vocab, 7, smoothing, valid_ids=valid)
    assert lm.order == 7 and len(lm.tables[6]) > 0
    for hist in histories(vocab, train, 7, np.random.default_rng(7))[::4]:
        assert abs(probs_over_vocab(lm, [int(x) for x in hist]).sum() - 1) < 1e-6
    assert math.isfinite(lm.perplexity(valid, vocab))


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_stream_scorer_trie_ranges_match_the_vectorised_lookups(ngram_corpus, order):
    """The compiled stream scorer (each lookup within its context's range, KenLM's trie pointers) gives
    bit-identical probabilities and orders to the numpy binary searches over whole tables."""
    from sampledlm.ngram.model import HAVE_NUMBA
    from sampledlm.ngram.tables import context_starts, lookup

    vocab, train, valid = ngram_corpus
    lm = train_ngram(train, vocab, order)
    saved = type(lm).COMPILED_MIN
    type(lm).COMPILED_MIN = 0  # the compiled path for this short stream too
    try:
        fast = lm.stream_logprobs(valid, vocab, with_order=True)
    finally:
        type(lm).COMPILED_MIN = saved
    lm.__dict__["_ranges"] = None
    saved, type(lm).RANGES_MAX = type(lm).RANGES_MAX, -1  # no ranges: the numpy path
    try:
        slow = lm.stream_logprobs(valid, vocab, with_order=True)
    finally:
        type(lm).RANGES_MAX = saved
    np.testing.assert_array_equal(fast[0], slow[0])
    np.testing.assert_array_equal(fast[1], slow[1])
    if HAVE_NUMBA and order > 1:
        from sampledlm.ngram.trie_kernels import lookup_in_context

        rng = np.random.default_rng(order)
        keys = lm._keys[1]
        ctx = rng.integers(-1, len(lm.tables[0]), 500)
        word = rng.integers(0, lm.width, 500)
        ctx[:50], word[:50] = keys[:50] // lm.width, keys[:50] % lm.width  # some present
        got = np.empty(500, dtype=np.int64)
        lookup_in_context(keys, context_starts(keys, len(lm.tables[0]), lm.width), ctx, word, lm.width, got)
        np.testing.assert_array_equal(got, lookup(keys, ctx, word, lm.width))
