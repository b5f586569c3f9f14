"""One interface for every language model, and what is written once against it: perplexity,
sentence scores, linear interpolation of any models and its EM weights.

Counting convention (the one KenLM, SRILM and the published PTB tables use): text is one sentence
per line; every sentence ends with ``</s>``, which is predicted and counted; ``<s>`` pads the history
and is never predicted; words outside the vocabulary are ``<unk>``. An *id stream* holds every
predicted token (words and ``</s>``) of a text, so for N tokens::

    ppl = exp(-(1/N) sum_i ln P(w_i | h_i))

Every number comes from the model's exact, normalised distribution (a sampled training objective
never enters evaluation).

Interpolation of K models with weights lam_k >= 0, sum_k lam_k = 1 (per token)::

    P(w|h) = sum_k lam_k P_k(w|h)

EM on held-out text: with posteriors ``r_ki = lam_k p_ki / sum_j lam_j p_ji``, iterate
``lam_k <- mean_i r_ki``; each iteration never lowers the held-out likelihood.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar, Sequence

import numpy as np

from .data.vocab import EOS_ID, UNK_ID, Vocab
from .errors import UserError


class LanguageModel(ABC):
    """What every family answers: its vocabulary and exact natural-log probabilities of an id stream.

    ``ids`` is always an id stream of ``self.vocab`` (:func:`sampledlm.data.corpus.load_ids`).
    ``independent=True`` scores each sentence from a fresh start (n-best and per-sentence scoring);
    ``False`` reads the stream as running text. Only models whose history crosses sentence
    boundaries (recurrent ones) give different numbers for the two.
    """

    family: ClassVar[str] = "base"
    vocab: Vocab
    #: how the model's training text was read (a :class:`~sampledlm.data.tokenizer.TextOptions`
    #: dict), so that test text is read the same way; None when the model does not know
    text_options: dict | None = None
    #: whether ``<unk>`` has a probability of its own (an ARPA file without it scores OOVs at log10 p = -100)
    has_unk: bool = True
    #: whether running text scores differently from sentences read on their own (recurrent and Transformer models)
    crosses_sentences: bool = False

    @property
    def context_length(self) -> int | None:
        """How many previous words the probabilities depend on (``n - 1`` for an n-gram or feed-forward model), or
        None when the whole history counts (recurrent and Transformer models, trigger features; the default).
        Lattice rescoring (:mod:`sampledlm.use.lattice`) is exact over histories of this many words."""
        return None

    def oov_mask(self, ids: np.ndarray) -> np.ndarray:
        """True where a token is scored as ``<unk>`` (KenLM's OOVs: words outside the vocabulary, literal ``<unk>``)."""
        return np.asarray(ids) == UNK_ID

    @abstractmethod
    def logprobs(self, ids: np.ndarray, *, independent: bool = False) -> np.ndarray:
        """``ln P(w_i | h_i)`` for every token of ``ids``: float64 ``[len(ids)]``."""

    def perplexity(self, ids: np.ndarray, *, independent: bool = False) -> float:
        return perplexity_of(self.logprobs(ids, independent=independent))

    def logprobs_at(self, ids: np.ndarray, at: np.ndarray, *, independent: bool = True) -> np.ndarray:
        """``ln P(w_i | h_i)`` for the positions ``at`` of ``ids`` only (models may skip the others' outputs)."""
        return self.logprobs(ids, independent=independent)[np.asarray(at)]

    def next_logprobs(self, history: Sequence[int]) -> np.ndarray:
        """``ln P(w | <s> history)`` for every word ``w`` of the vocabulary, float64 ``[V]``.

        ``history``: the ids of the sentence so far (no ``<s>``, no ``</s>``). This default scores
        ``history + [w]`` for every ``w`` as independent sentences (one batched call of
        :meth:`logprobs`); families override it with one forward pass.
        """
        h = np.asarray(history, dtype=np.int64)
        V, L = len(self.vocab), len(h)
        rows = np.empty((V, L + 2), dtype=np.int64)
        rows[:, :L] = h
        rows[:, L] = np.arange(V)
        rows[:, L + 1] = EOS_ID  # after w = </s> this is an empty sentence of its own: harmless
        return self.logprobs(rows.reshape(-1), independent=True).reshape(V, L + 2)[:, L]

    def next_logprobs_many(self, histories: Sequence[Sequence[int]]) -> np.ndarray:
        """:meth:`next_logprobs` of several histories, float64 ``[H, V]`` (row i: after ``<s> histories[i]``).

        This default calls :meth:`next_logprobs` once per history; neural models run all of them in one
        forward pass (a server's top-k queries of many clients, bunched)."""
        V = len(self.vocab)
        out = np.empty((len(histories), V), dtype=np.float64)
        for i, h in enumerate(histories):
            out[i] = self.next_logprobs(h)
        return out

    def logprobs_after(self, histories: Sequence[Sequence[int]], words: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """A decoder's query: ``ln P(words[i][j] | <s> histories[i])`` for every i, j, one float64 array per history.

        ``histories[i]``: ids of the sentence so far (no ``<s>``, no ``</s>``); ``words[i]``: the candidate
        next ids (``</s>`` allowed: the probability that the sentence ends there). Each pair is the
        sentence ``histories[i] + [w]`` (followed by ``</s>`` unless ``w`` is ``</s>``) read on its own, so
        the numbers are those :meth:`logprobs` gives that word inside that sentence (``sampledlm score``'s).
        This default scores all the pairs in one call of :meth:`logprobs_at`; families whose history is
        short (n-grams) or whose contexts can be shared (neural models: one context per history) override it.
        """
        stream, at, sizes = [], [], []
        for h, ws in zip(histories, words):
            h = [int(x) for x in h]
            sizes.append(len(ws))
            for w in ws:
                at.append(len(stream) + len(h))
                stream += h + ([EOS_ID] if int(w) == EOS_ID else [int(w), EOS_ID])
        if not at:
            return [np.zeros(0) for _ in sizes]
        lp = self.logprobs_at(np.asarray(stream, dtype=np.int64), np.asarray(at, dtype=np.int64), independent=True)
        return np.split(np.asarray(lp, dtype=np.float64), np.cumsum(sizes)[:-1])

    def describe(self) -> str:
        """One line for summaries: family and size."""
        return f"{self.family} LM, V={len(self.vocab)}"


# --- numbers written once ----------------------------------------------------------------------
def perplexity_from_nll(mean_nll: float) -> float:
    """``exp(mean_nll)``, the perplexity of a mean negative natural-log likelihood; ``inf`` where the
    exponential overflows a float (a diverged model's log probabilities can be huge yet finite), nan stays nan."""
    mean_nll = float(mean_nll)
    if math.isnan(mean_nll):
        return mean_nll
    return math.exp(mean_nll) if mean_nll < 709.0 else math.inf


def perplexity_of(logprobs: np.ndarray) -> float:
    """``exp(-mean ln p)``; nan for an empty stream, ``inf`` when it overflows (never raises)."""
    return perplexity_from_nll(-float(np.mean(logprobs))) if len(logprobs) else float("nan")


def sentence_bounds(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` (inclusive) of each sentence of an id stream; a last sentence without ``</s>`` counts."""
    ids = np.asarray(ids)
    ends = np.flatnonzero(ids == EOS_ID)
    if len(ids) and (len(ends) == 0 or ends[-1] != len(ids) - 1):
        ends = np.append(ends, len(ids) - 1)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    return starts, ends


def sentence_scores(logprobs: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per sentence: ``(total ln-prob [S], predictions [S])`` (each sentence's words and its ``</s>``)."""
    starts, ends = sentence_bounds(ids)
    csum = np.concatenate([[0.0], np.cumsum(logprobs)])
    return csum[ends + 1] - csum[starts], (ends + 1 - starts)


def mix_logprobs(component_logprobs: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """``ln sum_k w_k exp(lp_k)`` per token; ``component_logprobs [K, N]``; zero weights drop out."""
    lp = np.asarray(component_logprobs, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    keep = w > 0
    with np.errstate(divide="ignore"):
        terms = np.log(w[keep])[:, None] + lp[keep]
    return np.logaddexp.reduce(terms, axis=0)


def interpolate(lp_a: np.ndarray, lp_b: np.ndarray, weight: float) -> np.ndarray:
    """Two models: ``ln(weight * exp(lp_a) + (1 - weight) * exp(lp_b))`` per token."""
    return mix_logprobs(np.stack([lp_a, lp_b]), [weight, 1.0 - weight])


def em_weights(component_logprobs: np.ndarray, iters: int = 500, tol: float = 1e-7) -> np.ndarray:
    """EM estimate of the interpolation weights of K models from their held-out log-probs ``[K, N]``."""
    lp = np.asarray(component_logprobs, dtype=np.float64)
    k = lp.shape[0]
    lam = np.full(k, 1.0 / k)
    for _ in range(iters):
        mix = mix_logprobs(lp, lam)
        with np.errstate(divide="ignore"):
            new = np.exp(np.log(lam)[:, None] + lp - mix).mean(axis=1)
        new = np.clip(new, 1e-6, None)
        new /= new.sum()
        if np.max(np.abs(new - lam)) < tol:
            return new
        lam = new
    return lam


def em_weight(lp_a: np.ndarray, lp_b: np.ndarray) -> float:
    """Two models: the EM weight of model a."""
    return float(em_weights(np.stack([lp_a, lp_b]))[0])


# --- mixtures -------------------------------------------------------------------------------------
def union_vocab(vocabs: Sequence[Vocab]) -> Vocab:
    """The words of every vocabulary: the first's in its order, then each other's new words in theirs (counts
    summed where a word is in several); the first vocabulary itself when they all hold the same words."""
    first = vocabs[0]
    extra: dict[str, int] = {}
    counts = first.counts.copy()
    for v in vocabs[1:]:
        for w, c in zip(v.words, v.counts.tolist()):
            i = first.index.get(w)
            if i is not None:
                counts[i] += c
            else:
                extra[w] = extra.get(w, 0) + c
    if not extra:
        return first
    return Vocab(first.words + list(extra), np.concatenate([counts, np.array(list(extra.values()), dtype=np.int64)]))


def union_map(union: Vocab, dst: Vocab) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(ids, missing)``: the id in ``dst`` of every id of ``union`` (``<s>`` included), ``<unk>`` for a word ``dst``
    lacks, and the mask of those words (a model gives them probability 0); ``(None, None)`` when the two are the
    same vocabulary."""
    if union.words == dst.words:
        return None, None
    ids = np.array([dst.index.get(w, UNK_ID) for w in union.words] + [dst.bos_id], dtype=np.int64)
    missing = np.array([w not in dst.index for w in union.words] + [False], dtype=bool)
    return ids, (missing if missing.any() else None)


def common_text_options(models: Sequence[LanguageModel]) -> dict | None:
    """The one way a mixture's models read text: the options the models that record any agree on (an ARPA file
    records none, so it reads text as the model it is mixed with). Models that read text differently (one
    lower-cases, the other does not) cannot share a token stream: refused, whatever their order."""
    from .data.tokenizer import TextOptions

    # compared as full option sets: a config written before an option existed records fewer keys, same meaning
    known = [(i, TextOptions.from_dict(m.text_options, f"model {i + 1}").to_dict())
             for i, m in enumerate(models) if m.text_options]
    for i, opts in known[1:]:
        if opts != known[0][1]:
            diff = sorted(k for k in set(opts) | set(known[0][1]) if opts.get(k) != known[0][1].get(k))
            raise UserError(f"the models to mix read text differently (model {known[0][0] + 1} and model {i + 1} "
                            f"differ in {', '.join(diff)}): a mixture scores one token stream, so mix models "
                            "trained with the same text options")
    return known[0][1] if known else None


class Mixture(LanguageModel):
    """Linear interpolation of any language models (see module docstring).

    Its vocabulary is the union of the models' (as SRILM's ``ngram -mix-lm`` takes it): each model gives a word it
    does not know probability 0, so every model stays a distribution over the union and so does the mixture; a word
    outside every vocabulary is ``<unk>``, whose probability is the mix of each model's own ``<unk>`` probability
    (an ARPA file without ``<unk>`` gives it log10 -100, as KenLM does). A word a model lacks is read as that
    model's ``<unk>`` when it is a history. The models may order their vocabularies differently; ids are mapped by
    word.
    """

    family = "mixture"

    @property
    def crosses_sentences(self) -> bool:
        return any(m.crosses_sentences for m in self.models)

    @property
    def context_length(self) -> int | None:
        """The longest of its models' context lengths (None when one of them looks at the whole history)."""
        ks = [m.context_length for m in self.models]
        return None if any(k is None for k in ks) else max(ks)

    def __init__(self, models: Sequence[LanguageModel], weights: Sequence[float] | None = None):
        if len(models) < 2:
            raise ValueError("a mixture needs at least two models")
        self.models = list(models)
        self.vocab = union_vocab([m.vocab for m in self.models])
        self.text_options = common_text_options(self.models)
        self.maps, self.missing = (list(x) for x in zip(*(union_map(self.vocab, m.vocab) for m in self.models)))
        self.weights = np.full(len(models), 1.0 / len(models)) if weights is None else self.check_weights(weights)

    def check_weights(self, weights) -> np.ndarray:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (len(self.models),) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise UserError(f"interpolation weights {list(weights)}: give {len(self.models)} non-negative numbers")
        if abs(w.sum() - 1.0) > 1e-6:
            raise UserError(f"interpolation weights {list(weights)} sum to {w.sum():g}, not 1")
        return w

    def _zero_missing(self, k: int, lp: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Model k's ``lp`` of ``targets`` (union ids) with the words it lacks at probability 0."""
        missing = self.missing[k]
        if missing is None:
            return lp
        lp = np.array(lp, dtype=np.float64)
        lp[missing[np.asarray(targets, dtype=np.int64)]] = -np.inf
        return lp

    def component_logprobs(self, ids: np.ndarray, *, independent: bool = False,
                           own_vocabulary: bool = False) -> np.ndarray:
        """``[K, N]``: every model's log-probs of the stream (union ids): as the mixture takes them (0 for a word
        the model lacks), or with ``own_vocabulary`` as the model alone scores the text (such a word as its
        ``<unk>``: each model's own perplexity)."""
        ids = np.asarray(ids)
        raw = np.stack([m.logprobs(ids if mp is None else mp[ids], independent=independent)
                        for m, mp in zip(self.models, self.maps)])
        return raw if own_vocabulary else self.in_union(raw, ids)

    def in_union(self, component_lp: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """``[K, N]`` component log-probs of ``ids`` with each model's missing words at probability 0."""
        return np.stack([self._zero_missing(k, lp, ids) for k, lp in enumerate(component_lp)])

    def fit_weights(self, ids: np.ndarray, *, independent: bool = False) -> np.ndarray:
        """Set the weights by EM on held-out ids; returns them."""
        self.weights = em_weights(self.component_logprobs(ids, independent=independent))
        return self.weights

    def logprobs(self, ids: np.ndarray, *, independent: bool = False) -> np.ndarray:
        return mix_logprobs(self.component_logprobs(ids, independent=independent), self.weights)

    def logprobs_at(self, ids: np.ndarray, at: np.ndarray, *, independent: bool = True) -> np.ndarray:
        ids = np.asarray(ids)
        comps = [self._zero_missing(k, m.logprobs_at(ids if mp is None else mp[ids], at, independent=independent),
                                    ids[np.asarray(at)])
                 for k, (m, mp) in enumerate(zip(self.models, self.maps))]
        return mix_logprobs(np.stack(comps), self.weights)

    def next_logprobs(self, history: Sequence[int]) -> np.ndarray:
        h = np.asarray(history, dtype=np.int64)
        V = len(self.vocab)
        comps = [self._zero_missing(k, m.next_logprobs(h if mp is None else mp[h])[slice(None) if mp is None else mp[:V]],
                                    np.arange(V))
                 for k, (m, mp) in enumerate(zip(self.models, self.maps))]
        return mix_logprobs(np.stack(comps), self.weights)

    def next_logprobs_many(self, histories: Sequence[Sequence[int]]) -> np.ndarray:
        V = len(self.vocab)
        hs = [np.asarray(h, dtype=np.int64) for h in histories]
        comps = [m.next_logprobs_many(hs if mp is None else [mp[h] for h in hs])[:, slice(None) if mp is None else mp[:V]]
                 for m, mp in zip(self.models, self.maps)]
        for k, missing in enumerate(self.missing):
            if missing is not None:
                comps[k] = np.where(missing[:V][None, :], -np.inf, comps[k])
        return mix_logprobs(np.stack(comps).reshape(len(self.models), -1), self.weights).reshape(len(hs), V)

    def logprobs_after(self, histories: Sequence[Sequence[int]], words: Sequence[Sequence[int]]) -> list[np.ndarray]:
        hs = [np.asarray(h, dtype=np.int64) for h in histories]
        ws = [np.asarray(w, dtype=np.int64) for w in words]
        sizes = [len(w) for w in ws]
        comps = []
        flat = np.concatenate(ws) if ws else np.zeros(0, dtype=np.int64)
        for k, (m, mp) in enumerate(zip(self.models, self.maps)):
            got = m.logprobs_after(hs if mp is None else [mp[h] for h in hs], ws if mp is None else [mp[w] for w in ws])
            comps.append(self._zero_missing(k, np.concatenate(got) if got else np.zeros(0), flat))
        mixed = mix_logprobs(np.stack(comps), self.weights)
        return np.split(mixed, np.cumsum(sizes)[:-1]) if sizes else []

    def describe(self) -> str:
        parts = ", ".join(f"{w:.3f} x {m.describe()}" for m, w in zip(self.models, self.weights))
        return f"mixture of {len(self.models)}: {parts}"


def language_model(model) -> LanguageModel:
    """The id-level model of what :func:`sampledlm.load` returns (its ``lm``), or ``model`` itself when it is one:
    every public function of :mod:`sampledlm.use` takes either."""
    if isinstance(model, LanguageModel):
        return model
    inner = getattr(model, "lm", None)
    if isinstance(inner, LanguageModel):
        return inner
    raise TypeError(f"expected a model (sampledlm.load's) or a sampledlm.lm.LanguageModel, got {type(model).__name__}")
