"""Word classes by the exchange algorithm: every pass raises the class bigram likelihood, a finished
run is a local optimum (no single move helps, checked by brute force), the classes file round trip,
and the `classes` command feeding `--word-classes` for the class and hsm output layers."""

import json

import numpy as np
import pytest

from sampledlm.data.clusters import (bigram_tables, class_bigram_objective, class_bigram_perplexity,
                                     exchange_classes, read_word_classes, write_word_classes)
from sampledlm.errors import UserError


def two_topic_stream(n_sent=400, seed=0):
    """Sentences 'a_i b_j' and 'x_i y_j': words a* follow </s> and precede b*, so {a}, {b}, {x}, {y}
    are the classes a bigram likelihood wants (ids: 0 = </s>, a = 1..5, b = 6..10, x = 11..15, y = 16..20)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sent):
        base = 1 if rng.random() < 0.5 else 11
        out += [base + rng.integers(5), base + 5 + rng.integers(5), 0]
    return np.array(out, dtype=np.int64)


def test_bigram_tables_count_every_consecutive_pair():
    ids = np.array([1, 2, 1, 2, 0, 1, 1])
    (rp, rn, rc), (lp, ln, lc) = bigram_tables(ids, 3)
    right = {(w, int(rn[j])): int(rc[j]) for w in range(3) for j in range(rp[w], rp[w + 1])}
    left = {(int(ln[j]), w): int(lc[j]) for w in range(3) for j in range(lp[w], lp[w + 1])}
    assert right == left == {(1, 2): 2, (2, 1): 1, (2, 0): 1, (0, 1): 1, (1, 1): 1}


def test_exchange_finds_the_planted_classes_and_raises_the_likelihood():
    # a local search: from the round-robin start this corpus (seed 1) leads to the planted classes; other
    # draws can end in a local optimum (the brute-force test below checks that property on random text)
    ids = two_topic_stream(seed=1)
    cls = exchange_classes(ids, 21, 5, iterations=20)
    groups = {frozenset(np.flatnonzero(cls == c).tolist()) for c in range(5)}
    assert groups == {frozenset([0]), frozenset(range(1, 6)), frozenset(range(6, 11)), frozenset(range(11, 16)),
                      frozenset(range(16, 21))}
    start = np.arange(21) % 5
    assert class_bigram_objective(ids, cls) > class_bigram_objective(ids, start)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_pass_raises_f_and_the_end_is_a_local_optimum(seed):
    """On random text: F never falls from one pass to the next, and once a pass moves nothing, moving any
    word to any other class (brute force, its last word excepted) does not raise F."""
    rng = np.random.default_rng(seed)
    v, c = 30, 4
    ids = rng.choice(v, size=600, p=rng.dirichlet(np.ones(v) * 0.5)).astype(np.int64)
    fs = []
    for it in range(1, 8):
        fs.append(class_bigram_objective(ids, exchange_classes(ids, v, c, iterations=it)))
    assert all(b >= a - 1e-6 for a, b in zip(fs, fs[1:]))
    cls = exchange_classes(ids, v, c, iterations=200)
    best = class_bigram_objective(ids, cls)
    sizes = np.bincount(cls, minlength=c)
    for w in range(v):
        if sizes[cls[w]] == 1:
            continue
        for k in range(c):
            moved = cls.copy()
            moved[w] = k
            assert class_bigram_objective(ids, moved) <= best + 1e-6


def reference_exchange(ids, v, c, passes):
    """The exchange algorithm written plainly: each word in turn (by decreasing count, words absent from the text
    and the last word of a class left alone) goes to the class whose F, recomputed from scratch, is highest."""
    counts = np.bincount(ids, minlength=v)
    order = np.argsort(-counts.astype(np.float64), kind="stable")
    cls = np.empty(v, dtype=np.int64)
    cls[order] = np.arange(v) % c
    for _ in range(passes):
        for w in order:
            if counts[w] == 0 or np.sum(cls == cls[w]) == 1:
                continue
            scores = []
            for k in range(c):
                moved = cls.copy()
                moved[w] = k
                scores.append(class_bigram_objective(ids, moved))
            cls[w] = int(np.argmax(scores))
    return cls


@pytest.mark.parametrize("seed, v, c, n", [(0, 40, 5, 3_000), (1, 25, 3, 2_000), (2, 6, 2, 200_000)])
def test_compiled_pass_moves_each_word_where_a_plain_recount_would(seed, v, c, n):
    """The compiled pass keeps x log x of the class counts in tables and reads small counts' from a lookup table;
    move for move it must agree with recomputing F for every candidate. The last case's class pair counts pass
    the lookup table's 65,536 (the logarithm path); some words of the first never occur."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(v) * 0.5)
    if seed == 0:
        p[:4] = 0
        p /= p.sum()
    ids = rng.choice(v, size=n, p=p).astype(np.int64)
    for passes in (1, 3):
        assert np.array_equal(exchange_classes(ids, v, c, iterations=passes),
                              reference_exchange(ids, v, c, passes))


