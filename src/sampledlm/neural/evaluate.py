"""Exact evaluation of neural scorers: per-token log-probabilities, perplexity, interpolation, sentence scores.

Every number here uses the objective's *exact* inference rule, ``objective.log_prob(model, ctx)``
(the softmax over all V words; a renormalised sigmoid for binary-trained models), never the
training approximation. Counting convention (ARCHITECTURE.md): every token of the id stream,
words and ``</s>``, is one prediction; ``<s>`` is never predicted::

    ppl = exp(-(1/N) sum_i ln P(w_i | h_i))

Recurrent models read the stream as :func:`sampledlm.data.batches.bptt_rows` rows; the state starts at
zero at the start of each row and is carried across segments. With ``batch_size=1`` (the default
for recurrent models) there is one row: every token is conditioned on the whole stream before it.

Linear interpolation with an n-gram model (per token)::

    P(w|h) = lam * P_nn(w|h) + (1 - lam) * P_ngram(w|h)

``lam`` (the *neural* model's weight) can be tuned by EM on a validation stream: with posteriors
``r_i = lam p_nn,i / (lam p_nn,i + (1-lam) p_ng,i)``, iterate ``lam <- mean_i r_i`` (this never
lowers the validation likelihood).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..data.batches import bptt_rows, ngram_histories, sentence_positions
from ..data.vocab import EOS_ID


def _is_recurrent(model) -> bool:
    return getattr(model, "kind", "") == "rnn"


@torch.no_grad()
def batch_log_probs(model, objective, inputs: torch.Tensor) -> torch.Tensor:
    """Exact ``log P(w | h)`` over all V words, ``[N, V]``.

    ``inputs``: feed-forward: histories ``[N, n-1]``; recurrent: ids ``[B, T]`` read from a zero
    state (then the result is ``[B*T, V]``, row-major).
    """
    model.eval()
    if _is_recurrent(model):
        hidden, _ = model(inputs)
        hidden = hidden.reshape(-1, hidden.shape[-1])
    else:
        hidden = model(inputs)
    return objective.log_prob(model, hidden)


@torch.no_grad()
def stream_logprobs(model, objective, ids: np.ndarray, batch_size: int | None = None, bptt: int = 64) -> np.ndarray:
    """Natural-log probability of every token of ``ids`` (``float64 [len(ids)]``), exact.

    ``batch_size``: histories per forward pass (feed-forward; default 1024) or BPTT rows
    (recurrent; default 1, see module docstring). ``bptt``: segment length for recurrent models.
    """
    ids = np.asarray(ids)
    n = len(ids)
    out = np.zeros(n, dtype=np.float64)
    if n == 0:
        return out
    was_training = model.training
    model.eval()
    if _is_recurrent(model):
        B = batch_size or 1
        x, y, mask = bptt_rows(ids, B)
        lp = torch.zeros(x.shape, dtype=torch.float64)
        state = None  # reset at the start of evaluation
        for t in range(0, x.shape[1], bptt):
            hidden, state = model(x[:, t : t + bptt], state)
            flat = hidden.reshape(-1, hidden.shape[-1])
            seg = objective.log_prob_targets(model, flat, y[:, t : t + bptt].reshape(-1))
            lp[:, t : t + bptt] = seg.double().reshape(B, -1)
        out[:] = lp.reshape(-1)[:n].numpy()
    else:
        B = batch_size or 1024
        positions = sentence_positions(ids)
        targets = torch.from_numpy(ids.astype(np.int64))
        for s in range(0, n, B):
            at = np.arange(s, min(n, s + B))
            hist = torch.from_numpy(ngram_histories(ids, positions, model.order, model.num_words, at))
            ctx = model(hist)
            out[s : s + len(at)] = objective.log_prob_targets(model, ctx, targets[s : s + len(at)]).double().numpy()
    model.train(was_training)
    return out


def perplexity_of(logprobs: np.ndarray) -> float:
    return math.exp(-float(np.mean(logprobs))) if len(logprobs) else float("nan")


def perplexity(model, objective, ids: np.ndarray, **kw) -> float:
    """Exact perplexity of a stream (every word and ``</s>`` counted)."""
    return perplexity_of(stream_logprobs(model, objective, ids, **kw))


def sentence_scores(logprobs: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence: ``(total ln-prob [S], predictions [S])`` (each sentence's words and its ``</s>``)."""
    ids = np.asarray(ids)
    ends = np.flatnonzero(ids == EOS_ID)
    if len(ids) and (len(ends) == 0 or ends[-1] != len(ids) - 1):
        ends = np.append(ends, len(ids) - 1)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    csum = np.concatenate([[0.0], np.cumsum(logprobs)])
    return csum[ends + 1] - csum[starts], (ends + 1 - starts)


def score_sentences(model, objective, vocab, sentences: list[list[str]]) -> list[float]:
    """Natural-log probability of each tokenised sentence (its ``</s>`` included), each read on its own."""
    scores = []
    for words in sentences:
        ids = np.array(vocab.encode(words) + [EOS_ID], dtype=np.int32)
        scores.append(float(stream_logprobs(model, objective, ids).sum()))
    return scores


def interpolate(lp_a: np.ndarray, lp_b: np.ndarray, weight: float) -> np.ndarray:
    """``ln(weight * exp(lp_a) + (1 - weight) * exp(lp_b))`` per token, computed stably."""
    if weight >= 1.0:
        return lp_a.copy()
    if weight <= 0.0:
        return lp_b.copy()
    return np.logaddexp(math.log(weight) + lp_a, math.log1p(-weight) + lp_b)


def em_weight(lp_a: np.ndarray, lp_b: np.ndarray, start: float = 0.5, iters: int = 200, tol: float = 1e-7) -> float:
    """EM estimate of the weight of model a in a two-model linear interpolation (see module docstring)."""
    lam = start
    for _ in range(iters):
        mix = interpolate(lp_a, lp_b, lam)
        new = float(np.mean(np.exp(math.log(lam) + lp_a - mix)))
        new = min(max(new, 1e-6), 1 - 1e-6)
        if abs(new - lam) < tol:
            return new
        lam = new
    return lam
