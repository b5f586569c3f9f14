"""The word-by-word state of a recurrent model (:mod:`sampledlm.states`): one step of the network per word.

A state holds the recurrent layers' state after the words so far (GRU ``h [layers, 1, h]``; LSTM ``(h, c)``) and the
output context ``ctx [1, h_out]`` they give, from which the next word's probability is the objective's exact rule.
:func:`advance` scores N words against N states with one product, then runs one step of the network for the N
words together: O(1) work per word whatever the sentence's length, and the numbers of whole-sentence scoring
(:meth:`sampledlm.neural.lm.NeuralLM.logprobs_after`), to float32 rounding.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..data.vocab import EOS_ID


class RecurrentState(NamedTuple):
    """After ``<s> w_1 .. w_t``: the recurrent layers' state (batch of one) and the output context ``[1, h_out]``."""

    hidden: torch.Tensor | tuple[torch.Tensor, torch.Tensor]
    ctx: torch.Tensor
    owner: int = 0  # the model that made it (sampledlm.states.owner): another model's is refused

    # equal by value, as an n-gram's states are, so that a decoder can merge hypotheses whose states are equal
    # (tuple's == compared the tensors and raised "Boolean value of Tensor ... is ambiguous"; hashing was by identity)
    def __eq__(self, other) -> bool:
        if not isinstance(other, RecurrentState):
            return NotImplemented
        mine, theirs = _tensors(self), _tensors(other)
        return self.owner == other.owner and len(mine) == len(theirs) and all(
            a.shape == b.shape and torch.equal(a, b.to(a.device)) for a, b in zip(mine, theirs))

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash((self.owner, self.ctx.detach().cpu().numpy().tobytes()))


def _tensors(state: RecurrentState) -> tuple[torch.Tensor, ...]:
    hidden = state.hidden if isinstance(state.hidden, tuple) else (state.hidden,)
    return (*hidden, state.ctx)


def carries_state(lm) -> bool:
    """Whether ``lm`` (a :class:`~sampledlm.neural.lm.NeuralLM`) is recurrent and its objective's rule needs nothing
    but the context (a short-list's back-off n-gram reads the words themselves: the history path then serves)."""
    return bool(getattr(lm.model, "sequence_model", False)) and not getattr(lm.objective, "uses_history", False)


def _device(model) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def _step(model, x: torch.Tensor, hidden):
    was_training = model.training
    model.eval()
    try:
        out, new = model(x, hidden)
    finally:
        model.train(was_training)
    return out[:, -1], new


def begin(lm) -> RecurrentState:
    """The state after ``<s>`` (the input ``</s>`` from zeros, as whole-sentence scoring starts), made once."""
    start = getattr(lm, "_start_state", None)
    if start is None:
        ctx, hidden = _step(lm.model, torch.full((1, 1), EOS_ID, dtype=torch.int64, device=_device(lm.model)), None)
        start = lm._start_state = RecurrentState(hidden, ctx, id(lm))
    return start


def _stack(hiddens: list):
    if isinstance(hiddens[0], tuple):
        return tuple(torch.cat(parts, dim=1) for parts in zip(*hiddens))
    return torch.cat(hiddens, dim=1)


def _row(hidden, i: int):
    if isinstance(hidden, tuple):
        return tuple(h[:, i : i + 1] for h in hidden)
    return hidden[:, i : i + 1]


@torch.no_grad()
def advance(lm, states: list[RecurrentState], words: list[int]) -> tuple[np.ndarray, list[RecurrentState]]:
    """``(ln P(words[i] | states[i]) [N], the states after them)``; after ``</s>`` the start state."""
    model, objective = lm.model, lm.objective
    was_training = model.training
    model.eval()
    try:
        ctx = torch.cat([s.ctx for s in states])
        targets = torch.tensor(words, dtype=torch.int64, device=ctx.device)
        lp = objective.log_prob_targets(model, ctx, targets)  # as whole-sentence scoring of a recurrent model does
    finally:
        model.train(was_training)
    going = [i for i, w in enumerate(words) if w != EOS_ID]
    out = [begin(lm)] * len(words)
    if going:
        new_ctx, hidden = _step(model, targets[going].unsqueeze(1), _stack([states[i].hidden for i in going]))
        for j, i in enumerate(going):
            out[i] = RecurrentState(_row(hidden, j), new_ctx[j : j + 1], id(lm))
    return lp.double().cpu().numpy(), out