def test_auto_classes_are_computed_once_per_text_and_settings(tmp_path, monkeypatch):
    """``--word-classes auto``'s clustering is kept in the cache: the same stream, V, C, counts and passes give the
    cached classes without clustering again; any of them changed, or the cached file damaged, clusters anew; a
    cache that cannot be written still returns the classes."""
    from sampledlm.data import clusters

    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))
    calls = []
    real = clusters.exchange_classes
    monkeypatch.setattr(clusters, "exchange_classes", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    ids = two_topic_stream(seed=1)
    first = clusters.cached_exchange_classes(ids, 21, 5)
    assert np.array_equal(first, real(ids, 21, 5)) and len(calls) == 1
    (saved,) = (tmp_path / "cache" / "word-classes").iterdir()
    assert np.array_equal(clusters.cached_exchange_classes(ids.astype(np.int32), 21, 5), first) and len(calls) == 1
    for args, kw in (((ids, 21, 4), {}), ((ids[:-3], 21, 5), {}), ((ids, 21, 5), {"iterations": 2}),
                     ((ids, 21, 5, np.arange(21)[::-1]), {})):
        clusters.cached_exchange_classes(*args, **kw)
    assert len(calls) == 5
    saved.write_bytes(b"not a numpy file")
    assert np.array_equal(clusters.cached_exchange_classes(ids, 21, 5), first) and len(calls) == 6
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "file-not-dir"))
    (tmp_path / "file-not-dir").write_text("x")
    assert np.array_equal(clusters.cached_exchange_classes(ids, 21, 5), first) and len(calls) == 7


def test_class_bigram_perplexity_is_the_class_models_own():
    ids = two_topic_stream(50)
    cls = exchange_classes(ids, 21, 5)
    c = cls[ids]
    lp = 0.0
    for a, b, wa, wb in zip(c[:-1], c[1:], ids[:-1], ids[1:]):
        p_class = ((c[:-1] == a) & (c[1:] == b)).sum() / (c[:-1] == a).sum()
        p_word = (ids[1:] == wb).sum() / (c[1:] == b).sum()
        lp += np.log(p_class * p_word)
    assert class_bigram_perplexity(ids, cls) == pytest.approx(np.exp(-lp / (len(ids) - 1)), rel=1e-9)


def test_classes_file_round_trip_and_errors(tmp_path):
    words = ["</s>", "<unk>", "a", "b", "c"]
    cls = np.array([0, 0, 1, 1, 2])
    path = str(tmp_path / "c.txt")
    write_word_classes(path, words, cls, np.array([9, 0, 5, 4, 1]))
    back, missing = read_word_classes(path, words)
    assert missing == 0 and np.array_equal(back, cls)
    back, missing = read_word_classes(path, words + ["new"])
    assert missing == 1 and back[-1] == 3 and np.array_equal(back[:5], cls)
    (tmp_path / "bad.txt").write_text("0\ta\t1\nnotabs here\n")
    with pytest.raises(UserError, match=r"bad.txt:2:"):
        read_word_classes(str(tmp_path / "bad.txt"), words)
    (tmp_path / "twice.txt").write_text("0\ta\n1\ta\n")
    with pytest.raises(UserError, match=r"twice.txt:2: word 'a' already"):
        read_word_classes(str(tmp_path / "twice.txt"), words)
    (tmp_path / "bits.txt").write_text("0110\ta\t5\n0111\tb\t4\n0110\tc\t1\n")  # brown-cluster's paths file
    back, missing = read_word_classes(str(tmp_path / "bits.txt"), words)
    assert missing == 2 and back[2] == back[4] != back[3] and back[0] == back[1]
    assert read_word_classes(str(tmp_path / "bits.txt"), words, labels=True)[2] == ["0110", "0111", None]


