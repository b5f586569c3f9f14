"""Maximum-entropy LMs: features, sparse normaliser, gradients, training, model files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sampledlm.maxent import FeatureSet, FeatureSpec, MaxEntModel, TrainConfig, train
from sampledlm.maxent import kernels
from sampledlm.data.vocab import Vocab

WORDS = ["</s>", "<unk>", "a", "b", "c", "d", "e"]


def stream(text: str) -> np.ndarray:
    """Sentences separated by '|' -> id stream (each sentence followed by </s> = 0)."""
    idx = {w: i for i, w in enumerate(WORDS)}
    out = []
    for s in text.split("|"):
        out += [idx[w] for w in s.split()] + [0]
    return np.array(out, dtype=np.int32)


def random_stream(n_sent=60, V=12, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sent):
        L = rng.integers(1, 8)
        w = rng.integers(2, V, size=L)
        w[1:] = np.where(rng.random(L - 1) < 0.5, (w[:-1] + 1) % (V - 2) + 2, w[1:])  # some structure
        out += list(w) + [0]
    return np.array(out, dtype=np.int32)


def test_spec_parse():
    s = FeatureSpec.parse("feat-ii")
    assert s.names == ("unigram", "bigram", "trigram", "skip-bigram", "skip-trigram", "trigger")
    assert FeatureSpec.parse("bigram,4gram").names == ("unigram", "bigram", "4gram")
    assert dict(FeatureSpec.parse("4gram").context_types())["4gram"] == (3, 2, 1)
    from sampledlm.errors import UserError
    with pytest.raises(UserError):
        FeatureSpec.parse("bigram,fivegram")


def test_ngram_and_skip_features_by_hand():
    ids = stream("a b c|b c d")  # positions: a b c </s> b c d </s>
    V = len(WORDS)
    fs = FeatureSet.build(ids, V, FeatureSpec.parse("bigram,trigram,skip-bigram,skip-trigram"))
    bos = V
    # contexts seen: bigram w-1 over the 8 positions
    assert fs.ctx_keys[0].tolist() == sorted({bos, 2, 3, 4, 5})
    # the pairs of bigram context 'b' (=3): followed by c (=4) twice
    g_b = int(np.searchsorted(fs.ctx_keys[0], 3))
    assert fs.gword[fs.gptr[g_b]:fs.gptr[g_b + 1]].tolist() == [4]
    # skip-bigram w-2 -> w: (a, c), (b, </s>), (<s>, b) at sentence starts' second word ...
    off = fs.offsets
    sk = fs.ctx_keys[2]
    g_a = off[2] + int(np.searchsorted(sk, 2))
    assert fs.gword[fs.gptr[g_a]:fs.gptr[g_a + 1]].tolist() == [4]  # a _ c
    # active features of 'd' (position 6): bigram c, trigram (b c), skip-bigram b, skip-trigram (<s> b)
    hptr, hfeat = fs.active(ids, np.array([6]))
    tri = 3 * (V + 1) + 4
    want = [off[0] + np.searchsorted(fs.ctx_keys[0], 4), off[1] + np.searchsorted(fs.ctx_keys[1], tri),
            off[2] + np.searchsorted(sk, 3), off[3] + np.searchsorted(fs.ctx_keys[3], bos * (V + 1) + 3)]
    assert hfeat.tolist() == [int(x) for x in want]
    # an unseen context is not active
    hptr, hfeat = fs.active(stream("e e"), np.array([1]))
    assert len(hfeat) == 2  # bigram 'e' and trigram (<s> e) unseen; skip-bigram <s>, skip-trigram (<s> <s>) seen
    assert fs.pair_counts()["total"] == V + len(fs.gword)


def test_trigger_features_by_hand():
    # 'e' three or more tokens back reliably precedes 'a' (window covers the previous sentence)
    ids = stream("|".join(["e b c", "d d a"] * 10 + ["b c", "d d c"] * 10))
    V = len(WORDS)
    spec = FeatureSpec.parse("bigram,trigger", trigger_window=6, trigger_gap=2, trigger_pairs=3, trigger_min_count=2,
                              trigger_min_lift=1.0)
    fs = FeatureSet.build(ids, V, spec)
    g_e = fs.offsets[-2] + int(np.searchsorted(fs.trigger_words, 6))
    assert 6 in fs.trigger_words.tolist()
    assert 2 in fs.gword[fs.gptr[g_e]:fs.gptr[g_e + 1]].tolist()  # e -> a selected
    assert len(fs.gword) - fs.pair_counts()["bigram"] <= 3
    # window words exclude the last `gap` tokens and </s>
    from sampledlm.maxent.features import window_words
    r, w = window_words(stream("a b c d"), np.array([4]), window=6, gap=2)
    assert w.tolist() == [2, 3]  # a, b (c, d are within the gap)


def models(objective, hash_size=None, spec="feat-ii", seed=0):
    ids = random_stream(seed=seed)
    V = 12
    fs = FeatureSet.build(ids, V, FeatureSpec.parse(spec, trigger_window=5, trigger_min_count=1, trigger_min_lift=1.0), hash_size=hash_size)
    m = MaxEntModel(fs, objective, alpha=0.5)
    rng = np.random.default_rng(seed)
    m.u = rng.normal(size=V)
    m.theta = rng.normal(size=fs.num_params)
    return m, ids


@pytest.mark.parametrize("objective", ["softmax", "binary"])
@pytest.mark.parametrize("hash_size", [None, 7])
def test_sparse_normaliser_equals_brute_force(objective, hash_size):
    from sampledlm.objectives.base import Scorer

    m, ids = models(objective, hash_size)
    assert isinstance(m, Scorer)
    ctx = m.context(ids)
    fast = m.log_prob_targets(ctx, ids.astype(np.int64))
    brute = m.log_prob(ctx)
    np.testing.assert_allclose(fast, brute[np.arange(len(ids)), ids].numpy(), rtol=1e-10, atol=1e-10)
    assert np.allclose(torch.logsumexp(brute, 1).numpy(), 0)
    # the Scorer methods agree with score_all
    allv = m.score_all(ctx).numpy()
    t = torch.from_numpy(ids.astype(np.int64))
    np.testing.assert_allclose(m.score_targets(ctx, t).numpy(), allv[np.arange(len(ids)), ids])
    w = torch.tensor([[0, 5, 3]] * len(ids))
    np.testing.assert_allclose(m.score_each(ctx, w).numpy(), allv[:, [0, 5, 3]])
    np.testing.assert_allclose(m.score_shared(ctx, torch.tensor([2, 7])).numpy(), allv[:, [2, 7]])
    n1 = len(ids) // 3
    first, second = m.score_blocks(ctx, [n1, len(ids) - n1], torch.tensor([2, 7, 4]), [2, 1])
    np.testing.assert_allclose(first.numpy(), allv[:n1, [2, 7]])
    np.testing.assert_allclose(second.numpy(), allv[n1:, [4]])


def _loss(m, ctx, k, t):
    """Brute-force loss of position k: softmax -log p(t|h); binary sum_w logloss of classifier w."""
    a = m.score_all(ctx).numpy()[k]
    if m.objective == "softmax":
        return -(a[t] - np.log(np.exp(a).sum()))
    y = np.zeros_like(a)
    y[t] = 1
    return float(np.sum(np.logaddexp(0, a) - y * a))


@pytest.mark.parametrize("objective", ["softmax", "binary"])
def test_gradient_matches_finite_differences(objective):
    """One SGD step (lr 1, one position, block 1) moves every parameter by minus its gradient."""
    m, ids = models(objective)
    m.u *= 0.3
    m.theta *= 0.3
    ctx = m.context(ids)
    f = m.features
    for k in (0, 5, 17, 33):
        t = int(ids[k])
        u, th = m.u.copy(), m.theta.copy()
        order = np.array([k], np.int64)
        targets = ids.astype(np.int64)
        st = kernels.step(1.0, block=1)  # no L2, AdaGrad or averaging accumulators: plain SGD
        w = kernels.Weights(m.u, m.theta)
        if objective == "softmax":
            kernels.softmax_epoch(order, targets, ctx.active, f.pairs, w, st)
        else:
            neg = kernels.negatives(np.arange(len(ids)), np.ones(m.num_words, bool), 1.0, 0, 0)
            kernels.binary_epoch(order, targets, ctx.active, f.pairs, w, st, neg)
        grad_u, grad_th = u - m.u, th - m.theta
        m.u, m.theta = u, th
        eps = 1e-6
        for name, vec, grad in (("u", m.u, grad_u), ("theta", m.theta, grad_th)):
            for i in np.random.default_rng(k).choice(len(vec), size=min(len(vec), 25), replace=False):
                old = vec[i]
                vec[i] = old + eps
                lp = _loss(m, ctx, k, t)
                vec[i] = old - eps
                lm = _loss(m, ctx, k, t)
                vec[i] = old
                assert (lp - lm) / (2 * eps) == pytest.approx(grad[i], abs=1e-6), (name, i, k)


@pytest.mark.parametrize("objective", ["softmax", "binary"])
def test_averaged_parameters_are_the_mean_over_positions(objective):
    """The kernels' sparse accumulators give the mean of the parameters after each position."""
    m, ids = models(objective, spec="feat-i")
    ctx, f, targets = m.context(ids), m.features, ids.astype(np.int64)
    hist, uhist = np.zeros(len(m.theta)), np.zeros(m.num_words)  # AdaGrad, so steps differ per position
    l2g = np.full(f.num_history_features, 0.1)
    order = np.random.default_rng(4).permutation(len(ids))[:40].astype(np.int64)
    u, th = m.u.copy(), m.theta.copy()
    uavg, avg = np.zeros_like(u), np.zeros_like(th)
    E = np.zeros(0)

    def epoch(order, u, th, uavg, avg, age, hist, uhist):
        st = kernels.step(0.5, l2g, uhist, hist, uavg, avg, age, block=1)
        if objective == "softmax":
            kernels.softmax_epoch(order, targets, ctx.active, f.pairs, kernels.Weights(u, th), st)
        else:
            neg = kernels.negatives(np.arange(len(ids)), np.ones(m.num_words, bool), 0.5, 3, 1)
            kernels.binary_epoch(order, targets, ctx.active, f.pairs, kernels.Weights(u, th), st, neg)

    age0 = 7  # the average already holds 7 positions (all at the starting values)
    uavg[:] = 0.0
    epoch(order, u, th, uavg, avg, age0, hist.copy(), uhist.copy())
    got_u, got_th = kernels.averaged(u, uavg, age0 + len(order)), kernels.averaged(th, avg, age0 + len(order))
    # the same pass one position at a time (block 1 flushes u after every position), snapshotting each
    u2, th2, h2, uh2 = m.u.copy(), m.theta.copy(), hist.copy(), uhist.copy()
    snaps_u, snaps_th = [u2.copy()] * age0, [th2.copy()] * age0
    for k in order:
        epoch(np.array([k], np.int64), u2, th2, E, E, 0, h2, uh2)
        snaps_u.append(u2.copy())
        snaps_th.append(th2.copy())
    np.testing.assert_allclose(u, u2, rtol=0, atol=1e-12)  # averaging does not change the trajectory
    np.testing.assert_allclose(got_u, np.mean(snaps_u, axis=0), rtol=0, atol=1e-10)
    np.testing.assert_allclose(got_th, np.mean(snaps_th, axis=0), rtol=0, atol=1e-10)
    assert not np.allclose(got_th, th)  # the average differs from the last value


