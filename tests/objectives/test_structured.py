"""Structured and self-normalised output objectives (class, hsm, adaptive, selfnorm): exact normalisation with real models, the
structures they build, PyTorch's adaptive softmax as a reference, and train / eval / resume through the tool."""

import json

import numpy as np
import pytest
import torch
from helpers import config_for

from sampledlm.neural import rundir as runs
from sampledlm.neural.ffnn import FFNN
from sampledlm.neural.lm import perplexity
from sampledlm.neural.rnn import GRULM
from sampledlm.neural.trainer import TrainingInterrupted, new_run, resume_run
from sampledlm.objectives import OBJECTIVES, SampledOutput, make_objective, optimizer_pair
from sampledlm.objectives.classes import frequency_classes
from sampledlm.objectives.output import OutputLayer
from sampledlm.objectives.structure import huffman_tree, word_paths

STRUCTURED = ["class", "hsm", "adaptive"]
SAMPLED = ["is", "css-is", "css-bernoulli", "nce", "neg", "blackout", "ranking"]
NEW = STRUCTURED + ["selfnorm"]
V = 60
COUNTS = (3000 / np.arange(1, V + 1) ** 1.1).astype(np.int64) + 1


def zipf_stream(n, seed=0):
    rng = np.random.default_rng(seed)
    p = COUNTS / COUNTS.sum()
    return rng.choice(V, size=n, p=p).astype(np.int64)


def model_of(kind):
    torch.manual_seed(0)
    if kind == "ffnn":
        return FFNN.build(V, order=3, embed_dim=8, hidden=[12], dropout=0.0, sparse_output=True)
    return GRULM.build(V, embed_dim=8, hidden=12, dropout=0.0, tie=False, sparse_output=True)


def scaled(model, obj, scale=3.0):
    """Larger random weights, so the distributions are far from uniform."""
    with torch.no_grad():
        for p in list(model.parameters()) + list(obj.parameters()):
            p.mul_(scale)


@pytest.mark.parametrize("kind", ["ffnn", "gru"])
@pytest.mark.parametrize("name", NEW)
def test_sums_to_one_over_v_with_real_models(name, kind):
    model = model_of(kind)
    obj = make_objective(name, COUNTS)
    obj.bind(model)
    scaled(model, obj)
    check_exact(model, obj, kind, name in STRUCTURED)


def check_exact(model, obj, kind, loss_is_log_p, n=300):
    """On sampled histories: log_prob sums to one over V, log_prob_targets agrees with it and (structured
    objectives) the training loss is -mean log P."""
    model.eval()
    ids = zipf_stream(n)
    with torch.no_grad():
        for ctx, targets, _, *rows in model.eval_contexts(ids, batch_size=64 if kind == "ffnn" else 1):
            lp = obj.log_prob(model, ctx).double()
            if rows:  # feed-forward: one row per distinct history, ``rows`` maps predictions to them
                ctx, lp = ctx[rows[0]], lp[rows[0]]
            assert lp.shape == (len(targets), V)
            assert torch.allclose(lp.exp().sum(1), torch.ones(len(targets), dtype=torch.float64), atol=1e-5)
            assert lp.exp().min() > 0
            direct = obj.log_prob_targets(model, ctx, targets).double()
            assert torch.allclose(direct, lp.gather(1, targets.unsqueeze(1)).squeeze(1), atol=1e-5)
            if loss_is_log_p:
                assert obj(model, ctx, targets).item() == pytest.approx(-direct.mean().item(), rel=1e-5)


@pytest.mark.parametrize("name", STRUCTURED)
def test_gradient_of_the_loss_is_the_exact_log_likelihoods(name):
    """The batched training loss (padded blocks / paths, tails per cluster) has the gradient of
    -mean log P computed from the exact [N, V] log_prob, so training optimises the evaluated model."""
    torch.manual_seed(1)
    out = OutputLayer(V, 6)
    obj = make_objective(name, COUNTS)
    obj.bind(out)
    x = torch.randn(20, 6, dtype=torch.float64)
    out.double(), obj.double()
    y = torch.from_numpy(zipf_stream(20, seed=3))
    params = list(out.parameters()) + list(obj.parameters())
    g1 = torch.autograd.grad(obj(out, x, y), params, allow_unused=True)
    g2 = torch.autograd.grad(-obj.log_prob(out, x).gather(1, y.unsqueeze(1)).mean(), params, allow_unused=True)
    for a, b in zip(g1, g2):
        if a is None or b is None:
            assert a is None or not a.to_dense().any()
            continue
        assert torch.allclose(a.to_dense().float(), b.to_dense().float(), atol=1e-5)


def test_adaptive_log_prob_equals_pytorchs_with_the_same_weights():
    torch.manual_seed(0)
    h, cutoffs = 16, [8, 25]
    ref = torch.nn.AdaptiveLogSoftmaxWithLoss(h, V, cutoffs, div_value=2.0)
    # a vocabulary whose ids are NOT in frequency order: our ranks must map them onto PyTorch's classes
    perm = np.random.default_rng(0).permutation(V)
    counts = np.empty(V, dtype=np.int64)
    counts[perm] = COUNTS  # word perm[r] has rank r
    obj = make_objective("adaptive", counts, cutoffs=cutoffs, div_value=2.0)
    out = OutputLayer(V, h)
    obj.bind(out)
    assert obj.order.tolist() == perm.tolist()
    with torch.no_grad():
        out.weight[torch.from_numpy(perm[:8])] = ref.head.weight[:8]
        out.bias.zero_()
        obj.cluster.weight.copy_(ref.head.weight[8:])
        obj.cluster.bias.zero_()
        for i in range(2):
            obj.tail[i][0].weight.copy_(ref.tail[i][0].weight)
            obj.tail[i][1].weight.copy_(ref.tail[i][1].weight)
    x = torch.randn(12, h)
    ranks = torch.randint(V, (12,))
    with torch.no_grad():
        ours = obj.log_prob(out, x)
        theirs = ref.log_prob(x)
        assert torch.allclose(ours[:, torch.from_numpy(perm)], theirs, atol=1e-5)
        words = torch.from_numpy(perm)[ranks]
        assert obj(out, x, words).item() == pytest.approx(ref(x, ranks).loss.item(), rel=1e-5)


def test_adaptive_default_cutoffs_and_bad_cutoffs():
    from sampledlm.errors import UserError

    obj = make_objective("adaptive", COUNTS)
    obj.bind(OutputLayer(V, 8))
    cum = np.cumsum(np.sort(COUNTS)[::-1]) / COUNTS.sum()
    c0, c1 = obj.cutoffs[:2]
    assert cum[c0 - 1] >= 0.8 > cum[c0 - 2] and cum[c1 - 1] >= 0.95
    for bad in ([5, 5], [0, 10], [10, V]):
        with pytest.raises(UserError, match="--cutoffs"):
            make_objective("adaptive", COUNTS, cutoffs=bad).bind(OutputLayer(V, 8))


