"""Exact evaluation of neural models and the neural :class:`~sampledlm.lm.LanguageModel`.

Every number uses the objective's *exact* inference rule, ``objective.log_prob_targets(model, ctx, y)``
(the softmax over all V words; the renormalised calibrated sigmoids for binary-trained models),
never the training approximation. The model says how it reads a stream (``eval_contexts``), so this
module never asks which kind of model it holds. Counting convention: see :mod:`sampledlm.lm`.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import progress
from ..errors import UserError
from ..data.vocab import EOS_ID
from ..lm import LanguageModel, perplexity_of
from ..objectives.normaliser import EVAL_ROWS


def history(objective, ids: np.ndarray, positions) -> dict:
    """The keywords an objective's exact rule takes besides ``ctx``: the stream and the rows' positions
    in it when it needs their previous words (``uses_history``: the short-list's n-gram back-off)."""
    return {"ids": ids, "positions": positions} if getattr(objective, "uses_history", False) else {}


@torch.no_grad()
def stream_logprobs(model, objective, ids: np.ndarray, batch_size: int | None = None, independent: bool = False,
                    only: np.ndarray | None = None, **kw) -> np.ndarray:
    """Natural-log probability of every token of ``ids`` (``float64 [len(ids)]``), exact.

    ``batch_size``: histories (feed-forward; default 1024), BPTT rows (recurrent running text;
    default 1: every token conditioned on the whole stream before it) or sentences (recurrent,
    ``independent``; default 64). ``independent``: each sentence from a fresh state. ``only``: a
    boolean mask; the output layer runs for those positions alone (the others are left at 0).
    """
    ids = np.asarray(ids)
    out = np.zeros(len(ids), dtype=np.float64)
    if len(ids) == 0:
        return out
    was_training = model.training
    model.eval()
    blocks = not getattr(objective, "uses_history", False) and getattr(objective, "scores_in_blocks",
                                                                         lambda _: False)(model)
    try:
        chunks = model.eval_contexts(ids, batch_size=batch_size, independent=independent, **kw)
        if only is None and blocks:
            chunks = gathered(chunks, EVAL_ROWS)
        with progress.task_bar(total=int(len(ids) if only is None else np.count_nonzero(only)), unit="tok") as pb:
            _score_chunks(chunks, objective, model, ids, only, blocks, out, pb)
    finally:
        model.train(was_training)
    return out


def _score_chunks(chunks, objective, model, ids: np.ndarray, only, blocks: bool, out: np.ndarray, pb) -> None:
    """:func:`stream_logprobs`' loop: each chunk's exact log-probabilities into ``out``; ``pb`` counts them."""
    for ctx, targets, positions, *rows in chunks:
        if only is not None:
            keep = only[np.asarray(positions)]
            if not keep.any():
                continue
            positions, kt = np.asarray(positions)[keep], torch.from_numpy(keep).to(targets.device)
            targets = targets[kt]
            if rows:
                needed, local = torch.unique(rows[0][kt], return_inverse=True)
                ctx, rows = ctx[needed], [local]
            else:
                ctx = ctx[kt]
        targets = targets.to(ctx.device)
        if rows:
            rows = [rows[0].to(ctx.device)]
        if rows and (blocks or getattr(objective, "uses_history", False)):
            ctx, rows = ctx[rows[0]], []  # its rule reads each prediction's words, or walks V in blocks
        if rows:  # one context serves several predictions: one output distribution for all of them
            lp = objective.log_prob(model, ctx)[rows[0], targets]
        else:
            lp = objective.log_prob_targets(model, ctx, targets, **history(objective, ids, positions))
        out[positions] = lp.double().cpu().numpy()
        pb.update(len(positions))


def gathered(chunks, rows: int):
    """``eval_contexts``' chunks ``(ctx [n, h], targets [n], positions [n])`` joined into chunks of at least
    ``rows`` histories (the last one shorter), for an objective that scores them in blocks of output rows: one pass
    over the output table then serves ``rows`` histories (a recurrent model's running text comes in chunks of 64
    tokens at V = 485k). Chunks with a fourth member (one context for several predictions) pass as they are."""
    held: list[tuple] = []
    size = 0
    for chunk in chunks:
        if len(chunk) != 3 or not torch.is_tensor(chunk[0]):
            yield chunk
            continue
        held.append(chunk)
        size += len(chunk[1])
        if size >= rows:
            yield _joined(held)
            held, size = [], 0
    if held:
        yield _joined(held)


def _joined(held: list[tuple]) -> tuple:
    if len(held) == 1:
        return held[0]
    return (torch.cat([c[0] for c in held]), torch.cat([c[1] for c in held]),
            np.concatenate([np.asarray(c[2]) for c in held]))


@torch.no_grad()
def stream_log_normalisers(model, objective, ids: np.ndarray, batch_size: int | None = None,
                           independent: bool = False) -> np.ndarray | None:
    """``log Z(h)`` of every token's history (``float64 [len(ids)]``) when the objective has an
    unnormalised scoring mode (:meth:`~sampledlm.objectives.base.OutputObjective.log_normaliser`), else None."""
    ids = np.asarray(ids)
    out = np.zeros(len(ids), dtype=np.float64)
    was_training = model.training
    model.eval()
    try:
        with progress.task_bar(total=len(ids), unit="tok") as pb:
            for ctx, targets, positions, *rows in model.eval_contexts(ids, batch_size=batch_size,
                                                                     independent=independent):
                log_z = objective.log_normaliser(model, ctx)
                if log_z is None:
                    return None
                out[positions] = (log_z[rows[0]] if rows else log_z).double().cpu().numpy()
                pb.update(len(positions))
    finally:
        model.train(was_training)
    return out


def calibrate_log_z(model, objective, ids: np.ndarray, batch_size: int | None = None) -> float:
    """Shift a self-normalised model's output biases so that the mean log Z over the histories of
    ``ids`` (scored in evaluation mode) is 0 (:meth:`~sampledlm.objectives.selfnorm.SelfNormalised.calibrate`:
    exact probabilities unchanged); returns the shift."""
    log_z = stream_log_normalisers(model, objective, ids, batch_size=batch_size)
    if log_z is None or not hasattr(objective, "calibrate"):
        raise UserError(f"objective {getattr(objective, 'name', '?')!r} has no unnormalised scoring mode to calibrate "
                        "(train with --objective selfnorm)")
    return objective.calibrate(model, float(log_z.mean()))


def self_normalisation_report(logprobs: np.ndarray, log_z: np.ndarray) -> dict:
    """How far the raw scores are from the exact rule: log Z's mean and spread over the predictions,
    and the perplexity the raw scores ``log P + log Z`` would give if used as log-probabilities."""
    raw = logprobs + log_z
    return {"log_z_mean": float(log_z.mean()), "log_z_sd": float(log_z.std()),
            "log_z_abs_mean": float(np.abs(log_z).mean()), "unnormalised_ppl": perplexity_of(raw)}


def perplexity(model, objective, ids: np.ndarray, **kw) -> float:
    """Exact perplexity of a stream (every word and ``</s>`` counted)."""
    return perplexity_of(stream_logprobs(model, objective, ids, **kw))


@torch.no_grad()
def batch_log_probs(model, objective, ids: np.ndarray) -> torch.Tensor:
    """Exact ``log P(w | h)`` over all V words for every token of a stream, ``[N, V]`` (tests, small inputs)."""
    model.eval()
    ids = np.asarray(ids)
    rows = [None] * len(ids)
    ids = np.asarray(ids)
    for ctx, _, positions, *at in model.eval_contexts(ids):
        if at and getattr(objective, "uses_history", False):  # one row per prediction for a rule that reads words
            ctx, at = ctx[at[0]], []
        lp = objective.log_prob(model, ctx, **history(objective, ids, positions))
        for p, r in zip(positions, lp[at[0]] if at else lp):
            rows[int(p)] = r
    return torch.stack(rows)


def score_sentences(model, objective, vocab, sentences: list[list[str]]) -> list[float]:
    """Natural-log probability of each tokenised sentence (its ``</s>`` included), each read on its own."""
    ids = np.array([i for words in sentences for i in vocab.encode(words) + [EOS_ID]], dtype=np.int64)
    lp = stream_logprobs(model, objective, ids, independent=True)
    ends = np.flatnonzero(ids == EOS_ID)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [float(lp[s : e + 1].sum()) for s, e in zip(starts, ends)]


def _gathers(objective) -> bool:
    """True when the objective's ``log_prob_targets`` is the generic one (``log_prob`` then gather), so one
    ``log_prob`` row per distinct history gives the very numbers of one row per prediction."""
    from ..objectives.base import OutputObjective

    return type(objective).log_prob_targets is OutputObjective.log_prob_targets


class NeuralLM(LanguageModel):
    """A trained neural model with the objective that defines its inference rule."""

    family = "neural"

    def __init__(self, model, objective, vocab, config: dict | None = None, batch_size: int | None = None):
        self.model, self.objective, self.vocab = model, objective, vocab
        self.config = config or {}
        from ..data.tokenizer import TextOptions

        opts = self.config.get("data", {}).get("text_options")
        self.text_options = None if opts is None else TextOptions.from_dict(opts, "config.json").to_dict()
        self.batch_size = batch_size

    @property
    def crosses_sentences(self) -> bool:
        return self.model.crosses_sentences

    @property
    def context_length(self) -> int | None:
        """``order - 1`` for a feed-forward model (its n-gram window); None for recurrent and Transformer models."""
        order = getattr(self.model, "order", None)
        return order - 1 if isinstance(order, int) else None

    def logprobs(self, ids: np.ndarray, *, independent: bool = False) -> np.ndarray:
        return stream_logprobs(self.model, self.objective, ids, batch_size=self.batch_size, independent=independent)

    def self_normalisation(self, ids: np.ndarray, logprobs: np.ndarray, *, independent: bool = False) -> dict | None:
        """:func:`self_normalisation_report` for an objective with an unnormalised scoring mode, else None."""
        log_z = stream_log_normalisers(self.model, self.objective, ids, batch_size=self.batch_size,
                                       independent=independent)
        return None if log_z is None else self_normalisation_report(logprobs, log_z)

    def logprobs_at(self, ids: np.ndarray, at: np.ndarray, *, independent: bool = True) -> np.ndarray:
        only = np.zeros(len(ids), dtype=bool)
        only[np.asarray(at)] = True
        return stream_logprobs(self.model, self.objective, ids, batch_size=self.batch_size, independent=independent,
                               only=only)[np.asarray(at)]

    @torch.no_grad()
    def next_logprobs(self, history) -> np.ndarray:
        """One forward pass over ``history`` (read as the start of a sentence); the distribution after it.

        A model with a key-value cache (``decode``, the transformer) keeps the last call's: when
        ``history`` is the previous history plus one word (generation), only that word is run."""
        if hasattr(self.model, "decode"):
            return self._next_cached(list(map(int, history)))
        ids = np.append(np.asarray(history, dtype=np.int64), EOS_ID)
        last = len(ids) - 1
        model, objective = self.model, self.objective
        was_training = model.training
        model.eval()
        try:
            for ctx, _, positions, *rows in model.eval_contexts(ids, independent=True):
                hit = np.flatnonzero(np.asarray(positions) == last)
                if len(hit):
                    row = int(rows[0][hit[0]]) if rows else int(hit[0])
                    return objective.log_prob(model, ctx[row : row + 1])[0].double().cpu().numpy()
        finally:
            model.train(was_training)
        raise AssertionError("the model's contexts did not cover the stream")

    # --- a decoder's queries: many histories in one forward pass ---------------------------------
    history_cache = None  # a neural.cache.HistoryCache, when enabled

    def enable_history_cache(self, capacity: int) -> bool:
        """Cache the contexts of histories (an LRU of ``capacity`` entries) when the model's context is a
        function of a bounded key (feed-forward: the last n-1 words); returns whether it is enabled."""
        from .cache import HistoryCache

        if capacity < 1 or self.model.history_key([]) is None:
            self.history_cache = None
            return False
        self.history_cache = HistoryCache(capacity)
        return True

    def _distinct_contexts(self, histories) -> tuple[torch.Tensor, np.ndarray]:
        """``(ctx [U, h_out], row [H])``: one context per distinct history (by the model's key, or the
        whole history), ``ctx[row[i]]`` the one after ``histories[i]``; cached ones are reused."""
        model = self.model
        keys = [model.history_key(h) for h in histories]
        keys = [k if k is not None else tuple(int(x) for x in h) for k, h in zip(keys, histories)]
        index: dict = {}
        row = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int64)
        uniq = list(index)
        first = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        reps = [np.asarray(histories[first[k]], dtype=np.int64) for k in uniq]
        cache = self.history_cache
        if cache is None:
            return model.history_contexts(reps), row
        got, missing = cache.lookup(uniq)
        if missing:
            new = model.history_contexts([reps[i] for i in missing])
            cache.store([uniq[i] for i in missing], new)
            for j, i in enumerate(missing):
                got[i] = new[j]
        return torch.stack(got) if got else torch.zeros((0, model.hidden_size)), row

    @torch.no_grad()
    def next_logprobs_many(self, histories) -> np.ndarray:
        """``ln P(w | <s> histories[i])`` for every w, ``[H, V]``: one forward pass for the distinct histories."""
        if getattr(self.objective, "uses_history", False):  # its rule reads each prediction's own words
            return super().next_logprobs_many(histories)
        was_training = self.model.training
        self.model.eval()
        try:
            ctx, row = self._distinct_contexts(histories)
            return self.objective.log_prob(self.model, ctx).double().cpu().numpy()[row]
        finally:
            self.model.train(was_training)

    @torch.no_grad()
    def logprobs_after(self, histories, words) -> list[np.ndarray]:
        """:meth:`LanguageModel.logprobs_after` in one forward pass: the distinct histories' contexts (cached
        for feed-forward models), then the objective's exact rule for the asked words only, computed as
        :func:`stream_logprobs` computes them (the same numbers as ``sampledlm score``)."""
        if getattr(self.objective, "uses_history", False):
            return super().logprobs_after(histories, words)
        sizes = [len(w) for w in words]
        if not sum(sizes):
            return [np.zeros(0) for _ in sizes]
        model, objective = self.model, self.objective
        was_training = model.training
        model.eval()
        try:
            ctx, row = self._distinct_contexts(histories)
            pair_row = torch.from_numpy(np.repeat(row, sizes)).to(ctx.device)
            targets = torch.from_numpy(np.concatenate([np.asarray(w, dtype=np.int64) for w in words])).to(ctx.device)
            if model.shares_contexts or _gathers(objective):  # the same row-wise arithmetic as score's
                lp = objective.log_prob(model, ctx)[pair_row, targets]
            else:
                lp = objective.log_prob_targets(model, ctx[pair_row], targets)
            return np.split(lp.double().cpu().numpy(), np.cumsum(sizes)[:-1])
        finally:
            model.train(was_training)

    @torch.no_grad()
    def _next_cached(self, history: list[int]) -> np.ndarray:
        """``next_logprobs`` through the model's key-value cache; past the window (``model.context``
        inputs) the distribution is computed afresh from the window that scoring reads for that word
        (``model.next_window``: it read the last ``context`` inputs, other numbers than ``advance``'s and the
        server's by up to 0.2 nats)."""
        model, objective = self.model, self.objective
        inputs = [EOS_ID] + history
        last = getattr(self, "_cache", None)
        was_training = model.training
        model.eval()
        try:
            if last is not None and len(inputs) <= model.context and inputs[:-1] == last[0]:
                hidden, cache = model.decode(torch.tensor([inputs[-1:]]), last[1])
            else:
                hidden, cache = model.decode(torch.tensor([inputs[model.next_window(len(inputs) - 1):]]))
            self._cache = (inputs, cache) if len(inputs) < model.context else None
            return objective.log_prob(model, hidden[0, -1:])[0].double().cpu().numpy()
        finally:
            model.train(was_training)

    def describe(self) -> str:
        m = self.config.get("model", {})
        obj = self.config.get("objective", {}).get("name", "?")
        return f"neural {m.get('type', '?')} (trained with {obj}), V={len(self.vocab)}"


def load_neural(path: str, config: dict | None = None, device: str | None = None) -> NeuralLM:
    """Open a neural run directory as a :class:`NeuralLM` (``config`` as read by :func:`sampledlm.store.read_config`)."""
    from .rundir import load_run

    from .device import resolve_device

    model, objective, vocab, config = load_run(path)
    dev = resolve_device(device or "auto")
    return NeuralLM(model.to(dev), objective.to(dev), vocab, config)