@pytest.mark.parametrize("average", ["epoch", "run", "auto"])
def test_training_with_averaging(average):
    ids = random_stream(n_sent=300, seed=1)
    valid = random_stream(n_sent=60, seed=2)
    fs = FeatureSet.build(ids, 12, FeatureSpec.parse("feat-i"))
    m = MaxEntModel(fs, "binary", 1.0)
    m.init_unigram(np.bincount(ids, minlength=12))
    before = m.perplexity(valid)
    hist = train(m, ids, valid, TrainConfig(objective="binary", epochs=3, seed=3, average=average))
    assert m.perplexity(valid) < before
    assert m.perplexity(valid) == pytest.approx(min(h["valid_ppl"] for h in hist))  # the model kept is the best one
    with pytest.raises(ValueError, match="average"):
        TrainConfig(average="polyak")


def test_negative_sampling_is_a_hash():
    def draw(epoch):
        return [kernels.keep_negative(np.uint64(kernels.negative_key(3, epoch, p)), w, 0.1) for p in range(200) for w in range(50)]

    keep = draw(1)
    assert 0.08 < np.mean(keep) < 0.12
    assert keep == draw(1)
    assert keep != draw(2)


@pytest.mark.parametrize("objective,alpha,l2", [("softmax", 1.0, 0.0), ("binary", 1.0, 1.0), ("binary", 0.3, 0.0),
                                                ("softmax", 0.5, 1.0)])