@pytest.mark.parametrize("binning, share", [("mass", lambda c: c), ("sqrt", np.sqrt)])
def test_frequency_classes_bin_equal_mass_of_their_share(binning, share):
    counts = (1e6 / np.arange(1, 10001)).astype(np.int64) + 1
    cls = frequency_classes(counts, len(counts), 100, binning)
    n = cls.max() + 1
    assert 90 <= n <= 100 and set(np.unique(cls)) == set(range(n))
    w = share(counts.astype(np.float64))
    mass = np.bincount(cls, weights=w) / w.sum()
    singles = np.bincount(cls) == 1  # a word heavier than 1/C fills a class alone
    assert mass[~singles].max() < 2.5 / 100
    assert np.all(np.diff(cls[np.argsort(-counts, kind="stable")]) >= 0)  # consecutive frequency bins


def test_class_defaults_sqrt_bins_and_two_sqrt_v_classes_and_smaller_rare_classes():
    counts = (1e6 / np.arange(1, 10001)).astype(np.int64) + 1
    obj = make_objective("class", counts)
    obj.bind(OutputLayer(len(counts), 4))
    assert 180 <= obj.num_classes <= 200  # 2 sqrt(V) = 200 by default
    assert np.array_equal(obj.word_class.numpy(), frequency_classes(counts, len(counts), 200, "sqrt"))
    # the largest (rarest) class is far smaller with sqrt bins than with equal-mass bins
    assert np.bincount(frequency_classes(counts, len(counts), 100, "sqrt")).max() * 3 < \
        np.bincount(frequency_classes(counts, len(counts), 100, "mass")).max()


def test_a_class_model_keeps_the_classes_it_was_saved_with(tmp_path):
    """Weights written with other classes (another binning, an earlier version) load with their own classes."""
    import torch

    from sampledlm.store import load_state_into

    counts = (1e4 / np.arange(1, 501)).astype(np.int64) + 1
    old = make_objective("class", counts, binning="mass", classes=22)
    old.bind(OutputLayer(500, 4))
    new = make_objective("class", counts, classes=22)
    new.bind(OutputLayer(500, 4))
    assert not torch.equal(old.word_class, new.word_class)
    load_state_into(new, old.state_dict(), "x")
    assert torch.equal(new.word_class, old.word_class) and new.num_classes == old.num_classes
    ctx = torch.randn(3, 4)
    layer = OutputLayer(500, 4)
    assert torch.allclose(new.log_prob(layer, ctx), old.log_prob(layer, ctx))


def test_class_step_reads_only_the_targets_class_blocks():
    big_v = 5000
    counts = (1e5 / np.arange(1, big_v + 1)).astype(np.int64) + 1
    obj = make_objective("class", counts, classes=70)
    out = OutputLayer(big_v, 8, sparse=True)
    obj.bind(out)
    y = torch.tensor([0, 1, 2, 3])  # frequent words: small classes
    obj(out, torch.randn(4, 8), y).backward()
    rows = out.weight.grad.coalesce().indices()[0]
    blocks = set(obj.word_class[y].tolist())
    assert set(obj.word_class[rows].tolist()) == blocks
    assert len(rows) == int(obj.class_size[list(blocks)].sum())


@pytest.mark.parametrize("sparse", [True, False])
def test_class_term_is_the_same_per_class_or_against_the_batchs_union(monkeypatch, sparse):
    """The within-class softmax is computed per class (score_blocks) for large batches and against the
    union of the batch's classes for small ones: the same log-probabilities and gradients either way."""
    from sampledlm.objectives import classes

    torch.manual_seed(2)
    out = OutputLayer(V, 6, sparse=sparse)
    obj = make_objective("class", COUNTS, classes=7)
    obj.bind(out)
    out.double(), obj.double()
    scaled(out, obj)
    x = torch.randn(300, 6, dtype=torch.float64)
    y = torch.from_numpy(zipf_stream(300, seed=5))
    params = list(out.parameters()) + list(obj.parameters())
    results = []
    for overhead in (-10**9, 10**9):  # force per class, then the union
        monkeypatch.setattr(classes, "PER_CLASS_OVERHEAD", overhead)
        lp = obj.log_prob_targets(out, x, y)
        results.append((lp.detach(), torch.autograd.grad(-lp.mean(), params)))
    exact = obj.log_prob(out, x).gather(1, y.unsqueeze(1)).squeeze(1)
    (lp1, g1), (lp2, g2) = results
    assert torch.allclose(lp1, exact.detach(), atol=1e-10) and torch.allclose(lp2, exact.detach(), atol=1e-10)
    for a, b in zip(g1, g2):
        assert torch.allclose(a.to_dense(), b.to_dense(), atol=1e-10)


def test_class_term_per_example_equals_per_class_in_float32(monkeypatch):
    """A float32 CPU output layer with row-sparse gradients scores each example against its own class (padded
    to the batch's largest, compiled rows read in place): the per-class path's log-probabilities and gradients."""
    from sampledlm.objectives import classes

    torch.manual_seed(3)
    out = OutputLayer(V, 6, sparse=True)
    obj = make_objective("class", COUNTS, classes=7)
    obj.bind(out)
    scaled(out, obj)
    x = torch.randn(300, 6)
    y = torch.from_numpy(zipf_stream(300, seed=6))
    params = list(out.parameters()) + list(obj.parameters())
    assert obj._rows_in_place(out, x) and not obj._rows_in_place(OutputLayer(V, 6, sparse=False), x)
    results = []
    for factor in (0, 10**9):  # force per example, then per class (or the union)
        monkeypatch.setattr(classes, "PER_EXAMPLE_FACTOR", factor)
        lp = obj.log_prob_targets(out, x, y)
        results.append((lp.detach(), torch.autograd.grad(-lp.mean(), params)))
    (lp1, g1), (lp2, g2) = results
    assert torch.allclose(lp1, lp2, atol=1e-5)
    for a, b in zip(g1, g2):
        assert torch.allclose(a.to_dense(), b.to_dense(), atol=1e-6)


def test_huffman_tree_paths_are_short_for_frequent_words():
    counts = np.array([50, 20, 10, 10, 5, 3, 1, 1])
    parent, side = huffman_tree(counts)
    assert parent[-1] == -1 and (parent[:-1] >= len(counts)).all()
    nodes, signs = word_paths(parent, side, len(counts))
    length = (signs != 0).sum(1).numpy()
    assert length[0] == 1 and length[0] <= length[1] <= length[-1]
    p = counts / counts.sum()
    entropy = -(p * np.log2(p)).sum()
    assert entropy <= (p * length).sum() < entropy + 1
    codes = {tuple(s for s in signs[w].tolist() if s) + tuple(nodes[w].tolist()) for w in range(len(counts))}
    assert len(codes) == len(counts)  # every word its own path


def test_hsm_step_reads_only_path_rows():
    big_v = 4096
    counts = np.ones(big_v, dtype=np.int64)  # a balanced tree: 12 nodes per path
    obj = make_objective("hsm", counts)
    out = OutputLayer(big_v, 8, sparse=True)
    obj.bind(out)
    obj(out, torch.randn(3, 8), torch.tensor([5, 6, 4000])).backward()
    rows = out.weight.grad.coalesce().indices()[0]
    assert len(rows) <= 3 * 12 and obj.nodes.shape[1] == 12


