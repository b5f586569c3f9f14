"""The hot loops of maximum-entropy training and evaluation (numba when installed, else plain Python).

All three kernels walk the same sparse structure. For a position k, every active history
feature g (``hfeat[hptr[k]:hptr[k+1]]``) contributes ``theta[slot[p]]`` to the score of each
word ``gword[p]`` of its pair list ``p in gptr[g]:gptr[g+1]``. The words reached this way are
W(h), the only words whose score differs from the unigram part ``u_w``; gathering them costs
O(active pairs), never O(V).

- :func:`softmax_epoch`: one SGD pass of the standard MELM (eq. 10/11). The normaliser uses
  Wu & Khudanpur's decomposition ``Z(h) = S_u + sum_{w in W(h)} (exp a_w(h) - exp u_w)`` with
  ``S_u = sum_w exp u_w``. theta is updated after every position (only the touched entries);
  the unigram weights u, whose gradient ``p(w|h) - [w = y]`` is dense, are updated once per block of
  ``block`` positions from the aggregate ``sum_k exp(u_w) / Z_k`` (untouched words) plus the
  exact terms of the touched words, so a block costs O(V + active pairs).
- :func:`binary_epoch`: one SGD pass of the binarized MELM (eq. 12): V independent logistic
  classifiers. Classifier w sees position k as a positive when y_k = w, as a negative otherwise,
  kept with probability alpha by a counter-based hash of (seed, epoch, stream position, w), so the
  subsample does not depend on how the vocabulary is sharded. Negatives of words outside W(h)
  only move u_w; they are applied once per block at their expected value alpha * count *
  sigmoid(u_w) (a Rao-Blackwellised form of the same subsample, O(V) per block). As in the
  softmax kernel, theta moves after every position and u once per block.
- :func:`eval_sums`: per position, the log numerator and the normaliser over the owned words:
  softmax ``(a_y, sum_w exp a_w)``; binary (eq. 8) ``(log sigmoid a_y, sum_w sigmoid a_w)``.

``owned [V]`` (bool) marks the words of this shard; pair lists contain owned words only.
``slot [P]`` maps a pair to its weight when weights are hashed; empty for the exact dictionary
(weight index = pair index, one indirection less in the hot loop).

The kernels take their arrays bundled in named tuples (numba compiles a NamedTuple argument
to a struct of its fields, so the bundling costs nothing in the loops): :class:`Active`
(``hptr, hfeat``: the active features of the positions), :class:`Pairs` (``gptr, gword, slot``:
the feature dictionary), :class:`Weights` (``u, theta``), :class:`Step` (learning rate, L2,
AdaGrad and averaging accumulators, block size) and, for the binary kernel, :class:`Negatives`
(stream positions, owned words, alpha, seed, epoch). Build them with :func:`step` and
:func:`negatives`, which fix the field types (one compiled version per kernel).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

try:  # numba is optional: without it the kernels run as (slow) Python, fine for tiny tests
    from numba import njit
    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

    def njit(*args, **kw):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f


class Active(NamedTuple):
    """The active history features of N positions (CSR)."""

    hptr: np.ndarray  # [N+1] int64
    hfeat: np.ndarray  # [nnz] int32 history feature ids g


class Pairs(NamedTuple):
    """The known (history feature, word) pairs (CSR by g) and their weight slots."""

    gptr: np.ndarray  # [G+1] int64
    gword: np.ndarray  # [P] int32
    slot: np.ndarray  # [P] int64 weight of each pair when hashed; empty when exact (weight = theta[p])


class Weights(NamedTuple):
    u: np.ndarray  # [V] float64 unigram weights (the classifiers' biases)
    theta: np.ndarray  # [P or hash_size] float64 pair weights


class Step(NamedTuple):
    """How one pass moves the weights (see :func:`_step`); empty arrays switch a feature off."""

    lr: float
    l2g: np.ndarray  # [G] L2 strength of each update of a pair of history feature g, or empty
    uhist: np.ndarray  # AdaGrad accumulators of u and theta, or empty (plain SGD)
    hist: np.ndarray
    uavg: np.ndarray  # averaging accumulators of u and theta, or empty (no averaging)
    avg: np.ndarray
    age0: int  # positions already averaged before this pass (see :func:`averaged`)
    block: int  # positions per update of the dense unigram weights


class Negatives(NamedTuple):
    """The binary kernel's negatives: which classifiers this shard owns and how negatives are kept."""

    positions: np.ndarray  # [N] int64 stream position of each trained position (the hash key)
    owned: np.ndarray  # [V] bool
    alpha: float
    seed: int
    epoch: int


_EMPTY = np.zeros(0)


def step(lr: float, l2g=None, uhist=None, hist=None, uavg=None, avg=None, age0: int = 0, block: int = 32) -> Step:
    """A :class:`Step` with fixed field types (None = empty array = feature off)."""
    def arr(a):
        return _EMPTY if a is None else a
    return Step(float(lr), arr(l2g), arr(uhist), arr(hist), arr(uavg), arr(avg), int(age0), int(block))


