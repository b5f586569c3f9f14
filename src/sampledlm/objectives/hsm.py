"""Hierarchical softmax over a binary Huffman tree (Morin & Bengio 2005; Mikolov et al. 2013).

The V words are the leaves of a binary tree with V-1 internal nodes. A word's probability is the
product of binary decisions along its path n_1 .. n_L(w) from the leaf up to the root::

    log P(w|h) = sum_j log σ(s_j(w) · (W_{n_j} . h + b_{n_j}))

with ``s_j(w) = +1`` when w lies under node n_j's first child and -1 under its second. At every
node the two branches' probabilities sum to one, so P is normalised over V by construction.

Internal node ``i`` (0 .. V-2) is scored by the model's output row ``i``: ``a_i(h) = W_i . h + b_i``
(the scorer's ``score_each``), so the objective has no parameters of its own and the output layer
takes sparse gradients (only the rows on the batch's paths). With a *tied* recurrent model this
ties word i's input embedding to node i's vector; train with ``--no-tie`` for independent ones.

The tree is a Huffman tree by training count (word2vec's): a frequent word has a short path, and
the mean path length is within one bit of the unigram entropy, so training costs O(h log V) per
token. With ``word_classes`` (a file of word classes, e.g. the exchange algorithm's from
``sampledlm classes``) each class becomes a subtree: a Huffman tree within each class, then one over
the classes by their counts (:func:`~.structure.class_huffman_tree`), so the top decisions choose
among groups of words that occur in like contexts, as in Mnih & Hinton (2009)'s trees built from
word clusters (the issue asked for a balanced tree over the clusters; a Huffman tree keeps the same
grouping with shorter paths for the frequent words and classes). When the file's class labels are bit paths, as
Brown clustering writes them (``0110<TAB>word<TAB>count``, Liang 2005), the tree over the classes is the one those
paths spell instead of a Huffman tree. Paths are padded to the longest one in the batch: a step is one ``[N, L]`` gather-product
(``score_each``). The tree (``parent``, ``side``) and the padded paths are saved with the model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .base import OutputObjective, Scorer
from .structure import attach_word_classes, class_huffman_tree, huffman_tree, settle_word_classes, word_paths


def tree_levels(parent: np.ndarray) -> list[np.ndarray]:
    """Vertices by depth below the root (the root excluded): ``[depth 1 vertices, depth 2, ...]``."""
    root = len(parent) - 1
    depth_known = np.zeros(len(parent), dtype=bool)
    depth_known[root] = True
    levels = []
    frontier = np.zeros(len(parent), dtype=bool)
    frontier[root] = True
    while True:
        has_parent = parent >= 0
        nxt = np.zeros(len(parent), dtype=bool)
        nxt[has_parent] = frontier[parent[has_parent]]
        if not nxt.any():
            return levels
        levels.append(np.flatnonzero(nxt))
        frontier = nxt


class HierarchicalSoftmax(OutputObjective):
    """Hierarchical softmax over a Huffman tree (see the module docstring). Needs V >= 2.

    Shapes: ``ctx [N, h]``, ``targets [N]`` -> scalar mean ``-log P(y|h)``; per step O(N L h) with L
    the longest path among the batch's targets (about log2 V).
    """

    name = "hsm"
    sparse_output = True  # only the rows of the nodes on the batch's paths
    # The output rows are the tree's nodes: tied, word i's input embedding would be node i's vector.
    model_settings = {"tie": (False, "input and output embeddings untied (the output rows are the tree's nodes; "
                                     "give --tie to tie them anyway)")}

    def __init__(self, counts=None, *, word_classes: str | None = None):
        super().__init__(counts)
        self.counts = None if counts is None else np.asarray(counts)
        self.word_classes_path = word_classes  # read in attach (set_word_classes), not here
        self.bound = False

    def bind(self, scorer: Scorer) -> None:
        v = int(scorer.num_words)
        if v < 2:
            raise ValueError("hierarchical softmax needs at least 2 words")
        counts = np.ones(v) if self.counts is None else self.counts
        if len(counts) != v:
            raise ValueError(f"counts has {len(counts)} entries, the scorer {v} words")
        parent, side = huffman_tree(counts)
        self.register_buffer("parent", torch.from_numpy(parent))
        self.register_buffer("side", torch.from_numpy(side))
        self._derive()
        self.register_load_state_dict_post_hook(lambda module, keys: module._derive())
        self.bound = True

    def settle_options(self, options: dict, vocab) -> tuple[dict, list[str]]:
        return settle_word_classes(options, vocab)

    def attach(self, vocab, fresh: bool, open_ngram) -> None:
        attach_word_classes(self, vocab, fresh)

    def set_word_classes(self, cls, labels=None) -> None:
        """Rebuild the tree so that each class of ``cls [V]`` is a subtree (:func:`class_huffman_tree`;
        e.g. the exchange algorithm's classes; ``labels [C]``: the classes' names, bit paths arrange the
        classes' tree); after :meth:`bind`, before training."""
        self._check()
        cls = np.asarray(cls, dtype=np.int64)
        if len(cls) != self.num_words:
            raise ValueError(f"word classes for {len(cls)} words, the model has {self.num_words}")
        counts = np.ones(self.num_words) if self.counts is None else self.counts
        parent, side = class_huffman_tree(counts, cls, labels)
        self.parent.copy_(torch.from_numpy(parent))
        self.side.copy_(torch.from_numpy(side))
        self._derive()

    def _derive(self) -> None:
        """Padded paths and tree levels from the (saved) ``parent`` / ``side`` buffers."""
        parent, side = self.parent.cpu().numpy(), self.side.cpu().numpy()
        v = (len(parent) + 1) // 2
        nodes, signs = word_paths(parent, side, v)
        dev = self.parent.device
        self.nodes, self.signs = nodes.to(dev), signs.to(dev)  # [V, L]: path nodes leaf to root, ±1 (0: padding)
        self.path_len = (signs != 0).sum(1).to(dev)
        self.levels = [torch.from_numpy(x).to(dev) for x in tree_levels(parent)]
        self.num_words = v

    def _apply(self, fn, *args, **kwargs):  # keep the derived tensors on the buffers' device
        out = super()._apply(fn, *args, **kwargs)
        if self.bound:
            self._derive()
        return out

    def _check(self) -> None:
        if not self.bound:
            raise RuntimeError("hsm: call objective.bind(scorer) once before use (it builds the tree)")

    def log_prob_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """Exact ``log P(y_i | h_i)``, ``[N]``: one ``[N, L]`` gather-product along the padded paths."""
        self._check()
        length = int(self.path_len[targets].max())
        nodes, signs = self.nodes[targets, :length], self.signs[targets, :length]
        a = scorer.score_each(ctx, nodes).float()
        return (F.logsigmoid(signs * a) * (signs != 0)).sum(1)

    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        return -self.log_prob_targets(scorer, ctx, targets).mean()

    def log_prob(self, scorer: Scorer, ctx: Any) -> torch.Tensor:
        """Exact ``log P(w | h)`` over all V, ``[N, V]``: log-probabilities pushed down the tree one
        level at a time (O(N V) after one ``[N, h] x [h, V-1]`` product)."""
        self._check()
        v = self.num_words
        a = scorer.score_all(ctx)[:, : v - 1].float()  # internal node scores [N, V-1]
        lp = a.new_zeros(a.shape[0], 2 * v - 1)
        for verts in self.levels:
            par = self.parent[verts]
            sign = 1.0 - 2.0 * self.side[verts].to(a.dtype)
            lp = lp.index_copy(1, verts, lp[:, par] + F.logsigmoid(sign * a[:, par - v]))
        return lp[:, :v]
