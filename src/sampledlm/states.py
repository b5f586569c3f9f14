"""Scoring word by word with a state the caller carries: what a decoder needs for shallow fusion or on-the-fly
rescoring (KenLM's ``BeginSentenceWrite``/``Score(state, word, out_state)``, a Transformer's ``past_key_values``).

    state = begin(lm)                                   # the start of a sentence (after <s>)
    logp, states = advance(lm, [state, state], [w1, w2])   # ln P(w_i | state_i) [N], the states after them

A state is an immutable value: a decoder may advance one state with several words (branch) and keep the old one.
The numbers are those of whole-sentence scoring (``sampledlm score``, :meth:`LanguageModel.logprobs_after`): each
sentence read on its own after ``<s>``; advancing with ``</s>`` gives the probability that the sentence ends there
and returns the start state again (the next sentence is read on its own).

Work per word: O(1) for n-gram and feed-forward models (the state keeps the last ``context_length`` words, the only
ones their probabilities read) and for recurrent models (the state is the network's hidden state and its output
context: one step of the network per word, :mod:`sampledlm.neural.state`); a Transformer or a model that reads the
whole history (trigger features) re-reads its history, at most its window. A mixture carries one state per model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .data.vocab import EOS_ID
from .lm import LanguageModel, Mixture, mix_logprobs


class HistoryState(NamedTuple):
    """The words of the sentence so far, at most the model's ``context_length`` of them (ids of its vocabulary), and
    which model made it (``owner``: the ids mean words of that model's vocabulary only)."""

    ids: tuple[int, ...] = ()
    owner: int = 0


class MixtureState(NamedTuple):
    """One state per model of a mixture, in its order."""

    parts: tuple[Any, ...]


def begin(lm: LanguageModel):
    """The state at the start of a sentence (after ``<s>``)."""
    if isinstance(lm, Mixture):
        return MixtureState(tuple(begin(m) for m in lm.models))
    recurrent = _recurrent(lm)
    if recurrent is not None:
        return recurrent.begin(lm)
    return HistoryState(owner=owner(lm))


def owner(lm) -> int:
    """The tag a model's states carry: the model object's identity (a state of another model, even one of the same
    kind and shape, is refused by :func:`fits`; its ids or hidden vectors would mean other words)."""
    return id(lm)


def advance(lm: LanguageModel, states: Sequence, words: Sequence[int]) -> tuple[np.ndarray, list]:
    """``(logp [N], new states)``: ``ln P(words[i] | states[i])`` for every i (float64), and the state after each
    word (the start state after ``</s>``). All N pairs in one call of the model."""
    words = [int(w) for w in words]
    if len(states) != len(words):
        raise ValueError(f"advance: {len(states)} states and {len(words)} words")
    if not words:
        return np.zeros(0), []
    if isinstance(lm, Mixture):
        return _advance_mixture(lm, states, words)
    recurrent = _recurrent(lm)
    if recurrent is not None:
        return recurrent.advance(lm, states, words)
    return _advance_history(lm, states, words)


def fits(lm: LanguageModel, state, start=None) -> bool:
    """Whether ``state`` can be a state of ``lm`` (``start``: ``begin(lm)``, given to save making it): of the kind
    :func:`begin` makes for it, a mixture's with one part per model, a recurrent one of its shapes, a history of
    ids in its vocabulary, and made by this model object (its ``owner``; two loads of the same files are two
    owners)."""
    start = begin(lm) if start is None else start
    if type(state) is not type(start):
        return False
    if isinstance(state, MixtureState):
        return len(state.parts) == len(start.parts) and all(
            fits(m, p, q) for m, p, q in zip(lm.models, state.parts, start.parts))
    if getattr(state, "owner", None) != getattr(start, "owner", None):
        return False
    if isinstance(state, HistoryState):
        return all(isinstance(i, (int, np.integer)) and 0 <= i < len(lm.vocab) for i in state.ids)
    # a recurrent state: the model's shapes
    from .neural.state import RecurrentState

    if isinstance(state, RecurrentState):
        def shapes(h):
            return [tuple(t.shape) for t in (h if isinstance(h, tuple) else (h,))]
        return shapes(state.hidden) == shapes(start.hidden) and tuple(state.ctx.shape) == tuple(start.ctx.shape)
    return True


def _recurrent(lm: LanguageModel):
    """:mod:`sampledlm.neural.state` for a neural model that carries a state from word to word, else None."""
    if getattr(lm, "family", None) != "neural":
        return None
    from .neural import state

    return state if state.carries_state(lm) else None


def _advance_history(lm: LanguageModel, states, words: list[int]) -> tuple[np.ndarray, list]:
    lp = np.concatenate(lm.logprobs_after([list(s.ids) for s in states], [[w] for w in words]))
    keep, tag = lm.context_length, owner(lm)
    out = []
    for s, w in zip(states, words):
        if w == EOS_ID:
            out.append(HistoryState(owner=tag))
            continue
        ids = s.ids + (w,)
        out.append(HistoryState(ids[len(ids) - keep:] if keep is not None and len(ids) > keep else ids, tag))
    return np.asarray(lp, dtype=np.float64), out


def _advance_mixture(mix: Mixture, states, words: list[int]) -> tuple[np.ndarray, list]:
    comps, parts = [], []
    for k, (model, mp) in enumerate(zip(mix.models, mix.maps)):
        ws = words if mp is None else [int(mp[w]) for w in words]
        lp, new = advance(model, [s.parts[k] for s in states], ws)
        comps.append(mix._zero_missing(k, lp, np.asarray(words)))  # a word the model lacks: probability 0 there
        parts.append(new)
    mixed = mix_logprobs(np.stack(comps), mix.weights)
    return mixed, [MixtureState(tuple(p[i] for p in parts)) for i in range(len(words))]