def test_a_malformed_classes_line_is_refused_not_misread(tmp_path):
    """A space typed for the first tab made a class '1 just' of the next column's word; a count that is not a
    number passed; one label of a tree's bit paths typed wrong turned the whole tree into flat classes in silence."""
    words = ["</s>", "<unk>", "a", "b", "c", "d"]
    for text, why in (("0\ta\t3\n1 b\tc\t2\n", r"f.txt:2: class label '1 b' holds white space"),
                      ("0\ta\t3\n1\tc d\t2\n", r"f.txt:2: word 'c d' holds white space"),
                      ("0\ta\t3\n1\tc\tabc\n", r"f.txt:2: count 'abc' is not a whole number"),
                      ("0\ta\t3\n1\tc\t2\t9\n", r"f.txt:2: expected 'class<TAB>word\[<TAB>count\]'"),
                      ("00\ta\n01\tb\n1x\tc\n10\td\n", r"f.txt:3: class label '1x' is not a bit path, while 3 of")):
        (tmp_path / "f.txt").write_text(text)
        with pytest.raises(UserError, match=why):
            read_word_classes(str(tmp_path / "f.txt"), words)
    # decimal class numbers hold a few bit paths (0, 1, 10, 11) and are no tree; nor is a file without long paths
    for labels in (range(12), range(3)):
        (tmp_path / "n.txt").write_text("".join(f"{k}\tw{k}\t1\n" for k in labels))
        assert read_word_classes(str(tmp_path / "n.txt"), [f"w{k}" for k in labels])[1] == 0


