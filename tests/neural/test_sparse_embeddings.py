"""Row-sparse word tables: with an objective that reads a candidate set, the input embeddings (tied or not,
adaptive bands included) take row-sparse gradients that equal the dense ones, touch only the batch's rows,
and train to the same numbers as dense SGD; exact evaluation and the saved weights do not change."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import config_for

from sampledlm.neural.lm import perplexity
from sampledlm.neural.registry import build_model, model_spec
from sampledlm.neural.trainer import TrainingInterrupted, TrainOptions, clip_gradients, make_optimizers, new_run, \
    resume_run
from sampledlm.neural import rundir as runs
from sampledlm.objectives import make_objective

V = 40
COUNTS = np.maximum((1000 / np.arange(1, V + 1)).astype(np.int64), 1)

SPECS = {
    "ffnn": dict(type="ffnn", order=3, embed_dim=6, hidden=[8], dropout=0.0),
    "gru": dict(type="gru", embed_dim=6, hidden=8, dropout=0.0, tie=False),
    "gru tied": dict(type="gru", embed_dim=6, hidden=8, dropout=0.0, tie=True),
    "lstm tied": dict(type="lstm", embed_dim=6, hidden=6, dropout=0.0, tie=True),
    "gru adaptive input": dict(type="gru", embed_dim=8, hidden=8, dropout=0.0, tie=False, adaptive_input=True,
                               input_cutoffs=[5, 15], input_factor=2.0),
    "gru adaptive input tied": dict(type="gru", embed_dim=8, hidden=8, dropout=0.0, tie=True, adaptive_input=True,
                                    input_cutoffs=[5, 15], input_factor=2.0),
    "transformer": dict(type="transformer", embed_dim=8, layers=1, heads=2, dropout=0.0, context=6, tie=False),
    "transformer tied": dict(type="transformer", embed_dim=8, layers=1, heads=2, dropout=0.0, context=6, tie=True),
}


def build(kind: str, sparse: bool):
    spec = dict(SPECS[kind])
    torch.manual_seed(0)
    return build_model(model_spec(spec.pop("type"), **spec), V, sparse_output=sparse, counts=COUNTS)


def batch(kind: str, seed: int = 0):
    """``(inputs, targets [N])``: histories ``[N, 2]`` (ffnn) or a ``[3, 6]`` stream segment, with some
    ``<s>`` (id V) among the inputs."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, V + 1, (12, 2) if kind == "ffnn" else (3, 6), generator=g)
    n = x.shape[0] if kind == "ffnn" else x.numel()
    return x, torch.randint(0, V, (n,), generator=g)


def contexts(model, kind, x):
    if kind == "ffnn":
        return model(x)
    hidden, _ = model(x)
    return hidden.reshape(-1, hidden.shape[-1])


def loss_of(model, obj, kind, x, y, draw_seed=7):
    torch.manual_seed(draw_seed)  # the same candidates for both models
    return obj(model, contexts(model, kind, x), y)


def css(samples=6):
    obj = make_objective("css-is", COUNTS, samples=samples)
    return obj


@pytest.mark.parametrize("kind", list(SPECS))
def test_sparse_gradients_equal_the_dense_ones_and_touch_only_the_batch_rows(kind):
    dense, sparse, obj = build(kind, False), build(kind, True), css()
    obj.bind(sparse)
    assert dense.state_dict().keys() == sparse.state_dict().keys()  # run directories load either way
    assert all(torch.equal(a, b) for a, b in zip(dense.state_dict().values(), sparse.state_dict().values()))
    x, y = batch(kind)
    ld, ls = loss_of(dense, obj, kind, x, y), loss_of(sparse, obj, kind, x, y)
    assert torch.equal(ld, ls)
    ld.backward()
    ls.backward()
    torch.manual_seed(7)
    touched_out = set(y.tolist()) | set(obj.draw(y).words.tolist())
    inputs = set(x.flatten().tolist())
    listed = {id(p) for p in sparse.sparse_parameters()}
    assert id(sparse.output.weight) in listed and id(sparse.output.bias) in listed
    assert dense.sparse_parameters() == []
    for (name, pd), (_, ps) in zip(dense.named_parameters(), sparse.named_parameters()):
        if pd.grad is None:  # e.g. an adaptive band no word of the batch falls in
            assert ps.grad is None or not ps.grad.to_dense().any(), name
            continue
        assert ps.grad.is_sparse == (id(ps) in listed), name
        assert torch.allclose(ps.grad.to_dense(), pd.grad, atol=1e-6), name
        if ps.grad.is_sparse:
            rows = set(ps.grad.coalesce().indices()[0].tolist())
            if name.startswith("output."):  # tied: the input rows as well (<s> = V reads row V-1, with a zero)
                allowed = touched_out | ({min(i, V - 1) for i in inputs} if "tied" in kind else set())
            else:  # an input table: the batch's ids (adaptive bands: their rows within the band)
                allowed = inputs if name == "embed.weight" else set(range(ps.shape[0]))
            assert rows <= allowed, name
            assert len(rows) < ps.shape[0] or kind.startswith("gru adaptive"), name


