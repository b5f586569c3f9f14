"""hsm's training step on the CPU with wide nodes (``arity`` >= 4): each path step's siblings scored in compiled
loops, pair by pair (:func:`.row_scores.pair_scores`), instead of a product per parent.

A batch's path steps ``p = 1 .. P`` (about 2.7 a target at V = 485k) each choose child ``c_p`` among the children
of parent ``u_p``; :mod:`.hsm` gives the math. This module computes, for every step::

    log P(c_p | u_p, h_p) = s_{c_p}(h_p) - log sum_{c child of u_p} exp s_c(h_p)                 [P]

A parent that at least :data:`PAIRED_BLOCK_MIN` of the batch's steps pass (the root, the nodes near it) is scored as
one block ``[n_u, h] x [h, k_u]``; every other step's children go to the pair loops as (child row, history) pairs,
with no padding: at V = 485k (1,393 exchange classes, arity 128, 4 components) a batch of 1,120 targets has about
3,000 steps under 670 parents, of which about 600 are passed fewer than 8 times, and a product per parent (the
portable path in :mod:`.hsm`) spent most of the step in Python and autograd for each of them. The chosen child's
score is taken from its siblings' (no second gather), and each layer (the model's output rows, the node layer)
gets one coalesced row-sparse gradient for the step.
"""

from __future__ import annotations

import torch

from .cpu_linear import fast_linear
from .row_scores import pair_scores
from .structure import concat_ranges, segment_logsumexp

# A parent that at least this many of a batch's steps pass is scored as one block; fewer go to the pair loops.
PAIRED_BLOCK_MIN = 32


def component_rows(nodes: torch.Tensor, m: int) -> torch.Tensor:
    """The node layer's rows of ``nodes [R]``, each node's ``m`` components in turn: ``[R m]``."""
    return (nodes.unsqueeze(1) * m + torch.arange(m, device=nodes.device)).reshape(-1)


def step_log_probs(hsm, layer, ctx: torch.Tensor, tok: torch.Tensor, par: torch.Tensor,
                   col: torch.Tensor) -> torch.Tensor:
    """``[P]`` ``log P(child | parent)`` of each step: history ``ctx[tok[p]]``, parent ``par[p]``, and the chosen
    child's column ``col[p]`` in the parent's children listed words first, then nodes (``hsm.child_col``).
    ``hsm``: the bound :class:`~.hsm.HierarchicalSoftmax`; ``layer``: the model's output rows (sparse, float32)."""
    order = torch.argsort(par, stable=True)  # steps grouped by parent: a parent's rows stay in cache
    tok, par, col = tok[order], par[order], col[order]
    uniq, inv, cnt = torch.unique_consecutive(par, return_inverse=True, return_counts=True)
    big = (cnt >= PAIRED_BLOCK_MIN)[inv]
    small, grouped = (~big).nonzero().squeeze(1), big.nonzero().squeeze(1)
    parents = uniq[cnt >= PAIRED_BLOCK_MIN]
    m, nl = hsm.components, hsm.node_layer
    count = {k: getattr(hsm, f"{k}_kids_count")[par[small]] for k in ("word", "node")}
    kids = {k: concat_ranges(getattr(hsm, f"{k}_kids"), getattr(hsm, f"{k}_kids_start")[par[small]], count[k])[1]
            for k in ("word", "node")}
    seg = {k: torch.repeat_interleave(torch.arange(len(small), device=par.device), count[k]) for k in count}
    block_words, word_sizes = hsm._kids("word", parents)
    block_nodes, node_sizes = hsm._kids("node", parents)
    a_word, w_block, b_block = pair_scores(layer.weight, layer.bias, ctx, kids["word"], tok[small][seg["word"]],
                                           block=block_words)
    rows, block_rows = component_rows(kids["node"], m), component_rows(block_nodes, m)
    a_node, n_block, _ = pair_scores(nl.weight, None, ctx, rows, tok[small][seg["node"]].repeat_interleave(m),
                                     block=block_rows)
    a_node = (a_node + nl.bias[rows]).view(-1, m).logsumexp(1)
    scores = torch.cat([a_word, a_node])
    lse = segment_logsumexp(scores, torch.cat([seg["word"], seg["node"]]), len(small))
    c, wc = col[small], count["word"]
    first = {k: torch.cumsum(n, 0) - n for k, n in count.items()}  # each step's first pair of each kind
    chosen = torch.where(c < wc, first["word"] + c, len(a_word) + first["node"] + c - wc)
    out = torch.empty(len(par), dtype=scores.dtype, device=scores.device)
    out = out.index_put((small,), scores[chosen] - lse)
    if len(grouped):
        out = out.index_put((grouped,), _blocks(ctx[tok[grouped]], col[grouped], cnt[cnt >= PAIRED_BLOCK_MIN].tolist(),
                                                (w_block, b_block.squeeze(1), word_sizes),
                                                (n_block, nl.bias[block_rows], node_sizes), m))
    back = torch.empty_like(order)
    back[order] = torch.arange(len(order), device=order.device)
    return out[back]


def _blocks(h: torch.Tensor, col: torch.Tensor, sizes: list[int], words: tuple, nodes: tuple, m: int) -> torch.Tensor:
    """``[n]`` log-probabilities of the steps of the block parents (``sizes`` steps each, in order): each parent's
    histories against its children's rows (``words``, ``nodes``: weight, bias, children per parent)."""
    word_w, word_b, word_k = words
    node_w, node_b, node_k = nodes
    out = []
    for hg, cg, ww, wb, nw, nb in zip(h.split(sizes), col.split(sizes), word_w.split(word_k), word_b.split(word_k),
                                      node_w.split([k * m for k in node_k]), node_b.split([k * m for k in node_k])):
        s_node = fast_linear(hg, nw, nb).float().view(len(hg), -1, m).logsumexp(-1)
        s = torch.cat([fast_linear(hg, ww, wb).float(), s_node], 1)
        out.append(s.gather(1, cg.unsqueeze(1)).squeeze(1) - torch.logsumexp(s, 1))
    return torch.cat(out)
