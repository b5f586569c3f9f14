"""The id stream of bounded estimation (:mod:`.external`), in windows: of an array (memory-mapped or not), of a
text file encoded with a known vocabulary, or of a text file read once for both its vocabulary and its ids
(:func:`read_text`, the ids spilled to the file ``raw`` meanwhile).
"""

from __future__ import annotations

import os

import numpy as np

from ... import progress
from ...data.vocab import Vocab
from ...errors import UserError
from .spill import Spill


def array_chunks(ids: np.ndarray, size: int):
    """Windows of an id stream; a memory-mapped stream is read with ``np.fromfile`` (nothing stays resident)."""
    n = len(ids)
    if isinstance(ids, np.memmap) and ids.filename:
        for s in range(0, n, size):
            yield np.fromfile(ids.filename, dtype=ids.dtype, count=min(size, n - s), offset=ids.offset + s * ids.itemsize)
    else:
        for s in range(0, n, size):
            yield np.asarray(ids[s : s + size])


class TokenMeter:
    """Tokens read so far from a text of ``size`` bytes (None: unknown, e.g. standard input) and the bytes they
    came from: :meth:`expected` extrapolates the stream's length (for :func:`.budget.spill_need`)."""

    def __init__(self, size: int | None):
        self.size, self.bytes, self.tokens = size, 0, 0

    def add(self, tokens: int, nbytes: int) -> None:
        self.tokens += int(tokens)
        self.bytes += int(nbytes)

    def expected(self) -> int | None:
        """Tokens of the whole text at the rate read so far; None before anything is read, or when the text's
        size is unknown (until the caller knows the length)."""
        if not self.size or not self.bytes or not self.tokens:
            return None
        return int(self.tokens * max(1.0, self.size / self.bytes))


def text_chunks(path: str, vocab: Vocab, opts, meter: TokenMeter | None = None):
    """Windows of the id stream of a text file, encoded as :func:`sampledlm.data.corpus.encode_file` does
    (``meter``: counts them as they are read)."""
    from itertools import repeat

    from ...data.corpus import with_ends
    from ...data.tokenizer import iter_sentence_chunks
    from ...data.vocab import UNK_ID

    get = vocab.index.get
    for sents, nbytes in iter_sentence_chunks(path, opts):
        flat = with_ends(sents)
        if meter is not None:
            meter.add(len(flat), nbytes)
        if flat:
            yield np.fromiter(map(get, flat, repeat(UNK_ID)), dtype=np.int32, count=len(flat))


LINE_END = "\x00"  # marks line ends in read_text's fast path (a chunk holding NUL takes the slow one)


def _plain_sentences(path: str, opts, chunk_bytes: int):
    """``(tokens, nbytes, ends)`` per chunk of a plain text (``opts.is_plain``): every line's tokens followed
    by :data:`LINE_END`, blank lines included (the caller drops their marks). One ``str.split`` per
    chunk instead of one per line, three times faster on short lines. A chunk with literal ``<s>`` /
    ``</s>`` tokens (dropped, :func:`~sampledlm.data.tokenizer.split_line`) or a NUL is split line by
    line, and ``ends`` gives the marks' positions (a NUL token of the text is a word); else None."""
    from ...data.textio import iter_chunks
    from ...data.tokenizer import ENCODING_HINT, split_line

    for lines, nbytes in iter_chunks(path, opts.encoding_errors, chunk_bytes, ENCODING_HINT):
        joined = "\n".join(lines)
        if "s>" in joined or LINE_END in joined:
            toks, ends = [], []
            for line in lines:
                toks += split_line(line)
                ends.append(len(toks))
                toks.append(LINE_END)
            del lines, joined
            yield toks, nbytes, np.array(ends, dtype=np.int64)
        else:
            toks = joined.replace("\n", " " + LINE_END + " ").split()
            toks.append(LINE_END)
            del lines, joined
            yield toks, nbytes, None
        del toks  # nothing of this chunk stays while the next one is read


