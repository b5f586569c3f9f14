"""Sentence and word scores of a text under any model or mixture, computed in bunches.

Counting convention (:mod:`sampledlm.lm`): each sentence is read on its own, after ``<s>``; every word
and the ``</s>`` are predicted and counted; words outside the vocabulary are ``<unk>`` and counted as
OOVs (KenLM's ``oov`` flag; SRILM would leave them out of its perplexity). So for a file the totals give
exactly ``sampledlm eval --per-sentence``'s perplexity (and ``eval``'s own for every model whose history
stops at a sentence boundary: n-grams, feed-forward, maxent without triggers)::

    ppl = exp(-(sum of ln P) / (words + sentences))

Speed (Schwenk 2007, "sorting and bunch mode"): the text is read in chunks of about
``chunk_tokens`` predictions; within a chunk a recurrent model sorts the sentences by length and runs
them in bunches of ``batch_size`` padded rows, and a feed-forward model computes each distinct
history once (one output distribution serves every prediction that follows that history).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from itertools import repeat
from typing import Iterator

import numpy as np

from .. import progress
from ..data.textio import file_size
from ..data.tokenizer import TextOptions, iter_sentence_chunks
from ..data.vocab import EOS, UNK, UNK_ID
from ..errors import UserError
from ..lm import LanguageModel, perplexity_from_nll, sentence_bounds

LN10 = math.log(10.0)
#: predictions scored per call of the model (a chunk is sorted and bunched as a whole)
CHUNK_TOKENS = 20_000


@dataclass
class SentenceScore:
    """One sentence's scores: ``token_lp`` holds ``ln P`` of each word and of ``</s>``."""

    index: int  # 1-based, counting the sentences of the file (blank lines are no sentence)
    words: list[str]
    token_lp: np.ndarray
    oovs: int
    orders: np.ndarray | None = None  # n-gram models: the order each probability came from
    unk: np.ndarray | None = None  # per token: scored as <unk> (the word is outside the vocabulary, or <unk> itself)

    @property
    def ln_prob(self) -> float:
        return float(self.token_lp.sum())

    @property
    def log10_prob(self) -> float:
        return self.ln_prob / LN10

    @property
    def predictions(self) -> int:
        return len(self.token_lp)

    @property
    def ppl(self) -> float:
        return perplexity_from_nll(-self.ln_prob / self.predictions)

    def to_dict(self, per_word: bool = False) -> dict:
        d = {"sentence": self.index, "text": " ".join(self.words), "words": len(self.words), "oovs": self.oovs,
             "predictions": self.predictions, "log10": self.log10_prob, "ln": self.ln_prob, "ppl": self.ppl}
        if per_word:
            d["per_word"] = [
                {"word": w, "ln": float(lp), "log10": float(lp) / LN10,
                 **({"oov": bool(self.unk[i]) and w != UNK} if self.unk is not None else {}),
                 **({"order": int(self.orders[i])} if self.orders is not None else {})}
                for i, (w, lp) in enumerate(zip(self.words + [EOS], self.token_lp))]
        return d


@dataclass
class Totals:
    """Sums over the sentences scored so far."""

    sentences: int = 0
    words: int = 0
    oovs: int = 0
    ln_prob: float = 0.0

    def add(self, s: SentenceScore) -> None:
        self.sentences += 1
        self.words += len(s.words)
        self.oovs += s.oovs
        self.ln_prob += s.ln_prob

    @property
    def predictions(self) -> int:
        return self.words + self.sentences

    @property
    def ppl(self) -> float:
        return perplexity_from_nll(-self.ln_prob / self.predictions) if self.predictions else float("nan")

    def to_dict(self) -> dict:
        return {"sentences": self.sentences, "words": self.words, "oovs": self.oovs, "predictions": self.predictions,
                "log10": self.ln_prob / LN10, "ln": self.ln_prob, "ppl": self.ppl}


def encode(sentences: list[list[str]], lm: LanguageModel) -> np.ndarray:
    """The id stream of tokenised sentences (each followed by ``</s>``) in ``lm``'s vocabulary."""
    get = lm.vocab.index.get
    flat = []
    for s in sentences:
        flat += s
        flat.append(EOS)
    return np.fromiter(map(get, flat, repeat(UNK_ID)), dtype=np.int64, count=len(flat))


def score_ids(lm: LanguageModel, ids: np.ndarray, with_orders: bool = False):
    """``ln P`` of every token of an id stream, each sentence read on its own; and the n-gram orders
    (None for other families) when ``with_orders``."""
    if with_orders and hasattr(lm, "logprobs_and_orders"):
        return lm.logprobs_and_orders(ids)
    return lm.logprobs(ids, independent=True), None


