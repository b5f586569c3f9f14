"""Feature extraction for maximum-entropy LMs: history features, their dictionary, (g, w) pairs.

A maximum-entropy LM scores word ``w`` after history ``h`` by (Xu, Gunawardana & Khudanpur 2011, eq. 10)::

    a_w(h) = sum_i theta_i f_i(h, w) = u_w + sum_{g in G(h), (g, w) in F} theta[(g, w)]

where ``u_w`` is the unigram feature (the classifier's bias), ``G(h)`` the *history features*
active in ``h`` and ``F`` the set of known (history feature, word) pairs. Every feature f_i
belongs to exactly one word, so the V binary classifiers of the binarized MELM share nothing.

History feature types (``--features``, comma separated; "k back" = the word k places before
the predicted one, ``<s>``-padded at the sentence start)::

    unigram        the bias u_w (always present)
    bigram         w_{-1}                     trigram   w_{-2} w_{-1}     4gram, 5gram, ... likewise
    skip-bigram    w_{-2}  (skip-1 bigram: the word just before is skipped; Goodman 2001)
    skip-trigram   w_{-3} w_{-2}  (skip-1 trigram)
    trigger        each distinct word v among the stream tokens k = gap+1 .. window back (Rosenfeld
                   1996; across sentence boundaries, ``</s>`` excluded); only selected pairs
                   (v -> w) are features: the ``trigger_pairs`` pairs with the highest average
                   mutual information among those seen ``trigger_min_count`` times or more and
                   positively correlated (P(w | v in window) > P(w)).

Feat-I = ``unigram,bigram,trigram``; Feat-II adds ``skip-bigram,skip-trigram,trigger``.

Indexing. Each type keeps a sorted dictionary of the contexts seen in training (packed int64
keys ``sum_j w_j (V+1)^j``); a history feature's global id is ``g = offset[type] + index``.
The known pairs are the sorted int64 keys ``g * V + w`` of every (active feature, target)
seen in training (no count cut-off; triggers: the selected pairs), stored as CSR by ``g``:
``gptr [G+1]``, ``gword [P]``. A pair's parameter is ``theta[slot[p]]`` with ``slot = p``
(exact dictionary) or a hash of the key modulo ``hash_size`` (bounded parameter memory; the
pair structure itself stays exact so the sparse normaliser still works).

Active features of N positions are a CSR too: ``hptr [N+1]`` (int64), ``hfeat [nnz]`` (int32 g).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np

from ..data.batches import ngram_histories, sentence_positions
from ..errors import UserError
from ..data.vocab import EOS_ID

FEAT_I = "unigram,bigram,trigram"
FEAT_II = "unigram,bigram,trigram,skip-bigram,skip-trigram,trigger"
_NGRAM = re.compile(r"^(\d+)gram$")
_BACK = {"bigram": (1,), "trigram": (2, 1), "skip-bigram": (2,), "skip-trigram": (3, 2)}


@dataclass
class FeatureSpec:
    """Which history features to use, by name (see module docstring), and the trigger options."""

    names: tuple[str, ...] = ("unigram", "bigram", "trigram")
    trigger_window: int = 20
    trigger_gap: int = 2
    trigger_pairs: int = 200_000
    trigger_min_count: int = 3
    trigger_min_lift: float = 10.0

    @classmethod
    def parse(cls, text: str, **kw) -> "FeatureSpec":
        text = {"feat-i": FEAT_I, "feat-ii": FEAT_II}.get(text.strip().lower(), text)
        names = [n.strip().lower() for n in text.split(",") if n.strip()]
        if not names:
            raise UserError("--features is empty: name at least one feature (--features unigram for unigrams alone)")
        known = set(_BACK) | {"unigram", "trigger"}
        for n in names:
            if n not in known and not (_NGRAM.match(n) and int(_NGRAM.match(n).group(1)) >= 2):
                raise UserError(f"unknown feature {n!r}; choose from unigram, bigram, trigram, 4gram.., "
                                "skip-bigram, skip-trigram, trigger")
        if "unigram" not in names:
            names.insert(0, "unigram")
        spec = cls(tuple(dict.fromkeys(names)), **kw)
        if spec.trigger_window <= spec.trigger_gap:
            raise UserError("--trigger-window must exceed --trigger-gap")
        return spec

    def context_types(self) -> list[tuple[str, tuple[int, ...]]]:
        """``(name, back)`` for every fixed-width context type; ``back`` lists how far back each word is."""
        out = []
        for n in self.names:
            if n in _BACK:
                out.append((n, _BACK[n]))
            elif _NGRAM.match(n):
                k = int(_NGRAM.match(n).group(1))
                out.append((n, tuple(range(k - 1, 0, -1))))
        return out

    @property
    def max_back(self) -> int:
        return max([max(b) for _, b in self.context_types()] or [0])

    @property
    def has_triggers(self) -> bool:
        return "trigger" in self.names

    def to_dict(self) -> dict:
        d = asdict(self)
        d["names"] = list(self.names)
        return d


def window_words(ids: np.ndarray, at: np.ndarray, window: int, gap: int,
                 floor: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct words among stream tokens ``at - window .. at - gap - 1`` (``</s>`` excluded).

    ``floor [len(at)]``: the first stream index each window may reach (None: 0; the start of the
    position's own sentence scores sentences independently). Returns ``(rows [M] int64, words [M]
    int64)`` sorted by row then word; ``rows`` index ``at``.
    """
    ids = np.asarray(ids)
    lo = 0 if floor is None else floor
    rows, words = [], []
    for d in range(gap + 1, window + 1):
        src = at - d
        ok = src >= lo
        r = np.nonzero(ok)[0]
        w = ids[src[ok]].astype(np.int64)
        keep = w != EOS_ID
        rows.append(r[keep])
        words.append(w[keep])
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    r = np.concatenate(rows).astype(np.int64)
    w = np.concatenate(words)
    base = int(w.max()) + 1 if len(w) else 1
    key = np.unique(r * base + w)
    return key // base, key % base


