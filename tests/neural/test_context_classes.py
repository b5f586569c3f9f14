"""Word classes and trees from a model's mean contexts: k-means finds planted groups, the tree is prefix-free
with balanced splits, the mean contexts are the averages the model's contexts give, and `classes --from-model`
(flat and --tree) feeds `--word-classes` for the class and hsm layers."""

import json

import numpy as np
import pytest
import torch

from sampledlm.data.clusters import read_word_classes
from sampledlm.neural.context_classes import BALANCE, kmeans_classes, mean_contexts, tree_paths


def planted(groups=4, per=6, h=8, noise=0.05, seed=0):
    """Unit rows in ``groups`` tight bundles around random directions; the true group of each row."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(groups, h))
    truth = np.repeat(np.arange(groups), per)
    x = centres[truth] + noise * rng.normal(size=(len(truth), h))
    return x / np.linalg.norm(x, axis=1, keepdims=True), truth


def test_kmeans_finds_the_planted_groups_and_numbers_classes_densely():
    x, truth = planted()
    counts = np.arange(1, len(x) + 1)
    cls = kmeans_classes(x, counts, 4, seed=1)
    assert {frozenset(np.flatnonzero(cls == c)) for c in range(4)} == \
        {frozenset(np.flatnonzero(truth == g)) for g in range(4)}
    assert sorted(set(cls.tolist())) == list(range(cls.max() + 1))


def test_kmeans_never_leaves_a_class_number_unused_and_caps_at_v():
    x, _ = planted(groups=2, per=3)
    cls = kmeans_classes(x, np.ones(len(x)), 50)  # more classes than words: at most V, numbered densely
    assert cls.max() + 1 <= len(x) and sorted(set(cls.tolist())) == list(range(cls.max() + 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tree_paths_are_prefix_free_leaves_with_balanced_splits(seed):
    rng = np.random.default_rng(seed)
    x, _ = planted(groups=5, per=20, seed=seed)
    counts = rng.zipf(1.5, size=len(x)).clip(max=10_000)
    paths = tree_paths(x, counts, seed=seed)
    assert len(set(paths)) == len(paths) and all(set(p) <= {"0", "1"} and p for p in paths)
    assert not any(a != b and b.startswith(a) for a in paths for b in paths)
    # every split that could cut inside the balance band did: check each internal node's share of the weight
    w = np.maximum(counts, 0.5)
    prefixes = {p[:k] for p in paths for k in range(len(p))}
    for pre in prefixes:
        under = [i for i, p in enumerate(paths) if p.startswith(pre)]
        zero = [i for i in under if paths[i][len(pre)] == "0"]
        share = w[zero].sum() / w[under].sum()
        # when no word holds more than the band's width, some cut lands in the band, and the split takes one
        if w[under].max() / w[under].sum() <= BALANCE[1] - BALANCE[0]:
            assert BALANCE[0] - 1e-9 <= share <= BALANCE[1] + 1e-9, (pre, share)


def test_tree_paths_of_one_and_two_words():
    x, _ = planted(groups=1, per=2)
    assert tree_paths(x[:1], [3]) == ["0"]
    assert sorted(tree_paths(x, [3, 1])) == ["0", "1"]


class FixedContexts(torch.nn.Module):
    """A stand-in trunk whose contexts are given: ``eval_contexts`` yields them in two calls."""

    def __init__(self, ctx, targets, num_words):
        super().__init__()
        self.ctx, self.targets = ctx, targets
        self.num_words, self.hidden_size = num_words, ctx.shape[1]
        self.output = torch.nn.Linear(ctx.shape[1], num_words, bias=False)

    def eval_contexts(self, ids, batch_size=None):
        half = len(self.targets) // 2
        for s in (slice(0, half), slice(half, None)):
            yield self.ctx[s], self.targets[s], np.arange(len(self.targets))[s]


def test_mean_contexts_average_each_words_contexts_and_unseen_words_take_their_output_row():
    ctx = torch.tensor([[1.0, 0.0], [3.0, 4.0], [0.0, 2.0], [1.0, 1.0]])
    targets = torch.tensor([0, 1, 0, 1])
    model = FixedContexts(ctx, targets, num_words=3)
    with torch.no_grad():
        model.output.weight[2] = torch.tensor([0.0, -5.0])
    x, counts = mean_contexts(model, targets.numpy())
    assert counts.tolist() == [2, 2, 0]
    np.testing.assert_allclose(x[0], np.array([0.5, 1.0]) / np.hypot(0.5, 1.0))
    np.testing.assert_allclose(x[1], np.array([2.0, 2.5]) / np.hypot(2.0, 2.5))
    np.testing.assert_allclose(x[2], [0.0, -1.0])


def test_classes_from_a_model_feed_class_and_hsm(tmp_path, run_in_process):
    from helpers import write_word_corpus

    from sampledlm.neural import rundir as runs

    for split, n, seed in (("train", 80, 1), ("valid", 20, 2), ("test", 20, 3)):
        write_word_corpus(tmp_path / f"{split}.txt", n, seed)
    r = run_in_process("train", "--train", "train.txt", "--valid", "valid.txt", "--model", "ffnn", "--order", "3",
                       "-d", "6", "--hidden", "8", "--epochs", "1", "-o", "ffnn", "--threads", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("classes", "train.txt", "--from-model", "ffnn", "--classes", "3", "-o", "ffnn.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # a feed-forward model's contexts too
    assert "warning" not in r.stderr
    (tmp_path / "few.txt").write_text((tmp_path / "train.txt").read_text().splitlines()[0] + "\n")
    r = run_in_process("classes", "few.txt", "--from-model", "ffnn", "--classes", "3", "-o", "few-cls.txt",
                       cwd=tmp_path)  # a text that shows few of the model's words: said, not silent
    assert r.returncode == 0 and "never occur in few.txt: they are placed by their output rows alone" in r.stderr
    r = run_in_process("train", "--train", "train.txt", "--valid", "valid.txt", "--model", "transformer", "-d", "8",
                       "--layers", "1", "--heads", "2", "--epochs", "1", "-o", "tf", "--threads", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("classes", "train.txt", "--from-model", "tf", "--tree", "-o", "tf.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # and a Transformer's
    base = ("train", "--train", "train.txt", "--valid", "valid.txt", "--model", "gru", "-d", "8", "--hidden", "8",
            "--epochs", "1", "--batch-size", "4", "--bptt", "8", "--threads", "1")
    r = run_in_process(*base, "-o", "first", "--objective", "class", "--word-classes", "none", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("classes", "train.txt", "--from-model", "first", "--classes", "3", "-o", "ctx.txt",
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "mean contexts" in r.stderr and "classes over" in r.stderr
    vocab_words = runs.load_run(str(tmp_path / "first"))[2].words
    cls, missing = read_word_classes(str(tmp_path / "ctx.txt"), vocab_words)
    assert missing == 0 and 2 <= cls.max() + 1 <= 3
    r = run_in_process("classes", "train.txt", "--from-model", "first", "--tree", "-o", "tree.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    labels = [line.split("\t")[0] for line in (tmp_path / "tree.txt").read_text().splitlines()]
    assert len(labels) == len(vocab_words) and all(set(p) <= {"0", "1"} for p in labels)
    for objective, file in (("class", "ctx.txt"), ("hsm", "tree.txt")):
        r = run_in_process(*base, "-o", f"second-{objective}", "--objective", objective, "--word-classes", file,
                           cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        r = run_in_process("eval", f"second-{objective}", "--test", "test.txt", "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert 1 < json.loads(r.stdout)["ppl"] < 2 * len(vocab_words)


def test_classes_from_model_refusals(tmp_path, run_in_process):
    from helpers import write_word_corpus

    write_word_corpus(tmp_path / "train.txt", 20, 1)
    (tmp_path / "vocab.txt").write_text("</s>\t1\n")
    for args, words in ((("--tree",), "--tree builds its tree from a model's contexts"),
                        (("--from-model", "nowhere"), "--from-model nowhere: no such run directory"),
                        (("--from-model", "train.txt"), "--from-model train.txt: is a file, not a run directory"),
                        (("--from-model", ".", "--vocab", "vocab.txt"), "the model's own vocabulary"),
                        (("--from-model", ".", "--lowercase"), "the model's own vocabulary")):
        r = run_in_process("classes", "train.txt", "-o", "out.txt", *args, cwd=tmp_path)
        assert r.returncode == 1 and words in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "out.txt").exists()