def test_training_improves_and_round_trips(tmp_path, objective, alpha, l2):
    ids = random_stream(n_sent=300, seed=1)
    valid = random_stream(n_sent=60, seed=2)
    V = 12
    fs = FeatureSet.build(ids, V, FeatureSpec.parse("feat-i"))
    m = MaxEntModel(fs, objective, alpha)
    m.init_unigram(np.bincount(ids, minlength=V))
    before = m.perplexity(valid)
    hist = train(m, ids, valid, TrainConfig(objective=objective, alpha=alpha, epochs=4, seed=3, l2=l2))
    m.calibrate()
    after = m.perplexity(valid)
    assert after < before
    assert hist[-1]["epoch"] >= 1
    vocab = Vocab(["</s>", "<unk>"] + [f"w{i}" for i in range(2, V)], np.bincount(ids, minlength=V))
    m.save(str(tmp_path / "m"), vocab)
    m2, v2 = MaxEntModel.load(str(tmp_path / "m"))
    assert v2 == vocab and m2.objective == objective and m2.calibrated
    assert m2.perplexity(valid) == after
    np.testing.assert_array_equal(m2.theta, m.theta)


def test_load_errors(tmp_path):
    from sampledlm.errors import UserError
    with pytest.raises(UserError, match="config.json"):
        MaxEntModel.load(str(tmp_path))
    (tmp_path / "config.json").write_text("{oops")
    with pytest.raises(UserError, match="config.json.*line 1"):
        MaxEntModel.load(str(tmp_path))


