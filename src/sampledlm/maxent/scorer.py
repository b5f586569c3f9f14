"""The maximum-entropy model as a :class:`~sampledlm.objectives.base.Scorer`, exact evaluation, model files.

``a_w(h) = u_w + sum_{g in G(h), (g, w) known} theta[slot(g, w)]`` (see :mod:`.features`).

Inference rule, by the objective the model was trained with (Xu, Gunawardana & Khudanpur 2011):

- ``softmax`` (standard MELM, eq. 10): ``P(w|h) = exp a_w(h) / Z(h)`` with the exact normaliser
  ``Z(h) = sum_w exp u_w + sum_{w in W(h)} (exp a_w(h) - exp u_w)`` in O(active pairs).
- ``binary`` (binarized MELM, eqs. 12 and 8): the binary objective's rule
  (:mod:`sampledlm.objectives.binary`), ``P'(w|h) = sigmoid a_w(h) / sum_w' sigmoid a_w'(h)``, here
  with the same sparse decomposition, sigmoid in place of exp. A binary model trained at negative
  rate alpha is stored calibrated: :meth:`calibrate` is :meth:`Binary.finalize
  <sampledlm.objectives.binary.Binary.finalize>` (log alpha added to every u_w once, sec. 2.1);
  before that, evaluation adds the objective's ``log_alpha`` in flight, as ``Binary.log_prob`` does.

The Scorer methods (``score_targets/each/shared/all``, ``shift_bias``) return float64 tensors computed
in numpy, without autograd: they serve exact evaluation, the generic objectives' inference rules and
cross-checks. Training uses the sparse kernels of :mod:`.kernels` (per-word classifiers, indexed updates).

Model directory (the envelope of :mod:`sampledlm.store`)::

    config.json   {"format": "sampledlm-model", "family": "maxent", "version": 2,
                   "vocab": {"size": V, "fingerprint": ...},
                   "maxent": {"objective", "alpha", "calibrated", "num_words", "hash_size",
                              "features": {feature spec}, "weights": "model-<id>.safetensors",
                              "sizes": {tensor: length}},
                   "feature_counts": {...}, "text_options": {how the training text was read} | null,
                   "training": {config, epoch log, best_valid_ppl}, ...run facts}
    vocab.txt
    model-<id>.safetensors   u [V], theta [P or hash_size], the dictionary; SHA-256 in the header

Saving is one unit: the weights go to a new file, then ``vocab.txt``, and last ``config.json``
(written atomically) names the new weights file; the previous weights file is removed after that.
A process killed mid-save therefore leaves the previous model whole (its config.json still names
its own weights), or, when ``vocab.txt`` had already been replaced by a different one, a directory
that is refused on load (vocabulary fingerprint): never one that loads with mismatched parts.
Every index tensor is checked on load before any kernel runs (:func:`.features.check_index_tensors`).

Directories written before the envelope (``"format": "sampledlm-maxent-1"``: flat config.json,
``model.safetensors`` without a checksum) still load, with the same checks on their fields and
tensors; saving again writes the current format.
"""

from __future__ import annotations

import math
import os
import re
import secrets
from dataclasses import dataclass

import numpy as np
import torch

from .. import store
from ..data.vocab import Vocab
from ..errors import UserError
from ..lm import perplexity_of
from . import kernels
from .features import FeatureSet, FeatureSpec

LEGACY_FORMAT = "sampledlm-maxent-1"
_WEIGHTS_NAME = re.compile(r"^model-[0-9a-f]{12}\.safetensors$")
FORMAT = store.FORMAT
#: config.json keys the model owns; everything else is run information kept in ``model.info``
_OWN_KEYS = ("format", "family", "version", "vocab", "maxent", "feature_counts", "text_options")
_LEGACY_KEYS = ("format", "objective", "alpha", "calibrated", "num_words", "hash_size", "features", "feature_counts",
                "vocab_fingerprint")


def log_alpha(alpha: float) -> float:
    """The binary objective's calibration offset ``log alpha`` (:class:`~sampledlm.objectives.binary.Binary`)."""
    from ..objectives.binary import Binary

    return Binary(neg_rate=alpha).log_alpha


