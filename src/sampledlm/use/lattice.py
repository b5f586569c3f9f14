"""Word lattices: n-best extraction, and rescoring with any LM or mixture.

A lattice (:class:`sampledlm.use.slf.Lattice`, read from and written to HTK SLF files by
:mod:`sampledlm.use.slf`) is a directed acyclic graph from a start node to an end node; each link carries a
word (or none: epsilon) and first-pass natural-log scores ``am`` (acoustic) and ``lm``. A path's score combines
them as an n-best hypothesis' does (:class:`sampledlm.use.nbest.Weights`)::

    score = am_scale * am + lm_weight * ((1 - b) * lm_new + b * lm_first) + word_penalty * words

Rescoring (Schwenk 2007; the lattice example of the continuous-space LM summary): an LM whose
probability depends on the last ``k`` words only (an n-gram or feed-forward model, ``k = n - 1``) is
applied *exactly* by expanding every node into one node per distinct ``k``-word history that reaches
it (:func:`expand`: paths whose last ``k`` words agree are merged, as "a problem" is in the example,
and the others are kept apart). For a recurrent model the same expansion with a chosen ``k`` is the
standard approximation (Liu et al. 2016): histories sharing their last ``k`` words are merged and only
the best-scoring one is kept (:func:`rescore`, a Viterbi search over the expansion built on the fly).
"""

from __future__ import annotations

import heapq
import weakref
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ..data.vocab import EOS_ID, UNK_ID
from ..errors import UserError
from ..lm import language_model
from .nbest import Hypothesis, NBest, Weights
# EPSILON, is_slf, read_lattices, read_slf, write_slf: SLF's, imported from here too (as before they had a module)
from .slf import EPSILON, Lattice, Link, is_slf, read_lattices, read_slf, write_slf  # noqa: F401


# --- paths -------------------------------------------------------------------------------------------------
def all_paths(lat: Lattice) -> list[Hypothesis]:
    """Every start-to-end path (exponential: small lattices and tests only), as (words, am, lm) hypotheses."""
    out = lat.out_links()
    result = []

    def walk(node, words, am, lm):
        if node == lat.end:
            result.append(Hypothesis(list(words), am, lm))
        for link in out[node]:
            walk(link.end, words + ([link.word] if link.word else []), am + link.am, lm + link.lm)

    walk(lat.start, [], 0.0, 0.0)
    return result


def nbest(lat: Lattice, n: int, weights: Weights = Weights()) -> NBest:
    """The ``n`` best distinct word strings by first-pass score (``lm_new`` unset), best first.

    Exact: each node keeps its ``n`` best partial paths with distinct words (two partial paths with the
    same words into one node extend identically, so only the better one can matter).
    """
    best: list[dict] = [dict() for _ in range(lat.num_nodes)]  # node -> {words: (score, am, lm)}
    best[lat.start][()] = (0.0, 0.0, 0.0)
    out = lat.out_links()
    for node in lat.topological_order():
        here = heapq.nlargest(n, best[node].items(), key=lambda kv: kv[1][0])
        if node == lat.end:
            return NBest(lat.id, [Hypothesis(list(w), am, lm) for w, (_, am, lm) in here])
        best[node] = {}
        for link in out[node]:
            tgt = best[link.end]
            for words, (s, am, lm) in here:
                w2 = words + (link.word,) if link.word else words
                s2 = (s + weights.am_scale * link.am + weights.lm_weight * link.lm
                      + (weights.word_penalty if link.word else 0.0))
                if w2 not in tgt or tgt[w2][0] < s2:
                    tgt[w2] = (s2, am + link.am, lm + link.lm)
    raise UserError(f"lattice {lat.id!r}: the end node is not reachable")


