"""The compiled (numba) kernels of the n-gram stream scorer (:meth:`sampledlm.ngram.model.NgramLM`): each
lookup confined to its context's range, and the back-off pass. Imported only for streams long enough to pay
for numba's import, so a short ``ngram eval`` never loads it."""

from __future__ import annotations

from numba import njit


@njit(cache=True)
def lookup_in_context(keys, starts, ctx, word, width, out):
    """:func:`lookup` with each search confined to its context's range (:func:`context_starts`): one or two
    cache lines per query instead of a binary search over the whole table."""
    for i in range(len(ctx)):
        c = ctx[i]
        out[i] = -1
        if c < 0:
            continue
        lo, hi = starts[c], starts[c + 1]
        q = c * width + word[i]
        end = hi
        while lo < hi:
            mid = (lo + hi) >> 1
            if keys[mid] < q:
                lo = mid + 1
            else:
                hi = mid
        if lo < end and keys[lo] == q:
            out[i] = lo


@njit(cache=True)
def back_off_order(j, gram_j, ctx_j, logp_j, bow_lower, out, done, order):
    """One order of :meth:`sampledlm.ngram.model.NgramLM._back_off` (longest first), in place: the same
    additions in the same order, so the same floats."""
    for i in range(len(out)):
        if done[i]:
            continue
        g = gram_j[i]
        if g >= 0:
            out[i] += logp_j[g]
            order[i] = j + 1
            done[i] = True
        elif j > 0 and ctx_j[i] >= 0:
            out[i] += bow_lower[ctx_j[i]]
