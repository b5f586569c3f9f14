"""Sampled output objectives: losses and gradients against hand computations on tiny cases,
the softmax limits, binary calibration, sparse O(S h) gradients, options."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sampledlm.errors import UserError
from sampledlm.objectives.output import OutputLayer
from sampledlm.objectives import OBJECTIVES, SampledOutput, make_objective
from sampledlm.objectives.sampled import Candidates, masked_fill

V = 7
COUNTS = np.array([40, 25, 12, 9, 6, 3, 1])
SAMPLED = ["is", "css-is", "css-bernoulli", "nce", "neg", "blackout", "ranking"]


class ScoreScorer:
    """A scorer whose ctx IS the score matrix ``[N, V]``: gradients w.r.t. ctx are dLoss/da."""

    def __init__(self, allow_all=True):
        self.num_words = V
        self.allow_all = allow_all
        self.bias_shift = 0.0

    def score_targets(self, a, t):
        return a.gather(1, t.unsqueeze(1)).squeeze(1)

    def score_shared(self, a, w):
        return a[:, w]

    def score_each(self, a, w):
        return a.gather(1, w)

    def score_all(self, a):
        assert self.allow_all, "a sampled objective must not score all V words"
        return a

    def shift_bias(self, delta):
        self.bias_shift += float(delta)


def scores(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, V, generator=g, dtype=torch.float64) * 1.5).requires_grad_()


def grad_of(obj, a, t, cand=None, scorer=None):
    loss = obj(scorer or ScoreScorer(allow_all=False), a, t, cand) if cand is not None else obj(
        scorer or ScoreScorer(allow_all=False), a, t)
    (g,) = torch.autograd.grad(loss, a)
    return loss.item(), g.numpy()


def q_of(obj):
    return obj.noise.numpy()


T = torch.tensor([0, 3, 5])
BAG = torch.tensor([1, 3, 3, 6])  # shared bag with a repeat and a true word (3) inside


@pytest.mark.parametrize("true_term", [True, False])
def test_is_loss_and_gradient_by_hand(true_term):
    obj = make_objective("is", COUNTS, samples=4, true_term=true_term)
    a = scores()
    loss, g = grad_of(obj, a, T, Candidates(BAG))
    A, q = a.detach().numpy(), q_of(obj)
    want, gw = 0.0, np.zeros_like(A)
    for i, y in enumerate(T.tolist()):
        r = np.exp(A[i, BAG]) / q[BAG]
        r_y = np.exp(A[i, y]) / q[y] if true_term else 0.0  # the true word's own term
        want += -A[i, y] + np.log((r.sum() + r_y) / len(BAG))
        gw[i, y] += r_y / (r.sum() + r_y) - 1
        np.add.at(gw[i], BAG.numpy(), r / (r.sum() + r_y))
    assert loss == pytest.approx(want / 3)
    assert np.allclose(g, gw / 3)


def test_the_true_term_bounds_the_is_loss_below_where_the_plain_estimator_is_not():
    """Raise the true words' scores by 1,000 (none of them in the bag): the plain loss falls by about 1,000,
    the loss with the true term stays above -log(S q(y))."""
    bag = torch.tensor([1, 2, 4, 6])
    for true_term in (True, False):
        obj = make_objective("is", COUNTS, samples=4, true_term=true_term)
        a = scores().detach().clone()
        a[torch.arange(3), T] += 1e3
        loss, _ = grad_of(obj, a.requires_grad_(), T, Candidates(bag))
        floor = float(np.mean(-np.log(4 * q_of(obj)[T.numpy()])))
        assert (loss >= floor - 1e-5) == true_term, (true_term, loss, floor)  # log q is float32


def test_css_is_loss_and_gradient_by_hand():
    obj = make_objective("css-is", COUNTS, samples=2)
    a = scores()
    words = torch.tensor([[1, 0, 2, 4], [3, 3, 1, 1], [0, 6, 6, 2]])  # per example, S + S' = 4 draws
    keep = torch.tensor([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
    loss, g = grad_of(obj, a, T, Candidates(words, keep))
    A, q = a.detach().numpy(), q_of(obj)
    want, gw = 0.0, np.zeros_like(A)
    for i, y in enumerate(T.tolist()):
        d = words[i][keep[i]].numpy()
        kappa = (1 - q[y]) / (len(d) * q[d])  # 1 / (S q_y(d)), q_y = q / (1 - q(y))
        z = np.exp(A[i, y]) + (kappa * np.exp(A[i, d])).sum()
        want += -A[i, y] + np.log(z)
        gw[i, y] += np.exp(A[i, y]) / z - 1
        np.add.at(gw[i], d, kappa * np.exp(A[i, d]) / z)
    assert loss == pytest.approx(want / 3)
    assert np.allclose(g, gw / 3)
    assert np.all(np.abs(g * 3) <= 1 + 1e-12)  # CSS weights lie in [-1, 1] (eq. 21)


def test_css_bernoulli_loss_by_hand():
    obj = make_objective("css-bernoulli", COUNTS, samples=3)
    a = scores()
    obj.sampler()
    b = obj.inclusion.double().numpy()
    assert b.sum() == pytest.approx(3.0, rel=1e-5)
    words = torch.tensor([0, 2, 5])
    keep = words.unsqueeze(0) != T.unsqueeze(1)
    loss, g = grad_of(obj, a, T, Candidates(words, keep))
    A = a.detach().numpy()
    want = 0.0
    for i, y in enumerate(T.tolist()):
        d = [w for w in words.tolist() if w != y]
        want += -A[i, y] + np.log(np.exp(A[i, y]) + (np.exp(A[i, d]) / b[d]).sum())
    assert loss == pytest.approx(want / 3, rel=1e-5)


def softmax_grad(a, t):
    return (torch.softmax(a.detach(), 1) - F.one_hot(t, V)).numpy() / len(t)


@pytest.mark.parametrize("mode", ["shared", "each"])
def test_css_bernoulli_with_all_b_one_is_exactly_softmax(mode):
    torch.manual_seed(0)
    obj = make_objective("css-bernoulli", COUNTS, samples=V, sample_mode=mode)
    a = scores()
    loss, g = grad_of(obj, a, T)
    soft = make_objective("softmax")
    assert loss == pytest.approx(soft(ScoreScorer(), a, T).item())
    assert np.allclose(g, softmax_grad(a, T))


@pytest.mark.parametrize("name", ["is", "css-is"])
def test_importance_sampling_with_q_prop_exp_score_approaches_softmax(name):
    torch.manual_seed(1)
    a = scores(n=1)
    t = torch.tensor([2])
    obj = make_objective(name, COUNTS, samples=40_000)
    obj.set_noise(torch.softmax(a.detach()[0], 0))  # q ∝ exp(score): the ideal proposal
    loss, g = grad_of(obj, a, t)
    soft = make_objective("softmax")
    extra = math.log1p(1 / 40_000) if name == "is" else 0.0  # is: the true term adds Z / S
    assert loss == pytest.approx(soft(ScoreScorer(), a, t).item() + extra, abs=1e-6)  # Z~ = Z exactly
    assert np.allclose(g, softmax_grad(a, t), atol=0.01)


def test_nce_loss_gradient_and_weights_in_unit_interval():
    obj = make_objective("nce", COUNTS, samples=4)
    a = scores()
    loss, g = grad_of(obj, a, T, Candidates(BAG))
    A, q, k = a.detach().numpy(), q_of(obj), 4
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    want, gw = 0.0, np.zeros_like(A)
    for i, y in enumerate(T.tolist()):
        dy = A[i, y] - np.log(k * q[y])
        dn = A[i, BAG] - np.log(k * q[BAG])
        want += -np.log(sig(dy)) - np.log(1 - sig(dn)).sum()
        w_pos = k * q[y] / (np.exp(A[i, y]) + k * q[y])  # Labeau 2014: kPn / (Pθ + kPn)
        w_neg = np.exp(A[i, BAG]) / (np.exp(A[i, BAG]) + k * q[BAG])
        assert 0 <= w_pos <= 1 and np.all((0 <= w_neg) & (w_neg <= 1))
        gw[i, y] -= w_pos
        np.add.at(gw[i], BAG.numpy(), w_neg)
    assert loss == pytest.approx(want / 3)
    assert np.allclose(g, gw / 3)


def test_nce_learned_normaliser_is_a_parameter():
    obj = make_objective("nce", COUNTS, samples=3, learn_norm=True)
    assert [n for n, _ in obj.named_parameters()] == ["log_norm"]
    obj(ScoreScorer(allow_all=False), scores(), T).backward()
    assert obj.log_norm.grad is not None
    assert list(make_objective("nce", COUNTS).parameters()) == []


def test_negative_sampling_eq29_by_hand():
    obj = make_objective("neg", COUNTS, samples=2)
    a = scores()
    words = torch.tensor([0, 3, 1, 6])
    keep = torch.tensor([[False, True, True, False], [True, False, True, False], [True, True, False, False]])
    loss, _ = grad_of(obj, a, T, Candidates(words, keep))
    A = a.detach().numpy()
    ls = lambda x: -np.log1p(np.exp(-x))  # noqa: E731  log σ
    want = sum(-ls(A[i, y]) - np.mean([ls(-A[i, d]) for d in words[keep[i]].tolist()]) for i, y in enumerate(T.tolist()))
    assert loss == pytest.approx(want / 3)


def test_blackout_eq30_31_by_hand():
    obj = make_objective("blackout", COUNTS, samples=3)
    a = scores()
    words = torch.tensor([[1, 2, 4], [0, 1, 2], [0, 1, 6]])
    loss, g = grad_of(obj, a, T, Candidates(words, None))
    A, q = a.detach().numpy(), q_of(obj)
    want = 0.0
    for i, y in enumerate(T.tolist()):
        d = words[i].numpy()
        r_y, r_d = np.exp(A[i, y]) / q[y], np.exp(A[i, d]) / q[d]
        z = r_y + r_d.sum()
        want += -np.log(r_y / z) - np.log(1 - r_d / z).sum()
    assert loss == pytest.approx(want / 3)
    assert np.isfinite(g).all()


def _blackout_by_autograd(l_true, l_neg):
    """BlackOut's loss written with autograd's functions: the reference for its closed-form gradient."""
    from sampledlm.objectives.nce import log1mexp

    lt = l_true.unsqueeze(1)
    log_z = torch.logsumexp(torch.cat([lt, l_neg], 1), dim=1, keepdim=True)
    neg = torch.nan_to_num(log1mexp(l_neg - log_z), neginf=0.0).masked_fill(torch.isinf(l_neg), 0.0).sum(1)
    return (log_z - lt).squeeze(1) - neg


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-4)])
def test_blackout_closed_form_gradient_matches_autograd(dtype, tol):
    from sampledlm.objectives.nce import blackout_loss

    g = torch.Generator().manual_seed(0)
    n, s = 64, 50
    l_true = torch.randn(n, generator=g, dtype=dtype)
    l_neg = 3 * torch.randn(n, s, generator=g, dtype=dtype)
    l_neg[torch.rand(n, s, generator=g) < 0.1] = float("-inf")  # negatives not kept
    l_neg[0, 0], l_true[1], l_neg[2, :] = 30.0, 30.0, float("-inf")  # one holding all the mass; none kept
    w = torch.rand(n, generator=g, dtype=dtype)
    got, want = [], []
    for f, out in ((blackout_loss, got), (_blackout_by_autograd, want)):
        a, b = l_true.clone().requires_grad_(), l_neg.clone().requires_grad_()
        loss = f(a, b)
        out += [loss.detach(), *torch.autograd.grad((loss * w).sum(), [a, b])]
    for x, y in zip(got, want):
        assert torch.isfinite(x).all()
        torch.testing.assert_close(x, y, atol=tol, rtol=tol)


@pytest.mark.parametrize("shared,masked", [(True, True), (False, True), (True, False)])
def test_blackout_compiled_loop_matches_the_torch_form(shared, masked):
    """The compiled loss (subtraction of log q, mask, loss and gradient in one loop) against :func:`blackout_loss`
    of the masked differences: a negative holding all the mass, one near half of it, an example with none kept."""
    from sampledlm.objectives.nce import CompiledBlackOutLoss, blackout_loss, blackout_loss_of_scores

    g = torch.Generator().manual_seed(1)
    n, s = 48, 300
    l_true = torch.randn(n, generator=g)
    scores = 3 * torch.randn(n, s, generator=g)
    logq = torch.randn(1 if shared else n, s, generator=g) - 8
    keep = torch.rand(n, s, generator=g) > 0.1 if masked else None
    scores[0, 0], l_true[1] = 60.0, 40.0  # all the mass on a negative (capped); on the true word
    scores[4] = logq[0 if shared else 4] - 30.0  # a negative near half of Z, 0.57 of it, the rest tiny
    scores[4, 2] = l_true[4] + logq[0 if shared else 4, 2] + 0.3
    if masked:
        keep[2, :] = False  # nothing kept
        keep[0, 0] = keep[4, 2] = True
    w = torch.rand(n, generator=g)
    got, want = [], []
    for f, out in ((lambda a, b: CompiledBlackOutLoss.apply(a, b, logq, keep), got),
                   (lambda a, b: blackout_loss(a, masked_fill(b - logq, keep, float("-inf"))), want)):
        a, b = l_true.clone().requires_grad_(), scores.clone().requires_grad_()
        loss = f(a, b)
        out += [loss.detach(), *torch.autograd.grad((loss * w).sum(), [a, b])]
    for x, y in zip(got, want):
        assert torch.isfinite(x).all()
        torch.testing.assert_close(x, y, atol=1e-4, rtol=1e-4)
    # on the CPU in float32 the objective takes the compiled loop; float64 takes the torch form
    a = l_true.clone().requires_grad_()
    assert blackout_loss_of_scores(a, scores, logq, keep).grad_fn.name().startswith("CompiledBlackOutLoss")
    assert not blackout_loss_of_scores(a.double(), scores.double(), logq.double(), keep).grad_fn.name().startswith(
        "CompiledBlackOutLoss")


def test_ranking_default_margin_is_log_v_minus_1():
    obj = make_objective("ranking", COUNTS, samples=2)
    assert obj.delta() == pytest.approx(math.log(V - 1))
    a = scores()
    words = torch.tensor([1, 2, 4])
    keep = words.unsqueeze(0) != T.unsqueeze(1)
    keep[0, 2] = False
    loss, _ = grad_of(obj, a, T, Candidates(words, keep))
    A = a.detach().numpy()
    ls = lambda x: -np.log1p(np.exp(-x))  # noqa: E731
    want = sum(-np.mean([ls(A[i, y] - A[i, d] - math.log(V - 1)) for d in words[keep[i]].tolist()])
               for i, y in enumerate(T.tolist()))
    assert loss == pytest.approx(want / 3)
    assert make_objective("ranking", COUNTS, margin=1.0).delta() == 1.0


@pytest.mark.parametrize("name", ["css-is", "neg", "blackout", "ranking"])
@pytest.mark.parametrize("mode", ["shared", "each"])
def test_negatives_exclude_the_true_word(name, mode):
    torch.manual_seed(5)
    obj = make_objective(name, COUNTS, samples=5, sample_mode=mode)
    t = torch.randint(V, (50,))
    cand = obj.draw(t)
    words = cand.words.expand(len(t), -1) if cand.words.dim() == 1 else cand.words
    assert not (words == t.unsqueeze(1))[cand.keep].any()
    assert torch.all(cand.keep.sum(1) == 5)  # the spares (S') sufficed


def test_binary_alpha_one_is_eq6():
    obj = make_objective("binary", COUNTS, neg_rate=1.0)
    a = scores()
    loss = obj(ScoreScorer(), a, T)
    (g,) = torch.autograd.grad(loss, a)
    A = a.detach().numpy()
    sig = 1 / (1 + np.exp(-A))
    onehot = np.eye(V)[T.numpy()]
    eq6 = -(onehot * np.log(sig) + (1 - onehot) * np.log(1 - sig)).sum(1).mean()
    assert loss.item() == pytest.approx(eq6)
    assert np.allclose(g.numpy(), (sig - onehot) / 3)  # eq. 7: P_b(w|h) - δ


def test_binary_subsampled_by_hand_and_variable_rate():
    obj = make_objective("binary", COUNTS, neg_rate=0.5)
    a = scores()
    words = torch.tensor([0, 2, 6])
    loss = obj(ScoreScorer(allow_all=False), a, T, Candidates(words, words.unsqueeze(0) != T.unsqueeze(1)))
    A = a.detach().numpy()
    sp = lambda x: np.log1p(np.exp(x))  # noqa: E731  softplus
    want = sum(sp(-A[i, y]) + sum(sp(A[i, w]) for w in words.tolist() if w != y) for i, y in enumerate(T.tolist()))
    assert loss.item() == pytest.approx(want / 3)
    torch.manual_seed(0)
    big = make_objective("binary", None, neg_rate=0.1)
    sizes = [len(big.draw(torch.tensor([0]), 2000).words) for _ in range(50)]
    assert np.mean(sizes) == pytest.approx(200, rel=0.05)


def _negatives_of(cand, i):
    """Example i's negative words, as a sorted list, from shared or per-example candidates."""
    words = cand.words if cand.words.dim() == 1 else cand.words[i]
    return sorted(words[cand.keep[i]].tolist())