# --- rescoring ---------------------------------------------------------------------------------------------
def continuation_logprobs(lm, queries: list[tuple[tuple[int, ...], int]]) -> np.ndarray:
    """``ln P(word | <s> history)`` for each ``(history ids, word id)``: one bunched call of the model.

    Queries are grouped by history (:meth:`~sampledlm.lm.LanguageModel.logprobs_after`), so a history
    followed by several candidate words is read once (one context per distinct history for neural
    models; the numbers are those ``sampledlm score`` gives)."""
    if not queries:
        return np.zeros(0)
    index: dict[tuple, int] = {}
    words: list[list[int]] = []
    where = np.empty((len(queries), 2), dtype=np.int64)
    for q, (hist, word) in enumerate(queries):
        i = index.setdefault(tuple(hist), len(index))
        if i == len(words):
            words.append([])
        where[q] = i, len(words[i])
        words[i].append(word)
    got = lm.logprobs_after([list(h) for h in index], words)
    starts = np.concatenate([[0], np.cumsum([len(w) for w in words])[:-1]]).astype(np.int64)
    flat = np.concatenate([np.asarray(g, dtype=np.float64) for g in got])
    return flat[starts[where[:, 0]] + where[:, 1]]


_NORMALISERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _word_id(lm, word: str) -> int:
    """A lattice word's id as the model reads text (its own text options: lower-casing, numbers)."""
    norm = _NORMALISERS.get(lm)
    if norm is None:
        from ..data.tokenizer import token_normaliser

        norm = _NORMALISERS[lm] = token_normaliser(lm.text_options)
    return lm.vocab.index.get(norm(word), UNK_ID)


def expand(lat: Lattice, lm, k: int | None = None, first_pass_weight: float = 0.0) -> Lattice:
    """The lattice with one node per (node, last ``k`` words) and ``l=`` replaced by ``lm``'s scores.

    ``k``: the LM's context length (default ``lm.context_length``; exact for n-gram and feed-forward
    models). ``l`` on each link becomes ``(1 - b) ln P(word | its k-word history) + b l_first``; the
    ``</s>`` probability goes on the links into the (single) end node.
    """
    lm = language_model(lm)
    k = lm.context_length if k is None else k
    if k is None:
        raise UserError("this model's probabilities depend on the whole history: give the approximation's k")
    out = lat.out_links()
    state_id: dict[tuple[int, tuple], int] = {(lat.start, ()): 0}
    states_at: dict[int, list[tuple]] = defaultdict(list)
    states_at[lat.start].append(())
    new_links: list[tuple[int, tuple, Link, tuple]] = []  # (source state id, source ctx, link, target ctx)
    for node in lat.topological_order():
        if node == lat.end:
            continue
        for ctx in states_at[node]:
            src = state_id[(node, ctx)]
            for link in out[node]:
                if not link.word:
                    tctx = ctx
                else:
                    tctx = (ctx + (_word_id(lm, link.word),))[-k:] if k else ()
                key = (link.end, tctx)
                if key not in state_id:
                    state_id[key] = len(state_id)
                    states_at[link.end].append(tctx)
                new_links.append((src, ctx, link, tctx))
    queries = [(ctx, _word_id(lm, link.word)) for _, ctx, link, _ in new_links if link.word]
    queries += [(ctx, EOS_ID) for ctx in states_at[lat.end]]
    lp = continuation_logprobs(lm, queries)
    word_lp = iter(lp[: len(queries) - len(states_at[lat.end])])
    eos_lp = dict(zip(states_at[lat.end], lp[len(queries) - len(states_at[lat.end]):]))
    end_states = {state_id[(lat.end, ctx)] for ctx in states_at[lat.end]}
    final = len(state_id)  # one end node: </s> is paid on the links into it
    renumber = {s: (final if s in end_states else s) for s in range(len(state_id))}
    links = []
    b = first_pass_weight
    for src, _, link, tctx in new_links:
        new = float(next(word_lp)) if link.word else 0.0
        if link.end == lat.end:
            new += float(eos_lp[tctx])
        links.append(Link(renumber[src], renumber[state_id[(link.end, tctx)]], link.word, link.am,
                          (1 - b) * new + b * link.lm))
    used = sorted({x for lk in links for x in (lk.start, lk.end)} | {0, final})
    compact = {s: i for i, s in enumerate(used)}
    for lk in links:
        lk.start, lk.end = compact[lk.start], compact[lk.end]
    times = {compact[renumber[s]]: lat.times[node] for (node, _), s in state_id.items()  # each copy keeps its
             if node in lat.times and renumber[s] in compact}                              # node's time (t=)
    return Lattice(lat.id, len(used), links, 0, compact[final], times, dict(lat.header))