def test_two_ranks_give_the_model_of_one_rank(tmp_path):
    from sampledlm.maxent.shard import ShardJob, train_sharded

    ids = random_stream(n_sent=200, seed=4)
    valid = random_stream(n_sent=40, seed=5)
    V = 12
    counts = np.bincount(ids, minlength=V)
    vocab = Vocab(["</s>", "<unk>"] + [f"w{i}" for i in range(2, V)], counts)
    spec = FeatureSpec.parse("feat-ii", trigger_window=5, trigger_min_count=1, trigger_min_lift=1.0)
    cfg = TrainConfig(objective="binary", alpha=0.3, epochs=3, seed=9)
    for world in (1, 2):
        train_sharded(ShardJob(ids, valid, counts, spec, cfg, out_dir=str(tmp_path / f"r{world}"), vocab=vocab), world)
    one, _ = MaxEntModel.load(str(tmp_path / "r1"))
    two, _ = MaxEntModel.load(str(tmp_path / "r2"))
    np.testing.assert_array_equal(one.u, two.u)
    np.testing.assert_array_equal(one.theta, two.theta)
    assert one.perplexity(valid) == two.perplexity(valid)
    assert np.count_nonzero(one.theta) > 0


def test_binary_inference_matches_the_binary_objective():
    """Our eq. 8 renormalisation is the generic ``binary`` objective's inference rule."""
    try:
        from sampledlm.objectives.binary import Binary
    except ImportError:
        pytest.skip("sampledlm.objectives.binary not available")
    m, ids = models("binary")
    ctx = m.context(ids)
    theirs = Binary(neg_rate=m.alpha).log_prob(m, ctx).double().numpy()
    ours = m.log_prob_targets(ctx, ids.astype(np.int64))
    np.testing.assert_allclose(ours, theirs[np.arange(len(ids)), ids], rtol=1e-5, atol=1e-5)