def read_text(sp: Spill, path: str, opts, chunk_bytes: int | None = None,
              meter: TokenMeter | None = None) -> tuple[Vocab, object]:
    """One pass over a text file for both its vocabulary and its id stream: the :class:`Vocab` that
    :func:`sampledlm.data.corpus.build_vocab` builds, and windows of the id stream that
    :func:`text_chunks` yields with it (the same ids), read back from the spill file ``raw``.

    Words get provisional ids in order of first appearance while the text is read (the dictionary
    lookups of the ids already seen run at C speed; only a window's new words take a Python step),
    their counts by ``bincount``; once the vocabulary is known, a table maps provisional ids to its
    ids as each window is read back. The text is read once (``--train -`` works), not twice. ``meter``: counts
    the tokens and bytes read, each chunk's before its ids are spilled."""
    from collections import Counter
    from itertools import repeat

    from ...data.corpus import with_ends
    from ...data.textio import file_size
    from ...data.tokenizer import iter_sentence_chunks
    from ...data.vocab import EOS, UNK_ID

    MARK = -2  # the provisional id of LINE_END
    seen: dict[str, int] = {LINE_END: MARK}
    get = seen.get
    words: list[str] = []  # by provisional id
    literal: list[int] = []  # the provisional id of LINE_END as a word of the text, once seen
    counts = np.zeros(0, np.int64)
    n_sent = 0

    def provisional(flat: list[str]) -> np.ndarray:
        ids = np.fromiter(map(get, flat, repeat(-1)), dtype=np.int64, count=len(flat))
        for i in np.flatnonzero(ids == -1).tolist():
            j = get(flat[i])
            if j is None:
                # a copy, not the chunk's own string: those lie among the chunk's millions of transient
                # strings, and each one kept would pin its allocator arena (RSS growing with the corpus)
                w = flat[i].encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
                j = seen[w] = len(words)
                words.append(w)
            ids[i] = j
        return ids

    if opts.is_plain:
        chunks = _plain_sentences(path, opts, chunk_bytes)
    else:
        none = np.zeros(0, np.int64)
        chunks = ((with_ends(sents), nbytes, none) for sents, nbytes in iter_sentence_chunks(path, opts, chunk_bytes))
    sp.create("raw", np.int32)
    with progress.bar(total=file_size(path), desc=f"reading {os.path.basename(path)}", unit="B") as pb:
        for flat, nbytes, ends in chunks:
            ids = provisional(flat)
            if ends is not None:  # marks only where listed: any other LINE_END is the text's own word
                word = ids == MARK
                word[ends] = False
                if word.any():
                    if not literal:
                        literal.append(len(words))
                        words.append(LINE_END)
                    ids[word] = literal[0]
            mark = ids == MARK
            if mark.any():  # a line's end: </s> after its tokens, nothing for a blank line
                after_mark = np.empty(len(ids), dtype=bool)
                after_mark[0] = True  # chunks hold whole lines
                after_mark[1:] = mark[:-1]
                ids, mark = ids[~(mark & after_mark)], mark[~(mark & after_mark)]
                ids[mark] = provisional([EOS])[0]
            n_sent += int(np.count_nonzero(ids == get(EOS, -1)))
            if meter is not None:
                meter.add(len(ids), nbytes)
            if len(ids):
                c = np.bincount(ids, minlength=len(words))
                c[: len(counts)] += counts
                counts = c
                sp.append("raw", ids.astype(np.int32))
            del flat, ids, mark  # before the next chunk is read: one chunk's strings resident at a time
            pb.update(nbytes)
    if n_sent == 0:
        raise UserError(f"{path}: no words found (empty file or blank lines only)")
    vocab = Vocab.from_counts(Counter(dict(zip(words, counts.tolist()))), n_sent)  # </s>'s count is dropped there
    table = np.array([vocab.index.get(w, UNK_ID) for w in words], dtype=np.int32)
    return vocab, (table[raw] for _, raw in sp.chunks("raw"))


def rechunk(chunks, size: int):
    """The same stream cut into windows of at most ``size`` elements."""
    for c in chunks:
        for s in range(0, len(c), size):
            yield c[s : s + size]
