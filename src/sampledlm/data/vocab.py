"""The vocabulary: which words a model predicts, with their training counts.

Ids are fixed for the specials and deterministic for the rest::

    0        </s>   end of sentence: predicted and counted like a word
    1        <unk>  every word outside the vocabulary (its count includes the words cut off)
    2 ..     words by count descending, then by the word itself (code-point order)
    len(v)   <s>    start-of-sentence padding: an *input-only* id, never predicted

So ``len(vocab)`` is the number of predicted classes V (10,000 on PTB: 9,999 word types,
``<unk>`` among them, plus ``</s>``), and neural models give their input embeddings
``len(vocab) + 1`` rows. ``<unk>`` is always present, with count 0 when nothing maps to it.

The file format is one entry per line, ``word<TAB>count``, in id order (``<s>`` is not
written). It reloads to exactly the same ids and counts.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from typing import Iterable

import numpy as np

from ..errors import UserError
from .textio import atomic_write, iter_lines

EOS = "</s>"
UNK = "<unk>"
BOS = "<s>"
EOS_ID = 0
UNK_ID = 1


class Vocab:
    """An ordered list of words with counts and a word -> id index (see module docstring)."""

    def __init__(self, words: list[str], counts: Iterable[int]):
        if words[:2] != [EOS, UNK]:
            raise ValueError("a Vocab starts with </s>, <unk>")
        self.words = list(words)
        self.counts = np.asarray(list(counts), dtype=np.int64)
        if len(self.counts) != len(self.words):
            raise ValueError("words and counts differ in length")
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            dup = next(w for w, c in Counter(self.words).items() if c > 1)
            raise ValueError(f"duplicate word {dup!r} in vocabulary")

    # --- sizes and special ids -------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.words == other.words and np.array_equal(self.counts, other.counts)

    eos_id = EOS_ID
    unk_id = UNK_ID

    @property
    def bos_id(self) -> int:
        """Input-only id of ``<s>``: one past the last predicted word."""
        return len(self.words)

    def id(self, word: str) -> int:
        return self.index.get(word, UNK_ID)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        get = self.index.get
        return [get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        bos = self.bos_id
        return [BOS if i == bos else self.words[i] for i in ids]

    def fingerprint(self) -> str:
        """A short hash of the word list: equal fingerprints mean equal ids."""
        h = hashlib.sha1("\n".join(self.words).encode("utf-8"))
        return h.hexdigest()[:16]

    # --- building ---------------------------------------------------------------------------
    @classmethod
    def from_counts(
        cls, counts: Counter, n_sentences: int, min_count: int = 1, max_size: int | None = None
    ) -> "Vocab":
        """Build a vocabulary from word counts.

        ``min_count``: words seen fewer times become ``<unk>``. ``max_size``: keep at most this
        many entries *including* ``</s>`` and ``<unk>`` (ties at the cut are broken by word).
        Counts of words cut off are added to ``<unk>``'s count.
        """
        if max_size is not None and max_size < 2:
            raise UserError(f"--max-size {max_size}: must be at least 2 (</s> and <unk>)")
        counts = Counter(counts)
        unk = counts.pop(UNK, 0)
        counts.pop(EOS, None)
        counts.pop(BOS, None)
        ranked = sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))
        keep = [(w, c) for w, c in ranked if c >= min_count]
        if max_size is not None:
            keep = keep[: max_size - 2]
        unk += sum(counts.values()) - sum(c for _, c in keep)
        words = [EOS, UNK] + [w for w, _ in keep]
        return cls(words, [n_sentences, unk] + [c for _, c in keep])

    @classmethod
    def from_sentences(cls, sentences: Iterable[list[str]], **kw) -> "Vocab":
        sents = list(sentences)
        return cls.from_counts(Counter(itertools.chain.from_iterable(sents)), len(sents), **kw)

    # --- file io ----------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write ``word<TAB>count`` lines atomically (``-`` for stdout)."""
        for w in self.words:
            if "\t" in w or "\n" in w or "\r" in w or not w:
                raise UserError(f"{path}: cannot save word {w!r}: it is empty or contains a tab or newline")
        with atomic_write(path) as f:
            f.write("".join(f"{w}\t{c}\n" for w, c in zip(self.words, self.counts.tolist())))

    @classmethod
    def load(cls, path: str) -> "Vocab":
        """Read a vocabulary file written by :meth:`save`.

        A line may also hold just a word (count 0), so a plain word list works. Missing
        ``</s>``/``<unk>`` are added with count 0; specials are moved to ids 0 and 1.
        """
        words: list[str] = []
        counts: list[int] = []
        seen: dict[str, int] = {}
        for n, line in enumerate(iter_lines(path), 1):
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) > 2:
                raise UserError(f"{path}:{n}: expected 'word<TAB>count', found {len(parts) - 1} tabs")
            word = parts[0]
            if not word or word != word.strip():
                raise UserError(f"{path}:{n}: word is empty or has surrounding spaces")
            if any(c.isspace() for c in word):  # text is split on white space, so such a word would never occur
                raise UserError(f"{path}:{n}: {word[:40]!r} contains white space; a line is 'word<TAB>count' "
                                "or a bare word")
            try:
                count = int(parts[1]) if len(parts) == 2 else 0
            except ValueError:
                raise UserError(f"{path}:{n}: count {parts[1]!r} is not an integer") from None
            if not 0 <= count < 2**63:
                raise UserError(f"{path}:{n}: count {count} is {'negative' if count < 0 else 'too large'}")
            if word in seen:
                raise UserError(f"{path}:{n}: word {word!r} repeats line {seen[word]}")
            if word == BOS:
                continue
            seen[word] = n
            words.append(word)
            counts.append(count)
        if not words:
            raise UserError(f"{path}: empty vocabulary file")
        special = {w: c for w, c in zip(words, counts) if w in (EOS, UNK)}
        rest = [(w, c) for w, c in zip(words, counts) if w not in (EOS, UNK)]
        return cls(
            [EOS, UNK] + [w for w, _ in rest], [special.get(EOS, 0), special.get(UNK, 0)] + [c for _, c in rest]
        )