def test_cli_train_and_eval(tmp_path):
    from click.testing import CliRunner
    from sampledlm.cli import cli

    words = ["w%d" % i for i in range(15)]
    rng = np.random.default_rng(0)

    def write(name, n):
        lines = [" ".join(words[j] for j in rng.integers(0, 15, size=rng.integers(2, 9))) for _ in range(n)]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        return str(tmp_path / name)

    train_p, valid_p, test_p = write("train.txt", 200), write("valid.txt", 30), write("test.txt", 30)
    out = str(tmp_path / "m")
    r = CliRunner().invoke(cli, ["maxent", "train", train_p, valid_p, "-o", out, "--features", "feat-ii",
                                 "--neg-rate", "0.5", "--epochs", "2", "--trigger-min-count", "1"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["maxent", "eval", out, test_p, "--json"])
    assert r.exit_code == 0, r.output
    assert '"ppl"' in r.output
    r = CliRunner().invoke(cli, ["maxent", "train", train_p, valid_p, "-o", out, "--features", "bogus"])
    assert r.exit_code != 0


@pytest.mark.parametrize("lift", [1.0, 1.5])
def test_trigger_pairs_are_the_top_mutual_information_pairs_counted_by_position(lift):
    """select_triggers against a brute-force 2x2 table per pair, counted over positions: P(next is w) is the share
    of positions whose target is w, however many window words each position has; only pairs whose lift
    P(w | v in window) / P(w) exceeds ``lift`` qualify."""
    from sampledlm.maxent.features import select_triggers

    rng = np.random.default_rng(3)
    V, n = 8, 300
    windows = [sorted(set(rng.integers(0, V, size=rng.integers(1, 5)).tolist())) for _ in range(n)]
    targets = np.array([(w[0] + 1) % V if rng.random() < 0.6 else int(rng.integers(0, V)) for w in windows])
    v = np.array([x for w in windows for x in w])
    t = np.array([targets[i] for i, w in enumerate(windows) for _ in w])
    got = select_triggers(v, t, targets, V, num_pairs=5, min_count=2, min_lift=lift)

    def ami(a, b):
        cells = np.zeros((2, 2))
        for w, y in zip(windows, targets):
            cells[int(a in w), int(y == b)] += 1
        p = cells / n
        px, py = p.sum(1), p.sum(0)
        return sum(p[i, j] * np.log(p[i, j] / (px[i] * py[j])) for i in (0, 1) for j in (0, 1) if p[i, j] > 0), p
    scored = []
    for a in range(V):
        for b in range(V):
            m, p = ami(a, b)
            if p[1, 1] * n >= 2 and p[1, 1] / p[1].sum() > lift * p[:, 1].sum():
                scored.append((-m, a * V + b))
    want = sorted(k for _, k in sorted(scored)[:5])
    assert got.tolist() == want
