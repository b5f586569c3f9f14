"""What the structured output objectives (``class``, ``hsm``, ``adaptive``) share: word frequency
order, the Huffman tree, and the size of the hidden states they read.

Everything here is a pure function of the training counts, so a model rebuilt from its
``vocab.txt`` gets the same structure; the objectives still save it as buffers with the model.
"""

from __future__ import annotations

import heapq
import math

import numpy as np
import torch

from ..data.clusters import is_bit_path
from ..errors import UserError
from .base import OutputObjective


def output_rows(scorer):
    """The scorer's output layer: the scorer itself when it is one (it has ``sparse``), else the model's
    ``.output`` (None when it has neither)."""
    return scorer if getattr(scorer, "sparse", None) is not None else getattr(scorer, "output", None)


def launch_bound(x) -> bool:
    """Whether work on ``x``'s device costs a fixed time a kernel (a GPU), so that many small products lose to one
    large one: there the structured outputs split a batch into fewer pieces than on the CPU. Measured at V = 485k
    on an H200 (1,120 targets a step, h = 256, benchmarks/notes/gpu-structured-paths.sh): the class layer's
    product a class, about 500 a step, 5,327 tokens a second against 51,155 with one product against the
    union of the batch's classes; hsm's block a parent 4,367 against 51,938 with every step gathering its siblings;
    the same losses to 5 digits."""
    return torch.is_tensor(x) and x.device.type != "cpu"


def frequency_order(counts, num_words: int) -> np.ndarray:
    """Word ids by decreasing count (ties by id), ``int64 [V]``; ids in order without counts."""
    if counts is None:
        return np.arange(num_words, dtype=np.int64)
    c = np.asarray(counts, dtype=np.float64)
    if len(c) != num_words:
        raise ValueError(f"counts has {len(c)} entries, expected {num_words}")
    return np.argsort(-c, kind="stable").astype(np.int64)


def hidden_width(scorer) -> int:
    """``h``, the width of ``ctx``, for objectives with output parameters of their own."""
    h = getattr(scorer, "hidden_size", None)
    if h is None:
        raise UserError(f"this output objective needs hidden states [N, h]; {type(scorer).__name__} has no hidden_size")
    return int(h)


def check_words(counts, num_words: int | None, name: str) -> int:
    """V from the counts (the structure is built from them), at least 2 words."""
    if counts is None:
        raise UserError(f"objective {name!r} builds its structure from word counts: give counts")
    v = len(counts)
    if num_words is not None and v != num_words:
        raise ValueError(f"counts has {v} entries, the scorer {num_words} words")
    if v < 2:
        raise UserError(f"objective {name!r} needs at least 2 words")
    return v


def _merge(heap: list, parent: np.ndarray, side: np.ndarray, nxt: int) -> tuple[int, int]:
    """Huffman-merge the ``(weight, tie-break, vertex)`` heap down to one; returns (its vertex, next free id)."""
    heapq.heapify(heap)
    while len(heap) > 1:
        w0, _, a = heapq.heappop(heap)
        w1, _, b = heapq.heappop(heap)
        parent[a], side[a] = nxt, 0
        parent[b], side[b] = nxt, 1
        heapq.heappush(heap, (w0 + w1, nxt, nxt))
        nxt += 1
    return heap[0][2], nxt


