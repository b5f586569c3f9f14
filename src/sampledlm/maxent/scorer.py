"""The maximum-entropy model as a :class:`~sampledlm.objectives.base.Scorer`, exact evaluation, model files.

``a_w(h) = u_w + sum_{g in G(h), (g, w) known} theta[slot(g, w)]`` (see :mod:`.features`).

Inference rule, by the objective the model was trained with:

- ``softmax`` (standard MELM, eq. 10): ``P(w|h) = exp a_w(h) / Z(h)`` with the exact normaliser
  ``Z(h) = sum_w exp u_w + sum_{w in W(h)} (exp a_w(h) - exp u_w)`` in O(active pairs).
- ``binary`` (binarized MELM, eqs. 12 and 8): ``P'(w|h) = sigmoid a_w(h) / sum_w' sigmoid a_w'(h)``,
  the same decomposition with sigmoid in place of exp. A binary model trained at negative rate
  alpha is stored calibrated: log alpha is added to every u_w (sec. 2.1) by :meth:`calibrate`.

The Scorer methods (``score_targets/each/shared/all``, ``shift_bias``) return float64 tensors computed
in numpy, without autograd: they serve exact evaluation, the generic objectives' inference rules and
cross-checks. Training uses the sparse kernels of :mod:`.kernels` (per-word classifiers, indexed updates).

Model directory: ``config.json`` (feature spec, V, objective, alpha, feature counts, training log),
``vocab.txt``, ``model.safetensors`` (``u [V]``, ``theta [P or hash_size]``, the dictionary).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import UserError
from ..data.textio import atomic_write
from ..data.vocab import Vocab
from . import kernels
from .features import FeatureSet, FeatureSpec

FORMAT = "sampledlm-maxent-1"


@dataclass
class MaxEntContext:
    """The active history features of N positions (CSR): ``hptr [N+1]`` int64, ``hfeat [nnz]`` int32."""

    hptr: np.ndarray
    hfeat: np.ndarray

    def __len__(self) -> int:
        return len(self.hptr) - 1


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
        self._keys = None

    # --- contexts --------------------------------------------------------------------------
    def context(self, ids: np.ndarray, at: np.ndarray | None = None) -> MaxEntContext:
        return MaxEntContext(*self.features.active(ids, at))

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
        f = self.features
        owned = np.ones(self.num_words, bool) if owned is None else owned
        return kernels.eval_sums(ctx.hptr, ctx.hfeat, np.asarray(targets, dtype=np.int64), f.gptr, f.gword, f.kernel_slot,
                                 self.u, self.theta, owned, self.objective == "binary", float(shift))

    def log_prob_targets(self, ctx: MaxEntContext, targets: np.ndarray) -> np.ndarray:
        """Exact normalised ``log P(y_k | h_k)``, float64 ``[N]``, in O(active pairs) per position."""
        num, den = self.eval_sums(ctx, targets, shift=self._shift())
        return num - np.log(den)

    def log_prob(self, ctx: MaxEntContext) -> torch.Tensor:
        """Exact ``[N, V]`` log-probabilities by brute force (for tests and small batches)."""
        a = self.score_all(ctx) + self._shift()
        if self.objective == "binary":
            a = torch.nn.functional.logsigmoid(a)
        return torch.log_softmax(a, dim=-1)

    def perplexity(self, ids: np.ndarray) -> float:
        ids = np.asarray(ids)
        return math.exp(-self.log_prob_targets(self.context(ids), ids.astype(np.int64)).mean())

    def _shift(self) -> float:
        return 0.0 if self.calibrated or self.objective != "binary" else math.log(self.alpha)

    def calibrate(self) -> None:
        """Add log alpha to every classifier's bias (sec. 2.1): the stored model is then a plain scorer."""
        if self.objective == "binary" and not self.calibrated:
            self.shift_bias(math.log(self.alpha))
        self.calibrated = True

    # --- files -----------------------------------------------------------------------------
    def save(self, directory: str, vocab: Vocab) -> None:
        """Write ``config.json``, ``vocab.txt`` and ``model.safetensors`` (each atomically; config last)."""
        from safetensors.numpy import save

        os.makedirs(directory, exist_ok=True)
        f = self.features
        tensors = dict(f.tensors(), u=self.u, theta=self.theta)
        with atomic_write(os.path.join(directory, "model.safetensors"), "wb") as fh:
            fh.write(save({k: np.ascontiguousarray(v) for k, v in tensors.items()}))
        vocab.save(os.path.join(directory, "vocab.txt"))
        config = {"format": FORMAT, "objective": self.objective, "alpha": self.alpha, "calibrated": self.calibrated,
                  "num_words": self.num_words, "hash_size": f.hash_size, "features": f.spec.to_dict(),
                  "feature_counts": f.pair_counts(), "vocab_fingerprint": vocab.fingerprint(), **self.info}
        with atomic_write(os.path.join(directory, "config.json")) as fh:
            json.dump(config, fh, indent=1)
            fh.write("\n")

    @classmethod
    def load(cls, directory: str) -> tuple["MaxEntModel", Vocab]:
        from safetensors.numpy import load_file

        cpath = os.path.join(directory, "config.json")
        try:
            with open(cpath, encoding="utf-8") as fh:
                config = json.load(fh)
        except FileNotFoundError:
            raise UserError(f"{cpath}: no such file (not a maxent model directory)") from None
        except json.JSONDecodeError as e:
            raise UserError(f"{cpath}:{e.lineno}: invalid JSON: {e.msg}") from None
        if config.get("format") != FORMAT:
            raise UserError(f"{cpath}: not a sampledlm maxent model (format {config.get('format')!r})")
        vocab = Vocab.load(os.path.join(directory, "vocab.txt"))
        t = load_file(os.path.join(directory, "model.safetensors"))
        spec = FeatureSpec(**{**config["features"], "names": tuple(config["features"]["names"])})
        feats = FeatureSet.from_tensors(spec, config["num_words"], t, config["hash_size"])
        model = cls(feats, config["objective"], config["alpha"], t["u"], t["theta"])
        model.calibrated = config["calibrated"]
        model.info = {k: v for k, v in config.items() if k in ("training",)}
        return model, vocab