def select_triggers(v: np.ndarray, t: np.ndarray, targets: np.ndarray, num_words: int, num_pairs: int,
                    min_count: int, min_lift: float = 10.0) -> np.ndarray:
    """Trigger pairs by average mutual information (Rosenfeld 1996); returns sorted keys ``v * V + w``.

    ``v [M]``: a word in the window of a position, ``t [M]``: that position's target (one entry per
    distinct (position, v)); ``targets [N]``: every position's target, one entry per position (P(b) counts
    positions, not window words). With a = "v in window", b = "next is w"::

        AMI = sum_{x in {a, ~a}, y in {b, ~b}} P(x, y) log P(x, y) / (P(x) P(y))

    among the pairs whose lift ``P(b | a) / P(b)`` exceeds ``min_lift``: v must make w that many times
    likelier than usual. AMI alone ranks first the weak associations of frequent words (on PTB with a
    20-word window, lift > 1 admits 482k pairs, about 24,000 active (trigger, word) pairs per position;
    lift > 10: 42k pairs, 136 per position), which made Feat-II models slower and worse than Feat-I.
    """
    V = num_words
    keys, n_ab = np.unique(v * V + t, return_counts=True)
    n_a = np.bincount(v, minlength=V + 1).astype(np.float64)
    n_b = np.bincount(targets, minlength=V + 1).astype(np.float64)
    ok = n_ab >= min_count
    keys, n_ab = keys[ok], n_ab[ok].astype(np.float64)
    a, b = n_a[keys // V], n_b[keys % V]
    N = float(len(targets))
    ok = n_ab * N > min_lift * a * b  # P(b | a) > min_lift P(b): "v triggers w"
    keys, n_ab, a, b = keys[ok], n_ab[ok], a[ok], b[ok]

    def term(nxy, nx, ny):
        with np.errstate(divide="ignore", invalid="ignore"):
            r = nxy / N * np.log(nxy * N / (nx * ny))
        return np.where(nxy > 0, r, 0.0)

    ami = (term(n_ab, a, b) + term(a - n_ab, a, N - b) + term(b - n_ab, N - a, b)
           + term(N - a - b + n_ab, N - a, N - b))
    if len(keys) > num_pairs:
        top = np.argsort(-ami, kind="stable")[:num_pairs]
        keys = np.sort(keys[top])
    return keys


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser over uint64 (a counter-based hash)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@dataclass
class FeatureSet:
    """The feature dictionary learned from a training stream (see module docstring)."""

    spec: FeatureSpec
    num_words: int  # V
    ctx_keys: list[np.ndarray]  # per fixed context type: sorted packed context keys
    trigger_words: np.ndarray  # sorted ids of words that trigger something
    gptr: np.ndarray  # [G+1] int64
    gword: np.ndarray  # [P] int32
    hash_size: int | None = None
    slot: np.ndarray = field(default=None)  # [P] int64 parameter index (arange when exact)

    def __post_init__(self):
        if self.slot is None:
            P = len(self.gword)
            if self.hash_size:
                g = np.repeat(np.arange(len(self.gptr) - 1, dtype=np.int64), np.diff(self.gptr))
                self.slot = (_mix64((g * self.num_words + self.gword).astype(np.uint64))
                             % np.uint64(self.hash_size)).astype(np.int64)
            else:
                self.slot = np.arange(P, dtype=np.int64)

    # --- sizes -----------------------------------------------------------------------------
    @property
    def offsets(self) -> np.ndarray:
        """Global id of the first history feature of each type (fixed types, then triggers)."""
        sizes = [len(k) for k in self.ctx_keys] + [len(self.trigger_words)]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    @property
    def num_history_features(self) -> int:
        return len(self.gptr) - 1

    @property
    def num_pairs(self) -> int:
        return len(self.gword)

    @property
    def kernel_slot(self) -> np.ndarray:
        """``slot`` for the kernels: empty when exact (the weight of pair p is theta[p])."""
        return self.slot if self.hash_size else np.zeros(0, np.int64)

    @property
    def pairs(self):
        """The dictionary as the kernels take it (:class:`.kernels.Pairs`)."""
        from .kernels import Pairs

        return Pairs(self.gptr, self.gword, self.kernel_slot)

    @property
    def num_params(self) -> int:
        return self.hash_size or self.num_pairs

    def pair_counts(self) -> dict[str, int]:
        """Number of features by type (unigram: V; others: known (g, w) pairs)."""
        off = self.offsets
        names = [n for n, _ in self.spec.context_types()] + (["trigger"] if self.spec.has_triggers else [])
        out = {"unigram": self.num_words}
        for i, n in enumerate(names):
            out[n] = int(self.gptr[off[i + 1]] - self.gptr[off[i]])
        out["total"] = sum(out.values())
        return out

    def pair_keys(self) -> np.ndarray:
        """Sorted int64 keys ``g * V + w`` of the known pairs, ``[P]``."""
        g = np.repeat(np.arange(self.num_history_features, dtype=np.int64), np.diff(self.gptr))
        return g * self.num_words + self.gword

    # --- building and applying -------------------------------------------------------------
    @classmethod
    def build(cls, ids: np.ndarray, num_words: int, spec: FeatureSpec, at: np.ndarray | None = None,
              hash_size: int | None = None) -> "FeatureSet":
        """Learn the feature dictionary from the positions ``at`` (all when None) of a training stream."""
        ids = np.asarray(ids)
        V = num_words
        at = np.arange(len(ids), dtype=np.int64) if at is None else np.asarray(at, dtype=np.int64)
        targets = ids[at].astype(np.int64)
        pairs = [(k, targets) for k in _context_keys(ids, at, spec, V)]
        if spec.has_triggers:
            rows, v = window_words(ids, at, spec.trigger_window, spec.trigger_gap)
            tk = select_triggers(v, targets[rows], targets, V, spec.trigger_pairs, spec.trigger_min_count,
                                 spec.trigger_min_lift)
            pairs.append((tk // V, tk % V))
        return cls.from_pairs(spec, V, pairs, hash_size)

    @classmethod
    def from_pairs(cls, spec: FeatureSpec, num_words: int, pairs: list[tuple[np.ndarray, np.ndarray]],
                   hash_size: int | None = None) -> "FeatureSet":
        """The dictionary of exactly the (history feature, word) pairs given, duplicates allowed: ``pairs`` holds
        ``(contexts, words)`` per fixed context type in spec order (packed context keys), then, with triggers,
        ``(trigger words, words)`` (the form :meth:`context_pairs` returns)."""
        V = num_words
        n = len(spec.context_types())
        tables = [np.unique(np.asarray(c, dtype=np.int64)) for c, _ in pairs]
        tables += [np.zeros(0, np.int64)] * (n + 1 - len(tables))  # no trigger table without triggers
        keys = np.unique(_pair_keys(tables, V, pairs))
        G = sum(len(t) for t in tables)
        gptr = np.searchsorted(keys // V, np.arange(G + 1, dtype=np.int64)).astype(np.int64)
        return cls(spec, V, tables[:n], tables[n], gptr, (keys % V).astype(np.int32), hash_size)

    def keys_of(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Pair keys ``g * V + w`` of ``pairs`` (as :meth:`from_pairs` takes them), in their order; every context
        must be in this dictionary."""
        return _pair_keys(list(self.ctx_keys) + [self.trigger_words], self.num_words, pairs)

    def context_pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The known pairs by what they are, not by index: ``(contexts, words)`` per fixed context type, then
        (with triggers) ``(trigger words, words)``; pair ``p`` of the dictionary is the ``p``-th of them all."""
        g = np.repeat(np.arange(self.num_history_features, dtype=np.int64), np.diff(self.gptr))
        off = self.offsets
        tables = list(self.ctx_keys) + ([self.trigger_words] if self.spec.has_triggers else [])
        out = []
        for i, table in enumerate(tables):
            lo, hi = self.gptr[off[i]], self.gptr[off[i + 1]]
            out.append((table[g[lo:hi] - off[i]], self.gword[lo:hi].astype(np.int64)))
        return out

    def active(self, ids: np.ndarray, at: np.ndarray | None = None,
               independent: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Active history features of the tokens at stream positions ``at``: CSR ``(hptr [N+1], hfeat)``.

        Within a position: fixed types in spec order, then trigger words in id order.
        Contexts never seen in training are simply not active. n-gram and skip contexts never
        cross a sentence start; trigger windows do, unless ``independent`` (each sentence scored
        from a fresh start).
        """
        ids = np.asarray(ids)
        at = np.arange(len(ids), dtype=np.int64) if at is None else np.asarray(at, dtype=np.int64)
        n = len(at)
        off = self.offsets
        rows, feats = [], []
        for i, (k, d) in enumerate(zip(_context_keys(ids, at, self.spec, self.num_words), self.ctx_keys)):
            pos = np.minimum(np.searchsorted(d, k), max(len(d) - 1, 0))
            ok = (d[pos] == k) if len(d) else np.zeros(n, bool)
            rows.append(np.nonzero(ok)[0])
            feats.append(off[i] + pos[ok])
        if self.spec.has_triggers and len(self.trigger_words):
            floor = _sentence_starts(ids)[at] if independent else None
            r, v = window_words(ids, at, self.spec.trigger_window, self.spec.trigger_gap, floor)
            pos = np.minimum(np.searchsorted(self.trigger_words, v), len(self.trigger_words) - 1)
            ok = self.trigger_words[pos] == v
            rows.append(r[ok])
            feats.append(off[-2] + pos[ok])
        r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        f = np.concatenate(feats) if feats else np.zeros(0, np.int64)
        order = np.argsort(r, kind="stable")
        hptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(r, minlength=n), out=hptr[1:])
        return hptr, f[order].astype(np.int32)

    def restrict(self, owned: np.ndarray) -> "FeatureSet":
        """The same dictionary keeping only pairs whose word is ``owned`` (bool ``[V]``): one shard."""
        keep = owned[self.gword]
        g = np.repeat(np.arange(self.num_history_features, dtype=np.int64), np.diff(self.gptr))[keep]
        gptr = np.searchsorted(g, np.arange(self.num_history_features + 1, dtype=np.int64)).astype(np.int64)
        sub = FeatureSet(self.spec, self.num_words, self.ctx_keys, self.trigger_words, gptr, self.gword[keep],
                         self.hash_size, self.slot[keep] if self.hash_size else None)
        return sub

    # --- storage ---------------------------------------------------------------------------
    def tensors(self) -> dict[str, np.ndarray]:
        out = {f"ctx_keys.{i}": k for i, k in enumerate(self.ctx_keys)}
        out.update(trigger_words=self.trigger_words, gptr=self.gptr, gword=self.gword)
        return out

    def tensor_names(self) -> list[str]:
        return [f"ctx_keys.{i}" for i in range(len(self.spec.context_types()))] + ["trigger_words", "gptr", "gword"]

    @classmethod
    def from_tensors(cls, spec: FeatureSpec, num_words: int, t: dict[str, np.ndarray], hash_size: int | None,
                     path: str = "model.safetensors") -> "FeatureSet":
        """The dictionary stored by :meth:`tensors`, every index checked first (:func:`check_index_tensors`)."""
        t = check_index_tensors(spec, num_words, t, path)
        n = len(spec.context_types())
        return cls(spec, num_words, [t[f"ctx_keys.{i}"] for i in range(n)], t["trigger_words"], t["gptr"],
                   t["gword"], hash_size)


_INDEX_DTYPES = {"trigger_words": np.int64, "gptr": np.int64, "gword": np.int32}


def check_index_tensors(spec: FeatureSpec, num_words: int, t: dict[str, np.ndarray], path: str) -> dict[str, np.ndarray]:
    """The index tensors of a stored dictionary in the kernels' dtypes, or a :class:`UserError` naming ``path``.

    The kernels do no bounds checks, so every index is checked here, before any of them runs:
    context keys and trigger words sorted and within range, ``gptr`` starting at 0, non-decreasing
    and ending at ``len(gword)``, one pointer per history feature, every ``gword`` a word id.
    """
    V = int(num_words)

    def bad(name: str, what: str):
        raise UserError(f"{path}: tensor {name!r} {what}; the file is damaged or does not belong to this config.json")

    out = {}
    types = spec.context_types()
    for i, (_, back) in enumerate(types):
        name = f"ctx_keys.{i}"
        out[name] = _int_vector(t, name, np.int64, bad)
        top = (V + 1) ** len(back)
        _check_sorted_range(out[name], top, name, bad)
    out["trigger_words"] = _int_vector(t, "trigger_words", np.int64, bad)
    _check_sorted_range(out["trigger_words"], V, "trigger_words", bad)
    if len(out["trigger_words"]) and not spec.has_triggers:
        bad("trigger_words", "holds trigger words but the feature spec has no triggers")
    out["gptr"] = _int_vector(t, "gptr", np.int64, bad)
    out["gword"] = _int_vector(t, "gword", np.int32, bad, big=V)
    G = sum(len(out[f"ctx_keys.{i}"]) for i in range(len(types))) + len(out["trigger_words"])
    gptr, gword = out["gptr"], out["gword"]
    if len(gptr) != G + 1:
        bad("gptr", f"has {len(gptr)} entries, the dictionary needs {G + 1} (history features + 1)")
    if gptr[0] != 0 or gptr[-1] != len(gword):
        bad("gptr", f"must run from 0 to len(gword) = {len(gword)} (found {gptr[0]} .. {gptr[-1]})")
    if len(gptr) > 1 and np.any(np.diff(gptr) < 0):
        bad("gptr", "is not non-decreasing")
    if len(gword) and (int(gword.min()) < 0 or int(gword.max()) >= V):
        bad("gword", f"holds word ids outside 0..{V - 1}")
    return out


def _int_vector(t: dict, name: str, dtype, bad, big: int | None = None) -> np.ndarray:
    if name not in t:
        bad(name, "is missing")
    a = np.asarray(t[name])
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
        bad(name, f"should be a vector of integers (found {a.dtype} with shape {a.shape})")
    if big is not None and len(a) and (int(a.min()) < 0 or int(a.max()) >= big):
        bad(name, f"holds values outside 0..{big - 1}")
    return np.ascontiguousarray(a, dtype=dtype)


def _check_sorted_range(a: np.ndarray, top: int, name: str, bad) -> None:
    if len(a) > 1 and np.any(np.diff(a) <= 0):
        bad(name, "is not strictly increasing")
    if len(a) and (int(a.min()) < 0 or int(a.max()) >= top):
        bad(name, f"holds values outside 0..{top - 1}")


def _pair_keys(tables: list[np.ndarray], V: int, pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Keys ``g * V + w`` of ``pairs`` over the history-feature ``tables`` (each fixed type's contexts, then the
    trigger words): ``g`` is the offset of a pair's table plus its context's index there."""
    off = np.concatenate([[0], np.cumsum([len(t) for t in tables])]).astype(np.int64)
    keys = [(off[i] + np.searchsorted(tables[i], np.asarray(c, dtype=np.int64))) * V + np.asarray(w, dtype=np.int64)
            for i, (c, w) in enumerate(pairs)]
    return np.concatenate(keys) if keys else np.zeros(0, np.int64)


def _sentence_starts(ids: np.ndarray) -> np.ndarray:
    """``[len(ids)]`` int64: the stream index where each token's sentence starts."""
    ids = np.asarray(ids)
    ends = np.flatnonzero(ids == EOS_ID)
    starts = np.zeros(len(ids), np.int64)
    starts[ends[ends + 1 < len(ids)] + 1] = ends[ends + 1 < len(ids)] + 1
    return np.maximum.accumulate(starts) if len(ids) else starts


def _context_keys(ids: np.ndarray, at: np.ndarray, spec: FeatureSpec, V: int) -> list[np.ndarray]:
    """Packed context keys ``sum_j w_j (V+1)^j`` of every fixed context type, each ``[len(at)]`` int64.

    The histories are ``<s>``-padded at sentence starts (``bos = V``), as in :mod:`sampledlm.data.batches`.
    """
    order = spec.max_back + 1
    if order < 2:
        return []
    if (V + 1) ** (order - 1) >= 2 ** 62:
        raise UserError(f"context of {order - 1} words cannot be packed for a vocabulary of {V} words")
    hist = ngram_histories(ids, sentence_positions(ids), order, V, at)
    out = []
    for _, back in spec.context_types():
        key = np.zeros(len(at), np.int64)
        for b in back:
            key = key * (V + 1) + hist[:, order - 1 - b]
        out.append(key)
    return out