def test_which_tables_are_sparse():
    m = build("ffnn", True)
    ids = {id(p) for p in m.sparse_parameters()}
    assert {n for n, p in m.named_parameters() if id(p) in ids} == {"embed.weight", "output.weight", "output.bias"}
    m = build("gru tied", True)
    ids = {id(p) for p in m.sparse_parameters()}
    assert {n for n, p in m.named_parameters() if id(p) in ids} == {"output.weight", "output.bias"}
    m = build("gru adaptive input", True)
    ids = {id(p) for p in m.sparse_parameters()}
    assert {n for n, p in m.named_parameters() if id(p) in ids} == {
        "output.weight", "output.bias", "embed.head", "embed.tables.0", "embed.tables.1"}
    for kind in SPECS:
        assert build(kind, False).sparse_parameters() == []


def test_tied_adaptive_bands_shared_with_the_adaptive_softmax_stay_dense():
    """The adaptive softmax reads the shared band tables densely (a tail's softmax covers its band), so
    they take dense gradients and Adam; the tied head rows stay sparse; a trainer step runs."""
    m = build("gru adaptive input tied", True)
    obj = make_objective("adaptive", COUNTS, cutoffs=[5, 15], div_value=2.0)
    obj.bind(m)
    ids = {id(p) for p in m.sparse_parameters()}
    assert {n for n, p in m.named_parameters() if id(p) in ids} == {"output.weight", "output.bias"}
    opts = make_optimizers(m, obj, TrainOptions(optimizer="adam", lr=0.01))
    assert [type(o).__name__ for o in opts] == ["Adam", "RowAdam"]  # RowAdam: SparseAdam's update, index operations
    x, y = batch("gru adaptive input tied")
    obj(m, contexts(m, "gru", x), y).backward()
    assert m.output.weight.grad.is_sparse and not m.embed.tables[0].grad.is_sparse
    for o in opts:
        o.step()
    with_css = build("gru adaptive input tied", True)
    css().bind(with_css)
    ids = {id(p) for p in with_css.sparse_parameters()}
    assert {n for n, p in with_css.named_parameters() if id(p) in ids} == {
        "output.weight", "output.bias", "embed.tables.0", "embed.tables.1"}


CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))