def test_binary_fixed_subsets_are_per_example_stay_fixed_and_are_saved():
    """Fixed subsets are keyed on the example (its stream position), not on its target word: two
    examples with the same target get different negatives, the same example always the same ones."""
    torch.manual_seed(0)
    counts = np.ones(400, dtype=np.int64)
    obj = make_objective("binary", counts, neg_rate=0.1, neg_subset="fixed")
    assert obj.uses_positions and not obj.sparse_output
    t, p = torch.tensor([5, 5, 9]), torch.tensor([10, 11, 12])
    c1, c2 = obj.draw(t, 400, p), obj.draw(t, 400, p)
    sets = [_negatives_of(c1, i) for i in range(3)]
    assert sets == [_negatives_of(c2, i) for i in range(3)]
    assert sets[0] != sets[1] and 5 not in sets[0] and 5 not in sets[1] and 9 not in sets[2]
    assert all(abs(len(s) - 40) < 20 for s in sets)
    assert _negatives_of(obj.draw(torch.tensor([7, 9]), 400, torch.tensor([3, 12])), 1) == sets[2]  # batch-free
    other = make_objective("binary", counts, neg_rate=0.1, neg_subset="fixed")
    other.load_state_dict(obj.state_dict())
    assert [_negatives_of(other.draw(t, 400, p), i) for i in range(3)] == sets
    with pytest.raises(ValueError, match="positions"):
        obj.draw(t, 400)