def best_path(lat: Lattice, weights: Weights = Weights()) -> tuple[list[str], float]:
    """The best path by ``am_scale * a + lm_weight * l + word_penalty * words`` (l as it stands on the links)."""
    best = nbest(lat, 1, Weights(weights.am_scale, weights.lm_weight, weights.word_penalty))
    h = best.hyps[0]
    return h.words, weights.am_scale * h.am + weights.lm_weight * h.lm + weights.word_penalty * len(h.words)


def rescore(lat: Lattice, lm, weights: Weights = Weights(), k: int | None = None) -> Hypothesis:
    """The best path of one lattice under ``lm`` (:func:`rescore_all`)."""
    return rescore_all([lat], lm, weights, k)[0]


def rescore_all(lats: list[Lattice], lm, weights: Weights = Weights(), k: int | None = None,
                record: bool = False):
    """Each lattice's best path under ``lm`` (``lm_new`` set), searching its expansion by last-``k``-words histories.

    Each expanded state keeps its best partial path and scores its links with ``lm`` given that path's
    *whole* history, so the result is exact when ``lm`` looks back at most ``k`` words (``k`` defaults to
    ``lm.context_length``) and the standard approximation for recurrent models otherwise. The lattices
    advance together a level at a time (a node's level: its longest distance from the start), and each
    level's LM queries of every lattice go to the model in one bunched call.

    ``record``: also return each lattice's searched expansion (:class:`Expansion`: every expanded link
    with its acoustic, new and first-pass LM scores), as ``(hypotheses, expansions)``; weights can then be
    tuned on it without calling the model again (:func:`tune_lattices`).
    """
    lm = language_model(lm)
    k = lm.context_length if k is None else k
    if k is None:
        raise UserError("this model's probabilities depend on the whole history: give the approximation's k")
    searches = [_Search(lat, k, weights, record) for lat in lats]
    while True:
        active = [s for s in searches if s.result is None]
        if not active:
            hyps = [s.result for s in searches]
            return (hyps, [s.expansion() for s in searches]) if record else hyps
        todo = [s.pending(lm) for s in active]
        lp = continuation_logprobs(lm, [q for queries, _ in todo for q in queries])
        at = 0
        for s, (queries, work) in zip(active, todo):
            s.advance(work, lp[at : at + len(queries)])
            at += len(queries)


@dataclass
class Expansion:
    """A lattice expanded by LM histories, as arrays: link ``j`` goes from state ``src[j]`` to ``dst[j]``
    (states numbered in a topological order, ``0`` the start, ``final`` the end: the ``</s>`` probability
    is on the links into it), with acoustic score ``am[j]``, the rescoring LM's ``lm_new[j]``, the first
    pass's ``lm_first[j]`` and word ``words[j]`` (None: an epsilon link).

    Exact for n-gram and feed-forward models; for a recurrent model each state's LM scores are those
    given the history that survived the search which recorded it (so they depend, slightly, on that
    search's weights)."""

    id: str
    num_states: int
    final: int
    src: np.ndarray
    dst: np.ndarray
    am: np.ndarray
    lm_new: np.ndarray
    lm_first: np.ndarray
    words: list
    ref: list[str] | None = None
    nodes: np.ndarray | None = None  # [num_states]: the lattice node each state is a copy of (its time t=)

    def best_words(self, weights: Weights) -> list[str]:
        """The best path's words under ``weights`` (a Viterbi search; ties: the first link found)."""
        wid, vocab = self._ids()
        path = _best_path_ids(self.src, self.dst, self._link_score(weights), self.num_states, self.final,
                              wid)
        return [vocab[i] for i in path]

    def _link_score(self, w: Weights) -> np.ndarray:
        b = w.first_pass_weight
        return (w.am_scale * self.am + w.lm_weight * ((1 - b) * self.lm_new + b * self.lm_first)
                + w.word_penalty * (self._ids()[0] >= 0))

    def _ids(self):
        if not hasattr(self, "_wid"):
            vocab: dict[str, int] = {}
            for x in (self.ref or []):
                vocab.setdefault(x, len(vocab))
            wid = np.array([-1 if x is None else vocab.setdefault(x, len(vocab)) for x in self.words], dtype=np.int64)
            self._wid, self._vocab = wid, list(vocab)
        return self._wid, self._vocab