@pytest.mark.parametrize("name", NEW)
def test_train_eval_and_reload_through_the_tool(name, tmp_path, run_in_process):
    from helpers import write_word_corpus

    for split, n, seed in (("train", 80, 1), ("valid", 20, 2), ("test", 20, 3)):
        write_word_corpus(tmp_path / f"{split}.txt", n, seed)
    r = run_in_process("train", "--train", "train.txt", "--valid", "valid.txt", "-o", "run", "--objective", name,
                       "--order", "3", "-d", "6", "--hidden", "8", "--epochs", "2", "--batch-size", "16",
                       "--threads", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("eval", "run", "--test", "test.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ppl = json.loads(r.stdout)["ppl"]
    model, objective, vocab, config = runs.load_run(str(tmp_path / "run"))
    assert config["objective"]["name"] == name and type(objective).name == name
    from sampledlm.data.corpus import load_ids

    assert perplexity(model, objective, load_ids(str(tmp_path / "test.txt"), vocab)) == pytest.approx(ppl, rel=1e-6)
    assert 1 < ppl < 2 * len(vocab)  # uniform random words: near V after two epochs
    assert ("unnormalised scoring" in run_in_process("eval", "run", "--test", "test.txt", cwd=tmp_path).stdout) \
        == (name == "selfnorm")


@pytest.mark.parametrize("name", NEW)
def test_resume_gives_the_same_numbers(words_corpus, name):
    config, vocab = config_for(words_corpus, "gru", optimizer="adam", lr=0.01, clip=1.0, epochs=2)
    config["objective"] = {"name": name, "options": {}}
    new_run(str(words_corpus / "a"), config, vocab).train()
    t = new_run(str(words_corpus / "b"), config, vocab)
    t.stop_when = lambda st, n=t.data.num_batches() + 2: st.step >= n
    with pytest.raises(TrainingInterrupted):
        t.train()
    resume_run(str(words_corpus / "b")).train()
    a = runs.load_run(str(words_corpus / "a"))
    b = runs.load_run(str(words_corpus / "b"))
    for x, y in ((a[0], b[0]), (a[1], b[1])):
        for k, v in x.state_dict().items():
            assert torch.equal(v, y.state_dict()[k]), k
    assert [json.loads(line)["valid_ppl"] for line in open(words_corpus / "a" / "metrics.jsonl")] == \
        [json.loads(line)["valid_ppl"] for line in open(words_corpus / "b" / "metrics.jsonl")]


def test_selfnorm_loss_is_cross_entropy_plus_alpha_log_z_squared():
    torch.manual_seed(0)
    out = OutputLayer(V, 5)
    with torch.no_grad():
        out.bias.normal_()
    x, y = torch.randn(7, 5), torch.from_numpy(zipf_stream(7))
    obj = make_objective("selfnorm", COUNTS, selfnorm_alpha=0.3)
    a = out.score_all(x)
    log_z = torch.logsumexp(a, 1)
    want = torch.nn.functional.cross_entropy(a, y) + 0.3 * (log_z ** 2).mean()
    assert obj(out, x, y).item() == pytest.approx(want.item(), rel=1e-6)
    assert torch.allclose(obj.log_normaliser(out, x), log_z)
    assert torch.allclose(obj.unnormalised_log_prob_targets(out, x, y) - log_z, obj.log_prob_targets(out, x, y), atol=1e-5)


def test_selfnorm_starts_at_log_one_over_v_and_drives_log_z_to_zero():
    out = OutputLayer(V, 4)
    obj = make_objective("selfnorm", COUNTS)
    obj.prepare(out)
    assert torch.allclose(out.bias, torch.full((V, 1), -np.log(V)))
    with torch.no_grad():
        out.weight.zero_()
    assert obj.log_normaliser(out, torch.randn(3, 4)).abs().max() < 1e-5

    def trained_log_z(alpha):
        torch.manual_seed(0)
        layer = OutputLayer(V, 4)
        o = make_objective("selfnorm", COUNTS, selfnorm_alpha=alpha)
        o.prepare(layer)
        opt = torch.optim.Adam(layer.parameters(), lr=0.05)
        x = torch.randn(256, 4)
        y = torch.from_numpy(zipf_stream(256, seed=5))
        for _ in range(150):
            opt.zero_grad()
            o(layer, x, y).backward()
            opt.step()
        with torch.no_grad():
            return o.log_normaliser(layer, x).abs().mean().item()

    with_penalty, without = trained_log_z(1.0), trained_log_z(0.0)
    assert with_penalty < 0.5 * without  # seeded: 0.13 against 0.38


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_sampled_output_every_objective_with_plain_adam_or_the_optimizer_pair(name):
    """A user's own model: dense gradients work with torch.optim.Adam(model.parameters()); sparse ones
    with optimizer_pair; both train and give an exact distribution over V."""
    opts = {"samples": 20} if name in SAMPLED else {}
    for sparse in (False, None):
        torch.manual_seed(0)
        trunk = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh())
        head = SampledOutput(8, V, objective=name, counts=COUNTS, sparse=sparse, **opts)
        model = torch.nn.ModuleDict({"trunk": trunk, "head": head})
        optimizers = [torch.optim.Adam(model.parameters(), lr=0.02)] if sparse is False else optimizer_pair(model, 0.02)
        if sparse is None and head.output.sparse:
            assert [type(o).__name__ for o in optimizers] == ["Adam", "SparseAdam"]
        x = torch.randn(64, 4)
        y = (x[:, 0] > 0).long() * 5
        with torch.no_grad():
            start = -head.log_prob(trunk(x)).gather(1, y.unsqueeze(1)).mean().item()
        for _ in range(40):
            for o in optimizers:
                o.zero_grad()
            head(trunk(x), y).backward()
            for o in optimizers:
                o.step()
        head.finalize()
        with torch.no_grad():
            lp = head.log_prob(trunk(x))
        assert torch.allclose(lp.exp().sum(1), torch.ones(64), atol=1e-5)
        assert -lp.gather(1, y.unsqueeze(1)).mean().item() < start - 0.5, (name, sparse)


def test_optimizer_pair_updates_sparse_input_embeddings_row_wise():
    """A user's model with ``nn.Embedding(sparse=True)`` inputs before a sampled output: both tables go to
    SparseAdam (plain Adam refuses sparse gradients), and a step moves only the rows the batch touched."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(V, 8, sparse=True)
    head = SampledOutput(8, V, objective="css-is", counts=COUNTS, samples=5)
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    optimizers = optimizer_pair(model, 0.05)
    assert [type(o).__name__ for o in optimizers] == ["SparseAdam"]
    sparse_ids = {id(p) for p in optimizers[0].param_groups[0]["params"]}
    assert sparse_ids == {id(emb.weight), id(head.output.weight), id(head.output.bias)}
    before = emb.weight.detach().clone()
    x = torch.tensor([1, 2, 2, 7])
    head(emb(x), torch.tensor([3, 4, 5, 6])).backward()
    for o in optimizers:
        o.step()
    moved = set(torch.nonzero((emb.weight.detach() != before).any(1)).flatten().tolist())
    assert moved == {1, 2, 7}


@pytest.mark.parametrize("kind", ["ffnn", "gru"])
@pytest.mark.parametrize("name", ["class", "hsm"])
def test_word_classes_from_a_clustering_stay_exact(name, kind):
    """With classes given (as ``sampledlm classes`` makes them), P still sums to one over V and the
    training loss is still -log P."""
    model = model_of(kind)
    obj = make_objective(name, COUNTS)
    obj.bind(model)
    cls = np.random.default_rng(4).integers(0, 7, size=V)
    obj.set_word_classes(cls)
    scaled(model, obj)
    check_exact(model, obj, kind, True, n=200)
    if name == "class":
        assert torch.equal(obj.word_class, torch.from_numpy(np.unique(cls, return_inverse=True)[1]))


def test_class_huffman_tree_keeps_each_class_a_subtree():
    from sampledlm.objectives.structure import class_huffman_tree

    rng = np.random.default_rng(0)
    cls = rng.integers(0, 6, size=40)
    parent, side = class_huffman_tree(COUNTS[:40], cls)
    assert (parent == -1).sum() == 1 and parent[-1] == -1
    nodes, signs = word_paths(parent, side, 40)
    below: dict[int, set] = {}
    for w in range(40):
        for n in nodes[w][signs[w] != 0].tolist():
            below.setdefault(n, set()).add(w)
    for c in np.unique(cls):
        members = set(np.flatnonzero(cls == c).tolist())
        if len(members) > 1:  # some internal node has exactly the class's words below it
            assert any(s == members for s in below.values())
    # within a class, a frequent word's path is no longer than a rarer one's
    length = (signs != 0).sum(1).numpy()
    for c in np.unique(cls):
        m = np.flatnonzero(cls == c)
        assert length[m[0]] <= length[m[-1]]


@pytest.mark.parametrize("labels, joined", [(["00", "01", "1"], (0, 1)), (["0110", "0111", "00"], (0, 1)),
                                            (["10", "0", "11"], (0, 2)), (["0", "01", "011"], (1, 2))])
def test_bit_path_labels_spell_the_tree_over_the_classes(labels, joined):
    """Brown-style class labels: the two classes whose paths share the longest prefix share a subtree that holds
    nothing else, and the tree is a full binary tree over the V words (so hsm stays exact)."""
    from sampledlm.objectives.structure import class_huffman_tree

    cls = np.arange(12) % 3
    parent, side = class_huffman_tree(np.arange(12, 0, -1), cls, labels)
    children = np.bincount(parent[parent >= 0], minlength=len(parent))
    assert (parent == -1).sum() == 1 and set(children[12:].tolist()) == {2} and not children[:12].any()
    nodes, signs = word_paths(parent, side, 12)
    below: dict[int, set] = {}
    for w in range(12):
        for n in nodes[w][signs[w] != 0].tolist():
            below.setdefault(n, set()).add(w)
    a, b = joined
    assert set(np.flatnonzero((cls == a) | (cls == b)).tolist()) in below.values()


def test_hsm_with_bit_path_classes_stays_exact():
    model = model_of("ffnn")
    obj = make_objective("hsm", COUNTS)
    obj.bind(model)
    cls = np.arange(V) % 4
    obj.set_word_classes(cls, ["00", "01", "10", "11"])
    scaled(model, obj)
    check_exact(model, obj, "ffnn", True, n=200)


@pytest.mark.parametrize("bits", [1, 2, 3, 5])
def test_collapse_tree_makes_every_bits_levels_one_node(bits):
    """Each word's path in the wide tree has ceil(depth / bits) steps, every node at most 2^bits children, and
    each step's column names the step's own vertex among its parent's children."""
    from sampledlm.objectives.structure import collapse_tree

    parent, side = huffman_tree(COUNTS)
    t = collapse_tree(parent, V, bits)
    depth = (word_paths(parent, side, V)[1] != 0).sum(1).numpy()
    steps = (t["path_pos"] >= 0).sum(1)
    assert (steps == -(-depth // bits)).all()
    assert t["children"].shape[1] <= 2 ** bits
    num_nodes = len(t["node_depth"])
    for w in range(V):
        code = w
        for j in range(steps[w]):
            par, col = t["path_parent"][w, j], t["path_pos"][w, j]
            assert t["children"][par, col] == code and t["parent_of"][code] == par
            code = V + par
        assert code == V + num_nodes  # ended at the root
    kept = (t["children"] >= 0).sum()
    assert kept == V + num_nodes  # every word and every node below the root is some node's child, once


@pytest.mark.parametrize("bits", [2, 3, 5])
def test_wide_nodes_keep_to_word_classes(bits):
    """With the class subtrees' heads kept, a node's words all come from one class or its classes lie wholly under
    it; a class of at most 2^bits words is one node over exactly its words; the paths still end at the root."""
    from sampledlm.objectives.structure import class_heads, class_huffman_tree, collapse_tree

    cls = np.random.default_rng(3).integers(0, 6, size=V)
    parent, _ = class_huffman_tree(COUNTS, cls)
    heads = class_heads(parent, cls)
    assert heads.sum() == len(np.unique(cls))
    t = collapse_tree(parent, V, bits, heads)
    under = {}  # node -> the words below it
    for w in range(V):
        for par in t["path_parent"][w][t["path_pos"][w] >= 0]:
            under.setdefault(int(par), set()).add(w)
    for words in under.values():
        classes = set(cls[list(words)].tolist())
        assert len(classes) == 1 or all(set(np.flatnonzero(cls == c).tolist()) <= words for c in classes)
    for c in np.unique(cls):
        members = np.flatnonzero(cls == c)
        if len(members) <= 2 ** bits:
            parents = {int(t["path_parent"][w, 0]) for w in members}
            assert len(parents) == 1 and under[parents.pop()] == set(members.tolist())
    num_nodes = len(t["node_depth"])
    for w in range(V):  # each step's column names its own vertex, and the path ends at the root
        code = w
        for j in range(int((t["path_pos"][w] >= 0).sum())):
            par, col = t["path_parent"][w, j], t["path_pos"][w, j]
            assert t["children"][par, col] == code
            code = V + par
        assert code == V + num_nodes
    assert (t["node_depth"] >= 1).all()
    plain = collapse_tree(parent, V, bits)["children"]
    assert plain.shape != t["children"].shape or (plain != t["children"]).any()  # it is not the plain collapse


def test_a_wide_hsm_saved_before_class_heads_loads_with_its_own_tree():
    """A file without ``heads`` (written before wide nodes kept to word classes) loads as the plain collapse of its
    tree, so its probabilities are those it was trained with."""
    from sampledlm.store import load_state_into

    torch.manual_seed(0)
    out = OutputLayer(V, 6)
    old = make_objective("hsm", COUNTS, arity=8)
    old.bind(out)
    old.set_word_classes(np.random.default_rng(2).integers(0, 5, size=V))
    old.heads.zero_()
    old._derive()  # the tree as the earlier version collapsed it
    x = torch.randn(5, 6)
    want = old.log_prob(out, x)
    tensors = {k: v for k, v in old.state_dict().items() if k != "heads"}
    new = make_objective("hsm", COUNTS, arity=8)
    new.bind(out)
    load_state_into(new, tensors, "objective.safetensors")
    assert not new.heads.any()
    torch.testing.assert_close(new.log_prob(out, x), want)


@pytest.mark.parametrize("launched", [False, True])
def test_where_a_product_costs_a_launch_class_and_hsm_split_a_batch_into_few_pieces(launched, monkeypatch):
    """Where every product costs a kernel launch (a GPU: ``structure.launch_bound``), a batch the CPU would score
    class by class (a class layer) or block by block (hsm's parents) goes to one product against the union of its
    classes, and hsm's steps each gather their own siblings: exact either way."""
    from sampledlm.objectives import classes, hsm

    monkeypatch.setattr(classes, "PER_CLASS_OVERHEAD", 0)  # on the CPU: per class for any batch
    monkeypatch.setattr(hsm, "GROUP_MIN", 1)  # on the CPU: every parent a block
    for module in (classes, hsm):
        monkeypatch.setattr(module, "launch_bound", lambda x: launched)
    seen = []
    for cls, name in ((classes.ClassSoftmax, "_within_per_class"), (classes.ClassSoftmax, "_within_shared"),
                      (hsm.HierarchicalSoftmax, "_gathered_lse")):
        def spy(*a, _f=getattr(cls, name), _n=name, **k):
            seen.append(_n)
            return _f(*a, **k)
        monkeypatch.setattr(cls, name, spy)
    torch.manual_seed(3)
    x = torch.randn(200, 6, dtype=torch.float64)
    y = torch.from_numpy(zipf_stream(200, seed=5))
    for kind, opts in (("class", {"classes": 7}), ("hsm", {"arity": 4})):
        out = OutputLayer(V, 6, sparse=False)  # dense rows: hsm's compiled pair loops are the CPU's sparse path
        obj = make_objective(kind, COUNTS, **opts)
        obj.bind(out)
        if kind == "hsm":
            obj.set_word_classes(np.random.default_rng(1).integers(0, 5, size=V))
        out.double(), obj.double()
        scaled(out, obj)
        lp = obj.log_prob_targets(out, x, y)
        exact = obj.log_prob(out, x).gather(1, y.unsqueeze(1)).squeeze(1)
        torch.testing.assert_close(lp, exact)
    assert seen == (["_within_shared", "_gathered_lse"] if launched else ["_within_per_class"])


@pytest.mark.parametrize("arity", [4, 16])
@pytest.mark.parametrize("kind", ["ffnn", "gru"])
@pytest.mark.parametrize("group_min", [1, 16, 10**9])
def test_wide_hsm_is_exact_and_trains_on_its_exact_log_likelihood(arity, kind, group_min, monkeypatch):
    # group_min: every parent's children scored as one block, the default's mix, every step gathering its own
    import sampledlm.objectives.hsm as hsm

    monkeypatch.setattr(hsm, "GROUP_MIN", group_min)
    model = model_of(kind)
    obj = make_objective("hsm", COUNTS, arity=arity)
    obj.bind(model)
    rng = np.random.default_rng(1)
    obj.set_word_classes(rng.integers(0, 5, size=V))
    scaled(model, obj)
    check_exact(model, obj, kind, True, n=200)
    assert_loss_has_the_exact_gradient(n=30, arity=arity)


def assert_loss_has_the_exact_gradient(n: int, **options):
    """hsm with ``options`` on a float64 output layer: the batched loss's gradient is that of -mean log P computed
    from the exact ``[N, V]`` log_prob."""
    torch.manual_seed(1)
    out = OutputLayer(V, 6)
    obj = make_objective("hsm", COUNTS, **options)
    obj.bind(out)
    out.double(), obj.double()
    x = torch.randn(n, 6, dtype=torch.float64)
    y = torch.from_numpy(zipf_stream(n, seed=4))
    params = list(out.parameters()) + list(obj.parameters())
    g1 = torch.autograd.grad(obj(out, x, y), params)
    g2 = torch.autograd.grad(-obj.log_prob(out, x).gather(1, y.unsqueeze(1)).mean(), params)
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, atol=1e-6)


def test_wide_hsm_refuses_an_arity_that_is_not_a_power_of_two():
    from sampledlm.errors import UserError

    with pytest.raises(UserError, match="power of two"):
        make_objective("hsm", COUNTS, arity=6)


def test_wide_hsm_with_word_classes_trains_resumes_and_reloads(tmp_path, run_in_process):
    """The node layer's size follows the tree: a run whose tree came from a class file reloads and resumes."""
    from helpers import write_word_corpus

    for split, n, seed in (("train", 80, 1), ("valid", 20, 2), ("test", 20, 3)):
        write_word_corpus(tmp_path / f"{split}.txt", n, seed)
    words = sorted(set((tmp_path / "train.txt").read_text().split()))
    (tmp_path / "classes.txt").write_text("".join(f"{i % 7}\t{w}\n" for i, w in enumerate(words)))
    args = ("--train", "train.txt", "--valid", "valid.txt", "--model", "gru", "--objective", "hsm", "--arity", "8",
            "--word-classes", "classes.txt", "-d", "6", "--hidden", "8", "--batch-size", "4", "--bptt", "5",
            "--threads", "1")
    r = run_in_process("train", *args, "-o", "run", "--epochs", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("train", "--resume", "run", "--epochs", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("eval", "run", "--test", "test.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    model, objective, vocab, config = runs.load_run(str(tmp_path / "run"))
    assert config["objective"]["options"]["arity"] == 8 and objective.arity == 8
    fresh = make_objective("hsm", vocab.counts, arity=8)
    fresh.bind(model)
    assert not torch.equal(fresh.parent, objective.parent)  # the class file's tree, not the plain Huffman one
    assert fresh.node_layer.out_features != objective.node_layer.out_features  # so the saved tree had to be adopted
    from sampledlm.data.corpus import load_ids

    ppl = json.loads(r.stdout)["ppl"]
    assert perplexity(model, objective, load_ids(str(tmp_path / "test.txt"), vocab)) == pytest.approx(ppl, rel=1e-6)


def test_selfnorm_calibration_moves_mean_log_z_to_zero_and_keeps_exact_probabilities(words_corpus):
    """After training, the output biases move by minus the validation text's mean log Z (evaluation mode):
    there it becomes 0, and every exact probability is what the uncalibrated model gives."""
    from sampledlm.data.corpus import load_ids
    from sampledlm.neural.lm import stream_log_normalisers, stream_logprobs

    got = {}
    for calibrate in (True, False):
        config, vocab = config_for(words_corpus, "ffnn", epochs=1)
        config["model"]["dropout"] = 0.3  # the train / eval shift the calibration is for
        config["objective"] = {"name": "selfnorm", "options": {"selfnorm_calibrate": calibrate}}
        run = str(words_corpus / f"run-{calibrate}")
        new_run(run, config, vocab).train()
        model, obj, vocab, _ = runs.load_run(run)
        valid = load_ids(config["data"]["valid"], vocab)
        got[calibrate] = (stream_log_normalisers(model, obj, valid), stream_logprobs(model, obj, valid))
    (z_cal, lp_cal), (z_raw, lp_raw) = got[True], got[False]
    assert abs(z_cal.mean()) < 1e-4 and abs(z_raw.mean()) > 1e-3
    assert np.allclose(z_cal - z_raw, z_cal.mean() - z_raw.mean(), atol=1e-4)  # one shift for every history
    assert np.allclose(lp_cal, lp_raw, atol=1e-5)


def test_hsm_unties_binary_trees_only_unless_told(tmp_path, run_in_process):
    """Binary nodes score with the output rows as internal nodes (tied, word i's embedding would be node i's
    vector): untied unless --tie; wider nodes (the recurrent default, 128) score a word by its own row: tied."""
    from helpers import write_word_corpus

    write_word_corpus(tmp_path / "train.txt", 40, 1)
    base = ("train", "--train", "train.txt", "--valid", "train.txt", "--model", "gru", "-d", "6", "--hidden", "6",
            "--proj", "6", "--epochs", "1", "--objective", "hsm", "--threads", "1", "--word-classes", "none")

    def tie(name):
        return json.loads((tmp_path / name / "config.json").read_text())["model"]["tie"]

    r = run_in_process(*base, "--arity", "2", "-o", "a", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "untied" in r.stderr and tie("a") is False
    r = run_in_process(*base, "--arity", "2", "--tie", "-o", "b", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert tie("b") is True
    r = run_in_process(*base, "-o", "c", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "untied" not in r.stderr and tie("c") is True
    r = run_in_process(*base, "--arity", "16", "--no-tie", "-o", "d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert tie("d") is False


def test_calibrate_command_centres_log_z_on_other_text(words_corpus, run_in_process):
    """`sampledlm calibrate`: on a finished self-normalised run, the mean log Z on the given text becomes 0
    and the model records the total shift; exact perplexity unchanged; other objectives are refused."""
    from sampledlm.data.corpus import load_ids
    from sampledlm.neural.lm import stream_log_normalisers
    from sampledlm.store import load_tensors

    config, vocab = config_for(words_corpus, "ffnn", epochs=1)
    config["objective"] = {"name": "selfnorm", "options": {}}
    run = words_corpus / "sn"
    new_run(str(run), config, vocab).train()
    trained_shift = float(load_tensors(str(run / "model.safetensors"))[1]["log_z_shift"])
    before = run_in_process("eval", str(run), "--test", str(words_corpus / "train.txt"), "--json", cwd=words_corpus)
    r = run_in_process("calibrate", str(run), "--text", str(words_corpus / "train.txt"), cwd=words_corpus)
    assert r.returncode == 0, r.stderr
    model, obj, vocab, _ = runs.load_run(str(run))
    z = stream_log_normalisers(model, obj, load_ids(str(words_corpus / "train.txt"), vocab))
    assert abs(z.mean()) < 1e-4
    total = float(load_tensors(str(run / "model.safetensors"))[1]["log_z_shift"])
    assert total != trained_shift and "total" in r.stderr
    after = run_in_process("eval", str(run), "--test", str(words_corpus / "train.txt"), "--json", cwd=words_corpus)
    assert json.loads(after.stdout)["ppl"] == pytest.approx(json.loads(before.stdout)["ppl"], rel=1e-5)
    config["objective"] = {"name": "softmax", "options": {}}
    new_run(str(words_corpus / "soft"), config, vocab).train()
    r = run_in_process("calibrate", str(words_corpus / "soft"), "--text", str(words_corpus / "train.txt"), cwd=words_corpus)
    assert r.returncode == 1 and "selfnorm" in r.stderr
    # an empty text (the fault campaign's /dev/null) is refused and leaves the model's bytes as they were
    kept = (run / "model.safetensors").read_bytes()
    for empty in ("/dev/null", str(words_corpus / "blank.txt")):
        (words_corpus / "blank.txt").write_text("\n\n")
        r = run_in_process("calibrate", str(run), "--text", empty, cwd=words_corpus)
        assert r.returncode == 1 and "no sentences" in r.stderr and "left as it was" in r.stderr
        assert (run / "model.safetensors").read_bytes() == kept
    # a run another process is writing (a training resumed) is not calibrated: the training would overwrite it
    from sampledlm.store import lock_directory

    with lock_directory(str(run)):
        r = run_in_process("calibrate", str(run), "--text", str(words_corpus / "train.txt"), cwd=words_corpus)
    assert r.returncode == 1 and "another sampledlm process is writing" in r.stderr
    assert (run / "model.safetensors").read_bytes() == kept
    # a run without its model file: one error line, not first a warning that a checkpoint's weights will do
    import shutil

    shutil.copytree(run, words_corpus / "no-model")
    (words_corpus / "no-model" / "model.safetensors").unlink()
    r = run_in_process("calibrate", str(words_corpus / "no-model"), "--text", str(words_corpus / "train.txt"),
                       cwd=words_corpus)
    assert r.returncode == 1 and r.stderr.strip().splitlines() == [
        f"sampledlm: error: {words_corpus / 'no-model'}: training has not saved a model yet (no model.safetensors)"]


def test_adaptive_default_cutoffs_split_a_large_vocabularys_rare_words():
    """Past MAX_TAIL words after the last cut, more clusters end at 95 %, 99 %, 99.9 % of the mass (none that
    would leave fewer than MAX_TAIL / 2 words); small vocabularies keep their cuts."""
    from sampledlm.objectives.adaptive import MAX_TAIL, default_cutoffs

    v = 300_000
    counts = 1e7 / np.arange(1, v + 1)  # Zipf(1): the rare words hold a large share of the mass
    r95, r99, r999 = (rank_of(counts, s) for s in (0.95, 0.99, 0.999))
    assert 5000 < r95 < r99 < v - MAX_TAIL < v - MAX_TAIL // 2 < r999  # the case this test is about
    assert default_cutoffs(counts, v, 0.95, 5000) == [5000, r95, r99]  # 99.9 % would leave < MAX_TAIL / 2 words
    assert default_cutoffs(counts, v) == [4000, r95, r99]  # the 80 % head capped at 4,000 words
    small = 1e5 / np.arange(1, 10_001)  # V = 10k: nothing added
    assert default_cutoffs(small, 10_000, 0.95, 5000) == [min(rank_of(small, 0.95), 5000)]
    assert default_cutoffs(small, 10_000) == [rank_of(small, 0.8), rank_of(small, 0.95)]


def rank_of(counts, share):
    cum = np.cumsum(counts) / counts.sum()
    return int(np.searchsorted(cum, share) + 1)


def test_adaptive_head_coverage_sets_the_default_head_and_sequence_models_take_ninety_percent(tmp_path, capsys):
    from helpers import run_cli, synthetic_sentences, write_corpus

    from sampledlm.objectives.adaptive import default_cutoffs

    counts = np.array([400, 200, 100, 60, 40, 30, 20, 15, 10, 8, 6, 5, 4, 3, 2, 1], dtype=float)
    head80, head90 = default_cutoffs(counts, 16), default_cutoffs(counts, 16, 0.9)
    cum = np.cumsum(counts) / counts.sum()
    assert cum[head80[0] - 1] >= 0.8 > cum[head80[0] - 2] and cum[head90[0] - 1] >= 0.9 > cum[head90[0] - 2]
    assert default_cutoffs(counts, 16, 0.97) == [int(np.searchsorted(cum, 0.97) + 1)]  # no tail cut below the head
    assert default_cutoffs(counts, 16, 0.9, max_head=3) == [3, int(np.searchsorted(cum, 0.95) + 1)]  # the cap holds
    write_corpus(tmp_path / "t.txt", synthetic_sentences(300, 40, seed=3))
    for model, recorded in (("gru", {"head_coverage": 0.95, "div_value": 2.0, "max_head": 5000}),
                            ("ffnn", {"head_coverage": 0.8, "div_value": 4.0, "max_head": 4000})):  # every option's value
        code, _, err = run_cli(["train", "--train", str(tmp_path / "t.txt"), "--valid", str(tmp_path / "t.txt"),
                                "--model", model, "-d", "8", "--hidden", "8", "--epochs", "1", "--objective",
                                "adaptive", "-o", str(tmp_path / model)], capsys)
        assert code == 0, err
        config = json.loads((tmp_path / model / "config.json").read_text())
        assert config["objective"]["options"] == recorded


def test_adaptive_on_a_recurrent_model_ties_input_bands_unless_told_otherwise(tmp_path, capsys):
    """The recurrent default: adaptive input bands tied to the head and tails (factor = --div-value), left out when
    the user turns off the tie or the input matrices, or the adaptive input itself; a clash is refused."""
    from helpers import run_cli, synthetic_sentences, write_corpus

    write_corpus(tmp_path / "t.txt", synthetic_sentences(300, 40, seed=3))

    def train(name, *flags):
        code, _, err = run_cli(["train", "--train", str(tmp_path / "t.txt"), "--valid", str(tmp_path / "t.txt"),
                                "--model", "gru", "-d", "16", "--hidden", "16", "--epochs", "1", "--objective",
                                "adaptive", *flags, "-o", str(tmp_path / name)], capsys)
        model = json.loads((tmp_path / name / "config.json").read_text())["model"] if code == 0 else None
        return code, err, model

    code, err, model = train("default")
    assert code == 0 and model["adaptive_input"] and model["tie"] and model["input_factor"] == 2.0, err
    assert "--adaptive-input" in err and "--no-adaptive-input" in err  # says what it set, and how to undo it
    code, err, model = train("div4", "--div-value", "4")
    assert code == 0 and model["adaptive_input"] and model["input_factor"] == 4.0, err
    for name, flags in (("plain", ("--no-adaptive-input",)), ("untied", ("--no-tie",)),
                        ("no-input-matrices", ("--no-input-weights",))):
        code, err, model = train(name, *flags)
        assert code == 0 and not model["adaptive_input"], err
    code, err, _ = train("clash", "--input-factor", "3")
    assert code != 0 and "--input-factor" in err and "Traceback" not in err
    assert not (tmp_path / "clash").exists()  # nothing half-written


def test_class_and_hsm_cluster_the_text_on_sequence_models_unless_told_otherwise():
    from sampledlm.neural.settings import sequence_defaults

    blank = {"word_classes": None, "classes": None, "binning": None, "arity": None, "lr": None}
    blank["components"] = None
    assert sequence_defaults("gru", "class", blank)["word_classes"] == "auto"
    assert sequence_defaults("gru", "class", blank)["components"] == 4
    assert sequence_defaults("gru", "class", {**blank, "components": 1})["components"] == 1
    assert sequence_defaults("ffnn", "class", blank)["word_classes"] is None  # frequency bins: nothing to cluster first
    assert sequence_defaults("ffnn", "class", blank)["components"] is None
    for given in ({"classes": 50}, {"binning": "mass"}):  # the user asked for frequency bins
        assert sequence_defaults("gru", "class", {**blank, **given})["word_classes"] is None
    assert sequence_defaults("gru", "class", {**blank, "word_classes": "c.txt"})["word_classes"] == "c.txt"
    hsm = sequence_defaults("lstm", "hsm", blank)
    assert (hsm["word_classes"], hsm["arity"], hsm["components"]) == ("auto", 128, 4)
    binary = sequence_defaults("lstm", "hsm", {**blank, "arity": 2})  # a shape of one's own: one score per node
    assert (binary["arity"], binary["components"]) == (2, None)


@pytest.mark.parametrize("name, own", [("class", "word_class"), ("hsm", "parent")])
def test_word_classes_none_keeps_the_objectives_own_classes_on_a_recurrent_model(name, own, tmp_path, run_in_process):
    from helpers import write_word_corpus

    for split, n, seed in (("train", 120, 1), ("valid", 20, 2)):
        write_word_corpus(tmp_path / f"{split}.txt", n, seed)
    args = ("--train", "train.txt", "--valid", "valid.txt", "--model", "gru", "--objective", name, "-d", "6",
            "--hidden", "8", "--batch-size", "4", "--bptt", "5", "--threads", "1", "--epochs", "1")
    for flag, run in (((), "default"), (("--word-classes", "none"), "none")):
        r = run_in_process("train", *args, *flag, "-o", run, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert ("--word-classes auto" in r.stderr) == (run == "default")
    model, objective, vocab, config = runs.load_run(str(tmp_path / "none"))
    assert config["objective"]["options"].get("word_classes") is None
    plain = make_objective(name, vocab.counts, **({"arity": 128, "components": 4} if name == "hsm" else {}))
    plain.bind(model)
    assert torch.equal(getattr(plain, own), getattr(objective, own))  # frequency bins / the Huffman tree
    clustered = runs.load_run(str(tmp_path / "default"))[1]
    assert not torch.equal(getattr(clustered, own), getattr(objective, own))


@pytest.mark.parametrize("name, extra", [("class", []), ("hsm", ["--arity", "4"])])
def test_word_classes_auto_clusters_the_training_text_as_the_classes_command_does(name, extra, tmp_path,
                                                                                   run_in_process):
    from helpers import write_word_corpus

    from sampledlm.data.clusters import read_word_classes

    for split, n, seed in (("train", 120, 1), ("valid", 20, 2)):
        write_word_corpus(tmp_path / f"{split}.txt", n, seed)
    r = run_in_process("classes", "train.txt", "-o", "classes.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    args = ("--train", "train.txt", "--valid", "valid.txt", "--model", "gru", "--objective", name, *extra,
            "--word-classes", "auto", "-d", "6", "--hidden", "8", "--batch-size", "4", "--bptt", "5", "--threads", "1")
    r = run_in_process("train", *args, "-o", "run", "--epochs", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "--word-classes auto" in r.stderr
    r = run_in_process("train", "--resume", "run", "--epochs", "2", cwd=tmp_path)  # a resumed run keeps its classes
    assert r.returncode == 0, r.stderr
    model, objective, vocab, config = runs.load_run(str(tmp_path / "run"))
    assert config["objective"]["options"]["word_classes"] == "auto"
    from_file = read_word_classes(str(tmp_path / "classes.txt"), vocab.words)[0]
    if name == "class":
        got = objective.word_class.numpy()
    else:  # the tree's classes: the same tree as the file's gives
        reference = make_objective("hsm", vocab.counts, arity=4)
        reference.bind(model)
        reference.set_word_classes(from_file)
        assert torch.equal(reference.parent, objective.parent)
        return
    pairs = set(zip(got.tolist(), from_file.tolist()))  # the same partition of the words, whatever the numbering
    assert len(pairs) == len(set(got.tolist())) == len(set(from_file.tolist()))


@pytest.mark.parametrize("kind", ["ffnn", "gru"])
def test_class_components_stay_exact_and_are_the_log_sum_exp_of_their_scores(kind):
    """--components M: each class's score is log sum_k exp(U_{c,k} h + d_{c,k}); P stays normalised over V and the
    loss is its -log P; with every component but one at -inf-like bias it is the one-component layer."""
    model = model_of(kind)
    obj = make_objective("class", COUNTS, components=3)
    obj.bind(model)
    assert obj.class_layer.out_features == 3 * obj.num_classes
    scaled(model, obj)
    check_exact(model, obj, kind, True, n=200)
    single = make_objective("class", COUNTS)
    single.bind(model)
    with torch.no_grad():
        single.class_layer.weight.copy_(obj.class_layer.weight[::3])
        single.class_layer.bias.copy_(obj.class_layer.bias[::3])
        obj.class_layer.bias.view(-1, 3)[:, 1:] = -1e4
    ctx = torch.randn(7, model.hidden_size)
    assert torch.allclose(obj.class_log_prob(ctx), single.class_log_prob(ctx), atol=1e-5)
    from sampledlm.errors import UserError

    with pytest.raises(UserError, match="--components 0"):
        make_objective("class", COUNTS, components=0)


@pytest.mark.parametrize("group_min", [1, 10**9])
def test_wide_hsm_node_components_stay_exact_with_the_exact_gradient(group_min, monkeypatch):
    """--components M on hsm's node layer: each node's score the log-sum-exp of M; still normalised over V, the
    batched loss (blocks or gathered siblings) has the gradient of the exact log-likelihood; binary nodes refuse."""
    import sampledlm.objectives.hsm as hsm
    from sampledlm.errors import UserError

    monkeypatch.setattr(hsm, "GROUP_MIN", group_min)
    model = model_of("gru")
    obj = make_objective("hsm", COUNTS, arity=4, components=3)
    obj.bind(model)
    obj.set_word_classes(np.random.default_rng(1).integers(0, 5, size=V))
    assert obj.node_layer.out_features == 3 * (len(obj.child_codes) - 1)
    scaled(model, obj)
    check_exact(model, obj, "gru", True, n=200)
    assert_loss_has_the_exact_gradient(n=40, arity=4, components=3)
    with pytest.raises(UserError, match="binary nodes"):
        make_objective("hsm", COUNTS, components=2)


@pytest.mark.parametrize("group_min", [1, 10**9])  # siblings scored as blocks, or gathered one step at a time
def test_hsm_node_rows_take_row_sparse_gradients_with_sparse_output_rows(group_min, monkeypatch):
    """With sparse output rows the node layer's weight gets a row-sparse gradient (only the nodes a batch's paths
    and siblings touch), equal to the dense gradient of the exact rule, and the trainer updates it row-wise."""
    import sampledlm.objectives.hsm as hsm
    from sampledlm.neural.optim import make_optimizers, sparse_parameter_ids
    from sampledlm.neural.row_adam import RowAdam
    from sampledlm.neural.train_options import TrainOptions

    monkeypatch.setattr(hsm, "GROUP_MIN", group_min)
    torch.manual_seed(1)
    out = OutputLayer(V, 6, sparse=True)
    obj = make_objective("hsm", COUNTS, arity=4, components=2)
    obj.bind(out)
    out.double(), obj.double()
    x = torch.randn(30, 6, dtype=torch.float64)
    y = torch.from_numpy(zipf_stream(30, seed=4))
    obj(out, x, y).backward()
    grad = obj.node_layer.weight.grad
    assert grad.is_sparse
    touched = grad.coalesce().indices()[0].unique()
    assert 0 < len(touched) < obj.node_layer.out_features  # not every row
    node_w = obj.node_layer.weight
    want = torch.autograd.grad(-obj.log_prob(out, x).gather(1, y.unsqueeze(1)).mean(), node_w)[0]
    torch.testing.assert_close(grad.to_dense(), want)
    assert obj.sparse_parameters() == [node_w]

    model = model_of("gru")
    obj2 = make_objective("hsm", COUNTS, arity=4, components=2)
    obj2.bind(model)
    assert id(obj2.node_layer.weight) in sparse_parameter_ids(model, obj2)
    opts = make_optimizers(model, obj2, TrainOptions(lr=0.01, optimizer="adam"))
    row = [o for o in opts if isinstance(o, RowAdam)]
    assert row and any(p is obj2.node_layer.weight for g in row[0].param_groups for p in g["params"])
    dense = make_objective("hsm", COUNTS, arity=4)
    dense.bind(OutputLayer(V, 6))  # dense output rows: a dense node layer, as before
    assert dense.sparse_parameters() == []


def test_class_notes_a_file_whose_words_are_each_alone_in_a_class_and_hsm_does_not(tmp_path):
    """A tree file (one bit path a word) given to ``class`` is V classes of one word: said before training."""
    words = [f"w{i}" for i in range(8)]
    vocab = type("V", (), {"words": words, "__len__": lambda self: len(words)})()
    tree = tmp_path / "tree.txt"
    tree.write_text("".join(f"{i:03b}\t{w}\t1\n" for i, w in enumerate(words)))
    flat = tmp_path / "flat.txt"
    flat.write_text("".join(f"{i % 2}\t{w}\t1\n" for i, w in enumerate(words)))
    _, notes = OBJECTIVES["class"].settle_options({"word_classes": str(tree)}, vocab)
    assert any("8 of the 8 vocabulary words are alone in their class (8 classes)" in n and "hsm" in n
               for n in notes), notes
    assert not any("alone" in n for n in OBJECTIVES["hsm"].settle_options({"word_classes": str(tree)}, vocab)[1])
    assert not any("alone" in n for n in OBJECTIVES["class"].settle_options({"word_classes": str(flat)}, vocab)[1])