def test_binary_fixed_subsets_are_shifts_of_one_bernoulli_subset():
    """Example p's negatives are the base subset shifted by hash(seed, p) mod V, minus its target."""
    from sampledlm.objectives.binary import position_hash

    torch.manual_seed(0)
    V = 300
    obj = make_objective("binary", np.ones(V, dtype=np.int64), neg_rate=0.1, neg_subset="fixed")
    t, p = torch.tensor([3, 3, 40, 299, 0]), torch.tensor([0, 1, 2, 10**9, 77])
    keep = obj.fixed_negatives(t, p, V)
    base = torch.nonzero(obj.neg_base).flatten()
    for i in range(5):
        o = int(position_hash(obj.neg_seed, p[i : i + 1]) % V)
        want = sorted(set(((base + o) % V).tolist()) - {int(t[i])})
        assert torch.nonzero(keep[i]).flatten().tolist() == want


def test_binary_fixed_dense_loss_equals_the_per_example_loss():
    """Training scores all of V and masks each row; the loss must equal the one computed from each
    example's own subset, one example at a time."""
    torch.manual_seed(0)
    V = 300
    obj = make_objective("binary", np.ones(V, dtype=np.int64), neg_rate=0.1, neg_subset="fixed")
    out = OutputLayer(V, 6)
    h, t, p = torch.randn(5, 6), torch.tensor([3, 3, 40, 299, 0]), torch.tensor([8, 9, 10, 11, 12])
    keep = obj.fixed_negatives(t, p, V)
    each = []
    for i in range(5):
        a = out.score_all(h[i : i + 1])[0]
        each.append(F.softplus(-a[t[i]]) + F.softplus(a[keep[i]]).sum())
    assert obj(out, h, t, positions=p).item() == pytest.approx(torch.stack(each).mean().item(), rel=1e-6)