def class_huffman_tree(counts, word_class, labels=None) -> tuple[np.ndarray, np.ndarray]:
    """A binary tree over V >= 2 words that keeps each class a subtree: a Huffman tree over each
    class's words by count, then one over the classes by their total count. Same layout as
    :func:`huffman_tree` (words ``0 .. V-1``, internal nodes after them, root last). Among trees whose
    top splits separate whole classes, this one has the shortest mean path for the training counts.

    When every class label (``labels [C]``, ``None`` allowed for one class) is a bit path, as Brown clustering's
    output names classes (Liang 2005), the tree over the classes is the one those paths spell: classes sharing a
    prefix share a subtree, so the top decisions separate groups of similar words rather than groups of
    similar counts. A class labelled ``None`` (words the file lacks) joins at the root.
    """
    c = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    cls = np.asarray(word_class, dtype=np.int64)
    v = len(c)
    parent = np.full(2 * v - 1, -1, dtype=np.int64)
    side = np.zeros(2 * v - 1, dtype=np.int64)
    order = np.argsort(cls, kind="stable")
    bounds = np.flatnonzero(np.diff(cls[order])) + 1
    nxt, tops = v, []
    for members in np.split(order, bounds):
        root, nxt = _merge([(float(c[i]), int(i), int(i)) for i in members], parent, side, nxt)
        tops.append((float(c[members].sum()), root, root))
    if labels is not None and sum(is_bit_path(x) for x in labels) == len(labels) - sum(x is None for x in labels) \
            and any(is_bit_path(x) for x in labels):
        ordered = [labels[k] for k in np.unique(cls).tolist()]
        paths = [(lab, t[2]) for lab, t in zip(ordered, tops) if lab is not None]
        root, nxt = _prefix_merge(paths, 0, parent, side, nxt)
        rest = [(0.0, t[2], t[2]) for lab, t in zip(ordered, tops) if lab is None]
        _merge([(0.0, root, root), *rest], parent, side, nxt)
        return parent, side
    _merge(tops, parent, side, nxt)
    return parent, side