@dataclass
class MaxEntContext:
    """The active history features of N positions (CSR): ``hptr [N+1]`` int64, ``hfeat [nnz]`` int32."""

    hptr: np.ndarray
    hfeat: np.ndarray

    def __len__(self) -> int:
        return len(self.hptr) - 1

    @property
    def active(self) -> kernels.Active:
        """The same arrays as the kernels take them."""
        return kernels.Active(self.hptr, self.hfeat)


class MaxEntModel:
    """Weights over a :class:`FeatureSet`; implements the Scorer methods with ``ctx = MaxEntContext``."""

    def __init__(self, features: FeatureSet, objective: str = "binary", alpha: float = 1.0,
                 u: np.ndarray | None = None, theta: np.ndarray | None = None):
        if objective not in ("softmax", "binary"):
            raise UserError(f"maxent objective must be softmax or binary, not {objective!r}")
        self.features = features
        self.objective = objective
        self.alpha = float(alpha)
        self.num_words = features.num_words
        self.u = np.zeros(self.num_words) if u is None else np.asarray(u, dtype=np.float64)
        self.theta = np.zeros(features.num_params) if theta is None else np.asarray(theta, dtype=np.float64)
        self.calibrated = False
        self.info: dict = {}
        #: how the training text was read (a TextOptions dict), saved with the model; None when unknown
        self.text_options: dict | None = None
        self._keys = None

    # --- contexts --------------------------------------------------------------------------
    def context(self, ids: np.ndarray, at: np.ndarray | None = None, independent: bool = False) -> MaxEntContext:
        """Active features of positions ``at`` (all when None); ``independent``: trigger windows stop at
        the sentence start (see :meth:`.features.FeatureSet.active`)."""
        return MaxEntContext(*self.features.active(ids, at, independent))

    def init_unigram(self, counts: np.ndarray) -> None:
        """Start u at the log unigram distribution (softmax) or log odds (binary), add-one smoothed."""
        c = np.asarray(counts, dtype=np.float64)[: self.num_words] + 1.0
        p = c / c.sum()
        self.u = np.log(p) if self.objective == "softmax" else np.log(p) - np.log1p(-p)

    # --- Scorer protocol -------------------------------------------------------------------
    def _pair_scores(self, ctx: MaxEntContext, rows: np.ndarray, words: np.ndarray) -> np.ndarray:
        """``a_{words[m]}(h_{rows[m]})`` for M (row, word) requests, vectorised: float64 ``[M]``."""
        if self._keys is None:
            self._keys = self.features.pair_keys()
        keys, V = self._keys, self.num_words
        n_act = np.diff(ctx.hptr)[rows]
        m = np.repeat(np.arange(len(rows)), n_act)
        starts = np.repeat(ctx.hptr[rows] - np.cumsum(n_act) + n_act, n_act)
        g = ctx.hfeat[starts + np.arange(len(m))].astype(np.int64) if len(m) else np.zeros(0, np.int64)
        key = g * V + words[m]
        pos = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))
        hit = keys[pos] == key if len(keys) else np.zeros(len(key), bool)
        extra = np.bincount(m[hit], weights=self.theta[self.features.slot[pos[hit]]], minlength=len(rows))
        return self.u[words] + extra

    def score_targets(self, ctx: MaxEntContext, targets: torch.Tensor) -> torch.Tensor:
        t = np.asarray(targets, dtype=np.int64)
        return torch.from_numpy(self._pair_scores(ctx, np.arange(len(t)), t))

    def score_each(self, ctx: MaxEntContext, words: torch.Tensor) -> torch.Tensor:
        w = np.asarray(words, dtype=np.int64)
        rows = np.repeat(np.arange(w.shape[0]), w.shape[1])
        return torch.from_numpy(self._pair_scores(ctx, rows, w.reshape(-1)).reshape(w.shape))

    def score_shared(self, ctx: MaxEntContext, words: torch.Tensor) -> torch.Tensor:
        w = np.asarray(words, dtype=np.int64)
        return self.score_each(ctx, torch.from_numpy(np.broadcast_to(w, (len(ctx), len(w))).copy()))

    def score_blocks(self, ctx: MaxEntContext, ctx_sizes: list[int], words: torch.Tensor,
                     word_sizes: list[int]) -> list[torch.Tensor]:
        w = np.asarray(words, dtype=np.int64)
        row0, word0 = np.cumsum([0] + list(ctx_sizes)), np.cumsum([0] + list(word_sizes))
        rows = [np.repeat(np.arange(row0[g], row0[g + 1]), word_sizes[g]) for g in range(len(ctx_sizes))]
        cols = [np.tile(w[word0[g]:word0[g + 1]], ctx_sizes[g]) for g in range(len(ctx_sizes))]
        flat = self._pair_scores(ctx, np.concatenate(rows or [np.zeros(0, np.int64)]),
                                 np.concatenate(cols or [np.zeros(0, np.int64)]))
        cut = np.cumsum([n * s for n, s in zip(ctx_sizes, word_sizes)])[:-1]
        return [torch.from_numpy(x.reshape(n, s)) for x, n, s in zip(np.split(flat, cut), ctx_sizes, word_sizes)]

    def score_all(self, ctx: MaxEntContext) -> torch.Tensor:
        """``[N, V]`` by brute force (O(N V)): the reference the sparse normaliser is tested against."""
        f = self.features
        n = len(ctx)
        out = np.tile(self.u, (n, 1))
        rows_g = np.repeat(np.arange(n), np.diff(ctx.hptr))
        g = ctx.hfeat.astype(np.int64)
        cnt = f.gptr[g + 1] - f.gptr[g]
        rows = np.repeat(rows_g, cnt)
        p = np.repeat(f.gptr[g] - np.cumsum(cnt) + cnt, cnt) + np.arange(int(cnt.sum()))
        np.add.at(out, (rows, f.gword[p]), self.theta[f.slot[p]])
        return torch.from_numpy(out)

    def shift_bias(self, delta) -> None:
        self.u = self.u + np.asarray(delta, dtype=np.float64)

    # --- exact evaluation ------------------------------------------------------------------
    def eval_sums(self, ctx: MaxEntContext, targets: np.ndarray, owned: np.ndarray | None = None,
                  shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Per-position log numerator and normaliser over ``owned`` words (see :func:`kernels.eval_sums`)."""
        owned = np.ones(self.num_words, bool) if owned is None else owned
        return kernels.eval_sums(ctx.active, np.asarray(targets, dtype=np.int64), self.features.pairs,
                                 kernels.Weights(self.u, self.theta), owned, self.objective == "binary", float(shift))

    def log_prob_targets(self, ctx: MaxEntContext, targets: np.ndarray) -> np.ndarray:
        """Exact normalised ``log P(y_k | h_k)``, float64 ``[N]``, in O(active pairs) per position."""
        num, den = self.eval_sums(ctx, targets, shift=self._shift())
        return num - np.log(den)

    def log_prob(self, ctx: MaxEntContext) -> torch.Tensor:
        """Exact ``[N, V]`` log-probabilities by brute force (for tests and small batches)."""
        a = self.score_all(ctx) + self._shift()
        if self.objective == "binary":
            from ..objectives.binary import renormalised_log_prob

            return renormalised_log_prob(a)
        return torch.log_softmax(a, dim=-1)

    def perplexity(self, ids: np.ndarray) -> float:
        ids = np.asarray(ids)
        return perplexity_of(self.log_prob_targets(self.context(ids), ids.astype(np.int64)))

    def _shift(self) -> float:
        """What evaluation adds to every score: the binary objective's log alpha until calibrated."""
        if self.calibrated or self.objective != "binary":
            return 0.0
        return log_alpha(self.alpha)

    def binary_objective(self):
        """The :class:`~sampledlm.objectives.binary.Binary` objective this model was trained with, in its
        calibration state (its inference rule and calibration are the model's)."""
        from ..objectives.binary import Binary

        obj = Binary(neg_rate=self.alpha)
        obj.calibrated.fill_(bool(self.calibrated))
        return obj

    def calibrate(self) -> None:
        """Calibration (sec. 2.1) by the binary objective: log alpha added to every bias, exactly once."""
        if self.objective == "binary":
            obj = self.binary_objective()
            obj.finalize(self)
            self.calibrated = bool(obj.calibrated)
        self.calibrated = True

    # --- files -----------------------------------------------------------------------------
    def save(self, directory: str, vocab: Vocab) -> None:
        """Write the model directory as one unit (see module docstring); the caller locks it
        (:func:`sampledlm.store.lock_directory`) when other processes might write there too."""
        if len(vocab) != self.num_words:
            raise ValueError(f"vocabulary of {len(vocab)} words for a model of {self.num_words}")
        os.makedirs(directory, exist_ok=True)
        previous = _committed_weights(directory)
        f = self.features
        tensors = {**f.tensors(), "u": self.u, "theta": self.theta}
        name = f"model-{secrets.token_hex(6)}.safetensors"
        store.save_tensors(os.path.join(directory, name),
                           {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()})
        vocab.save(os.path.join(directory, "vocab.txt"))
        info = {k: v for k, v in self.info.items() if k not in _OWN_KEYS}
        config = {**store.envelope("maxent", vocab),
                  "maxent": {"objective": self.objective, "alpha": self.alpha, "calibrated": bool(self.calibrated),
                             "num_words": self.num_words, "hash_size": f.hash_size, "features": f.spec.to_dict(),
                             "weights": name, "sizes": {k: int(len(v)) for k, v in tensors.items()}},
                  "feature_counts": f.pair_counts(), "text_options": self.text_options, **info}
        store.write_json(os.path.join(directory, "config.json"), config)  # the commit point
        for entry in os.listdir(directory):  # the previous weights, and any left by an interrupted save
            if entry != name and (entry == previous or _WEIGHTS_NAME.match(entry)):
                try:
                    os.remove(os.path.join(directory, entry))
                except OSError:
                    pass

    @classmethod
    def load(cls, directory: str) -> tuple["MaxEntModel", Vocab]:
        """``(model, vocab)`` of a model directory (current or legacy format; see module docstring)."""
        config, family = store.read_config(directory)
        if family != "maxent":
            raise UserError(f"{directory}: holds a {family} model, not a maxent one (evaluate it with sampledlm eval)")
        return cls.from_config(directory, config)

    @classmethod
    def from_config(cls, directory: str, config: dict) -> tuple["MaxEntModel", Vocab]:
        """Like :meth:`load`, from a config.json already read by :func:`sampledlm.store.read_config`."""
        cpath = os.path.join(directory, "config.json")
        legacy = config.get("format") == LEGACY_FORMAT
        if legacy:
            sec = config
            vocab = _legacy_vocab(directory, config, cpath)
            wpath = os.path.join(directory, "model.safetensors")
            tensors = _legacy_tensors(wpath)
        else:
            sec = store.check_type(config, "maxent", dict, cpath)
            vocab = store.load_vocab_checked(directory, config)
            name = store.check_type(sec, "weights", str, cpath)
            if os.path.basename(name) != name or name in ("", ".", ".."):
                raise UserError(f"{cpath}: field 'weights' should name a file in the model directory, not {name!r}")
            wpath = os.path.join(directory, name)
            tensors = {k: v.numpy() for k, v in store.load_tensors(wpath)[0].items()}
        objective = store.check_type(sec, "objective", str, cpath)
        if objective not in ("softmax", "binary"):
            raise UserError(f"{cpath}: field 'objective' should be softmax or binary, not {objective!r}")
        alpha = float(store.check_type(sec, "alpha", (int, float), cpath))
        if not 0.0 < alpha <= 1.0:
            raise UserError(f"{cpath}: field 'alpha' should lie in (0, 1], not {alpha!r}")
        calibrated = store.check_type(sec, "calibrated", bool, cpath)
        V = store.check_type(sec, "num_words", int, cpath)
        if V != len(vocab):
            raise UserError(f"{cpath}: num_words {V} but vocab.txt holds {len(vocab)} words")
        hash_size = sec.get("hash_size")
        if hash_size is not None and (store.check_type(sec, "hash_size", int, cpath) < 1):
            raise UserError(f"{cpath}: field 'hash_size' should be a positive integer or null, not {hash_size}")
        spec = _spec_from_config(store.check_type(sec, "features", dict, cpath), cpath)
        sizes = None if legacy else store.check_type(sec, "sizes", dict, cpath)
        feats = FeatureSet.from_tensors(spec, V, tensors, hash_size, wpath)
        u = _float_vector(tensors, "u", V, wpath)
        theta = _float_vector(tensors, "theta", hash_size or feats.num_pairs, wpath)
        names = set(feats.tensor_names()) | {"u", "theta"}
        extra = sorted(set(tensors) - names)
        if extra:
            raise UserError(f"{wpath}: unexpected tensor {extra[0]!r}; the file does not belong to this config.json")
        if sizes is not None:
            want = {k: sizes.get(k) for k in names}
            got = {k: int(len(tensors[k])) for k in names}
            if want != got:
                k = next(k for k in sorted(names) if want[k] != got[k])
                raise UserError(f"{wpath}: tensor {k!r} holds {got[k]} values, {cpath} says {want[k]!r}; "
                                "the files do not belong together")
        model = cls(feats, objective, alpha, u, theta)
        model.calibrated = calibrated
        model.text_options = _text_options(config.get("text_options"), cpath)
        skip = _LEGACY_KEYS if legacy else _OWN_KEYS
        model.info = {k: v for k, v in config.items() if k not in skip}
        if "training" in model.info:
            store.check_type(model.info, "training", dict, cpath)
        if legacy:
            model.info["legacy_format"] = LEGACY_FORMAT
        return model, vocab


def _committed_weights(directory: str) -> str | None:
    """The weights file the maxent model now in ``directory`` uses (None when there is none)."""
    try:
        config, family = store.read_config(directory)
    except UserError:
        return None
    if family != "maxent":
        return None
    if config.get("format") == LEGACY_FORMAT:
        return "model.safetensors"
    name = (config.get("maxent") or {}).get("weights") if isinstance(config.get("maxent"), dict) else None
    return name if isinstance(name, str) and os.path.basename(name) == name else None


def _legacy_vocab(directory: str, config: dict, cpath: str) -> Vocab:
    path = os.path.join(directory, "vocab.txt")
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    vocab = Vocab.load(path)
    want = store.check_type(config, "vocab_fingerprint", str, cpath)
    V = store.check_type(config, "num_words", int, cpath)
    if len(vocab) != V or vocab.fingerprint() != want:
        raise UserError(f"{path}: vocabulary does not match config.json (size {len(vocab)} vs {V}, "
                        f"fingerprint {vocab.fingerprint()} vs {want}); the file was changed")
    return vocab


def _legacy_tensors(path: str) -> dict[str, np.ndarray]:
    """A legacy ``model.safetensors`` (no checksum: only its structure can be checked)."""
    from safetensors.numpy import load_file

    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file")
    try:
        return load_file(path)
    except Exception as e:  # safetensors raises its own error types for bad headers / truncation
        raise UserError(f"{path}: not a readable safetensors file ({e}); the file is damaged or truncated") from None


def _spec_from_config(d: dict, cpath: str) -> FeatureSpec:
    known = set(FeatureSpec.__dataclass_fields__)
    extra = sorted(set(d) - known)
    if extra:
        raise UserError(f"{cpath}: unknown feature option {extra[0]!r}")
    names = store.check_type(d, "names", list, cpath)
    if not all(isinstance(n, str) for n in names):
        raise UserError(f"{cpath}: field 'names' should be a list of feature names (strings)")
    kw = {k: store.check_type(d, k, (int, float) if k == "trigger_min_lift" else int, cpath)
          for k in known - {"names"} if k in d}
    if "trigger_min_lift" not in d:  # written before the lift rule: every positively correlated pair qualified
        kw["trigger_min_lift"] = 1.0
    spec = FeatureSpec.parse(",".join(names), **kw)
    if list(spec.names) != names:
        raise UserError(f"{cpath}: feature names {names} are not in the order this sampledlm writes them")
    return spec


def _float_vector(t: dict, name: str, size: int, path: str) -> np.ndarray:
    if name not in t:
        raise UserError(f"{path}: tensor {name!r} is missing")
    a = np.asarray(t[name])
    if a.ndim != 1 or not np.issubdtype(a.dtype, np.floating) or len(a) != size:
        raise UserError(f"{path}: tensor {name!r} should hold {size} floats (found {a.dtype} with shape {a.shape})")
    if not np.all(np.isfinite(a)):
        raise UserError(f"{path}: tensor {name!r} holds non-finite values")
    return np.array(a, dtype=np.float64)


def _text_options(d, cpath: str) -> dict | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise UserError(f"{cpath}: field 'text_options' should be an object, found {type(d).__name__}")
    from ..data.tokenizer import TextOptions

    return TextOptions.from_dict(d, cpath).to_dict()