@pytest.mark.parametrize("subset", ["fixed", "variable"])
def test_binary_every_classifier_sees_alpha_of_the_negatives(subset):
    """Each (example, classifier) pair is a negative with probability alpha, so every classifier w
    is a negative for about alpha of the targets: none is left with positives only."""
    torch.manual_seed(0)
    V, alpha = 300, 0.1
    obj = make_objective("binary", np.ones(V, dtype=np.int64), neg_rate=alpha, neg_subset=subset)
    targets = torch.arange(V).repeat(4)
    share = torch.zeros(V)  # per classifier: the share of examples it is a negative for, over 20 batches
    positions = torch.arange(len(targets))
    for _ in range(20):  # (variable subsets: one batch holds only G subsets; fixed ones never change)
        cand = obj.draw(targets, V, positions)
        neg = torch.zeros(len(targets), V)
        if cand.words.dim() == 1:
            neg[:, cand.words] = cand.keep.float()
        else:
            neg.scatter_(1, cand.words, cand.keep.float())
        share += neg.mean(0) / 20
    assert share.mean().item() == pytest.approx(alpha, rel=0.15)
    assert (share > alpha / 4).float().mean().item() > 0.95


def test_binary_calibration_shifts_log_odds_by_log_alpha_exactly_once():
    torch.manual_seed(0)
    alpha = 0.05
    out = OutputLayer(V, 4, sparse=True)
    with torch.no_grad():
        out.bias.normal_()
    obj = make_objective("binary", COUNTS, neg_rate=alpha)
    h = torch.randn(3, 4)
    with torch.no_grad():
        before = out.score_all(h).clone()
        lp_before = obj.log_prob(out, h)  # applies the shift in flight
        obj.finalize(out)
        after = out.score_all(h)
        assert torch.allclose(after - before, torch.full_like(before, math.log(alpha)), atol=1e-6)
        lp_after = obj.log_prob(out, h)
        assert torch.allclose(lp_before, lp_after, atol=1e-6)
        sig = torch.sigmoid(before + math.log(alpha))
        assert torch.allclose(lp_after.exp(), sig / sig.sum(1, keepdim=True), atol=1e-6)  # eq. 8
        obj.finalize(out)  # no second shift
        assert torch.allclose(out.score_all(h), after)
    fresh = make_objective("binary", COUNTS, neg_rate=alpha)
    fresh.load_state_dict(obj.state_dict())
    assert bool(fresh.calibrated)
    fresh.finalize(out)
    assert torch.allclose(out.score_all(h), after)  # a reloaded model is not calibrated twice
    # training after calibration still sees the uncalibrated scores
    torch.manual_seed(1)
    l_cal = fresh(out, h, T)
    torch.manual_seed(1)
    uncal = make_objective("binary", COUNTS, neg_rate=alpha)
    out.shift_bias(-math.log(alpha))
    assert l_cal.item() == pytest.approx(uncal(out, h, T).item(), rel=1e-5)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_log_prob_is_normalised_and_forward_runs(name):
    torch.manual_seed(0)
    opts = {"samples": 4} if name in SAMPLED else {}
    obj = make_objective(name, COUNTS, **opts)
    out = OutputLayer(V, 5, sparse=obj.sparse_output)
    obj.bind(out)
    h = torch.randn(6, 5)
    loss = obj(out, h, torch.randint(V, (6,)))
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    lp = obj.log_prob(out, h)
    assert lp.shape == (6, V)
    assert torch.allclose(lp.exp().sum(1), torch.ones(6), atol=1e-5)