def negatives(positions: np.ndarray, owned: np.ndarray, alpha: float, seed: int, epoch: int) -> Negatives:
    """A :class:`Negatives` with fixed field types."""
    return Negatives(np.asarray(positions, dtype=np.int64), np.asarray(owned, dtype=np.bool_), float(alpha),
                     int(seed), int(epoch))


@njit(cache=True)
def _mix(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def negative_key(seed, epoch, position):
    """Per-position part of the negative-sampling hash: depends on (seed, epoch, stream position) only."""
    h = _mix(np.uint64(seed))
    h = _mix(h ^ np.uint64(epoch))
    return _mix(h ^ np.uint64(position))


@njit(cache=True, inline="always")
def keep_negative(key, word, alpha):
    """True with probability alpha, decided by a hash of (position key, word) alone: shard-independent."""
    h = _mix(key ^ (np.uint64(word) * np.uint64(0xD6E8FEB86659FD93)))
    return float(h >> np.uint64(11)) * (1.0 / 9007199254740992.0) < alpha


@njit(cache=True, inline="always")
def _sigmoid(a):
    if a >= 0:
        return 1.0 / (1.0 + math.exp(-a))
    e = math.exp(a)
    return e / (1.0 + e)


@njit(cache=True, inline="always")
def _gather(k, mark, act, pairs, u, theta, acc, stamp, touched):
    """Scores of W(h_k) into ``acc``; returns how many words were touched (listed in ``touched``)."""
    hptr, hfeat, gptr, gword, slot = act.hptr, act.hfeat, pairs.gptr, pairs.gword, pairs.slot
    nt = 0
    hashed = slot.shape[0] > 0
    for j in range(hptr[k], hptr[k + 1]):
        g = hfeat[j]
        for p in range(gptr[g], gptr[g + 1]):
            w = gword[p]
            if stamp[w] != mark:
                stamp[w] = mark
                acc[w] = u[w]
                touched[nt] = w
                nt += 1
            acc[w] += theta[slot[p] if hashed else p]
    return nt


@njit(cache=True, inline="always")
def _step(param, i, g, lr, l2, hist, avg, age):
    """``param[i] -= lr * g'`` with ``g' = g + l2 param[i]``: plain SGD when ``hist`` is empty, else
    AdaGrad (Duchi et al. 2011) started at 1: ``hist[i] += g'^2``, step divided by ``sqrt(1 + hist[i])``
    (plain SGD while a parameter's gradients are small, smaller steps once they have added up).

    ``avg`` (empty: no averaging) accumulates ``age * step`` for the averaged parameters (see
    :func:`averaged`); ``age`` = positions already averaged before the one that made this step."""
    g += l2 * param[i]
    d = lr * g
    if hist.shape[0] > 0:
        hist[i] += g * g
        d /= math.sqrt(1.0 + hist[i])
    param[i] -= d
    if avg.shape[0] > 0:
        avg[i] -= age * d


def averaged(param: np.ndarray, avg: np.ndarray, count: int) -> np.ndarray:
    """The mean of ``param`` over the last ``count`` positions (Polyak-Ruppert averaging).

    With theta_t the value after position t of the averaging window and d_s the (summed) step
    made at position s, ``mean_{t=1..T} theta_t = theta_T - (1/T) sum_s (s - 1) d_s``: the kernels
    keep ``avg = sum_s (s - 1) d_s`` beside each parameter array, which costs one multiply-add per
    step and keeps updates sparse (Wei Xu 2011, "Towards optimal one pass large scale learning with
    averaged stochastic gradient descent")."""
    return param - avg / count if count > 0 else param.copy()


@njit(cache=True, inline="always")
def _update_theta(k, act, pairs, theta, grad, st, age):
    hptr, hfeat, gptr, gword, slot = act.hptr, act.hfeat, pairs.gptr, pairs.gword, pairs.slot
    hashed = slot.shape[0] > 0
    for j in range(hptr[k], hptr[k + 1]):
        g = hfeat[j]
        l2 = st.l2g[g] if st.l2g.shape[0] > 0 else 0.0
        for p in range(gptr[g], gptr[g + 1]):
            gw = grad[gword[p]]
            if gw != 0.0:
                _step(theta, slot[p] if hashed else p, gw, st.lr, l2, st.hist, st.avg, age)


@njit(cache=True)
def softmax_epoch(order, targets, act, pairs, wts, st):
    """One SGD pass over positions ``order`` of the standard MELM; returns the summed -log p(y|h).

    ``act``: :class:`Active` of the positions, ``targets [N]`` their words, ``pairs``: :class:`Pairs`,
    ``wts``: :class:`Weights` (moved in place), ``st``: :class:`Step` (optimiser, averaging, block)."""
    u, theta = wts.u, wts.theta
    V = u.shape[0]
    acc = np.zeros(V)
    grad = np.zeros(V)
    ug = np.zeros(V)  # accumulated u-gradient of the touched terms in this block
    rc = np.zeros(V)  # sum of 1/Z_k over the block's positions where w was touched
    stamp = np.full(V, -1, np.int64)
    touched = np.empty(V, np.int64)
    eu = np.exp(u)
    su = eu.sum()
    r = 0.0
    nb = 0
    loss = 0.0
    n = order.shape[0]
    for idx in range(n):
        k = order[idx]
        t = targets[k]
        nt = _gather(k, idx, act, pairs, u, theta, acc, stamp, touched)
        z = su
        for i in range(nt):
            w = touched[i]
            grad[w] = math.exp(acc[w])  # exp a_w, turned into the gradient below
            z += grad[w] - eu[w]
        inv = 1.0 / z
        r += inv
        for i in range(nt):
            w = touched[i]
            g = grad[w] * inv
            if w == t:
                g -= 1.0
            grad[w] = g
            ug[w] += g
            rc[w] += inv
        if stamp[t] == idx:
            loss += math.log(z) - acc[t]
        else:
            loss += math.log(z) - u[t]
            ug[t] -= 1.0
        _update_theta(k, act, pairs, theta, grad, st, st.age0 + idx)
        nb += 1
        if nb == st.block or idx == n - 1:
            for w in range(V):
                _step(u, w, ug[w] + eu[w] * (r - rc[w]), st.lr, 0.0, st.uhist, st.uavg, st.age0 + idx)
                ug[w] = 0.0
                rc[w] = 0.0
            eu = np.exp(u)
            su = eu.sum()
            r = 0.0
            nb = 0
    return loss


@njit(cache=True)
def binary_epoch(order, targets, act, pairs, wts, st, neg):
    """One SGD pass of the binarized MELM over ``order``; ``neg``: :class:`Negatives` (``neg.positions[k]``
    is k's stream position, the hash key). Other arguments as in :func:`softmax_epoch`."""
    u, theta, owned, alpha = wts.u, wts.theta, neg.owned, neg.alpha
    V = u.shape[0]
    acc = np.zeros(V)
    grad = np.zeros(V)
    ug = np.zeros(V)  # accumulated u-gradient of the block's own (touched or target) examples
    seen = np.zeros(V, np.int64)  # positions of this block that gave w its own (touched) example
    stamp = np.full(V, -1, np.int64)
    touched = np.empty(V, np.int64)
    nb = 0
    n = order.shape[0]
    for idx in range(n):
        k = order[idx]
        t = targets[k]
        nt = _gather(k, idx, act, pairs, u, theta, acc, stamp, touched)
        key = negative_key(neg.seed, neg.epoch, neg.positions[k])
        for i in range(nt):
            w = touched[i]
            seen[w] += 1
            if w == t:
                grad[w] = _sigmoid(acc[w]) - 1.0
            elif alpha >= 1.0 or keep_negative(key, w, alpha):
                grad[w] = _sigmoid(acc[w])
            else:
                grad[w] = 0.0
        if stamp[t] != idx and owned[t]:  # a positive with no active feature: only its bias learns
            ug[t] += _sigmoid(u[t]) - 1.0
            seen[t] += 1
        _update_theta(k, act, pairs, theta, grad, st, st.age0 + idx)
        for i in range(nt):
            w = touched[i]
            ug[w] += grad[w]
        nb += 1
        if nb == st.block or idx == n - 1:
            for w in range(V):
                m = nb - seen[w]
                if owned[w]:
                    g = ug[w] + (alpha * m * _sigmoid(u[w]) if m > 0 else 0.0)
                    if g != 0.0:
                        _step(u, w, g, st.lr, 0.0, st.uhist, st.uavg, st.age0 + idx)
                ug[w] = 0.0
                seen[w] = 0
            nb = 0


@njit(cache=True)
def eval_sums(act, targets, pairs, wts, owned, binary, shift):
    """``(num [N], den [N])`` over owned words; ``log p(y_k|h_k) = num_k - log den_k`` once summed over shards.

    ``shift`` is added to every owned u_w first (the log-alpha calibration of a binary model in training).
    """
    u, theta = wts.u, wts.theta
    V = u.shape[0]
    n = targets.shape[0]
    num = np.zeros(n)
    den = np.zeros(n)
    us = u + shift
    acc = np.zeros(V)
    stamp = np.full(V, -1, np.int64)
    touched = np.empty(V, np.int64)
    base = 0.0
    fu = np.zeros(V)
    for w in range(V):
        if owned[w]:
            fu[w] = _sigmoid(us[w]) if binary else math.exp(us[w])
            base += fu[w]
    for k in range(n):
        t = targets[k]
        nt = _gather(k, k, act, pairs, us, theta, acc, stamp, touched)
        d = base
        for i in range(nt):
            w = touched[i]
            d += (_sigmoid(acc[w]) if binary else math.exp(acc[w])) - fu[w]
        den[k] = d
        if owned[t]:
            a = acc[t] if stamp[t] == k else us[t]
            if binary:
                num[k] = -math.log1p(math.exp(-a)) if a >= 0 else a - math.log1p(math.exp(a))
            else:
                num[k] = a
    return num, den
