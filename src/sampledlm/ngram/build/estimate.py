"""The in-memory estimator, in KenLM's stages: count -> adjust/discount (per smoothing) -> interpolate -> model.

It holds the whole model (about 180 bytes an n-gram). ``ngram train`` (:func:`.pipeline.build`) uses it only for
the smoothings the bounded pipeline (:mod:`.external`) cannot stream: ``wb``, ``jm``, ``katz``, ``addk``. For
``mkn`` and ``kn`` it is the reference the pipeline's bytes are tested against, and the id-level Python API
(:func:`sampledlm.ngram.train_ngram`, a model in memory from an id stream).

Every smoothing reduces to two arrays per order k (see :mod:`.kneser_ney`, :mod:`.smoothing`,
:mod:`.jelinek_mercer`): ``alpha(h w)`` for each stored k-gram and ``gamma(h)`` for each
context. The last stage turns them into ARPA probabilities, bottom-up, with
p_0(w) = 1/V (V predicted words: ``<unk>`` and ``</s>`` included, ``<s>`` not):

interpolated (KN, modified KN, Witten-Bell, Jelinek-Mercer, add-k)::

    p(w|h) = alpha(h w) + gamma(h) p(w|h'),     b(h) = gamma(h)

back-off (Katz; ``gamma`` is None), with the back-off weight that makes p(.|h) sum to one::

    p(w|h) = alpha(h w),    b(h) = (1 - sum_{w: c(h w)>0} alpha(h w)) / (1 - sum_{w: c(h w)>0} p(w|h'))

p(w|h') of a stored n-gram is the already-final probability of its suffix, which is always
stored (every suffix of an n-gram in the text is in the text). ``<s>`` gets probability 0
(written -99). The result is an :class:`~.model.NgramLM`, queried by back-off, which gives
exactly the interpolated value for unseen n-grams.
"""

from __future__ import annotations

import time

import numpy as np

from ...errors import UserError
from ...data.vocab import BOS, Vocab
from .counts import NgramCounts, count_ngrams
from .jelinek_mercer import jelinek_mercer
from .kneser_ney import kneser_ney
from ..model import NgramLM, NgramTable
from .prune import compact, parse_thresholds
from .smoothing import add_k, katz, witten_bell

LOG_ZERO = -99.0


def _mkn(counts, vocab_size, pruned=None, **_):
    return kneser_ney(counts, modified=True, pruned=pruned)


def _kn(counts, vocab_size, pruned=None, **_):
    return kneser_ney(counts, modified=False, pruned=pruned)

PRUNABLE = ("mkn", "kn")  # count pruning follows lmplz, which prunes Kneser-Ney models only


SMOOTHINGS = {
    "mkn": _mkn,  # interpolated modified Kneser-Ney (Chen & Goodman 1998), the default
    "kn": _kn,  # interpolated Kneser-Ney, one discount per order
    "wb": witten_bell,
    "jm": jelinek_mercer,
    "katz": katz,
    "addk": add_k,
}
DESCRIPTIONS = {
    "mkn": "interpolated modified Kneser-Ney", "kn": "interpolated Kneser-Ney", "wb": "Witten-Bell",
    "jm": "Jelinek-Mercer", "katz": "Katz back-off (Good-Turing)", "addk": "add-k",
}


def _log10(p: np.ndarray) -> np.ndarray:
    """log10, rounded to 8 decimals (what an ARPA file holds: the written model reads back bit for bit)."""
    with np.errstate(divide="ignore"):
        return np.round(np.where(p > 0, np.log10(np.maximum(p, 1e-300)), LOG_ZERO), 8)


def interpolate(counts: NgramCounts, weights: list, vocab_size: int) -> list[NgramTable]:
    """Final stage: per-order ``(alpha, gamma)`` -> tables of log10 p and log10 b (module docstring)."""
    alpha1, gamma1 = weights[0]
    probs = [alpha1 + gamma1[0] / vocab_size]
    probs[0][counts.bos] = 0.0
    bows = []
    for k in range(2, counts.order + 1):
        o = counts.orders[k - 1]
        alpha, gamma = weights[k - 1]
        lower = probs[-1][o.suffix]
        if gamma is not None:
            p, bow = alpha + gamma[o.ctx] * lower, gamma
        else:
            p = alpha.copy()
            left = 1.0 - counts.context_sums(k, alpha)
            room = 1.0 - counts.context_sums(k, lower)
            has_ext = counts.context_sums(k, np.ones(len(o))) > 0
            stuck = has_ext & (room <= 1e-12)  # extensions cover all of p(.|h'): renormalise instead
            if stuck.any():
                fix = stuck[o.ctx]
                p[fix] /= (1.0 - left[o.ctx[fix]])
            with np.errstate(divide="ignore", invalid="ignore"):
                bow = np.where(has_ext & ~stuck, np.maximum(left, 0.0) / room, 1.0)
        probs.append(p)
        bows.append(bow)
    bows.append(np.ones(len(counts.orders[-1])))
    return [NgramTable(o.keys, _log10(p), _log10(b)) for o, p, b in zip(counts.orders, probs, bows)]