@pytest.mark.parametrize("name", SAMPLED + ["binary"])
def test_sparse_gradients_touch_only_candidate_rows(name):
    torch.manual_seed(0)
    big_v, h, n, s = 5000, 16, 8, 20
    counts = (1000 / np.arange(1, big_v + 1)).astype(np.int64) + 1
    opts = {"samples": s} if name in SAMPLED else {"neg_rate": 0.004}
    obj = make_objective(name, counts, **opts)
    assert obj.sparse_output
    out = OutputLayer(big_v, h, sparse=True)
    x = torch.randn(n, h, requires_grad=True)
    obj(out, x, torch.randint(big_v, (n,))).backward()
    gw, gb = out.weight.grad, out.bias.grad
    assert gw.is_sparse and gb.is_sparse
    rows = gw.coalesce().indices().shape[1]
    assert rows <= n + obj.extra_draws() + s + 200 if name in SAMPLED else rows <= n + 200
    opt = torch.optim.SGD(out.parameters(), lr=0.1)
    opt.step()  # SGD accepts the sparse gradients
    assert torch.isfinite(out.weight).all()


def test_sampled_forward_never_scores_all_words():
    for name in SAMPLED:
        obj = make_objective(name, COUNTS, samples=3)
        obj(ScoreScorer(allow_all=False), scores(), T)