@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("kind", ["ffnn", "gru tied", "transformer tied", "gru adaptive input"])
def test_sgd_on_row_sparse_gradients_trains_like_dense_sgd(kind, device):
    """SGD without momentum or weight decay: ``W_r -= lr g_r`` on the touched rows is dense SGD, so a few
    clipped steps give the same weights (up to the order of float sums); SparseAdam's first step is dense
    Adam's (an untouched row's first update is 0 / (0 + eps) = 0 in dense Adam)."""
    for optimizer, steps in (("sgd", 4), ("adam", 1)):
        dense, sparse, obj = build(kind, False).to(device), build(kind, True).to(device), css().to(device)
        o = TrainOptions(optimizer=optimizer, lr=0.3 if optimizer == "sgd" else 0.01)
        opt_d, opt_s = make_optimizers(dense, obj, o), make_optimizers(sparse, obj, o)
        assert len(opt_s) == (1 if optimizer == "sgd" else 2)
        params_d = [p for g in opt_d for grp in g.param_groups for p in grp["params"]]
        params_s = [p for g in opt_s for grp in g.param_groups for p in grp["params"]]
        for step in range(steps):
            x, y = (t.to(device) for t in batch(kind, seed=step))
            for model, opts, params in ((dense, opt_d, params_d), (sparse, opt_s, params_s)):
                for opt in opts:
                    opt.zero_grad(set_to_none=True)
                loss_of(model, obj, kind, x, y, draw_seed=step).backward()
                clip_gradients(params, 0.5)
                for opt in opts:
                    opt.step()
        changed = 0
        for (name, a), (_, b) in zip(dense.state_dict().items(), sparse.state_dict().items()):
            # Adam's first step is lr g / (|g| + eps): an entry whose gradient is ~eps moves by a fraction of lr
            # that float rounding of g decides (the GPU's differs from the CPU's by 1 % of lr), while a wrong row
            # moves by about lr; so Adam is compared at a quarter of lr
            tol = 1e-6 if optimizer == "sgd" else 0.25 * o.lr
            assert torch.allclose(a, b, atol=tol, rtol=1e-5), (optimizer, name, (a - b).abs().max())
            changed += int(not torch.equal(a.cpu(), build(kind, False).state_dict()[name]))
        assert changed >= 3  # the steps did move the weights


@pytest.mark.parametrize("kind", ["ffnn", "gru tied", "transformer tied", "gru adaptive input tied"])
def test_exact_evaluation_is_unchanged(kind):
    dense, sparse, obj = build(kind, False), build(kind, True), css()
    with torch.no_grad():  # weights away from the initial ones
        for p in sparse.parameters():
            p.add_(0.3 * torch.randn_like(p))
    dense.load_state_dict(sparse.state_dict())
    ids = np.random.default_rng(0).integers(0, V, 60)
    ids[::7] = 0  # sentence ends
    assert perplexity(sparse, obj, ids) == perplexity(dense, obj, ids)
    assert perplexity(sparse, obj, ids, independent=True) == perplexity(dense, obj, ids, independent=True)


def test_tied_transformer_looks_up_in_place():
    """The tied lookup gives the rows of ``[W; <s> row]`` without building that ``[V+1, d]`` table."""
    m = build("transformer tied", True)
    x = torch.tensor([[V, 3, 0, V - 1, 5, V]])
    want = F.embedding(x, torch.cat([m.output.weight, m.bos_embed], 0))
    assert torch.equal(m.embed_ids(x), want)


def test_clip_gradients_coalesces_each_sparse_gradient_once():
    p = torch.nn.Parameter(torch.zeros(5, 2))
    p.grad = torch.sparse_coo_tensor([[1, 1, 3]], torch.tensor([[3.0, 0.0], [1.0, 0.0], [0.0, 3.0]]), (5, 2),
                                     check_invariants=True)
    assert not p.grad.is_coalesced()
    assert clip_gradients([p], 0.0) == pytest.approx(5.0)  # rows 1 (4, 0) and 3 (0, 3)
    assert p.grad.is_coalesced() and p.grad.values().shape[0] == 2


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_resume_is_exact_for_a_tied_gru_with_sparse_tables(words_corpus, optimizer):
    """SparseAdam's (or SGD's) state of the tied row-sparse table survives an interrupt: the same numbers."""
    config, vocab = config_for(words_corpus, "gru", optimizer=optimizer, lr=0.01 if optimizer == "adam" else 0.5,
                               epochs=2, clip=1.0)
    config["objective"] = {"name": "css-is", "options": {"samples": 4}}
    new_run(str(words_corpus / "a"), config, vocab).train()
    t = new_run(str(words_corpus / "b"), config, vocab)
    assert t.model.tie and t.model.output.sparse
    t.stop_when = lambda st, n=t.data.num_batches() + 2: st.step >= n
    with pytest.raises(TrainingInterrupted):
        t.train()
    resume_run(str(words_corpus / "b")).train()
    wa, wb = (runs.load_run(str(words_corpus / d))[0].state_dict() for d in "ab")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
