"""Pruning a back-off model: count thresholds at estimation time (as lmplz ``--prune``) and relative-entropy
pruning of a finished model (Stolcke 1998, as SRILM ``ngram -prune``).

**Count thresholds** ``t_1 .. t_N`` (``t_1 = 0``: unigrams stay; non-decreasing, the last repeated for
higher orders): a k-gram, k >= 2, whose raw count is at most ``t_k`` is dropped. Because the raw count
of an n-gram never exceeds that of its prefix or suffix and the thresholds do not decrease, every kept
n-gram keeps its context and its suffix. Kneser-Ney (:mod:`.kneser_ney`) then follows lmplz: discounts
and continuation counts come from all n-grams, pruned ones included; a pruned n-gram's whole adjusted
count moves into its context's back-off mass::

    gamma(h) = (sum_{x kept} D(a(h x)) + sum_{x pruned} a(h x)) / sum_x a(h x)

so p(.|h) still sums to one.

**Entropy pruning** (Stolcke 1998). Removing the stored n-gram ``h w`` replaces p(w|h) by the back-off
estimate b'(h) p(w|h') and changes the back-off weight of h to b'(h); in the notation of SRILM's
``computeBOW``, with sums over the words v stored after h::

    num(h) = 1 - sum_v p(v|h),     den(h) = 1 - sum_v p(v|h'),     b(h) = num / den
    b'(h)  = (num + p(w|h)) / (den + p(w|h'))
    dH     = -P(h) [ p(w|h) (log b'(h) + log p(w|h') - log p(w|h)) + num (log b'(h) - log b(h)) ]   (log10)

where P(h) is the probability of the context words under the model (a leading ``<s>`` counts as
p(``</s>``), as SRILM does) or, given a *history model* (SRILM's ``-prune-history-lm``), under that one.
On a Kneser-Ney model the model's own P(h) is poor: its lower orders are continuation distributions
(how many contexts a word follows, not how often it occurs), so the chain's first factors misjudge how
often a context is seen and pruning removes n-grams whose loss it underestimates. Chelba et al. (2010)
found KN models degrade badly under entropy pruning for this reason and computed P(h) with a Katz model
instead; on PTB KN5 that turns entropy pruning from worse than count thresholds at every size into
better at 10 % and 1 % of the n-grams (``docs/results/ngram-scale.md``). The n-gram goes when the relative change of the training-set perplexity,
``10^dH - 1``, is below the threshold -- unless it is the context of an n-gram that stays. Every n-gram
is judged against the unpruned model (highest order first, so that a context's fate is known when it is
judged), then all back-off weights are recomputed bottom-up so that every p(.|h) sums to one again.
Unigrams are never pruned.
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ..model import NgramLM, NgramTable

EPS = 3e-6  # SRILM's Prob_Epsilon: sums within this of zero are zero


def parse_thresholds(values, order: int) -> list[int]:
    """lmplz's ``--prune`` list -> one threshold per order (the last value repeats)."""
    t = [int(v) for v in values]
    if not t:
        return [0] * order
    if any(v < 0 for v in t):
        raise UserError(f"--prune {','.join(map(str, t))}: thresholds must be counts >= 0")
    if t[0] != 0:
        raise UserError(f"--prune {','.join(map(str, t))}: unigrams cannot be pruned: the first threshold must be 0")
    if any(b < a for a, b in zip(t, t[1:])):
        raise UserError(f"--prune {','.join(map(str, t))}: thresholds must not decrease with the order")
    if len(t) > order:
        raise UserError(f"--prune {','.join(map(str, t))}: {len(t)} thresholds for an order-{order} model")
    return (t + [t[-1]] * order)[:order]