def test_same_seed_same_loss():
    a = scores()
    vals = []
    for _ in range(2):
        torch.manual_seed(11)
        obj = make_objective("css-is", COUNTS, samples=3)
        vals.append(obj(ScoreScorer(), a, T).item())
    assert vals[0] == vals[1]


def test_options_are_checked():
    with pytest.raises(UserError, match="--neg-rate"):
        make_objective("css-is", COUNTS, neg_rate=0.1)
    with pytest.raises(UserError, match="--samples"):
        make_objective("nce", COUNTS, samples=0)
    with pytest.raises(UserError, match="--sample-mode"):
        make_objective("is", COUNTS, sample_mode="both")
    with pytest.raises(UserError, match="--neg-rate"):
        make_objective("binary", COUNTS, neg_rate=0.0)
    with pytest.raises(UserError, match="--neg-subset"):
        make_objective("binary", COUNTS, neg_subset="sometimes")
    with pytest.raises(UserError, match="--sampler"):
        make_objective("neg", COUNTS, sampler="magic")
    assert make_objective("is", COUNTS, sampler="multinomial", samples=5, noise_power=0.0).noise_power == 0.0


def test_noise_is_saved_with_the_objective():
    obj = make_objective("blackout", COUNTS, noise_power=1.0)
    other = make_objective("blackout", np.ones(V, dtype=np.int64))
    other.load_state_dict(obj.state_dict())
    assert torch.allclose(other.noise, obj.noise)
    assert torch.allclose(other.log_noise.exp().double(), obj.noise)