def expansion_lattice(exp: Expansion, lat: Lattice, first_pass_weight: float = 0.0) -> Lattice:
    """A searched expansion (:func:`rescore_all` with ``record``) as an SLF lattice: one node per expanded state,
    ``l = (1 - b) lm_new + b l_first`` on each link. For a recurrent model this is the lattice its search merged by
    last-``k``-words histories, each state's scores given the history that survived there (the standard
    approximation); for an n-gram model with ``k`` >= n-1 it equals :func:`expand`'s."""
    b = first_pass_weight
    links = [Link(int(s), int(d), w, float(a), float((1 - b) * n + b * f))
             for s, d, w, a, n, f in zip(exp.src, exp.dst, exp.words, exp.am, exp.lm_new, exp.lm_first)]
    times = {} if exp.nodes is None else {i: lat.times[n] for i, n in enumerate(exp.nodes.tolist()) if n in lat.times}
    return Lattice(lat.id, exp.num_states, links, 0, exp.final, times, dict(lat.header))


def _best_path_ids(src, dst, score, num_states, final, wid) -> list[int]:
    best = np.full(num_states, -np.inf)
    back = np.full(num_states, -1, dtype=np.int64)
    best[0] = 0.0
    for j in range(len(src)):
        v = best[src[j]] + score[j]
        if v > best[dst[j]]:
            best[dst[j]], back[dst[j]] = v, j
    out, node = [], final
    while node != 0:
        j = back[node]
        if wid[j] >= 0:
            out.append(int(wid[j]))
        node = src[j]
    return out[::-1]


def tune_lattices(exps: list[Expansion], am_scale: float = 1.0, grid=None) -> tuple[Weights, int]:
    """The grid point (:class:`sampledlm.use.nbest.Grid`) whose best lattice paths make the fewest errors
    over ``exps`` (which need references), and that number; ties as :func:`sampledlm.use.nbest.tune` breaks them. One Viterbi search per lattice and grid point over the recorded
    scores: the model is not called again."""
    from .nbest import Grid
    from .wer_kernels import grid_errors

    grid = grid or Grid()
    cand = np.array([(am_scale, lw, wp, b) for b in grid.first_pass_weight for lw in grid.lm_weight
                     for wp in grid.word_penalty], dtype=np.float64)
    total = np.zeros(len(cand), dtype=np.int64)
    for e in exps:
        if e.ref is None:
            raise UserError(f"lattice {e.id!r} has no reference")
        wid, vocab = e._ids()
        ref = np.array([vocab.index(x) for x in e.ref], dtype=np.int64)
        grid_errors(e.src, e.dst, e.am, e.lm_new, e.lm_first, wid, e.num_states, e.final, ref, cand, total)
    i = grid.best(cand, total)
    return Weights(*map(float, cand[i])), int(total[i])