def count_pruned(counts: NgramCounts, thresholds: list[int]) -> list[np.ndarray | None]:
    """Per order, the n-grams whose raw count is at most the order's threshold (None: nothing pruned)."""
    return [None if k == 1 or t <= 0 else counts.orders[k - 1].count <= t for k, t in enumerate(thresholds, 1)]


def train_ngram(train_ids: np.ndarray, vocab: Vocab, order: int, smoothing: str = "mkn",
                valid_ids: np.ndarray | None = None, prune: list[int] | None = None, **opts) -> NgramLM:
    """Estimate an n-gram model of ``order`` from an id stream of ``vocab``.

    Default, interpolated modified Kneser-Ney (Chen & Goodman 1998, eq. 17 and 26)::

        p(w|h) = (a(h w) - D_k(a(h w))) / sum_x a(h x)  +  gamma(h) p(w|h'),   p_0(w) = 1/V
        a = raw counts at order N and for n-grams starting with <s>, else N1+(. h w)
        D_k(1), D_k(2), D_k(3+) from the counts-of-counts of a at order k

    ``smoothing``: ``mkn`` (interpolated modified Kneser-Ney, Chen & Goodman 1998, KenLM
    lmplz's conventions), ``kn``, ``wb`` (Witten-Bell), ``jm`` (Jelinek-Mercer, needs
    ``valid_ids``), ``katz`` (Good-Turing back-off; option ``katz_k``), ``addk`` (option ``k``).
    Every word of ``vocab`` is in the model (unseen ones get lower-order/uniform mass), so
    sum_w p(w|h) = 1 over the V words of ``vocab`` for every history h.
    The model's ids equal ``vocab``'s, with ``<s>`` at ``vocab.bos_id``.
    ``prune``: lmplz's count thresholds per order (``[0, 0, 1]`` drops singleton trigrams; :mod:`.prune`).
    """
    if smoothing not in SMOOTHINGS:
        raise UserError(f"unknown smoothing {smoothing!r}: use one of {', '.join(SMOOTHINGS)}")
    if not isinstance(order, (int, np.integer)) or order < 1:
        raise UserError(f"order {order!r}: must be an integer >= 1")
    ids = np.asarray(train_ids)
    V = len(vocab)
    if len(ids) == 0:
        raise UserError("cannot train an n-gram model on an empty corpus")
    if ids.min() < 0 or ids.max() >= V:
        raise UserError("training ids fall outside the vocabulary (was the stream encoded with another vocabulary?)")
    thresholds = parse_thresholds(prune or [], int(order))
    if any(thresholds) and smoothing not in PRUNABLE:
        raise UserError(f"count pruning (--prune) is defined for Kneser-Ney models ({', '.join(PRUNABLE)}), "
                        f"not for --smoothing {smoothing}; prune a finished model with 'sampledlm ngram prune'")
    t0 = time.perf_counter()
    counts = count_ngrams(ids, V + 1, int(order), vocab.bos_id)
    return estimate(counts, vocab, smoothing, valid_ids, thresholds, t0=t0, **opts)


def estimate(counts: NgramCounts, vocab: Vocab, smoothing: str = "mkn", valid_ids: np.ndarray | None = None,
             thresholds: list[int] | None = None, t0: float | None = None, **opts) -> NgramLM:
    """The stages after counting (:func:`train_ngram`), from counts made anywhere (e.g. :mod:`.distributed`)."""
    t0 = time.perf_counter() if t0 is None else t0
    V, order = len(vocab), counts.order
    thresholds = thresholds or [0] * order
    t_count = time.perf_counter() - t0
    pruned = count_pruned(counts, thresholds) if any(thresholds) else None
    weights, info = SMOOTHINGS[smoothing](counts, V, valid_ids=valid_ids, pruned=pruned, **opts)
    tables = interpolate(counts, weights, V)
    info = {"smoothing": smoothing, "order": int(order), "ngrams": [len(o) for o in counts.orders],
            "seconds_count": round(t_count, 3), "seconds_total": round(time.perf_counter() - t0, 3), **info}
    lm = NgramLM(list(vocab.words) + [BOS], tables, info)
    if pruned is not None:
        info["prune"] = thresholds
        lm = compact(lm, [np.ones(len(t), bool) if m is None else ~m for t, m in zip(tables, pruned)])
        info["ngrams"] = lm.counts()
    return lm