def test_uniform_noise_without_counts():
    obj = make_objective("neg", None, samples=3)
    obj(ScoreScorer(), scores(), T)
    assert torch.allclose(obj.noise, torch.full((V,), 1.0 / V, dtype=torch.float64))


def test_sampled_output_module_trains_and_evaluates():
    torch.manual_seed(0)
    big_v = 300
    counts = (1000 / np.arange(1, big_v + 1)).astype(np.int64) + 1
    out = SampledOutput(8, big_v, objective="css-is", counts=counts, samples=30)
    x = torch.randn(64, 8)
    y = (x[:, 0] > 0).long() * 7  # learnable: words 0 or 7
    opt = torch.optim.SGD(out.parameters(), lr=0.5)
    with torch.no_grad():
        start = -out.log_prob(x).gather(1, y.unsqueeze(1)).mean().item()
    for _ in range(60):
        opt.zero_grad()
        out(x, y).backward()
        opt.step()
    with torch.no_grad():
        end = -out.log_prob(x).gather(1, y.unsqueeze(1)).mean().item()
    assert end < start - 1.0
    assert out.weight.shape == (big_v, 8) and out.bias.shape == (big_v, 1)
    b = SampledOutput(8, big_v, objective="binary", counts=counts, neg_rate=0.1)
    b.finalize()
    assert bool(b.objective.calibrated)
    with pytest.raises(ValueError):
        SampledOutput(8, 10, counts=counts)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_state_round_trips_through_safetensors(name, tmp_path):
    from safetensors.torch import load_file, save_file

    opts = {"neg_subset": "fixed"} if name == "binary" else {}
    obj = make_objective(name, COUNTS, **opts)
    obj.bind(OutputLayer(V, 5))
    if name == "binary":
        obj.finalize(ScoreScorer())
    path = str(tmp_path / "obj.safetensors")
    save_file(dict(obj.state_dict()), path)
    other = make_objective(name, COUNTS, **opts)
    other.bind(OutputLayer(V, 5))
    other.load_state_dict(load_file(path))
    for k, v in obj.state_dict().items():
        assert torch.equal(other.state_dict()[k], v), k