@pytest.mark.parametrize("objective", ["class", "hsm"])
def test_classes_command_feeds_word_classes(objective, tmp_path, run_in_process):
    from helpers import write_word_corpus

    from sampledlm.neural import rundir as runs

    for split, n, seed in (("train", 80, 1), ("valid", 20, 2), ("test", 20, 3)):
        write_word_corpus(tmp_path / f"{split}.txt", n, seed)
    r = run_in_process("classes", "train.txt", "--classes", "4", "-o", "cls.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "4 classes" in r.stderr and "perplexity" in r.stderr
    r = run_in_process("classes", "train.txt", "-o", "cls.txt", cwd=tmp_path)
    assert r.returncode == 1 and "already exists" in r.stderr
    r = run_in_process("train", "--train", "train.txt", "--valid", "valid.txt", "-o", "run", "--objective", objective,
                       "--word-classes", "cls.txt", "--order", "3", "-d", "6", "--hidden", "8", "--epochs", "1",
                       "--batch-size", "16", "--threads", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "cls.txt").unlink()  # the structure is saved with the model: loading needs no file
    model, obj, vocab, config = runs.load_run(str(tmp_path / "run"))
    assert config["objective"]["options"]["word_classes"] == str(tmp_path / "cls.txt")
    r = run_in_process("eval", "run", "--test", "test.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert 1 < json.loads(r.stdout)["ppl"] < 2 * len(vocab)
    if objective == "class":
        assert obj.num_classes == 4
    else:  # the top of the tree splits whole classes: each class's words share the path above their subtree
        assert obj.nodes.shape[1] >= 2


def test_word_classes_errors(tmp_path, run_in_process):
    from helpers import write_word_corpus

    write_word_corpus(tmp_path / "train.txt", 40, 1)
    base = ("train", "--train", "train.txt", "--valid", "train.txt", "-o", "run", "--order", "3", "-d", "4",
            "--hidden", "4", "--epochs", "1")
    r = run_in_process(*base, "--objective", "class", "--word-classes", "nope.txt", cwd=tmp_path)
    assert r.returncode == 1 and "nope.txt: no such word-classes file" in r.stderr
    (tmp_path / "c.txt").write_text("0\tthe\n")
    r = run_in_process(*base, "--objective", "class", "--word-classes", "c.txt", "--classes", "3", cwd=tmp_path)
    assert r.returncode == 1 and "--classes and --word-classes" in r.stderr
    r = run_in_process(*base, "--objective", "softmax", "--word-classes", "c.txt", cwd=tmp_path)
    assert r.returncode == 1 and "--word-classes" in r.stderr and "softmax" in r.stderr
    assert not (tmp_path / "run").exists()


def test_clustering_with_progress_says_what_it_does_off_a_terminal(capsys, monkeypatch):
    """Off a terminal (a log), a clustering run said nothing before its first pass's line, however long counting
    the bigrams of a large text took; it now says what comes and how many passes at most."""
    monkeypatch.setenv("SAMPLEDLM_PROGRESS_SECONDS", "0.000001")
    monkeypatch.delenv("SAMPLEDLM_NO_PROGRESS", raising=False)
    ids = np.random.default_rng(0).integers(0, 50, size=2000)
    exchange_classes(ids, 50, 5, iterations=3, progress=True)
    err = capsys.readouterr().err
    assert err.startswith("word classes: counting the bigrams of 2,000 tokens (V = 50, C = 5), then up to 3 exchange")
    assert "word classes (exchange pass 1 of at most 3):" in err
    monkeypatch.setenv("SAMPLEDLM_NO_PROGRESS", "1")
    exchange_classes(ids, 50, 5, iterations=3, progress=True)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("stop_after", [1, 2])
def test_clustering_stopped_between_passes_resumes_to_the_same_classes(tmp_path, monkeypatch, stop_after):
    """A run stopped while clustering (``--word-classes auto``) keeps the state of its last whole pass and takes it
    up there: the passes already done are not run again, and the classes equal an uninterrupted search's; the pass
    state is gone once the classes are cached, and a damaged one is passed by."""
    from sampledlm.data import clusters

    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(3)
    ids = np.concatenate([two_topic_stream(seed=2), rng.integers(0, 40, 3000)])
    passes = []
    whole = exchange_classes(ids, 40, 6, report=lambda it, moved: passes.append(it))
    assert len(passes) > stop_after, "the search must need more passes than the stop leaves"
    real = clusters.exchange_classes

    def stopped(*a, **k):
        def stop(done, cls):
            k_checkpoint(done, cls)
            if done == stop_after:
                raise KeyboardInterrupt

        k_checkpoint = k["checkpoint"]
        return real(*a, **{**k, "checkpoint": stop})

    monkeypatch.setattr(clusters, "exchange_classes", stopped)
    with pytest.raises(KeyboardInterrupt):
        clusters.cached_exchange_classes(ids, 40, 6)
    (state,) = (tmp_path / "cache" / "word-classes").iterdir()
    assert state.name.endswith(".pass.npz")
    resumed_from = []
    monkeypatch.setattr(clusters, "exchange_classes",
                        lambda *a, **k: resumed_from.append(k["resume"][0]) or real(*a, **k))
    assert np.array_equal(clusters.cached_exchange_classes(ids, 40, 6), whole)
    assert resumed_from == [stop_after]
    assert [p.name.endswith(".npy") for p in (tmp_path / "cache" / "word-classes").iterdir()] == [True]
    damaged = tmp_path / "cache" / "word-classes" / "x.pass.npz"
    damaged.write_bytes(b"PK\x03\x04 cut short")
    assert clusters._read_pass_state(str(damaged), 40, 6) is None


def test_classes_command_reuses_a_finished_clustering(tmp_path, run_in_process, private_cache):
    """`sampledlm classes` goes through the classes' cache: the same text and settings a second time write the same
    file without clustering again, and say so; other settings cluster anew."""
    from helpers import write_word_corpus

    write_word_corpus(tmp_path / "train.txt", 80, 1)
    first = run_in_process("classes", "train.txt", "--classes", "4", "-o", "a.txt", cwd=tmp_path)
    assert first.returncode == 0 and "pass 1:" in first.stderr, first.stderr
    again = run_in_process("classes", "train.txt", "--classes", "4", "-o", "b.txt", cwd=tmp_path)
    assert again.returncode == 0 and "already cached" in again.stderr and "pass 1:" not in again.stderr
    assert (tmp_path / "a.txt").read_text() == (tmp_path / "b.txt").read_text()
    other = run_in_process("classes", "train.txt", "--classes", "3", "-o", "c.txt", cwd=tmp_path)
    assert other.returncode == 0 and "pass 1:" in other.stderr
