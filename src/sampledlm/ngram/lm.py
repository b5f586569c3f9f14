"""An ARPA back-off model (a text file, or its memory-mapped binary directory) as a :class:`sampledlm.lm.LanguageModel`.

    >>> from sampledlm.ngram import ArpaLM
    >>> lm = ArpaLM.open("kn3.arpa.gz")       # any tool's ARPA file, plain or compressed
    >>> lm.perplexity(load_ids("test.txt", lm.vocab))

The vocabulary is the ARPA file's words: ``</s>`` (id 0), ``<unk>`` (id 1), then the other
1-grams in file order, all with count 0; ``<s>`` is the input-only id ``len(vocab)``. Words of
a test text outside it are ``<unk>``. A file without ``<unk>`` gives them log10 probability
-100 and a warning on stderr, exactly as KenLM does (its numbers are the cross-check).

n-gram histories never cross a sentence boundary, so ``independent=True`` and ``False`` give the
same numbers.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from ..data.vocab import BOS, EOS, UNK, Vocab
from ..errors import UserError
from ..lm import LanguageModel
from .arpa import UNK_LOGP, read_arpa
from .model import LN10, NgramLM


def missing_unk_warning(path: str) -> str:
    return (f"sampledlm: warning: {path}: the ARPA file has no <unk>; words outside its vocabulary get "
            f"log10 probability {UNK_LOGP:g}, plus the history's back-off weight (as KenLM does)")


class ArpaLM(LanguageModel):
    """A back-off n-gram model read from an ARPA file (module docstring); ``.ngram`` is the :class:`NgramLM`."""

    family = "ngram"

    def __init__(self, ngram: NgramLM, path: str | None = None):
        self.ngram = ngram
        self.path = path
        words = [w for w in ngram.words if w not in (EOS, UNK, BOS)]
        self.vocab = Vocab([EOS, UNK] + words, np.zeros(len(words) + 2, dtype=np.int64))
        self.text_options = ngram.info.get("text_options") or None  # recorded by ngram train --binary

    @classmethod
    def open(cls, path: str, warn: bool = True, config: dict | None = None) -> "ArpaLM":
        """Read ``path``: an ARPA file (plain, .gz, .bz2 or .xz; parsed tables are cached, :func:`read_arpa`)
        or a binary model directory (memory-mapped, :mod:`.mapped`; ``config`` its config.json if already read).

        ``warn``: print KenLM's warning on stderr when the file has no ``<unk>``.
        """
        if os.path.isdir(path):
            from .mapped import open_binary

            lm = cls(open_binary(path, config), path)
        else:
            lm = cls(read_arpa(path), path)
        if warn and not lm.has_unk:
            print(missing_unk_warning(path), file=sys.stderr)
        return lm

    @property
    def has_unk(self) -> bool:
        """Whether the file itself lists ``<unk>`` (otherwise it was added at log10 p = -100)."""
        return UNK not in self.ngram.info.get("added", [])

    @property
    def order(self) -> int:
        return self.ngram.order

    @property
    def context_length(self) -> int:
        """``order - 1``: an n-gram model reads the last n - 1 words."""
        return self.order - 1

    def _checked(self, lp: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        """``lp``, unless a probability exceeds 1: back-off weights that are not those of the file's own
        estimate (a damaged or hand-edited file) can push ``bow(h) P(w|h')`` past 1, and a perplexity
        computed from such numbers would be below the truth with no sign of it."""
        bad = np.flatnonzero(lp > 1e-6)
        if len(bad):
            where = f" (token {int(bad[0]) + 1}, {self.vocab.words[int(ids[bad[0]])]!r})" if ids is not None else ""
            raise UserError(f"{self.path or 'the n-gram model'}: gives a probability above 1 "
                            f"(ln P = {lp[bad[0]]:.4g}){where}; its back-off weights do not fit its probabilities")
        return lp

    def logprobs(self, ids: np.ndarray, *, independent: bool = False) -> np.ndarray:
        """``ln P(w_i | h_i)`` for every token of an id stream of ``self.vocab`` (both modes agree)."""
        return self._checked(self.ngram.stream_logprobs(ids, self.vocab), ids)

    def logprobs_and_orders(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`logprobs` and, per token, the order of the n-gram its probability came from."""
        lp, orders = self.ngram.stream_logprobs(ids, self.vocab, with_order=True)
        return self._checked(lp, ids), orders

    def next_logprobs(self, history) -> np.ndarray:
        n, ng = self.order, self.ngram
        m = ng.map_vocab(self.vocab)
        h = np.concatenate([np.full(max(n - 1, 0), ng.bos, np.int64), m[np.asarray(history, dtype=np.int64)]])
        h = h[len(h) - (n - 1):] if n > 1 else h[:0]
        V = len(self.vocab)
        return self._checked(ng.logprob10_ids(np.broadcast_to(h, (V, len(h))), m[:V]) * LN10)

    def logprobs_after(self, histories, words) -> list[np.ndarray]:
        """:meth:`LanguageModel.logprobs_after` with each history cut to its last n-1 words (all an n-gram
        reads), so a long history costs no more than a short one; the same stream scoring as ``logprobs``."""
        keep = max(self.order - 1, 0)
        cut = [list(h)[len(h) - keep:] if len(h) > keep else list(h) for h in histories]
        return super().logprobs_after(cut, words)

    def describe(self) -> str:
        counts = "/".join(f"{c:,}" for c in self.ngram.counts())
        extra = "" if self.has_unk else f", no <unk> (OOV log10 p {UNK_LOGP:g})"
        return f"ngram LM, order {self.order}, n-grams {counts}, V={len(self.vocab):,}{extra}"