def _prefix_merge(paths: list, depth: int, parent: np.ndarray, side: np.ndarray, nxt: int) -> tuple[int, int]:
    """Join the subtrees ``paths = [(bit path, vertex)]`` as their paths spell from ``depth`` on: one node per
    branching prefix (a prefix with one branch adds none). A path that ends here goes to the 0 side."""
    if len(paths) == 1:
        return paths[0][1], nxt
    zero = [p for p in paths if len(p[0]) <= depth or p[0][depth] == "0"]
    one = [p for p in paths if len(p[0]) > depth and p[0][depth] == "1"]
    if not zero or not one:
        if all(len(p[0]) <= depth for p in paths):  # no bit left to tell them apart: join them in order
            zero, one = paths[: len(paths) // 2], paths[len(paths) // 2:]
        else:
            return _prefix_merge(paths, depth + 1, parent, side, nxt)
    a, nxt = _prefix_merge(zero, depth + 1, parent, side, nxt)
    b, nxt = _prefix_merge(one, depth + 1, parent, side, nxt)
    parent[a], side[a] = nxt, 0
    parent[b], side[b] = nxt, 1
    return nxt, nxt + 1


def huffman_tree(counts) -> tuple[np.ndarray, np.ndarray]:
    """A binary Huffman tree over V >= 2 words by count (as word2vec builds it).

    Vertices ``0 .. V-1`` are the words (leaves), ``V .. 2V-2`` the V-1 internal nodes, the root
    last. Returns ``(parent [2V-1], side [2V-1])``: each vertex's parent (-1 for the root) and
    whether it is its parent's first (0) or second (1) child. Frequent words get short paths:
    the expected path length is within one bit of the unigram entropy.
    """
    c = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    v = len(c)
    parent = np.full(2 * v - 1, -1, dtype=np.int64)
    side = np.zeros(2 * v - 1, dtype=np.int64)
    _merge([(float(c[i]), i, i) for i in range(v)], parent, side, v)  # (weight, tie-break, vertex)
    return parent, side


def word_paths(parent: np.ndarray, side: np.ndarray, num_words: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each word's internal nodes (0-based: vertex ``V + i`` is node ``i``) and signs, leaf to root.

    Returns ``nodes [V, L]`` int64 and ``signs [V, L]`` float (+1: the word lies under the node's
    first child, -1: under its second, 0: padding past the root), L the tree's depth.
    """
    v = num_words
    cur = np.arange(v)
    nodes, signs = [], []
    while True:
        alive = cur >= 0
        par = np.where(alive, parent[np.maximum(cur, 0)], -1)
        alive &= par >= 0
        if not alive.any():
            break
        nodes.append(np.where(alive, par - v, 0))
        signs.append(np.where(alive, 1.0 - 2.0 * side[np.maximum(cur, 0)], 0.0))
        cur = np.where(alive, par, -1)
    return (torch.from_numpy(np.stack(nodes, 1).astype(np.int64)),
            torch.from_numpy(np.stack(signs, 1).astype(np.float32)))


def collapse_tree(parent: np.ndarray, num_words: int, bits: int, heads: np.ndarray | None = None) -> dict:
    """A tree of up to ``2**bits`` children per node from a binary one (``parent [2V-1]``, root last): every
    vertex whose depth is a multiple of ``bits`` stays, with the leaves; each kept vertex hangs from its nearest
    kept ancestor, so ``bits`` binary decisions become one choice among at most ``2**bits`` children.

    ``heads [2V-1]`` (bool): vertices that stay whatever their depth, below which depth counts again from 0, e.g.
    the roots of word classes' subtrees (:func:`class_heads`): a node then never mixes the words of a class with
    what lies outside it, and a head over at most ``2**bits`` words becomes one node over exactly those words
    (however deep its binary subtree), as a class of the class-based softmax is.

    Children are named by *codes*: a word ``w`` by ``w``, the ``i``-th kept internal node (root excluded) by
    ``V + i``; parents by node index ``0 .. I-1``, the root by ``I``. Returns numpy arrays:
    ``children [I+1, K]`` (codes, -1 padding), ``parent_of [V+I]`` (each code's parent), ``node_depth [I]``
    (depth in the new tree, the root's children 1), and per word, leaf to root, ``path_parent [V, L]`` and
    ``path_pos [V, L]`` (the parent at each step and the child's column in ``children``; -1 padding).
    """
    v, n = num_words, len(parent)
    root = n - 1
    head = np.zeros(n, dtype=bool) if heads is None else np.asarray(heads, dtype=bool)
    depth = np.zeros(n, dtype=np.int64)  # from the nearest head or the root
    flat = np.zeros(n, dtype=bool)  # below a head over at most 2**bits words: no node of its own
    small = np.zeros(n, dtype=bool)
    if head.any():
        size = np.zeros(n, dtype=np.int64)
        size[:v] = 1
        for v_ in range(n - 1):  # children before parents
            size[parent[v_]] += size[v_]
        small = head & (size <= 2 ** bits)
    for v_ in range(n - 2, -1, -1):  # a parent always comes after its children (huffman_tree, class_huffman_tree)
        p = parent[v_]
        depth[v_] = 0 if head[v_] else depth[p] + 1
        flat[v_] = not head[v_] and (flat[p] or bool(head[p] and small[p]))
    kept = (np.arange(n) < v) | head | ((depth % bits == 0) & ~flat)
    up = parent.copy()
    while True:  # climb to the nearest kept ancestor (at most `bits` steps, more in a flattened class)
        move = (up >= 0) & ~kept[np.maximum(up, 0)]
        if not move.any():
            break
        up[move] = parent[up[move]]
    level = np.zeros(n, dtype=np.int64)  # depth in the new tree
    for v_ in np.flatnonzero(kept[:root])[::-1]:
        level[v_] = level[up[v_]] + 1
    internal = np.flatnonzero(kept[v:root]) + v
    num_nodes = len(internal)
    node_of = np.full(n, -1, dtype=np.int64)
    node_of[internal] = np.arange(num_nodes)
    node_of[root] = num_nodes
    code_vertex = np.concatenate([np.arange(v), internal])  # [V+I]: the vertex each code names
    parent_of = node_of[up[code_vertex]]
    order = np.argsort(parent_of, kind="stable")
    group = np.bincount(parent_of, minlength=num_nodes + 1)
    start = np.concatenate([[0], np.cumsum(group)[:-1]])
    pos = np.empty(len(code_vertex), dtype=np.int64)
    pos[order] = np.arange(len(order)) - start[parent_of[order]]
    children = np.full((num_nodes + 1, int(group.max())), -1, dtype=np.int64)
    children[parent_of, pos] = np.arange(len(code_vertex))
    steps_parent, steps_pos = [], []
    cur = np.arange(v)  # codes
    while (cur >= 0).any():
        alive = cur >= 0
        par = np.where(alive, parent_of[np.maximum(cur, 0)], -1)
        steps_parent.append(par)
        steps_pos.append(np.where(alive, pos[np.maximum(cur, 0)], -1))
        cur = np.where(alive & (par < num_nodes), v + par, -1)  # the parent's own code, until the root
    return {"children": children, "parent_of": parent_of, "node_depth": level[internal],
            "path_parent": np.stack(steps_parent, 1), "path_pos": np.stack(steps_pos, 1)}


def class_heads(parent: np.ndarray, word_class: np.ndarray) -> np.ndarray:
    """``[2V-1]`` bool: the vertices of a binary tree (``parent``, words ``0 .. V-1`` first, a parent after its
    children, root last) that head a word class's subtree, i.e. whose leaves all share one class and whose parent's
    do not (the root when all words share one). With :func:`class_huffman_tree`'s trees, one head a class."""
    n, v = len(parent), len(word_class)
    cls = np.full(n, -2, dtype=np.int64)  # -2: not yet seen, -1: mixed
    cls[:v] = word_class
    for x in range(n - 1):
        p = parent[x]
        cls[p] = cls[x] if cls[p] == -2 else (cls[p] if cls[p] == cls[x] else -1)
    above = np.full(n, -1, dtype=np.int64)
    above[:-1] = cls[parent[:-1]]
    return (cls >= 0) & (above < 0)


def concat_ranges(flat: torch.Tensor, start: torch.Tensor, size: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The runs ``flat[start[g] : start[g] + size[g]]`` of each group g, one after another, with no loop:
    ``(offset [G], values [sum size])``, each group's first position in ``values``. The class layer's classes
    and hsm's children are stored so (members listed group after group)."""
    offset = torch.cumsum(size, 0) - size
    col = torch.arange(int(size.sum()), device=flat.device)
    return offset, flat[torch.repeat_interleave(start - offset, size) + col]


def segment_logsumexp(scores: torch.Tensor, segment: torch.Tensor, num: int) -> torch.Tensor:
    """``[num]``: ``log sum_{i: segment[i] = s} exp scores[i]`` for each segment s (each must hold a score)."""
    top = torch.full((num,), float("-inf"), dtype=scores.dtype, device=scores.device)
    top = top.scatter_reduce(0, segment, scores.detach(), reduce="amax")
    total = torch.zeros_like(top).index_add(0, segment, (scores - top[segment]).exp())
    return top + total.log()


# --- word classes from a file or clustered (class and hsm) -------------------------------------------------
AUTO_CLASSES = "auto"  # --word-classes auto: cluster the training text before the run starts
NO_CLASSES = "none"  # --word-classes none: frequency bins / a Huffman tree where a recurrent model would cluster


def word_classes_path(word_classes: str | None) -> str | None:
    """The objectives' ``word_classes`` option as they keep it until :func:`attach_word_classes` reads it: a path,
    ``auto``, or None (``none`` asks for no file where a recurrent default would cluster)."""
    return None if word_classes == NO_CLASSES else word_classes


def settle_word_classes(options: dict, vocab, flat: bool = False) -> tuple[dict, list[str]]:
    """``settle_options`` of the objectives that take ``word_classes``: the file read once now (a bad line fails
    before training), its absolute path recorded, and a note when some vocabulary words have no class (with
    ``flat``, the class layer's, also when half the words or more are alone in their class: a tree's leaves taken
    as classes);
    ``auto`` is recorded as it is (the run clusters its training text in :func:`attach_word_classes`); ``none``
    is no file (the objective's own frequency classes or Huffman tree)."""
    if options.get("word_classes") in (None, NO_CLASSES):
        return {**options, "word_classes": None}, []
    if options["word_classes"] == AUTO_CLASSES:
        return dict(options), [f"--word-classes auto: the training text's words go into {auto_class_count(len(vocab))} "
                               "classes by the exchange algorithm before training (as 'sampledlm classes' does)"]
    from ..data.clusters import check_class_file, read_word_classes

    path = check_class_file(options["word_classes"])
    cls, missing = read_word_classes(path, vocab.words)
    verb = "has" if missing == 1 else "have"
    notes = [f"{options['word_classes']}: {missing:,} of the {len(vocab):,} vocabulary words {verb} no class there; "
             "they share one extra class"] if missing else []
    if flat:
        notes += _singleton_note(options["word_classes"], cls)
    return {**options, "word_classes": path}, notes


def _singleton_note(path: str, cls: np.ndarray) -> list[str]:
    """A note when half the vocabulary or more sits alone in its class: such a file is usually a tree whose leaves
    are single words (``classes --tree``, a Huffman code), which the class layer would score as V classes of one
    word, a softmax's cost and no better."""
    sizes = np.bincount(cls)
    alone = int((sizes == 1).sum())
    if len(cls) < 4 or 2 * alone < len(cls):
        return []
    return [f"{path}: {alone:,} of the {len(cls):,} vocabulary words are alone in their class ({len(sizes):,} "
            "classes); --objective class scores each label as one class, at about the softmax's cost (a tree's "
            "paths, one word each, are for --objective hsm; `sampledlm classes TRAIN -o FILE` makes "
            f"round(2 sqrt(V)) = {auto_class_count(len(cls)):,} classes)"]


def auto_class_count(num_words: int) -> int:
    """C = round(2 sqrt(V)): ``sampledlm classes``'s default, and the class layer's."""
    return max(1, min(num_words, round(2 * math.sqrt(num_words))))


def attach_word_classes(objective, vocab, fresh: bool, train_ids=None) -> None:
    """``attach`` of those objectives: a new run reads its classes, or with ``auto`` clusters ``train_ids()`` (the
    training text's id stream) by the exchange algorithm with ``sampledlm classes``'s defaults, which makes the same
    classes as that command's file (kept in the cache: a second run on the same text reuses them); a resumed or
    loaded run has them in its buffers."""
    if not fresh or objective.word_classes_path is None:
        return
    if objective.word_classes_path == AUTO_CLASSES:
        if train_ids is None:
            raise UserError("--word-classes auto clusters the training text: this caller gave none")
        from ..data.clusters import cached_exchange_classes

        objective.set_word_classes(cached_exchange_classes(train_ids(), len(vocab), auto_class_count(len(vocab)),
                                                           vocab.counts, progress=True))
        return
    from ..data.clusters import read_word_classes

    cls, _, labels = read_word_classes(objective.word_classes_path, vocab.words, labels=True)
    objective.set_word_classes(cls, labels)



class WordClassObjective(OutputObjective):
    """What class and hsm share: ``components``, the unigram counts, the word classes' path (read in
    :meth:`attach`, clustered there for ``auto``) and the options' settling."""

    def __init__(self, counts=None, **options):
        super().__init__(counts, **options)
        self.components = int(self.options.components)
        self.counts = None if counts is None else np.asarray(counts)
        self.word_classes_path = word_classes_path(self.options.word_classes)  # read in attach, not here
        self.bound = False

    @classmethod
    def settle_options(cls, options: dict, vocab) -> tuple[dict, list[str]]:
        return settle_word_classes(options, vocab, flat=cls.name == "class")

    def attach(self, vocab, fresh: bool, open_ngram, train_ids=None) -> None:
        attach_word_classes(self, vocab, fresh, train_ids)
