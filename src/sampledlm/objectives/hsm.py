"""Hierarchical softmax over a binary Huffman tree (Morin & Bengio 2005; Mikolov et al. 2013).

The V words are the leaves of a binary tree with V-1 internal nodes. A word's probability is the
product of binary decisions along its path n_1 .. n_L(w) from the leaf up to the root::

    log P(w|h) = sum_j log σ(s_j(w) · (W_{n_j} . h + b_{n_j}))

with ``s_j(w) = +1`` when w lies under node n_j's first child and -1 under its second. At every
node the two branches' probabilities sum to one, so P is normalised over V by construction.

Internal node ``i`` (0 .. V-2) is scored by the model's output row ``i``: ``a_i(h) = W_i . h + b_i``
(the scorer's ``score_each``), so the objective has no parameters of its own and the output layer
takes sparse gradients (only the rows on the batch's paths). With a *tied* recurrent model this
would tie word i's input embedding to node i's vector, so binary trees are untied unless ``--tie`` is given.

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

**Wider nodes** (``arity`` K = 2^d > 2): every d levels of the binary tree become one node, a softmax over its up to
K children (:func:`~.structure.collapse_tree`)::

    log P(w|h) = sum_j [ s_{u_j}(h) - log sum_{u' sibling of u_j} exp s_{u'}(h) ]

along the word's path u_1 = w, u_2, ... in the new tree, where a word's score is the model's ``a_w(h)`` and an
internal node's ``s_i(h) = N_i . h + c_i`` comes from this objective's own node layer ``[I, h]`` (I about
V / (K - 1)). A step costs O(L K h) per token for L = depth / d levels. K = 2 is the binary tree above (one
logistic per node, no parameters of its own); larger K trades speed for fewer, better-informed decisions; the two
levels of the class-based softmax are its limit. With word classes the collapse keeps to them: each class's
subtree starts a node of its own, and a class of at most K words is one node over exactly its words (as a class of
the class layer is), so no node mixes a class's words with others'. With ``components`` M > 1 a node scores the log-sum-exp of M
linear scores, ``s_i(h) = log sum_k exp(N_{i,k} . h + c_{i,k})`` (node layer ``[I M, h]``), as the class layer's
classes do (:mod:`.classes`). On the CPU, with row-sparse float32 layers (a recurrent model's default), a step's
siblings are scored pair by pair in compiled loops (:mod:`.hsm_paired`); elsewhere by the products below.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..config import option, setting_name, setting_value
from ..errors import UserError
from .base import Scorer
from .options import WordClassOptions, like
from .cpu_linear import FastLinear, fast_linear
from .hsm_paired import step_log_probs
from .structure import (WordClassObjective, class_heads, class_huffman_tree, collapse_tree, concat_ranges, hidden_width,
                        launch_bound, output_rows, huffman_tree, word_paths)


# A parent's children are scored as one block (_sibling_lse) once the batch's steps through it need at least this
# many scores (steps x children); fewer gather their own rows. Measured at V = 10k, h = 200, 1,120 targets, one
# thread, K = 16, 64 and 128: thresholds from 4 to 32 within each other's noise, 256 or more and gathering every
# step's siblings slower (at K = 128: 29-35 ms a step against 72 ms from 256 and 508-586 ms gathered).
GROUP_MIN = 16
# The same where a product costs a launch (a GPU: structure.launch_bound): on an H200 at V = 485k, K = 128, 1,120
# targets, every step gathering its siblings ran 11.9x the block a parent (about 670 parents a batch); a parent is
# a block there only when its steps need a million scores or more (the root of a batch of tens of thousands).
GROUP_MIN_LAUNCHED = 1 << 20


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


@dataclass
class HSMOptions(WordClassOptions):
    word_classes: str | None = like(WordClassOptions, "word_classes", recurrent="auto")
    components: int = like(WordClassOptions, "components", recurrent=4, recurrent_unless=("arity",))
    arity: int = option(2, "hsm: children per tree node, a power of two: 2 is the binary tree of logistic decisions; "
                           "2^d makes every d levels one softmax over up to 2^d children (its own node layer)", min=2,
                        recurrent=128)

    def __post_init__(self):
        arity, components = self.arity, self.components
        if arity < 2 or arity & (arity - 1):
            raise UserError(f"{setting_value('arity', arity)}: a power of two (2, 4, 8, 16, ...)")
        if components < 1:
            raise UserError(f"{setting_value('components', components)}: at least 1")
        if components > 1 and arity == 2:
            raise UserError(f"{setting_name('components')} applies to hsm's node layer, which binary nodes do not have: "
                            f"give {setting_value('arity', 4)} or more")


class HierarchicalSoftmax(WordClassObjective):
    """Hierarchical softmax over a Huffman tree (see the module docstring). Needs V >= 2.

    Shapes: ``ctx [N, h]``, ``targets [N]`` -> scalar mean ``-log P(y|h)``; per step O(N L h) with L
    the longest path among the batch's targets (about log2 V).
    """

    name = "hsm"
    sparse_output = True  # only the rows of the nodes on the batch's paths
    # Binary nodes: the output rows are the tree's internal nodes, and tied, word i's input embedding would be node
    # i's vector. Wider nodes score a word by its own output row (as the class layer does): tied as the model is.
    model_settings = {"tie": (False, "input and output embeddings untied (with --arity 2 the output rows are the "
                                     "tree's internal nodes; give --tie to tie them anyway)")}
    Options = HSMOptions
    sequence_train = {"lr": 0.008}
    sequence_why = ("PTB's GRU-256, 8 epochs, against the softmax's 98.58: binary decisions over the exchange "
                    "algorithm's classes gave 124.05 (+25.8 %), 16-way nodes over them 112.19 (+13.8 %), 128-way nodes "
                    "107.86 (+9.4 %), and 128-way nodes each scored by the log-sum-exp of 4 linear scores 102.87 (+4.4 %) at "
                    "2.9x the softmax's words per CPU second; against the softmax at its tuned 0.004 (92.01), wide nodes "
                    "that keep to the classes (each class its own node) 95.33 at lr 0.008 (valid 100.75, against 101.68 "
                    "at 0.004: test 95.37), where nodes cut across the classes gave 97.80 at 0.004")
    sequence_train_long = ((20_000, {"lr": 0.002},
                            "over the first epoch of a 4-epoch cosine run of about 52,500 steps on 14.7M words of "
                            "Wikipedia at V = 485k (its 1,393 exchange classes, 128-way nodes): 0.008 358.27, 0.004 "
                            "295.36, 0.002 275.76, 0.001 291.27; PTB's 8 epochs take 6,640 steps"),)

    @classmethod
    def model_settings_for(cls, flags: dict, recurrent: bool) -> dict:
        """Untied only for binary nodes: with ``--arity`` 4 or more a word's score is its own output row, tied to its
        input embedding as in the class layer (PTB's GRU-256 at lr 0.004: valid 103.74 / test 97.80 tied, against
        105.30 / 100.26 untied, which overfit from epoch 5)."""
        arity = flags.get("arity") or (cls.sequence_defaults.get("arity") if recurrent else None) or 2
        return cls.model_settings if arity == 2 else {}

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        self.arity = int(self.options.arity)
        self.bits = self.arity.bit_length() - 1
        self.sparse_nodes = False

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
        # the vertices heading a word class's subtree: wide nodes never cross them (:func:`collapse_tree`)
        self.register_buffer("heads", torch.zeros(len(parent), dtype=torch.bool))
        self.hidden = hidden_width(scorer) if self.arity > 2 else None
        # the node layer takes row-sparse gradients when the model's output rows do (the trainer then updates the
        # touched rows only): at V = 485k it has 252,916 rows, and a dense gradient, its clipping and Adam's update
        # over all of them took about half of each training step
        self.sparse_nodes = bool(getattr(output_rows(scorer), "sparse", False))
        self._derive()
        self.register_load_state_dict_post_hook(lambda module, keys: module._derive())
        self.bound = True

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
        self.heads.copy_(torch.from_numpy(class_heads(parent, cls)))
        self._derive()

    def upgrade_state(self, tensors: dict) -> dict:
        """Adopt the tree saved with the weights before they load (its node layer's size follows the tree)."""
        saved = tensors.get("parent")
        if saved is not None and "heads" not in tensors:  # written before wide nodes kept to word classes
            tensors["heads"] = torch.zeros(saved.shape, dtype=torch.bool)
        if self.bound and self.arity > 2 and saved is not None and saved.shape == self.parent.shape \
                and not (torch.equal(saved.to(self.parent.device), self.parent)
                         and torch.equal(tensors["heads"].to(self.heads.device), self.heads)):
            self.parent.copy_(saved)
            self.side.copy_(tensors.get("side", self.side))
            self.heads.copy_(tensors["heads"])
            self._derive()
        return tensors

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
        if self.arity > 2:
            self._derive_wide(parent, v, dev)

    def _derive_wide(self, parent: np.ndarray, v: int, dev) -> None:
        """The K-ary tree's tables (:func:`collapse_tree`) and a node layer ``[I, h]`` (kept when I is unchanged)."""
        t = collapse_tree(parent, v, self.bits, self.heads.cpu().numpy())
        for name in ("children", "parent_of", "path_parent", "path_pos"):  # (children: nn.Module.children is a method)
            setattr(self, "child_codes" if name == "children" else name, torch.from_numpy(t[name]).to(dev))
        self.path_steps = (self.path_pos >= 0).sum(1)
        kids = t["children"]
        is_word, is_node = (kids >= 0) & (kids < v), kids >= v
        # each child's column among its parent's children listed words first, then nodes (-1: padding)
        col = np.where(is_word, np.cumsum(is_word, 1) - 1, is_word.sum(1, keepdims=True) + np.cumsum(is_node, 1) - 1)
        self.child_col = torch.from_numpy(np.where(kids >= 0, col, -1)).to(dev)
        for kind, mask, shift in (("word", is_word, 0), ("node", is_node, v)):
            count = mask.sum(1)  # each parent's children of that kind, listed one parent after another
            setattr(self, f"{kind}_kids", torch.from_numpy(kids[mask] - shift).to(dev))
            setattr(self, f"{kind}_kids_start", torch.from_numpy(np.cumsum(count) - count).to(dev))
            setattr(self, f"{kind}_kids_count", torch.from_numpy(count).to(dev))
        depth = t["node_depth"]
        self.node_levels = [torch.from_numpy(np.flatnonzero(depth == k)).to(dev) for k in range(1, int(depth.max(initial=0)) + 1)]
        num_nodes = len(depth)
        layer = self._modules.get("node_layer")
        if layer is None or layer.out_features != num_nodes * self.components:
            with warnings.catch_warnings():  # a tree of one level (V <= arity) has no inner node: an empty layer
                warnings.filterwarnings("ignore", "Initializing zero-element tensors")
                layer = FastLinear(self.hidden, num_nodes * self.components)
            torch.nn.init.zeros_(layer.bias)
            self.node_layer = layer.to(device=dev, dtype=self._node_dtype())

    def _node_dtype(self):
        """The floating dtype of the node layer: that of an existing one (after ``.double()``), else the default."""
        layer = self._modules.get("node_layer")
        return layer.weight.dtype if layer is not None else torch.get_default_dtype()

    def _apply(self, fn, *args, **kwargs):  # keep the derived tensors on the buffers' device
        out = super()._apply(fn, *args, **kwargs)
        if self.bound:
            self._derive()
        return out

    def _check(self) -> None:
        if not self.bound:
            raise RuntimeError("hsm: call objective.bind(scorer) once before use (it builds the tree)")

    def log_prob_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """Exact ``log P(y_i | h_i)``, ``[N]``: one ``[N, L]`` gather-product along the padded paths (K-ary:
        ``[N, L, K]``, each step's siblings)."""
        self._check()
        if self.arity > 2:
            return self._wide_targets(scorer, ctx, targets)
        length = int(self.path_len[targets].max())
        nodes, signs = self.nodes[targets, :length], self.signs[targets, :length]
        a = scorer.score_each(ctx, nodes).float()
        return (F.logsigmoid(signs * a) * (signs != 0)).sum(1)

    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        return -self.log_prob_targets(scorer, ctx, targets).mean()

    def _wide_targets(self, scorer: Scorer, ctx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """K-ary ``log P(y_i | h_i)``: the sum over the path's steps of the chosen child's score less the
        log-sum-exp of its siblings' (:meth:`_sibling_lse`); words are scored by the model, nodes by the node layer."""
        n = len(targets)
        steps = int(self.path_steps[targets].max())
        pos = self.path_pos[targets, :steps]  # [N, L]
        valid = pos >= 0
        tok = torch.arange(n, device=ctx.device).unsqueeze(1).expand(n, steps)[valid]  # [P] each step's history
        par = self.path_parent[targets, :steps][valid]  # [P] its parent node
        if self._pairs_in_place(scorer, ctx):
            col = self.child_col[par, pos[valid]]
            step_lp = step_log_probs(self, output_rows(scorer), ctx, tok, par, col)
        else:
            step_lp = (self._code_scores(scorer, ctx, tok, self.child_codes[par, pos[valid]])
                       - self._sibling_lse(scorer, ctx, tok, par))
        return torch.zeros(n, dtype=step_lp.dtype, device=ctx.device).index_add(0, tok, step_lp)

    def _code_scores(self, scorer: Scorer, ctx: torch.Tensor, tok: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
        """``[P]`` float32 scores of the children ``code [P]`` (words ``< V``, nodes ``V + i``) for the histories
        ``ctx[tok]``."""
        v = self.num_words
        is_word = code < v
        word_at, node_at = is_word.nonzero().squeeze(1), (~is_word).nonzero().squeeze(1)
        a_word = scorer.score_targets(ctx[tok[word_at]], code[word_at]).float()
        node = code[node_at] - v
        w, b = self._node_rows_at(node)
        a_node = ((w * ctx[tok[node_at]].unsqueeze(1)).sum(-1) + b).float().logsumexp(-1)
        return torch.cat([a_word, a_node])[torch.argsort(torch.cat([word_at, node_at]))]

    def _sibling_lse(self, scorer: Scorer, ctx: torch.Tensor, tok: torch.Tensor, par: torch.Tensor) -> torch.Tensor:
        """``[P]``: ``log sum_{u child of par} exp s_u(h_tok)`` for each (history, parent) step.

        A parent that enough of the batch's steps pass (the root and the nodes near it: every token's path
        starts at the root; :data:`GROUP_MIN`) has its children scored as one block, ``[n_p, h] x [h, k_p]``, as the class layer scores a
        class (:meth:`~.classes.ClassSoftmax._within_per_class`): one product instead of gathering the same k_p
        rows n_p times, which made wide nodes memory-bound (at K = 128 slower than the full softmax). The
        other steps gather their own siblings."""
        uniq, inv, cnt = torch.unique(par, return_inverse=True, return_counts=True)
        big = cnt * (self.word_kids_count[uniq] + self.node_kids_count[uniq]) >= (
            GROUP_MIN_LAUNCHED if launch_bound(ctx) else GROUP_MIN)
        pieces, where = [], []
        small = (~big)[inv].nonzero().squeeze(1)
        if len(small):
            pieces.append(self._gathered_lse(scorer, ctx, tok[small], par[small]))
            where.append(small)
        if big.any():
            grouped = big[inv].nonzero().squeeze(1)
            order = grouped[torch.argsort(inv[grouped], stable=True)]  # steps by parent, in the order of uniq
            parents = uniq[big]
            sizes = cnt[big].tolist()
            words, word_sizes = self._kids("word", parents)
            nodes, node_sizes = self._kids("node", parents)
            h = ctx[tok[order]]
            word_blocks = scorer.score_blocks(h, sizes, words, word_sizes)
            # a node's score is the log-sum-exp of its components', so the siblings' is over every component's
            m = self.components
            node_w, node_b = self._node_rows_at(nodes)
            node_w, node_b = node_w.reshape(-1, node_w.shape[-1]), node_b.reshape(-1)
            lses = [torch.logsumexp(torch.cat([wb.float(), fast_linear(hg, nw, nb).float()], 1), 1)
                    for hg, wb, nw, nb in zip(h.split(sizes), word_blocks,
                                              node_w.split([k * m for k in node_sizes]),
                                              node_b.split([k * m for k in node_sizes]))]
            pieces.append(torch.cat(lses))
            where.append(order)
        return torch.cat(pieces)[torch.argsort(torch.cat(where))]

    def _pairs_in_place(self, scorer: Scorer, ctx: Any) -> bool:
        """Whether a step's children go to the compiled pair loops (:mod:`.hsm_paired`): the model's output rows and
        the node layer both take row-sparse gradients, float32 on the CPU."""
        layer = output_rows(scorer)
        return (self.sparse_nodes and torch.is_tensor(ctx) and ctx.device.type == "cpu"
                and ctx.dtype != torch.float64 and bool(getattr(layer, "sparse", False))
                and getattr(layer, "weight", None) is not None
                and layer.weight.dtype == torch.float32 and self.node_layer.weight.dtype == torch.float32)

    def _node_rows_at(self, nodes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The node layer's rows of ``nodes [P]``: ``(weight [P, M, h], bias [P, M])``, each node's M components;
        the weight's gradient row-sparse when :attr:`sparse_nodes` (the bias's, ``[I M]`` floats, stays dense)."""
        layer, m = self.node_layer, self.components
        rows = nodes.unsqueeze(1) * m + torch.arange(m, device=nodes.device)  # [P, M]
        return F.embedding(rows, layer.weight, sparse=self.sparse_nodes), layer.bias[rows]

    def sparse_parameters(self) -> list[torch.nn.Parameter]:
        """The node layer's weight when it takes row-sparse gradients (:meth:`_node_rows_at`); the trainer gives
        it a row-wise optimiser (:func:`sampledlm.neural.optim.make_optimizers`)."""
        layer = self._modules.get("node_layer")
        return [layer.weight] if layer is not None and self.sparse_nodes else []

    def _kids(self, kind: str, parents: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        """The children of one kind (``word``: word ids, ``node``: node-layer rows) of each of ``parents``, one
        parent after another: ``(ids [S], count per parent)``."""
        flat, start, count = (getattr(self, f"{kind}_kids{x}") for x in ("", "_start", "_count"))
        size = count[parents]
        return concat_ranges(flat, start[parents], size)[1], size.tolist()

    def _gathered_lse(self, scorer: Scorer, ctx: torch.Tensor, tok: torch.Tensor, par: torch.Tensor) -> torch.Tensor:
        """``[P]`` siblings' log-sum-exp by gathering each step's own children (only those that exist)."""
        sib = self.child_codes[par]  # [P, K] codes, -1 padding
        present = sib >= 0
        at = present.nonzero()
        flat = self._code_scores(scorer, ctx, tok[at[:, 0]], sib[present])
        a = torch.full(sib.shape, float("-inf"), dtype=flat.dtype, device=flat.device).masked_scatter(present, flat)
        return torch.logsumexp(a, 1)

    def _wide_log_prob(self, scorer: Scorer, ctx: torch.Tensor) -> torch.Tensor:
        """``[N, V]`` for the K-ary tree: each child's log-probability given its parent by a scatter over parents,
        then pushed down one level at a time."""
        v, num_nodes = self.num_words, self.node_layer.out_features // self.components
        nodes = self.node_layer(ctx).float().view(ctx.shape[0], num_nodes, self.components).logsumexp(-1)
        s = torch.cat([scorer.score_all(ctx)[:, :v].float(), nodes], 1)  # [N, V+I] by code
        n, par = s.shape[0], self.parent_of
        top = torch.full((n, num_nodes + 1), float("-inf"), device=s.device)
        top = top.scatter_reduce(1, par.expand(n, -1), s.detach(), reduce="amax")
        lse = top + torch.zeros_like(top).scatter_add(1, par.expand(n, -1), (s - top[:, par]).exp()).log()
        cond = s - lse[:, par]  # log P(child | parent)
        node_lp = s.new_zeros(n, num_nodes + 1)  # the root's column (last) stays 0
        for nodes in self.node_levels:
            node_lp = node_lp.index_copy(1, nodes, cond[:, v + nodes] + node_lp[:, par[v + nodes]])
        return cond[:, :v] + node_lp[:, par[:v]]

    def log_prob(self, scorer: Scorer, ctx: Any) -> torch.Tensor:
        """Exact ``log P(w | h)`` over all V, ``[N, V]``: log-probabilities pushed down the tree one
        level at a time (O(N V) after one ``[N, h] x [h, V-1]`` product)."""
        self._check()
        if self.arity > 2:
            return self._wide_log_prob(scorer, ctx)
        v = self.num_words
        a = scorer.score_all(ctx)[:, : v - 1].float()  # internal node scores [N, V-1]
        lp = a.new_zeros(a.shape[0], 2 * v - 1)
        for verts in self.levels:
            par = self.parent[verts]
            sign = 1.0 - 2.0 * self.side[verts].to(a.dtype)
            lp = lp.index_copy(1, verts, lp[:, par] + F.logsigmoid(sign * a[:, par - v]))
        return lp[:, :v]