class _Search:
    """One lattice's Viterbi search over its expansion by last-k-words histories (:func:`rescore_all`)."""

    def __init__(self, lat: Lattice, k: int, weights: Weights, record: bool = False):
        self.lat, self.k, self.w = lat, k, weights
        self.out = lat.out_links()
        order = lat.topological_order()
        level = [0] * lat.num_nodes
        for node in order:
            for link in self.out[node]:
                level[link.end] = max(level[link.end], level[node] + 1)
        by_level: dict[int, list[int]] = defaultdict(list)
        for node in order:
            by_level[level[node]].append(node)
        self.levels = [by_level[x] for x in sorted(by_level)]
        self.next_level = 0
        # state (node, last k word ids) -> (score, history ids, words, am, lm_first, lm_new)
        self.states: dict[tuple[int, tuple], tuple] = {(lat.start, ()): (0.0, (), (), 0.0, 0.0, 0.0)}
        self.at_node: dict[int, list[tuple]] = defaultdict(list)
        self.at_node[lat.start].append(())
        self.result: Hypothesis | None = None
        # the searched expansion: state ids (in the order states are first reached) and links
        self.record = record
        self.ids: dict[tuple, int] = {(lat.start, ()): 0}
        self.rec: list[tuple] = []  # (src id, dst key or None for the end, am, lm_new, lm_first, word)

    def pending(self, lm) -> tuple[list, list]:
        """The next level's LM queries ``(history ids, word id)`` and the work they belong to."""
        if self.next_level >= len(self.levels):
            raise UserError(f"lattice {self.lat.id!r}: the end node is not reachable")
        work = []  # (state key, state, link or None for </s>)
        for node in self.levels[self.next_level]:
            for key in self.at_node[node]:
                st = self.states[(node, key)]
                if node == self.lat.end:
                    work.append(((node, key), st, None))
                else:
                    work.extend(((node, key), st, link) for link in self.out[node])
        queries = [(st[1], EOS_ID if link is None else _word_id(lm, link.word))
                   for _, st, link in work if link is None or link.word]
        self.lm = lm
        return queries, work

    def advance(self, work: list, lp: np.ndarray) -> None:
        w, b, k = self.w, self.w.first_pass_weight, self.k
        lp = iter(lp.tolist())
        finals = []
        rec = self.rec if self.record else None
        for skey, st, link in work:
            score, hist, words, am, lmf, lmn = st
            if link is None:
                new = next(lp)
                finals.append((score + w.lm_weight * (1 - b) * new, words, am, lmf, lmn + new))
                if rec is not None:
                    rec.append((self.ids[skey], None, 0.0, new, 0.0, None))
                continue
            new = next(lp) if link.word else 0.0
            s2 = (score + w.am_scale * link.am + w.lm_weight * ((1 - b) * new + b * link.lm)
                  + (w.word_penalty if link.word else 0.0))
            if link.word:
                hist2, words2 = hist + (_word_id(self.lm, link.word),), words + (link.word,)
            else:
                hist2, words2 = hist, words
            key = (link.end, hist2[-k:] if k else ())
            old = self.states.get(key)
            if old is None:
                self.at_node[link.end].append(key[1])
                if rec is not None:
                    self.ids[key] = len(self.ids)
            if rec is not None:
                rec.append((self.ids[skey], self.ids[key], link.am, new, link.lm, link.word))
            if old is None or old[0] < s2:
                self.states[key] = (s2, hist2, words2, am + link.am, lmf + link.lm, lmn + new)
        self.next_level += 1
        if finals:
            _, words, am, lmf, lmn = max(finals, key=lambda f: f[0])
            self.result = Hypothesis(list(words), am, lmf, lmn)

    def expansion(self) -> Expansion:
        final = len(self.ids)
        rec = self.rec
        nodes = np.full(final + 1, self.lat.end, dtype=np.int64)  # the added final state follows the end node
        for (node, _), i in self.ids.items():
            nodes[i] = node
        return Expansion(self.lat.id, final + 1, final,
                         np.array([r[0] for r in rec], dtype=np.int64),
                         np.array([final if r[1] is None else r[1] for r in rec], dtype=np.int64),
                         np.array([r[2] for r in rec], dtype=np.float64),
                         np.array([r[3] for r in rec], dtype=np.float64),
                         np.array([r[4] for r in rec], dtype=np.float64),
                         [r[5] for r in rec], self.lat.ref, nodes)


def first_pass_best(lat: Lattice, weights: Weights = Weights()) -> Hypothesis:
    """The first pass's best path (the lattice's own ``l=`` scores)."""
    return nbest(lat, 1, weights).hyps[0]


def rescore_nbest(lat: Lattice, n: int, weights: Weights = Weights()) -> NBest:
    """The lattice's ``n``-best list (first-pass order) with its reference: what n-best rescoring would see."""
    nb = nbest(lat, n, weights)
    nb.ref = lat.ref
    return nb
