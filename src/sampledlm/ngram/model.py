"""The query side: a back-off n-gram model in ARPA form, scored in vectorised batches.

Whatever the smoothing, the finished model is what an ARPA file holds: for every stored
n-gram ``h w`` a probability ``log10 p(w|h)`` and, for n-grams that are contexts, a back-off
weight ``log10 b(h w)``. A query backs off from the longest stored n-gram (Katz 1987)::

    p(w | h) = p*(h w)                     if h w is stored
             = b(h) * p(w | h')            otherwise (h' = h without its oldest word;
                                           b(h) = 1 when h is not stored)

An interpolated model (KN, Witten-Bell, JM) is written in this form too: its stored p* is the
interpolated probability and b(h) its interpolation weight gamma(h), which gives exactly
the interpolated value for unseen n-grams. ``<s>`` is in the table (as a context; its
probability is log10 0 -> -99) and never predicted.

Tables are the sorted key arrays of :mod:`.tables`, one per order, with float64 arrays
``logp`` and ``bow`` (log10). Word ids are the model's own (``words``); callers with another
vocabulary map by string (:meth:`NgramLM.map_vocab`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import importlib.util

import numpy as np

from ..data.vocab import BOS, EOS, EOS_ID, UNK, Vocab
from ..lm import perplexity_of
from .tables import context_and_gram_indices, context_starts, lookup, lookup_grams

HAVE_NUMBA = importlib.util.find_spec("numba") is not None  # the compiled stream scorer (.trie_kernels)

LN10 = math.log(10.0)
CHUNK = 1 << 20  # predictions scored per batch in stream_logprobs


@dataclass
class NgramTable:
    """One order: sorted ``keys`` [M] (order 1: arange(W)), ``logp`` [M] and ``bow`` [M], log10."""

    keys: np.ndarray
    logp: np.ndarray
    bow: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)


@dataclass
class NgramLM:
    """A back-off n-gram model over ``words`` (which include ``<s>``, ``</s>``, ``<unk>``).

    ``tables[k-1]`` holds order k. ``info`` records how the model was made (smoothing,
    discounts, tuned weights) for reports; it is not written to ARPA files.
    """

    words: list[str]
    tables: list[NgramTable]
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        self.index = {w: i for i, w in enumerate(self.words)}
        self.width = len(self.words)
        self.bos, self.eos, self.unk = self.index[BOS], self.index[EOS], self.index[UNK]
        self._keys = [t.keys for t in self.tables]

    @property
    def order(self) -> int:
        return len(self.tables)

    def counts(self) -> list[int]:
        """Number of stored n-grams per order (what an ARPA header lists)."""
        return [len(t) for t in self.tables]

    # --- batched query (model ids) ------------------------------------------------------
    def logprob10_ids(self, hist: np.ndarray, words: np.ndarray, with_order: bool = False):
        """log10 p(word | hist) for a batch: ``hist`` [N, h] model ids oldest first, ``words`` [N] -> [N].

        ``with_order``: also return the order of the longest n-gram found (the n of SRILM's
        ``-debug 2`` "[3gram]" and of KenLM's ``full_scores`` ngram_length), int64 [N].

        Only the last ``order - 1`` history words matter, and nothing before a row's last
        ``<s>``: as in KenLM, a sentence starts from a state holding ONE ``<s>``, so the extra
        ``<s>`` padding of a sentence's first words is no history. This matters for files that
        store padding n-grams such as ``<s> <s> w`` (IRSTLM writes them): KenLM never uses
        them, and neither do we.
        """
        words = np.asarray(words, dtype=np.int64)
        hist = np.asarray(hist, dtype=np.int64)
        if hist.ndim != 2:
            hist = hist.reshape(len(words), -1)
        hist = _cut_at_sentence_start(hist, self.bos)
        ctx, gram = context_and_gram_indices(self._keys, hist, words, self.width)
        return self._back_off(ctx, gram, with_order)

    def _back_off(self, ctx: list[np.ndarray], gram: list[np.ndarray], with_order: bool):
        """log10 p from the context and n-gram indices of every order (:func:`context_and_gram_indices`)."""
        words = gram[0]
        out = np.zeros(len(words), dtype=np.float64)
        done = np.zeros(len(words), dtype=bool)
        order = np.zeros(len(words), dtype=np.int64)
        for j in range(len(ctx) - 1, -1, -1):  # longest match first
            hit = (gram[j] >= 0) & ~done
            out[hit] += self.tables[j].logp[gram[j][hit]]
            order[hit] = j + 1
            done |= hit
            if j > 0:  # not found at order j+1: pay the back-off weight of the j-word context
                miss = ~done & (ctx[j] >= 0)
                out[miss] += self.tables[j - 1].bow[ctx[j][miss]]
        return (out, order) if with_order else out

    def subset_logmass10_ids(self, hist: np.ndarray, member: np.ndarray) -> np.ndarray:
        """log10 of ``sum_{w: member[w]} p(w | hist)`` for a batch of histories, exactly, ``[N]``.

        ``hist`` [N, h] model ids oldest first (as :meth:`logprob10_ids`), ``member`` bool [W] the
        word subset (e.g. a neural model's short-list, Schwenk 2007). Not one query per word: the
        back-off form gives, for a context c with back-off weight b(c) and shorter context c',

            M(c) = sum_{w in S, c w stored} p*(c w) + b(c) (M(c') - sum_{w in S, c w stored} p(w | c'))

        (M(c) = M(c') when c is not stored), so with the two sums precomputed per stored context
        (once per subset, cached) a history costs the same few binary searches as one query.
        """
        member = np.asarray(member, dtype=bool)
        hist = np.asarray(hist, dtype=np.int64)
        if hist.ndim != 2:
            hist = hist.reshape(-1, max(self.order - 1, 0))
        stored, unigram = self._subset_sums(member)
        hist = _cut_at_sentence_start(hist, self.bos)
        mass = np.full(len(hist), unigram)
        w = min(hist.shape[1], self.order - 1)
        for j in range(1, w + 1):  # contexts of j words, shortest first
            c = lookup_grams(self._keys, hist[:, hist.shape[1] - j :], self.width)
            ok = c >= 0
            a, b = stored[j - 1]
            bow = 10.0 ** self.tables[j - 1].bow[c[ok]]
            mass[ok] = a[c[ok]] + bow * (mass[ok] - b[c[ok]])
        return np.log10(np.maximum(mass, 1e-300))

    def _subset_sums(self, member: np.ndarray):
        """Per stored context of each order j >= 1: (sum of p*(c w), sum of p(w | c')) over stored c w, w in S."""
        key = member.tobytes()
        cache = self.__dict__.setdefault("_subset_cache", {})
        if key in cache:
            return cache[key]
        unigram = float((10.0 ** self.tables[0].logp[member[: self.width]]).sum())
        stored, words = [], np.arange(self.width, dtype=np.int64)[:, None]  # words of every stored gram, by order
        for k in range(2, self.order + 1):
            keys = self.tables[k - 1].keys
            ctx, last = keys // self.width, keys % self.width
            words = np.concatenate([words[ctx], last[:, None]], axis=1)  # [M_k, k]
            sel = np.flatnonzero(member[last])
            n_ctx = len(self.tables[k - 2])
            a = np.bincount(ctx[sel], weights=10.0 ** self.tables[k - 1].logp[sel], minlength=n_ctx)
            lower = self.logprob10_ids(words[sel, 1:-1], last[sel])
            b = np.bincount(ctx[sel], weights=10.0 ** lower, minlength=n_ctx)
            stored.append((a, b))
        cache.clear()  # one subset at a time (a model has one short-list)
        cache[key] = (stored, unigram)
        return cache[key]

    def map_vocab(self, vocab: Vocab) -> np.ndarray:
        """Model id of each ``vocab`` id (by word string); ``vocab.bos_id`` -> ``<s>``; missing -> ``<unk>``.

        The map of the last vocabulary asked for is kept (a scorer asks once per chunk)."""
        cached = getattr(self, "_vocab_map", None)
        if cached is not None and cached[0] is vocab and len(cached[1]) == len(vocab) + 1:
            return cached[1]
        self._vocab_map = (vocab, self._map_vocab(vocab))
        return self._vocab_map[1]

    def _map_vocab(self, vocab: Vocab) -> np.ndarray:
        get = self.index.get
        m = np.fromiter((get(w, self.unk) for w in vocab.words), dtype=np.int64, count=len(vocab))
        return np.concatenate([m, [self.bos]])

    def stream_logprobs(self, ids: np.ndarray, vocab: Vocab, with_order: bool = False):
        """Natural-log P(token | up to n-1 previous tokens of its sentence, <s>-padded), float64 [len(ids)].

        ``ids`` is an id stream of ``vocab`` (:func:`sampledlm.data.corpus.load_ids`): every token,
        words and ``</s>``, is one prediction. Words are matched to the model by string; a
        ``vocab`` word the model lacks gets the model's ``<unk>`` probability. ``with_order``: also
        the order of the n-gram each probability came from (:meth:`logprob10_ids`).
        """
        ids = np.asarray(ids)
        m = self.map_vocab(vocab)
        out = np.empty(len(ids), dtype=np.float64)
        order = np.empty(len(ids), dtype=np.int64)
        s = 0
        while s < len(ids):  # chunks end at a sentence end (a sentence longer than CHUNK is cut)
            e = min(s + CHUNK, len(ids))
            if e < len(ids):
                ends = np.flatnonzero(ids[s:e] == vocab.eos_id)
                e = s + int(ends[-1]) + 1 if len(ends) else e
            out[s:e], order[s:e] = self._stream_logprob10(m[np.asarray(ids[s:e], dtype=np.int64)],
                                                          np.asarray(ids[s:e]) == vocab.eos_id)
            s = e
        return (out * LN10, order) if with_order else out * LN10

    def _stream_logprob10(self, words: np.ndarray, is_eos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log10 p and n-gram order of every token of a stream of model ids (``is_eos`` marks the ``</s>``).

        KenLM's state trick, vectorised: the context of length j of token i is the j-gram ending at
        token i-1, whose index the previous order's pass already found; so one binary search per
        order and token, not one per order and context length. A sentence's first token has ``<s>``
        as its only history (a context of length 1).
        """
        starts = np.ones(len(words), dtype=bool)
        starts[1:] = is_eos[:-1]
        ranges = self._context_ranges() if len(words) >= self.COMPILED_MIN else None
        if ranges is not None:
            from .trie_kernels import back_off_order, lookup_in_context
        ctx, gram = [np.zeros(len(words), dtype=np.int64)], [words]
        for j in range(1, self.order):
            c = np.empty(len(words), dtype=np.int64)
            c[1:] = gram[j - 1][:-1]
            c[starts] = self.bos if j == 1 else -1
            ctx.append(c)
            if ranges is None:
                gram.append(lookup(self._keys[j], c, words, self.width))
            else:
                g = np.empty(len(words), dtype=np.int64)
                lookup_in_context(self._keys[j], ranges[j], c, words, self.width, g)
                gram.append(g)
        if ranges is None:
            return self._back_off(ctx, gram, True)
        out = np.zeros(len(words), dtype=np.float64)
        done = np.zeros(len(words), dtype=np.bool_)
        order = np.zeros(len(words), dtype=np.int64)
        for j in range(len(ctx) - 1, -1, -1):
            t = self.tables[j]
            back_off_order(j, gram[j], ctx[j], t.logp, self.tables[j - 1].bow if j else t.bow, out, done, order)
        return out, order

    #: contexts per order up to which the stream scorer builds its trie pointers (8 bytes each)
    RANGES_MAX = 100_000_000
    #: tokens from which the stream scorer uses its compiled kernels (numba's import costs a few tenths of a second)
    COMPILED_MIN = 20_000

    def _context_ranges(self):
        """Per order j >= 1, :func:`.tables.context_starts` of its keys (built once, kept); None without numba
        or for tables too large to add a pointer per context."""
        if not HAVE_NUMBA or self.order < 2 or any(len(t) > self.RANGES_MAX for t in self.tables[:-1]):
            return None
        got = self.__dict__.get("_ranges")
        if got is None:
            got = [None] + [context_starts(self._keys[j], len(self.tables[j - 1]), self.width)
                            for j in range(1, self.order)]
            self.__dict__["_ranges"] = got
        return got

    # --- convenience API (strings) ------------------------------------------------------
    def encode(self, words: list[str]) -> np.ndarray:
        return np.array([self.index.get(w, self.unk) for w in words], dtype=np.int64)

    def log10_prob(self, history: list[str], word: str) -> float:
        """log10 p(word | history), as the ARPA file holds it; ``history`` is a list of words, oldest first (may start
        with ``<s>``)."""
        h = self.encode(list(history)[-(self.order - 1):] if self.order > 1 else [])
        return float(self.logprob10_ids(h.reshape(1, -1), self.encode([word]))[0])

    def logprob(self, history: list[str], word: str) -> float:
        """Deprecated: :meth:`log10_prob` (this name returned log10 where the rest of the API's ``logprob`` is ln; it
        still returns log10, so that no caller's numbers change base silently)."""
        import warnings

        warnings.warn("NgramLM.logprob is deprecated (it is log10): use log10_prob", DeprecationWarning, stacklevel=2)
        return self.log10_prob(history, word)

    def score(self, sentence: str | list[str], eos: bool = True) -> float:
        """Total log10 probability of one sentence after ``<s>`` (and its ``</s>``), like KenLM's ``score``."""
        toks = sentence.split() if isinstance(sentence, str) else list(sentence)
        ids = self.encode(toks + ([EOS] if eos else []))
        return float(self.sentence_logprobs10(ids).sum())

    def sentence_logprobs10(self, ids: np.ndarray) -> np.ndarray:
        """log10 probability of each token of ONE sentence (model ids, after ``<s>``); [len(ids)]."""
        ids = np.asarray(ids, dtype=np.int64)
        h = self.order - 1
        padded = np.concatenate([np.full(h, self.bos, np.int64), ids])
        hist = np.lib.stride_tricks.sliding_window_view(padded, h)[: len(ids)] if h else np.zeros((len(ids), 0), np.int64)
        return self.logprob10_ids(hist, ids)

    def perplexity(self, ids: np.ndarray, vocab: Vocab) -> float:
        """exp(-mean ln p) over every prediction of an id stream (words and ``</s>``)."""
        lp = self.stream_logprobs(ids, vocab)
        return perplexity_of(lp)


def _cut_at_sentence_start(hist: np.ndarray, bos: int) -> np.ndarray:
    """``hist`` with every word before a row's last ``<s>`` replaced by -1 (no word: matches no n-gram)."""
    is_bos = hist == bos
    if hist.shape[1] < 2 or not is_bos[:, 1:].any():
        return hist
    cols = np.arange(hist.shape[1])
    last = np.where(is_bos, cols, -1).max(axis=1)
    return np.where(cols[None, :] < last[:, None], -1, hist)


def sentence_scores10(logprobs_ln: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Per-sentence log10 totals from per-token natural-log probabilities of a stream."""
    ids = np.asarray(ids)
    ends = np.flatnonzero(ids == EOS_ID)
    if len(ids) and (len(ends) == 0 or ends[-1] != len(ids) - 1):
        ends = np.concatenate([ends, [len(ids) - 1]])
    starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else np.zeros(0, np.int64)
    return np.add.reduceat(logprobs_ln, starts) / LN10 if len(starts) else np.zeros(0)
