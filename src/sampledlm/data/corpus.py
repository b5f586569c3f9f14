"""Corpora as int32 id streams: counting words, encoding text, caching the result on disk.

An encoded corpus is one flat ``int32`` array, the *stream*: each sentence's word ids
followed by ``</s>`` (id 0). Sentence starts are implicit (after every ``</s>``, and at
position 0). This one array serves both n-gram windows and BPTT batches
(:mod:`sampledlm.data.batches`). At 4 bytes a token a 100M-token corpus is 400 MB, and it is
memory-mapped from a ``.npy`` cache, so only the pages in use occupy memory.

The cache lives in ``$SAMPLEDLM_CACHE`` (default ``~/.cache/sampledlm``); its key covers a
hash of the file's bytes (:func:`~sampledlm.data.textio.content_hash`: size and modification
time would miss a file rewritten within the same second with the same size), the
vocabulary's fingerprint and the tokenisation options, so a stale cache is never used; a CRC-32 beside each
stream catches a damaged one (bit rot, a half-copied cache), which is encoded again.
Hashing reads the file once more, at several hundred MB/s, a small fraction of encoding it.
Standard input is never cached.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

from .. import progress
from ..errors import UserError
from .textio import atomic_write, content_hash, file_size
from .tokenizer import TextOptions, iter_sentence_chunks
from .vocab import EOS, EOS_ID, UNK_ID, Vocab


@dataclass
class WordCounts:
    """What one pass over a text file counts."""

    counts: Counter
    sentences: int

    @property
    def tokens(self) -> int:
        """Word tokens, not counting ``</s>``."""
        return sum(self.counts.values())


def count_words(path: str, opts: TextOptions = TextOptions()) -> WordCounts:
    """Count word tokens and sentences of a text file (one pass, progress on a terminal)."""
    counts: Counter = Counter()
    n_sent = 0
    with progress.bar(total=file_size(path), desc=f"counting {os.path.basename(path)}", unit="B") as pb:
        for sents, nbytes in iter_sentence_chunks(path, opts):
            counts.update(chain.from_iterable(sents))
            n_sent += len(sents)
            pb.update(nbytes)
    return WordCounts(counts, n_sent)


def build_vocab(path: str, opts: TextOptions = TextOptions(), min_count: int = 1, max_size: int | None = None) -> Vocab:
    """Count ``path`` and build its vocabulary; an empty corpus is an error."""
    wc = count_words(path, opts)
    if wc.sentences == 0:
        raise UserError(f"{path}: no words found (empty file or blank lines only)")
    vocab = Vocab.from_counts(wc.counts, wc.sentences, min_count=min_count, max_size=max_size)
    if len(vocab) <= 2 and wc.counts:  # every word would be <unk>: a model of </s> and <unk> alone
        (word, count), = wc.counts.most_common(1)
        raise UserError(f"{path}: no word occurs --min-count {min_count:,} times (the most frequent, {word!r}, "
                        f"{count:,} times): the vocabulary would hold only </s> and <unk>")
    return vocab


def with_ends(sents: list[list[str]]) -> list[str]:
    """The tokens of ``sents`` in order, ``</s>`` after each sentence: what the id stream holds."""
    flat: list[str] = []
    for s in sents:
        flat += s
        flat.append(EOS)
    return flat


def encode_file(path: str, vocab: Vocab, opts: TextOptions = TextOptions()) -> np.ndarray:
    """Encode a text file into its id stream (see module docstring); shape ``[tokens + sentences]``."""
    get = vocab.index.get
    parts: list[np.ndarray] = []
    with progress.bar(total=file_size(path), desc=f"encoding {os.path.basename(path)}", unit="B") as pb:
        for sents, nbytes in iter_sentence_chunks(path, opts):
            flat = with_ends(sents)
            parts.append(np.fromiter(map(get, flat, repeat(UNK_ID)), dtype=np.int32, count=len(flat)))
            pb.update(nbytes)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)


def cache_dir() -> str:
    return os.environ.get("SAMPLEDLM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "sampledlm")


def _cache_path(path: str, vocab: Vocab, opts: TextOptions) -> str | None:
    if path == "-":
        return None
    key = json.dumps(["sha1", content_hash(path), vocab.fingerprint(), opts.to_dict()])
    digest = hashlib.sha1(key.encode()).hexdigest()[:20]
    return os.path.join(cache_dir(), f"{os.path.basename(path)}.{digest}.npy")


def load_ids(path: str, vocab: Vocab, opts: TextOptions = TextOptions(), cache: bool = True) -> np.ndarray:
    """The id stream of ``path``, memory-mapped from the cache (encoded and cached on first use).

    A cache that cannot be written (read-only home, full disk) is skipped silently: the
    stream is then returned from memory.
    """
    cpath = _cache_path(path, vocab, opts) if cache else None
    if cpath and os.path.exists(cpath):
        try:
            ids = np.load(cpath, mmap_mode="r")
            if _intact(ids, cpath, len(vocab)):
                return ids
        except (OSError, ValueError):
            pass  # a damaged cache entry is rebuilt below
    ids = encode_file(path, vocab, opts)
    if cpath and _cache_path(path, vocab, opts) == cpath:  # not rewritten while we read it
        try:
            os.makedirs(os.path.dirname(cpath), exist_ok=True)
            with atomic_write(cpath + CHECKSUM, "w") as f:  # before the stream: a kill between leaves no stream
                f.write(f"{_checksum(ids)}\n")
            with atomic_write(cpath, "wb") as f:
                np.save(f, ids)
            return np.load(cpath, mmap_mode="r")
        except (OSError, UserError):
            pass
    return ids


#: the suffix of a cached stream's checksum file (CRC-32 of its ids, written beside it)
CHECKSUM = ".crc32"


def _checksum(ids: np.ndarray) -> str:
    import zlib

    return f"{zlib.crc32(memoryview(np.ascontiguousarray(ids, dtype=np.int32)).cast('B')):08x}"


def _intact(ids: np.ndarray, cpath: str, vocab_size: int) -> bool:
    """Whether a cached stream is the one that was written: its checksum file's CRC-32 (0.15 s for a 640 MB
    stream here), or, for a stream cached without one, every id within the vocabulary. A damaged entry (bit rot, a
    half-copied cache directory) is then encoded again rather than trained on."""
    try:
        with open(cpath + CHECKSUM, encoding="utf-8") as f:
            return f.read().strip() == _checksum(ids)
    except (OSError, UnicodeDecodeError):
        pass
    return ids.dtype == np.int32 and ids.ndim == 1 and (len(ids) == 0 or (int(ids.min()) >= 0
                                                                       and int(ids.max()) < vocab_size))


def sentence_count(ids: np.ndarray) -> int:
    """Number of sentences in a stream (= number of ``</s>``)."""
    return int(np.count_nonzero(np.asarray(ids) == EOS_ID))