def test_binary_variable_groups_share_negatives_within_a_group():
    torch.manual_seed(2)
    obj = make_objective("binary", None, neg_rate=0.1, neg_groups=4)
    t = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    cand = obj.draw(t, 2000)
    words, keep = cand.words, cand.keep
    assert words.dim() == 1 and len(torch.unique(words)) == len(words)
    assert not (words.unsqueeze(0) == t.unsqueeze(1))[keep].any()
    others = (words.unsqueeze(0) != t[0]) & (words.unsqueeze(0) != t[4])
    assert torch.equal(keep[0] & others[0], keep[4] & others[0])  # examples 0 and 4: group 0
    assert not torch.equal(keep[0], keep[1])
    assert keep.sum(1).float().mean().item() == pytest.approx(200, rel=0.15)
    assert len(words) == pytest.approx(2000 * (1 - 0.9 ** 4), rel=0.1)
    single = make_objective("binary", None, neg_rate=0.1, neg_groups=1).draw(t, 2000)
    assert single.keep.sum(0).max().item() == len(t)  # one subset for the whole batch


def test_sampled_output_docstring_example_runs():
    import doctest

    import sampledlm.objectives.module as module

    result = doctest.testmod(module, verbose=False)
    assert result.attempted > 0 and result.failed == 0


def test_prepare_starts_biases_at_the_log_unigram():
    out = OutputLayer(V, 3)
    p = COUNTS / COUNTS.sum()
    make_objective("nce", COUNTS).prepare(out)
    assert np.allclose(out.bias.detach().squeeze(1).numpy(), np.log(p), atol=1e-5)
    out = OutputLayer(V, 3)
    make_objective("binary", COUNTS, neg_rate=0.1).prepare(out)
    assert np.allclose(out.bias.detach().squeeze(1).numpy(), np.log(p) - math.log(0.1), atol=1e-5)
    out = OutputLayer(V, 3)
    make_objective("softmax", COUNTS).prepare(out)  # no-op by default
    assert torch.all(out.bias == 0)


def test_binary_reads_files_with_other_fixed_subset_buffers():
    from sampledlm.neural.rundir import load_state_into

    obj = make_objective("binary", COUNTS, neg_rate=0.1)
    other = {"calibrated": torch.tensor(True), "neg_fixed": torch.zeros(8, len(COUNTS), dtype=torch.bool)}
    load_state_into(obj, other, "objective.safetensors")
    assert bool(obj.calibrated)
    with pytest.raises(UserError, match="unexpected"):
        load_state_into(make_objective("binary", COUNTS), {**other, "stray": torch.zeros(1)}, "objective.safetensors")


def test_neg_is_read_at_its_optimum_as_the_distribution_it_was_trained_on():
    """NEG's pointwise optimum is a_w = log P(w|h) - log q(w) (include_true: the true word may be its own negative,
    so the optimum is exact): minimising the expected loss over free scores and reading them with NEG's exact rule
    gives P back, where a plain softmax of the scores gives P / q renormalised."""
    obj = make_objective("neg", counts=COUNTS, samples=V, exclude_true=False)
    p = torch.tensor([0.02, 0.05, 0.3, 0.1, 0.2, 0.13, 0.2], dtype=torch.float64)
    q = obj.noise.to(torch.float64)
    a = torch.zeros(1, V, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([a], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-14)

    def expected_loss():  # -sum_w [P(w) log σ(a_w) + q(w) log(1 - σ(a_w))], the loss in expectation over draws
        opt.zero_grad()
        loss = -(p * F.logsigmoid(a[0]) + q * F.logsigmoid(-a[0])).sum()
        loss.backward()
        return loss

    opt.step(expected_loss)
    ours = obj.log_prob(ScoreScorer(), a.detach()).exp()[0]
    assert torch.allclose(ours, p.float(), atol=1e-5)
    plain = torch.softmax(a.detach()[0], 0)
    assert not torch.allclose(plain, p, atol=1e-2)  # the scores alone are not the distribution
