"""Starting a maxent training run from a trained model (``sampledlm maxent train --init-from MODEL``).

The new run has the source's objective and features (their kinds, trigger options and ``--hash-size``) and reads
its text as the source's was; its training settings and text are its own (``--neg-rate`` defaults to the
source's). The text is read with the source's vocabulary, or with a new one (``--vocab FILE``): the two then
meet by word (:class:`~sampledlm.data.vocabmap.VocabMap`).

What is copied, and why by *pair* rather than by table. A feature weight belongs to a (history feature, word)
pair, and both halves are word ids: a history feature is a packed key of context word ids (or a trigger word's
id), and its index ``g`` in the dictionary depends on every other context seen in training. So neither the
weight vector nor a hashed table (whose slot is a hash of ``g * V + w``) means anything once the dictionary or
the ids change. Every pair is therefore taken by what it says:

* the dictionary of the new run is its own text's pairs *and* the source's (:meth:`Start.features`), each source
  pair translated word by word into the new ids (``<s>`` padding included); a pair naming a word the new
  vocabulary lacks is dropped, since it cannot be said in the new ids (mapping it to ``<unk>`` would give
  ``<unk>`` a weight learnt for one particular word);
* every source pair keeps its weight (the source's ``theta`` at the pair's slot), the new text's other pairs
  start at 0, as in a fresh run;
* ``u`` (the per-word bias, the output row of a word) of a shared word is the source's, of a new word what a fresh
  run starts with (the log unigram odds or probability of the vocabulary's counts).

A pair at weight 0 changes no score (its ``exp``/sigmoid term in the sparse normaliser cancels), so without
``--hash-size`` the new run starts as exactly the source's model, also on text unlike its own, and keeps what it
knew of contexts the new text lacks. With ``--hash-size`` the new dictionary numbers its pairs afresh, so pairs
land in other slots: each slot holding a source pair gets that pair's weight (one of them where several collide),
and a new pair sharing a slot with a source pair starts at that weight, as hashed pairs always share.

Binary models are stored calibrated (``log alpha`` added to every bias); training runs on uncalibrated biases at
the new run's own rate, so a shared word's bias starts at the source's calibrated one minus the new run's
``log alpha``: the model evaluates the same before any step whatever ``--neg-rate`` is. ``config.json`` records
the origin under ``init_from``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.vocab import Vocab
from ..data.vocabmap import VocabMap
from .features import FeatureSet
from .scorer import MaxEntModel


def source_model(path: str) -> tuple[MaxEntModel, Vocab]:
    """The trained maxent model in ``path`` (a one-line error naming ``--init-from`` and the path otherwise)."""
    from ..store import check_source

    check_source(path, "maxent", "a maxent model")
    return MaxEntModel.load(path)


@dataclass
class Start:
    """What a run started from a source needs, in the new run's ids (plain arrays: it travels to every rank)."""

    pairs: list[tuple[np.ndarray, np.ndarray]]  # the source's pairs, as FeatureSet.context_pairs gives them
    weights: np.ndarray  # their weights, in the same order
    rows: tuple[np.ndarray, np.ndarray]  # source and new ids of the shared words
    bias: np.ndarray  # the source's calibrated biases of the shared words
    origin: dict

    @classmethod
    def of(cls, source: MaxEntModel, src_vocab: Vocab, vocab: Vocab, where: str) -> "Start":
        mapping = VocabMap.between(src_vocab, vocab)
        pairs, weights = _translate(source, mapping.id_map(), len(vocab))
        return cls(pairs, weights, (mapping.source, mapping.target), (source.u + source._shift())[mapping.source],
                   mapping.origin(where))

    def features(self, fresh: FeatureSet) -> FeatureSet:
        """The new run's dictionary: ``fresh`` (the new text's) and the source's pairs."""
        pairs = [(np.concatenate([c, sc]), np.concatenate([w, sw]))
                 for (c, w), (sc, sw) in zip(fresh.context_pairs(), self.pairs)]
        return FeatureSet.from_pairs(fresh.spec, fresh.num_words, pairs, fresh.hash_size)

    def copy_weights(self, model: MaxEntModel) -> None:
        """Set the source's weights into ``model`` (over :meth:`features`' dictionary, or a shard of it), whose
        biases hold a fresh run's start."""
        f = model.features
        keys, want = f.pair_keys(), f.keys_of(self.pairs)
        pos = np.minimum(np.searchsorted(keys, want), max(len(keys) - 1, 0))
        hit = keys[pos] == want if len(keys) else np.zeros(len(want), bool)  # a shard holds its own words' pairs
        model.theta[f.slot[pos[hit]]] = self.weights[hit]
        model.u[self.rows[1]] = self.bias - model._shift()


def _translate(source: MaxEntModel, id_map: np.ndarray, size: int) -> tuple[list, np.ndarray]:
    """The source's pairs in the new ids (those whose words all have one) and their weights."""
    f = source.features
    new_id = np.append(id_map, size)  # the <s> padding id (V) is the new vocabulary's (its size)
    base = f.num_words + 1
    widths = [len(back) for _, back in f.spec.context_types()]
    out, weights, start = [], [], 0
    for i, (ctx, words) in enumerate(f.context_pairs()):
        slots = f.slot[start:start + len(words)]
        start += len(words)
        target = new_id[words]
        ok = target >= 0
        if i < len(widths):  # a packed context key: its words, least significant first
            ctx, key, scale = ctx.copy(), np.zeros(len(ctx), np.int64), 1
            for _ in range(widths[i]):
                w = new_id[ctx % base]
                ctx //= base
                ok &= w >= 0
                key += np.maximum(w, 0) * scale
                scale *= size + 1
        else:  # a trigger word
            key = new_id[ctx]
            ok &= key >= 0
        out.append((key[ok], target[ok]))
        weights.append(source.theta[slots[ok]])
    return out, np.concatenate(weights) if weights else np.zeros(0)