def compact(lm: NgramLM, keep: list[np.ndarray], info: dict | None = None) -> NgramLM:
    """The model with only the rows ``keep[k-1]`` (bool [M_k]) of each order, keys renumbered.

    Every kept n-gram's context must be kept (order 1 is kept whole).
    """
    W = lm.width
    tables = [lm.tables[0]]
    new_index = np.arange(W, dtype=np.int64)
    for k in range(2, lm.order + 1):
        t, kp = lm.tables[k - 1], np.asarray(keep[k - 1], dtype=bool)
        keys = np.asarray(t.keys)[kp]
        ctx = new_index[keys // W]
        if (ctx < 0).any():
            raise AssertionError(f"a kept {k}-gram lost its context")
        tables.append(NgramTable(ctx * W + keys % W, np.asarray(t.logp)[kp], np.asarray(t.bow)[kp]))
        new_index = np.where(kp, np.cumsum(kp) - 1, -1)
    return NgramLM(list(lm.words), tables, dict(lm.info if info is None else info))


def _words(lm: NgramLM) -> list[np.ndarray]:
    """The word ids [M_k, k] of every stored n-gram, per order."""
    W = lm.width
    out = [np.arange(W, dtype=np.int64)[:, None]]
    for t in lm.tables[1:]:
        keys = np.asarray(t.keys)
        out.append(np.concatenate([out[-1][keys // W], (keys % W)[:, None]], axis=1))
    return out


def _bow_parts(lm: NgramLM, k: int, words: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For the order-k n-grams h w: (p(w|h) [M_k], p(w|h') [M_k], num(h) and den(h) over the order-(k-1) contexts)."""
    t = lm.tables[k - 1]
    ctx = np.asarray(t.keys) // lm.width
    p = 10.0 ** np.asarray(t.logp)
    q = 10.0 ** lm.logprob10_ids(words[:, 1:-1], words[:, -1])
    n_ctx = len(lm.tables[k - 2])
    num = 1.0 - np.bincount(ctx, weights=p, minlength=n_ctx)
    den = 1.0 - np.bincount(ctx, weights=q, minlength=n_ctx)
    num = np.where((num < 0) & (num > -EPS), 0.0, num)
    den = np.where((den < 0) & (den > -EPS), 0.0, den)
    return p, q, num, den


def recompute_backoffs(lm: NgramLM) -> NgramLM:
    """Back-off weights b(h) = num(h) / den(h) for every context, bottom-up (SRILM's ``recomputeBOWs``).

    A context whose back-off distribution has no mass left (den = 0, num > 0) has its n-gram
    probabilities scaled to sum to one, as SRILM does; b(h) = 1 where nothing is stored after h.
    """
    words = _words(lm)
    tables = [NgramTable(t.keys, np.array(t.logp), np.array(t.bow)) for t in lm.tables]
    out = NgramLM(list(lm.words), tables, dict(lm.info))
    for k in range(2, lm.order + 1):
        p, q, num, den = _bow_parts(out, k, words[k - 1])
        has = np.bincount(np.asarray(tables[k - 1].keys) // lm.width, minlength=len(tables[k - 2])) > 0
        stuck = has & (den <= 0) & (num > 0)
        if stuck.any():  # scale that context's probabilities to sum to one
            ctx = np.asarray(tables[k - 1].keys) // lm.width
            fix = stuck[ctx]
            tables[k - 1].logp[fix] -= np.log10(1.0 - num[ctx[fix]])
            num = np.where(stuck, 0.0, num)
        with np.errstate(divide="ignore", invalid="ignore"):
            bow = np.where(has & (den > 0) & (num > 0), np.log10(np.maximum(num, 1e-300)) - np.log10(np.maximum(den, 1e-300)), 0.0)
        bow = np.where(has & (num <= 0) & (den > 0), -99.0, bow)  # extensions take all the mass: nothing backs off
        tables[k - 2].bow[:] = np.round(bow, 8)
    return out


def context_logprob10(lm: NgramLM, k: int, words: np.ndarray) -> np.ndarray:
    """log10 P(h) of each order-k stored n-gram taken as a context (module docstring), [M_k]."""
    lp1 = np.asarray(lm.tables[0].logp).copy()
    lp1[lm.bos] = lp1[lm.eos]
    out = lp1[words[:, 0]]
    idx = words[:, 0].copy()
    for j in range(2, k + 1):
        t = lm.tables[j - 1]
        keys = np.asarray(t.keys)
        pos = np.searchsorted(keys, idx * lm.width + words[:, j - 1])
        idx = pos
        out = out + np.asarray(t.logp)[pos]
    return out


def history_logprob10(history: NgramLM, lm: NgramLM, words: np.ndarray) -> np.ndarray:
    """log10 P(h) under ``history`` of contexts given as ``lm``'s word ids ``words`` [M, k] (a leading
    ``<s>`` counts as p(``</s>``)); words ``history`` lacks are its ``<unk>``."""
    index = {w: i for i, w in enumerate(history.words)}
    unk = index.get("<unk>", 1)
    to_hist = np.array([index.get(w, unk) for w in lm.words], dtype=np.int64)
    h = to_hist[words]
    out = np.zeros(len(h))
    for j in range(h.shape[1]):
        lp = history.logprob10_ids(h[:, :j], h[:, j])
        if j == 0:
            eos = history.logprob10_ids(h[:, :0], np.full(len(h), history.eos))
            lp = np.where(h[:, 0] == history.bos, eos, lp)
        out += lp
    return out


def entropy_scores(lm: NgramLM, history: NgramLM | None = None) -> list[np.ndarray]:
    """Relative perplexity change 10^dH - 1 of removing each n-gram alone (order 1: zeros), per order;
    P(h) from ``history`` when given (module docstring), else from ``lm``."""
    words = _words(lm)
    scores = [np.zeros(len(lm.tables[0]))]
    for k in range(2, lm.order + 1):
        t = lm.tables[k - 1]
        ctx = np.asarray(t.keys) // lm.width
        p, q, num, den = _bow_parts(lm, k, words[k - 1])
        bow = np.asarray(lm.tables[k - 2].bow)[ctx]
        ctx_lp = (context_logprob10(lm, k - 1, words[k - 2]) if history is None else
                  history_logprob10(history, lm, words[k - 2]))
        ph = 10.0 ** ctx_lp[ctx]
        with np.errstate(divide="ignore", invalid="ignore"):
            new_bow = np.log10(num[ctx] + p) - np.log10(den[ctx] + q)
            delta_p = np.log10(np.maximum(q, 1e-300)) + new_bow - np.asarray(t.logp)
            dh = -ph * (p * delta_p + num[ctx] * (new_bow - bow))
        scores.append(np.where(np.isfinite(dh), 10.0 ** dh - 1.0, np.inf))
    return scores


def entropy_prune(lm: NgramLM, threshold: float, scores: list[np.ndarray] | None = None) -> NgramLM:
    """Stolcke (1998) pruning at ``threshold`` (relative perplexity change; module docstring)."""
    if not (threshold >= 0 and np.isfinite(threshold)):
        raise UserError(f"--threshold {threshold}: must be a finite number >= 0")
    scores = entropy_scores(lm) if scores is None else scores
    keep = [np.ones(len(t), dtype=bool) for t in lm.tables]
    for k in range(lm.order, 1, -1):
        kp = ~(scores[k - 1] < threshold) if threshold > 0 else np.ones(len(scores[k - 1]), bool)
        if k < lm.order:  # contexts of kept (k+1)-grams stay
            ctx = np.asarray(lm.tables[k].keys)[keep[k]] // lm.width
            kp[ctx] = True
        keep[k - 1] = kp
    info = dict(lm.info, pruned={"method": "entropy", "threshold": threshold, "from": lm.counts()})
    return recompute_backoffs(compact(lm, keep, info))


def threshold_for_size(scores: list[np.ndarray], fraction: float) -> float:
    """The threshold that keeps about ``fraction`` of the prunable (order >= 2) n-grams, by their scores."""
    s = np.sort(np.concatenate(scores[1:]))
    if not len(s):
        return 0.0
    i = int(round((1.0 - fraction) * len(s)))
    return float(s[min(max(i, 0), len(s) - 1)]) if i > 0 else 0.0
