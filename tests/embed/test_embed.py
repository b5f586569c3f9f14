"""Word embeddings: the Huffman tree, subsampling, the window rule, the noise table, the kernel (determinism,
learning), the word2vec files (and gensim's reading of them), similarity and analogy scoring."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sampledlm.embed import evaluate as ev
from sampledlm.embed.formats import load_vectors, read_binary, read_text, write_binary, write_text
from sampledlm.embed.huffman import huffman_codes
from sampledlm.embed.noise import alias_probabilities, alias_table, noise_distribution
from sampledlm.embed.train import Word2VecConfig, train
from sampledlm.embed.vectors import WordVectors
from sampledlm.embed.vocab import Corpus, EmbedVocab, read_corpus
from sampledlm.errors import UserError


# --- Huffman tree ------------------------------------------------------------------------------------------------

def _optimal_cost(counts) -> int:
    """sum_w count_w * depth_w of an optimal prefix code = the sum of all merged weights (Huffman's theorem)."""
    import heapq

    h = list(map(int, counts))
    heapq.heapify(h)
    cost = 0
    while len(h) > 1:
        a, b = heapq.heappop(h), heapq.heappop(h)
        cost += a + b
        heapq.heappush(h, a + b)
    return cost


@pytest.mark.parametrize("counts", [[5, 3, 2, 1], [1, 1, 1, 1, 1, 1, 1, 1], [100, 50, 20, 20, 7, 3, 2, 1, 1],
                                    list(np.random.default_rng(0).zipf(1.3, 300).clip(max=10**6))])
def test_huffman_codes_are_an_optimal_prefix_code(counts):
    codes, points, lens = huffman_codes(np.array(counts))
    V = len(counts)
    words = ["".join(map(str, codes[w, : lens[w]])) for w in range(V)]
    assert len(set(words)) == V
    for a in words:  # prefix-free
        assert not any(b != a and b.startswith(a) for b in words)
    assert math.isclose(sum(2.0 ** -len(c) for c in words), 1.0)  # a full binary tree: Kraft equality
    assert int(np.dot(counts, lens)) == _optimal_cost(counts)
    for w in range(V):  # paths start at the root (V - 2) and visit inner nodes only
        assert points[w, 0] == V - 2
        assert ((0 <= points[w, : lens[w]]) & (points[w, : lens[w]] <= V - 2)).all()
    order = np.argsort(-np.array(counts), kind="stable")
    assert all(lens[order[i]] <= lens[order[j]] for i in range(V) for j in range(i + 1, V)
               if counts[order[i]] > counts[order[j]])


def test_hierarchical_softmax_probabilities_sum_to_one():
    rng = np.random.default_rng(1)
    codes, points, lens = huffman_codes(np.array([40, 30, 10, 9, 5, 3, 2, 1]))
    nodes = rng.normal(size=(7, 4))
    h = rng.normal(size=4)
    sig = lambda x: 1 / (1 + np.exp(-x))
    p = [np.prod([sig((1 - 2 * int(codes[w, j])) * nodes[points[w, j]] @ h) for j in range(lens[w])]) for w in range(8)]
    assert math.isclose(sum(p), 1.0, rel_tol=1e-12)


# --- subsampling, noise, window ----------------------------------------------------------------------------------

def test_subsampling_probabilities_follow_word2vec():
    v = EmbedVocab(["the", "cat", "sat"], [10_000, 100, 1])
    p = v.keep_probabilities(1e-3)
    t = 1e-3 * 10_101  # sample x the tokens of the vocabulary's words
    assert np.allclose(p, [(math.sqrt(10_000 / t) + 1) * t / 10_000, (math.sqrt(100 / t) + 1) * t / 100, 1.0])
    assert p[0] == pytest.approx(0.0328, abs=1e-4) and p[1] == pytest.approx(0.4188, abs=1e-4)
    assert (v.keep_probabilities(0) == 1).all()


def test_the_kernel_subsamples_at_those_rates():
    # two words: "a" frequent, "b" rare; words kept by the kernel over 4 epochs against the expected number
    n = 20_000
    ids = (np.arange(n) % 50 == 0).astype(np.int32)  # 1 in 50 is "b"
    vocab = EmbedVocab(["a", "b"], np.bincount(ids))
    corpus = Corpus(ids, np.arange(0, n + 1, 100, dtype=np.int64), n)
    cfg = Word2VecConfig(dim=4, epochs=4, min_count=1, threads=1, sample=1e-2)
    r = train(vocab, corpus, cfg)
    p = vocab.keep_probabilities(1e-2)
    mean = cfg.epochs * float(vocab.counts @ p)
    sd = math.sqrt(cfg.epochs * float(vocab.counts @ (p * (1 - p))))
    assert p[0] < 0.2 and p[1] == 1.0
    assert abs(r.kept - mean) < 5 * sd


def test_alias_table_samples_the_noise_distribution():
    counts = np.array([1000, 500, 100, 10, 3, 1, 1])
    p = noise_distribution(counts, 0.75)
    assert np.allclose(p, counts**0.75 / (counts**0.75).sum())
    threshold, alias = alias_table(p)
    assert np.allclose(alias_probabilities(threshold, alias), p, atol=1e-9)


def test_window_rule_shrinks_uniformly():
    from sampledlm.embed.kernels import context_range, random_stream

    window, n, i = 5, 100, 50
    rs = random_stream(7, 20_000)
    sizes = np.array([(lambda lo_hi: lo_hi[1] - lo_hi[0] - 1)(context_range(i, n, window, r)) for r in rs])
    assert set(np.unique(sizes)) == {2, 4, 6, 8, 10}  # 1..window words on each side
    freq = np.bincount(sizes // 2)[1:] / len(sizes)
    assert np.abs(freq - 0.2).max() < 0.02
    assert context_range(0, 3, 5, np.uint64(0)) == (0, 3)  # clipped at the sentence's ends
    assert context_range(2, 3, 5, np.uint64(4)) == (1, 3)  # b = 4: one word each side


# --- training ------------------------------------------------------------------------------------------------------

def _topic_corpus(n_sent=1500, seed=0):
    """Sentences drawn from one of two disjoint word groups: words of a group share contexts."""
    rng = np.random.default_rng(seed)
    groups = [[f"a{i}" for i in range(10)], [f"b{i}" for i in range(10)]]
    return [[groups[s % 2][j] for j in rng.integers(0, 10, size=8)] for s in range(n_sent)]


def _corpus_from(sents, tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("".join(" ".join(s) + "\n" for s in sents))
    return read_corpus([(str(path), __import__("sampledlm.data.tokenizer", fromlist=["TextOptions"]).TextOptions())],
                       min_count=1)


@pytest.mark.parametrize("model,objective", [("skipgram", "neg"), ("cbow", "neg"), ("skipgram", "hs"), ("cbow", "hs")])
def test_training_separates_words_of_different_contexts(model, objective, tmp_path):
    vocab, corpus = _corpus_from(_topic_corpus(), tmp_path)
    r = train(vocab, corpus, Word2VecConfig(model=model, objective=objective, dim=16, epochs=5, min_count=1,
                                            threads=2, sample=0, seed=3))
    wv = WordVectors(vocab.words, r.w_in)
    u = wv.unit()
    grp = np.array([w[0] == "a" for w in vocab.words])
    sims = u @ u.T
    same = sims[np.ix_(grp, grp)][~np.eye(grp.sum(), dtype=bool)].mean()
    other = sims[np.ix_(grp, ~grp)].mean()
    assert same > other + 0.3, (same, other)


def test_one_thread_and_a_seed_give_the_same_vectors(tmp_path):
    vocab, corpus = _corpus_from(_topic_corpus(300), tmp_path)
    cfg = dict(model="skipgram", dim=8, epochs=2, min_count=1, threads=1)
    a = train(vocab, corpus, Word2VecConfig(seed=5, **cfg)).w_in
    b = train(vocab, corpus, Word2VecConfig(seed=5, **cfg)).w_in
    c = train(vocab, corpus, Word2VecConfig(seed=6, **cfg)).w_in
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_equal_counts_go_by_first_occurrence_the_latest_first_as_gensim(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("zeta beta\nalpha zeta beta alpha gamma\nx\n")
    from sampledlm.data.tokenizer import TextOptions

    vocab, _ = read_corpus([(str(path), TextOptions())], min_count=1)
    assert vocab.words == ["alpha", "beta", "zeta", "x", "gamma"]  # by count, then the latest first seen (not a-z)
    assert vocab.counts.tolist() == [2, 2, 2, 1, 1]


def test_huffman_tree_is_gensims_node_for_node(tmp_path):
    """Same vocabulary order, same tree: equal counts (most rare words) pair up as gensim pairs them."""
    gensim_models = pytest.importorskip("gensim.models", reason="gensim is not installed (pip install gensim)")
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(300)]
    sents = [[words[j] for j in rng.zipf(1.3, size=12).clip(max=300) - 1] for _ in range(400)]
    vocab, _ = _corpus_from(sents, tmp_path)
    assert len(set(vocab.counts.tolist())) < len(vocab) / 2  # many ties
    g = gensim_models.Word2Vec(vector_size=4, min_count=1, hs=1, negative=0, workers=1)
    g.build_vocab(sents)
    assert list(g.wv.index_to_key) == vocab.words
    codes, points, lens = huffman_codes(vocab.counts)
    for i, w in enumerate(vocab.words):
        assert codes[i, : lens[i]].tolist() == list(g.wv.get_vecattr(w, "code"))
        assert points[i, : lens[i]].tolist() == list(g.wv.get_vecattr(w, "point"))


def test_long_sentences_are_cut_and_dropped_words_removed(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("x " * 25 + "rare\n" + "x y\n")
    from sampledlm.data.tokenizer import TextOptions

    vocab, corpus = read_corpus([(str(path), TextOptions())], min_count=2, max_sentence=10)
    assert vocab.words == ["x"]
    assert corpus.tokens_read == 28 and corpus.words == 26
    assert np.diff(corpus.sent_start).tolist() == [10, 10, 5, 1]


def test_no_word_above_min_count_is_one_line_error(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("a b c\n")
    from sampledlm.data.tokenizer import TextOptions

    with pytest.raises(UserError, match="--min-count 5"):
        read_corpus([(str(path), TextOptions())], min_count=5)
    path.write_text("\n  \n")  # said "no word occurs --min-count 5 times or more (0 tokens, 0 distinct)"
    with pytest.raises(UserError, match="no words found"):
        read_corpus([(str(path), TextOptions())], min_count=5)


# --- files -----------------------------------------------------------------------------------------------------------

@pytest.fixture
def vectors():
    rng = np.random.default_rng(2)
    words = ["the", "king", "queen", "ünïcode", "日本", "x'y"]
    vec = rng.normal(size=(6, 7)).astype(np.float32) * np.float32(10.0) ** rng.integers(-8, 8, size=(6, 7))
    return WordVectors(words, vec)


def test_word2vec_files_round_trip_bit_for_bit(vectors, tmp_path):
    write_text(str(tmp_path / "v.txt"), vectors)
    write_binary(str(tmp_path / "v.bin"), vectors)
    for path, reader in ((tmp_path / "v.txt", read_text), (tmp_path / "v.bin", read_binary)):
        for back in (reader(str(path)), load_vectors(str(path))):  # load_vectors tells the formats apart
            assert back.words == vectors.words
            assert np.array_equal(back.vectors, vectors.vectors)


def test_gensim_reads_our_files_and_we_read_its(vectors, tmp_path):
    gensim_models = pytest.importorskip("gensim.models", reason="gensim is not installed (pip install gensim)")
    KeyedVectors = gensim_models.KeyedVectors
    for binary in (False, True):
        ours = tmp_path / f"ours.{binary}"
        (write_binary if binary else write_text)(str(ours), vectors)
        kv = KeyedVectors.load_word2vec_format(str(ours), binary=binary)
        assert list(kv.index_to_key) == vectors.words
        assert np.array_equal(kv.vectors, vectors.vectors)
        theirs = tmp_path / f"theirs.{binary}"
        kv.save_word2vec_format(str(theirs), binary=binary)
        back = load_vectors(str(theirs))
        assert back.words == vectors.words and np.array_equal(back.vectors, vectors.vectors)


@pytest.mark.parametrize("content,binary,message", [
    (b"3 2\na 1 2\nb 1\n", False, r":3: expected a word and 2 values, found 1"),
    (b"2 2\na 1 2\n", False, "announces 2 words, the file holds 1"),
    (b"x y\n", False, r":1: expected a word2vec header"),
    (b"2 2\na 1 oops\nb 1 2\n", False, "not a number"),
    (b"2 2\na " + np.zeros(2, "<f4").tobytes() + b"\nb " + b"\x00", True, "truncated at word 2"),
])
def test_damaged_files_are_one_line_errors(tmp_path, content, binary, message):
    path = tmp_path / "v"
    path.write_bytes(content)
    with pytest.raises(UserError, match=message):
        (read_binary if binary else read_text)(str(path))


# --- evaluation ------------------------------------------------------------------------------------------------------

def test_spearman_matches_hand_computed_values():
    assert ev.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert ev.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks with a tie: x -> 1, 2.5, 2.5, 4; y -> 1, 2, 3, 4: r = 0.9486832980505138
    assert ev.spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)


def test_similarity_counts_skipped_pairs():
    wv = WordVectors(["a", "b", "c"], np.array([[1, 0], [1, 0.1], [0, 1]], dtype=np.float32))
    res = ev.similarity(wv, [("a", "b", 9.0), ("A", "c", 1.0), ("b", "c", 2.0), ("a", "zzz", 5.0)])
    assert (res.pairs, res.skipped) == (3, 1)
    assert res.rho == pytest.approx(1.0)


def _analogy_vectors():
    """Gender and capital offsets that hold exactly, plus distractors."""
    base = {"man": [1, 0, 0, 0, 0], "king": [1, 0, 1, 0, 0], "france": [0, 0, 0, 1, 0], "germany": [0, 0, 0, 0, 1]}
    vec = {**base, "woman": [1, 1, 0, 0, 0], "queen": [1, 1, 1, 0, 0],
           "paris": [0, 0, 0, 1, 1.5], "berlin": [0, 0, 0, 0, 2.5], "noise": [0.2, -1, 0.3, 0.1, -0.4]}
    words = list(vec)
    return WordVectors(words, np.array([vec[w] for w in words], dtype=np.float32))


def test_analogy_answers_known_questions(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text(": family\nman woman king queen\nMan King woman queen\nman woman king noise\n"
                    ": gram-capitals\nfrance paris germany berlin\nfrance paris germany unknownword\n")
    res = ev.analogy(_analogy_vectors(), ev.read_analogies(str(path))).to_dict()
    fam, cap = res["sections"]
    assert (fam["kind"], fam["answered"], fam["add"], fam["mul"]) == ("semantic", 3, 2, 2)
    assert (cap["kind"], cap["questions"], cap["answered"]) == ("syntactic", 2, 1)
    assert res["all"]["coverage"] == pytest.approx(4 / 5)
    assert res["semantic"]["add"] == pytest.approx(2 / 3)
    # restricting the search to the 3 most frequent words leaves no answerable question
    assert ev.analogy(_analogy_vectors(), ev.read_analogies(str(path)), restrict=3).total()["answered"] == 0


def test_analogy_answers_agree_with_gensim_and_the_formulas():
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(60)]
    vec = rng.normal(size=(60, 6)).astype(np.float32)
    q = np.array([rng.choice(60, 3, replace=False) for _ in range(200)])
    wv = WordVectors(words, vec)
    add, mul = ev.predict(wv.unit(), q)
    u = wv.unit().astype(np.float64)
    for (a, a2, b), pa, pm in zip(q, add, mul):  # the formulas of the module docstring, one question at a time
        cos = lambda i: u @ u[i]
        s_add, s_mul = cos(a2) - cos(a) + cos(b), (cos(a2) + 1) / 2 * (cos(b) + 1) / 2 / ((cos(a) + 1) / 2 + 1e-3)
        s_add[[a, a2, b]] = s_mul[[a, a2, b]] = -np.inf
        assert (pa, pm) == (s_add.argmax(), s_mul.argmax())
    gensim_models = pytest.importorskip("gensim.models", reason="gensim is not installed (pip install gensim)")
    kv = gensim_models.KeyedVectors(6)
    kv.add_vectors(words, vec)
    theirs = [kv.most_similar(positive=[words[a2], words[b]], negative=[words[a]], topn=1)[0][0] for a, a2, b in q]
    assert [words[i] for i in add] == theirs


def test_similarity_interval_narrows_with_pairs_and_holds_rho():
    """The 95 % interval holds rho, is None under 4 pairs, and shrinks about as 1/sqrt(n)."""
    assert ev.SimilarityResult("x", 0.5, 3, 0).ci95 is None
    assert ev.SimilarityResult("x", 1.0, 50, 0).ci95 is None
    lo, hi = ev.SimilarityResult("x", 0.5, 28, 0).ci95
    assert lo < 0.5 < hi
    lo4, hi4 = ev.SimilarityResult("x", 0.5, 103, 0).ci95  # n - 3 four times as large: about half the width
    assert 0.4 < (hi4 - lo4) / (hi - lo) < 0.6
    # WS-353's size: about +-0.07 around a typical rho
    lo, hi = ev.SimilarityResult("x", 0.6, 353, 0).ci95
    assert 0.12 < hi - lo < 0.16


def test_neighbors_wants_a_count_of_at_least_one_and_lookup_answers_none_for_an_unknown_word():
    from sampledlm.errors import UserError

    wv = WordVectors(["a", "b", "c"], np.array([[1, 0], [1, 0.1], [0, 1]], dtype=np.float32))
    assert [w for w, _ in wv.neighbors("a", 1)] == ["b"] and len(wv.neighbors("a", 5)) == 2
    for bad in (-1, 0, 2.5, True):  # -1 sliced [:-1]: nearly the whole vocabulary
        with pytest.raises(UserError, match="neighbors: n"):
            wv.neighbors("a", bad)
    assert wv.lookup("zzz") is None
    with pytest.raises(UserError, match="not in the vocabulary"):
        wv.neighbors("zzz", 1)