def score_sentences(lm: LanguageModel, sentences: list[list[str]], with_orders: bool = False,
                    first_index: int = 1) -> list[SentenceScore]:
    """Score tokenised sentences in one bunched call of the model. ``lm``: a model as :func:`sampledlm.load` returns
    it (whose sentences may then be strings, read with its text options) or its ``lm`` (lists of words only: a
    string is refused, not read as a list of characters)."""
    from ..lm import language_model

    if not isinstance(lm, LanguageModel) and hasattr(lm, "words"):
        sentences = [lm.words(s) for s in sentences]
    elif any(isinstance(s, str) for s in sentences):
        raise UserError("score_sentences: a sentence is a list of words here; split the string (or give the model "
                        "sampledlm.load returns, which reads strings with the model's text options)")
    lm = language_model(lm)
    if not sentences:
        return []
    ids = encode(sentences, lm)
    lp, orders = score_ids(lm, ids, with_orders)
    starts, ends = sentence_bounds(ids)
    unk = ids == UNK_ID
    oovs = np.add.reduceat(unk.astype(np.int64), starts).tolist()  # a sentence's </s> is never <unk>
    return [SentenceScore(first_index + k, words, lp[s : e + 1], oov, None if orders is None else orders[s : e + 1],
                          unk[s : e + 1])
            for k, (s, e, words, oov) in enumerate(zip(starts.tolist(), ends.tolist(), sentences, oovs))]


def score_file(lm: LanguageModel, path: str, with_orders: bool = False, chunk_tokens: int = CHUNK_TOKENS,
               opts: TextOptions | None = None) -> Iterator[SentenceScore]:
    """Scores of every sentence of ``path`` (read with the model's text options), in file order.

    A progress bar on stderr follows the file when stderr is a terminal.
    """
    from ..lm import language_model

    lm = language_model(lm)
    opts = opts or TextOptions(**(lm.text_options or {}))
    pending: list[list[str]] = []
    size, index = 0, 1
    with progress.bar(total=file_size(path), desc=f"scoring {os.path.basename(path)}", unit="B") as bar:
        for sents, nbytes in iter_sentence_chunks(path, opts):
            for s in sents:
                pending.append(s)
                size += len(s) + 1
                if size >= chunk_tokens:
                    yield from score_sentences(lm, pending, with_orders, index)
                    index += len(pending)
                    pending, size = [], 0
            bar.update(nbytes)
        yield from score_sentences(lm, pending, with_orders, index)


def format_sentence(s: SentenceScore, per_word: bool = False) -> str:
    """SRILM's ``ngram -ppl -debug 1`` (``-debug 2`` with ``per_word``) block for one sentence, plus ``ln=``."""
    lines = [" ".join(s.words)]
    if per_word:
        toks = s.words + [EOS]
        for i, (w, lp) in enumerate(zip(toks, s.token_lp.tolist())):
            hist = "<s>" if i == 0 else toks[i - 1] + (" ..." if i > 1 else "")
            order = f"[{int(s.orders[i])}gram] " if s.orders is not None else ""
            lines.append(f"\tp( {w} | {hist} ) \t= {order}{math.exp(lp):.6g} [ {lp / LN10:.6g} ]")
    lines.append(f"1 sentences, {len(s.words)} words, {s.oovs} OOVs")
    lines.append(f"0 zeroprobs, logprob= {s.log10_prob:.6g} ppl= {s.ppl:.6g} ppl1= {_ppl1(s.ln_prob, len(s.words))} "
                 f"ln= {s.ln_prob:.6g}")
    return "\n".join(lines) + "\n"


def _ppl1(ln_prob: float, words: int) -> str:
    """SRILM's ppl1: the perplexity over the words alone (``</s>`` left out of the count); "undefined" for none."""
    return f"{perplexity_from_nll(-ln_prob / words):.6g}" if words else "undefined"


def format_totals(name: str, t: Totals) -> str:
    """SRILM's file summary (``ngram -ppl``): sentences, words, OOVs; zeroprobs (always 0: every probability here
    is exact and positive), the log10 total, ppl over the words and ``</s>``, ppl1 over the words alone; then
    the natural-log total and the count of predictions. Unlike SRILM, OOVs are predicted as ``<unk>`` and counted
    (KenLM's convention, :mod:`sampledlm.lm`)."""
    return (f"file {name}: {t.sentences} sentences, {t.words} words, {t.oovs} OOVs\n"
            f"0 zeroprobs, logprob= {t.ln_prob / LN10:.6g} ppl= {t.ppl:.6g} ppl1= {_ppl1(t.ln_prob, t.words)} "
            f"ln= {t.ln_prob:.6g} predictions= {t.predictions}\n")
