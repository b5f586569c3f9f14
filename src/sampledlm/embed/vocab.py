"""The words an embedding model trains, their counts, and the corpus as an id stream.

One pass over the text (the toolkit's tokenizer, :mod:`sampledlm.data.tokenizer`) gives every
token a provisional id; the vocabulary then keeps the words seen at least ``min_count`` times,
ordered by count (descending), words of equal count by their first occurrence in the text, the
latest first (gensim's order: ``lexsort`` by count, then by descending first-seen index), as
word2vec files list them. Tokens of dropped words are removed from the stream before training
(word2vec and gensim do the same), so the window reaches across them.

The order of equal counts is not cosmetic: the Huffman tree of hierarchical softmax
(:mod:`.huffman`) pairs equal counts in vocabulary order, so with first occurrences the rare words
first seen in one passage tend to become siblings and share most of their path (our tree is then
gensim's, node for node), while an alphabetical order paired unrelated words. On PTB + War and
Peace, skip-gram with hierarchical softmax on one thread scored WS-353 rho 0.258-0.261 with
alphabetical ties and 0.270-0.291 with this order (seeds 1-3; gensim: 0.289 and 0.302 for seeds
1-2); negative sampling has no tree.

:class:`Corpus` holds ``ids [N] int32`` (vocabulary ids, sentences back to back) and
``sent_start [S + 1] int64``; a sentence longer than ``max_sentence`` words (10,000, gensim's
limit) is cut into pieces of that length.

Frequent-word subsampling (Mikolov et al. 2013b, in word2vec.c's form): with ``t = sample * T``
(``T`` the number of tokens of kept words), word ``w`` of count ``f`` is kept with probability
``min(1, (sqrt(f / t) + 1) * t / f)``; ``sample = 0`` keeps everything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .. import progress
from ..data.textio import atomic_write, file_size, iter_lines
from ..data.tokenizer import TextOptions, iter_sentence_chunks
from ..errors import UserError

MAX_SENTENCE = 10_000


class EmbedVocab:
    """Words (id order) and their training counts, with a word -> id index."""

    def __init__(self, words: list[str], counts):
        self.words = list(words)
        self.counts = np.asarray(counts, dtype=np.int64)
        if len(self.words) != len(self.counts):
            raise ValueError("words and counts differ in length")
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("duplicate word in vocabulary")

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def keep_probabilities(self, sample: float) -> np.ndarray:
        """``[V]`` float64: the probability each occurrence of a word survives subsampling."""
        f = self.counts.astype(np.float64)
        if sample <= 0:
            return np.ones(len(f))
        t = sample * f.sum()
        with np.errstate(divide="ignore"):
            p = (np.sqrt(f / t) + 1.0) * t / f
        return np.minimum(p, 1.0)

    def keep_thresholds(self, sample: float) -> np.ndarray:
        """``keep_probabilities * 2**32`` as uint64: the kernel keeps a word when 32 random bits fall below."""
        return np.round(self.keep_probabilities(sample) * 2.0**32).astype(np.uint64)

    def save(self, path: str) -> None:
        """``word<TAB>count`` lines in id order, written atomically."""
        for w in self.words:
            if not w or any(ch in w for ch in "\t\n\r "):
                raise UserError(f"{path}: cannot save word {w!r}: it is empty or contains whitespace")
        with atomic_write(path) as f:
            f.write("".join(f"{w}\t{c}\n" for w, c in zip(self.words, self.counts.tolist())))

    @classmethod
    def load(cls, path: str) -> "EmbedVocab":
        words, counts = [], []
        for n, line in enumerate(iter_lines(path), 1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 2 or not parts[0] or not parts[1].isdigit():
                raise UserError(f"{path}:{n}: expected 'word<TAB>count', found {line.strip()[:60]!r}")
            words.append(parts[0])
            counts.append(int(parts[1]))
        try:
            return cls(words, counts)
        except ValueError as e:
            raise UserError(f"{path}: {e}") from None


@dataclass
class Corpus:
    """The training text as vocabulary ids (see module docstring)."""

    ids: np.ndarray  # [N] int32
    sent_start: np.ndarray  # [S + 1] int64
    tokens_read: int  # every token of the text, dropped words included

    @property
    def words(self) -> int:
        return len(self.ids)

    @property
    def sentences(self) -> int:
        return len(self.sent_start) - 1


def read_corpus(sources: list[tuple[str, TextOptions]], min_count: int = 5, max_vocab: int | None = None,
                max_sentence: int = MAX_SENTENCE, words: list[str] | None = None) -> tuple[EmbedVocab, Corpus]:
    """Tokenise every ``(path, options)`` once; return the vocabulary and the id stream. ``words``: a vocabulary
    to keep instead (these words in this order, with their counts in the text, 0 for a word it lacks; a run
    started from another reads its text with the source's words)."""
    if min_count < 1:
        raise UserError(f"--min-count {min_count}: must be at least 1")
    prov: dict[str, int] = {}
    get = prov.setdefault
    parts: list[np.ndarray] = []
    lengths: list[int] = []
    for path, opts in sources:
        if path != "-" and not os.path.exists(path):  # a pipe or <(...) is read (once) like a file
            raise UserError(f"{path}: no such file")
        if os.path.isdir(path):
            raise UserError(f"{path}: is a directory, expected a text file")
        with progress.bar(total=file_size(path), desc=f"reading {os.path.basename(path)}", unit="B") as pb:
            for sents, nbytes in iter_sentence_chunks(path, opts):
                flat = [get(t, len(prov)) for s in sents for t in s]
                parts.append(np.asarray(flat, dtype=np.int32))
                lengths.extend(len(s) for s in sents)
                pb.update(nbytes)
    stream = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
    words_prov = list(prov)
    counts = np.bincount(stream, minlength=len(words_prov))
    remap = np.full(len(words_prov), -1, dtype=np.int64)
    if words is not None:
        vocab = EmbedVocab(words, [counts[prov[w]] if w in prov else 0 for w in words])
        seen = np.array([i for i, w in enumerate(words) if w in prov], dtype=np.int64)
        remap[np.array([prov[words[i]] for i in seen], dtype=np.int64)] = seen
    else:
        # provisional ids are in order of first occurrence; ties: the latest first, as gensim
        order = sorted((i for i in range(len(words_prov)) if counts[i] >= min_count), key=lambda i: (-counts[i], -i))
        if max_vocab is not None:
            order = order[:max_vocab]
        if not order:
            names = ", ".join(p for p, _ in sources)
            if not len(stream):
                raise UserError(f"{names}: no words found (empty, or blank lines only)")
            raise UserError(f"{names}: no word occurs --min-count {min_count} times or more "
                            f"({len(stream)} tokens, {len(words_prov)} distinct)")
        remap[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
        vocab = EmbedVocab([words_prov[i] for i in order], counts[np.asarray(order)])
    mapped = remap[stream]
    keep = mapped >= 0
    # sentence lengths after dropping words, then cut long ones
    sent_id = np.repeat(np.arange(len(lengths)), lengths)
    new_len = np.bincount(sent_id[keep], minlength=len(lengths)) if len(lengths) else np.zeros(0, dtype=np.int64)
    pieces = []
    for n in new_len.tolist():
        while n > max_sentence:
            pieces.append(max_sentence)
            n -= max_sentence
        if n > 0:
            pieces.append(n)
    sent_start = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum(pieces, out=sent_start[1:])
    return vocab, Corpus(mapped[keep].astype(np.int32), sent_start, int(len(stream)))
