"""Word classes and word trees from a trained model's contexts (after Mnih & Hinton 2009).

A word's *mean context vector* is the average of the trunk outputs ``h_t`` that predict it over a text::

    x_w = (1 / n_w) sum_{t: w_{t+1} = w} h_t            x_w in R^h, n_w its count in the text

Words whose mean contexts point the same way are the words the model expects in the same places, so they
are what one class (or one subtree) of a factored output layer should hold: the class factor then decides
what the model already tells apart, and each within-class softmax what it finds hard. Mnih & Hinton (2009)
build their hierarchical softmax's tree this way from a first model and retrain: trees from the learned
vectors beat random ones by about a quarter in perplexity. Here the vectors are scaled to unit length
(the direction is what a dot product with the output rows reads) and:

- :func:`kmeans_classes`: C flat classes by count-weighted spherical k-means (cosine), for
  ``--objective class``;
- :func:`tree_paths`: a binary tree by recursive 2-means, each word's bit path (``0110``), for
  ``--objective hsm`` (a classes file whose labels are bit paths spells the tree, as Brown clustering's
  does). Each split's cut is moved along the two centroids' direction until each side holds 35-65 % of
  the node's token mass, so frequent words keep short paths, as in a Huffman tree.

A word the text never shows (count 0) has no context; its own output row stands in for it.
"""

from __future__ import annotations

import numpy as np
import torch

MIN_MOVED = 0.001  # k-means stops when fewer than this share of the words change class
BALANCE = (0.35, 0.65)  # each side of a tree split holds this share of the node's token mass, where a cut allows


@torch.no_grad()
def mean_contexts(model, ids: np.ndarray, batch_size: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """``(x [V, h] float64, unit rows; counts [V] int64)``: each word's mean context vector over the id stream
    ``ids`` (running text, as ``eval`` reads it), scaled to unit length; ``batch_size``: tokens a call, for a
    recurrent model (the others batch by their own defaults)."""
    from .rnn import RNNLM

    v = int(model.num_words)
    sums = torch.zeros(v, int(model.hidden_size), dtype=torch.float64)
    # a recurrent model reads batch_size tokens a call; the others count batches in windows or histories: their own
    kw = {"batch_size": batch_size} if isinstance(model, RNNLM) else {}
    was_training = model.training
    model.eval()
    try:
        for ctx, targets, _, *rows in model.eval_contexts(np.asarray(ids, dtype=np.int64), **kw):
            if rows:  # feed-forward: one context per distinct history, rows[0] maps each prediction to its own
                ctx = ctx[rows[0]]
            sums.index_add_(0, targets.cpu(), ctx.detach().double().cpu())
    finally:
        model.train(was_training)
    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=v)[:v].astype(np.int64)
    x = sums.numpy()
    unseen = counts == 0
    if unseen.any():
        x[unseen] = model.output.weight.detach().double().cpu().numpy()[unseen]
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norm, 1e-12), counts


def kmeans_classes(x: np.ndarray, counts: np.ndarray, num_classes: int, seed: int = 0,
                   iterations: int = 50) -> np.ndarray:
    """``int64 [V]`` classes ``0..C'-1`` (C' <= C, no class empty) of the unit rows ``x [V, h]``: spherical k-means,
    each word weighted by its count (at least 1/2, so unseen words still count), seeded by drawing C words
    in proportion to their weights; an emptied class is given a word at random again. Stops when fewer
    than 0.1 % of the words move, or after ``iterations``. O(iterations V C h)."""
    v = len(x)
    c = max(1, min(int(num_classes), v))
    w = np.maximum(np.asarray(counts, dtype=np.float64), 0.5)
    rng = np.random.default_rng(seed)
    centres = x[rng.choice(v, c, replace=False, p=w / w.sum())]
    assign = np.argmax(x @ centres.T, axis=1)
    for _ in range(iterations):
        sums = np.zeros_like(centres)
        np.add.at(sums, assign, x * w[:, None])
        empty = np.bincount(assign, minlength=c) == 0
        if empty.any():
            sums[empty] = x[rng.choice(v, int(empty.sum()), replace=False)]
        centres = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
        new = np.argmax(x @ centres.T, axis=1)
        moved = float((new != assign).mean())
        assign = new
        if moved < MIN_MOVED:
            break
    return np.unique(assign, return_inverse=True)[1].astype(np.int64)


def tree_paths(x: np.ndarray, counts: np.ndarray, seed: int = 0) -> list[str]:
    """Each word's bit path in a binary tree over the unit rows ``x [V, h]`` (recursive 2-means; see the module
    docstring). Every word is a leaf; no path is a prefix of another; one word alone gets ``"0"``."""
    v = len(x)
    w = np.maximum(np.asarray(counts, dtype=np.float64), 0.5)
    rng = np.random.default_rng(seed)
    paths = [""] * v
    stack = [(np.arange(v), "")]
    while stack:
        words, prefix = stack.pop()
        if len(words) == 1:
            paths[int(words[0])] = prefix or "0"
            continue
        left, right = _split(x[words], w[words], rng)
        stack.append((words[right], prefix + "1"))
        stack.append((words[left], prefix + "0"))
    return paths


def _split(x: np.ndarray, w: np.ndarray, rng, rounds: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Two non-empty index sets of the rows ``x [n, h]`` (n >= 2): 2-means (cosine), then the cut along the
    centroids' direction nearest to 2-means's own that gives each side a share of the weight within
    :data:`BALANCE` (or the share nearest to one half, when no cut does)."""
    n = len(x)
    if n == 2:  # the second word on the first side (the order the PTB runs' trees were built in)
        proj = np.array([0.0, 1.0])
    else:
        centres = x[rng.choice(n, 2, replace=False, p=w / w.sum())]
        for _ in range(rounds):
            first = (x @ centres[0]) >= (x @ centres[1])
            if first.all() or not first.any():
                break
            new = np.stack([(x[first] * w[first, None]).sum(0), (x[~first] * w[~first, None]).sum(0)])
            if np.allclose(new, centres):
                break
            centres = new
        proj = x @ (centres[0] - centres[1])
    order = np.argsort(-proj, kind="stable")
    share = np.cumsum(w[order])[:-1] / w.sum()  # the first side's share for a cut after each position
    natural = int((proj >= 0).sum())
    allowed = np.flatnonzero((share >= BALANCE[0]) & (share <= BALANCE[1])) + 1
    cut = int(allowed[np.argmin(np.abs(allowed - natural))]) if len(allowed) else int(np.argmin(np.abs(share - 0.5))) + 1
    return order[:cut], order[cut:]
