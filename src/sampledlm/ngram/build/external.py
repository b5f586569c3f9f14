"""Kneser-Ney estimation within a memory budget: the stages of :mod:`.estimate` over sorted runs, the one
pipeline that ``mkn`` and ``kn`` models are estimated by (as lmplz is one pipeline whatever its ``-S``).

The in-memory estimator (:func:`.estimate.train_ngram`) holds every n-gram of every order at once (about 180
bytes each). Here the same numbers are computed with at most a *window* of elements in memory at any time (the
window follows from the budget: ``--memory``, or half the available memory), the rest living in flat files of
a :class:`~.spill.Spill` -- held in memory while the budget leaves room beside the window, so that a corpus that
fits in one window writes nothing to disk, spilled to its directory otherwise (:func:`fit_window`). The tables
are the ones of :mod:`.tables` -- order k sorted by ``key = index(prefix) * W + last word`` -- so
every stage is a pass in key order, or a gather that reads a file range in windows:

1. **pad** the id stream into ``<s> w_1 .. w_m </s>`` per sentence (:func:`.counts.pad_stream`), with
   each position's place in its sentence; unigram counts (W of them) stay in memory.
2. **count** order k = 2..N: a window of positions gives the keys ``index_{k-1}(j-1) * W + w_j``,
   sorted and counted (:func:`.counts.group_keys`) into a *run*; the runs are merged (a k-way merge in windows)
   into the order-k table -- keys, raw counts, the index of each n-gram's suffix, whether it starts
   with ``<s>`` -- and each position's order-k index (needed by order k+1) is read back from the
   per-run ranks the merge writes.
3. **adjust**: continuation counts N1+(. w_1..w_k) = how many order-(k+1) n-grams have this suffix,
   counted into a file in windows; counts-of-counts give the discounts (:mod:`.kneser_ney`).
4. **discount and interpolate**, bottom-up: per context h (contiguous in key order) the sums
   ``sum_x a(h x)`` and the discounted mass, added in the same order as ``np.bincount`` adds them;
   ``p(w|h) = alpha(h w) + gamma(h) p(w|h')`` with p(w|h') gathered from order k-1's file.
5. **write** the ARPA file order by order; each n-gram's text is its prefix's text (order k-1's,
   kept in a spill file and read forward in step, since prefixes come in key order) plus its last word.

Every floating-point operation is the in-memory path's, on the same values and in the same order, so
the ARPA file is byte-identical (a test checks it under a budget that forces hundreds of runs). Disk
traffic per order is a few passes over the positions and the n-grams; a gather whose index spans a
whole file reads it once per window of queries, so a budget far below the model size costs passes.
Only the Kneser-Ney smoothings (``mkn``, ``kn``, with or without ``--prune``) stream; the others
need the whole model in memory and say so.
"""

from __future__ import annotations

import os
import resource
import sys
import time

import numpy as np

from ... import progress
from ...data.textio import CHUNK_BYTES
from ...data.vocab import BOS, EOS_ID, Vocab
from ...errors import UserError
from .counts import check_order_supported
from .counts import group_keys
from .estimate import _log10
from .kneser_ney import discounts_from_n
from .prune import parse_thresholds
from .arpa_stream import PYTHON_BYTES_PER_LINE, PYTHON_LINES, write_arpa_held, write_arpa_streaming
from .runs import index_dtype, merge_runs
from .spill import Spill, heap_kept

STREAMING = ("mkn", "kn")
BYTES_PER_ELEMENT = 160  # peak working bytes per windowed element (group_keys: index/inverse/counts, sorts)
MIN_WINDOW = 1024
MIN_WORKING = 96 << 20  # bytes a budget must leave above the process's footprint (a 1 MiB chunk of text, windows)
# numba and the compiled ARPA line kernels (arpa_lines), loaded when an ARPA file starts to be written: measured
# 130 MB of a 2-gram model's 172 MB peak on a 3-line text (a binary directory needs neither: 44 MB)
ARPA_KERNELS = 136 << 20


def parse_memory(text: str) -> int:
    """``2G``, ``500M``, ``64K``, ``123`` (bytes) or ``40%`` (of physical memory) -> bytes."""
    t = str(text).strip().upper().removesuffix("B")
    try:
        if t.endswith("%"):
            pct = float(t[:-1])
            if not 0 < pct <= 100:
                raise ValueError
            return int(physical_memory() * pct / 100)
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
        value = float(t[:-1] if t[-1:] in "KMGT" else t) * mult
        if not value > 0:
            raise ValueError
        return int(value)
    except (ValueError, IndexError):
        raise UserError(f"--memory {text!r}: expected a size such as 2G, 500M or 40%") from None


def auto_budget() -> int:
    """The budget when none is given: half the available memory (lmplz's ``-S`` defaults to 80 % of physical
    memory; half of what is free leaves the rest of a shared machine alone), never less than this process
    needs (:func:`check_budget`). A corpus whose model fits in it is estimated without writing to disk."""
    return max(available_memory() // 2, current_rss() + ARPA_KERNELS + MIN_WORKING)


def available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return physical_memory() // 2


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def current_rss() -> int:
    """Resident set size of this process now, bytes."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def check_streaming(smoothing: str) -> None:
    """A :class:`UserError` for a smoothing that bounded estimation cannot stream."""
    if smoothing not in STREAMING:
        raise UserError(f"--smoothing {smoothing} needs the whole model in memory; bounded estimation (--memory) "
                        f"streams {' and '.join(STREAMING)} only: leave out --memory for {smoothing}")


def text_chunk_bytes(budget: int, reserve: int = 0) -> int:
    """Bytes of text read at a time: one chunk's tokens as Python strings take about 30x the text's bytes,
    so a chunk gets 1/40 of what the budget leaves above the process and ``reserve`` (1 .. 8 MiB)."""
    return int(min(CHUNK_BYTES, max(1 << 20, (budget - current_rss() - reserve) // 40)))


def check_budget(budget: int, reserve: int = 0) -> None:
    """A :class:`UserError` for a budget the process cannot keep: below its own footprint (the interpreter
    and its libraries, ``reserve`` for what loads later) plus :data:`MIN_WORKING` to work in."""
    have = current_rss() + reserve
    if budget < have + MIN_WORKING:
        mib = -(-(have + MIN_WORKING) // (1 << 20))
        given = f"{budget / (1 << 20):.0f}M" if budget >= 10 << 20 else f"{budget / 1024:.0f}K"
        raise UserError(f"--memory {given} is less than this process needs: the interpreter and "
                        f"its libraries take about {have >> 20} MiB, and bounded estimation needs "
                        f"{MIN_WORKING >> 20} MiB more to work in; give at least --memory {mib}M")


def window_for(budget: int, reserve: int = 0) -> int:
    """Elements per window: what the budget leaves above the interpreter's own footprint and ``reserve``."""
    return max(MIN_WINDOW, _working(budget, reserve) // BYTES_PER_ELEMENT)


def _working(budget: int, reserve: int) -> int:
    """Bytes to work in: 80 % of what the budget leaves above the process's footprint and ``reserve``."""
    return int((budget - current_rss() - reserve) * 0.8)


def held_while_reading(budget: int, reserve: int = 0, path: str | None = None) -> int:
    """Bytes of spill files held in memory while the text is read and padded: a corpus that fits in one window
    (:func:`window_for`) has at most 9 bytes a position in them (``raw`` 4, ``padded`` 4, ``pos`` 1). 0 when
    the text file ``path`` is too large to fit (4 bytes of text a position; compressed: 4:1), so that what
    those files would leave resident once moved to disk does not narrow the window of a large corpus."""
    from ...data.textio import file_size

    working = _working(budget, reserve)
    size = file_size(path) if path not in (None, "-") else None
    if size is not None and path.endswith((".gz", ".bz2", ".xz")):
        size *= 4
    if size is not None and size // 4 * BYTES_PER_ELEMENT > working:
        return 0
    return max(0, working * 9 // BYTES_PER_ELEMENT)


def fit_window(sp: Spill, budget: int, reserve: int, needed: int) -> None:
    """Once the stream's length is known: a window no larger than the longest array (``needed`` elements),
    and the spill files held in memory within what the budget leaves beside it -- a corpus that fits in one
    window is then estimated without writing to disk, as lmplz keeps its blocks in RAM when ``-S`` allows."""
    sp.window = max(MIN_WINDOW, min(sp.window, int(needed)))
    sp.ram = sp.held + max(0, _working(budget, reserve) - sp.window * BYTES_PER_ELEMENT)


# --- the id stream, in windows -------------------------------------------------------------------------
def array_chunks(ids: np.ndarray, size: int):
    """Windows of an id stream; a memory-mapped stream is read with ``np.fromfile`` (nothing stays resident)."""
    n = len(ids)
    if isinstance(ids, np.memmap) and ids.filename:
        for s in range(0, n, size):
            yield np.fromfile(ids.filename, dtype=ids.dtype, count=min(size, n - s), offset=ids.offset + s * ids.itemsize)
    else:
        for s in range(0, n, size):
            yield np.asarray(ids[s : s + size])


def text_chunks(path: str, vocab: Vocab, opts):
    """Windows of the id stream of a text file, encoded as :func:`sampledlm.data.corpus.encode_file` does."""
    from itertools import repeat

    from ...data.corpus import with_ends
    from ...data.tokenizer import iter_sentence_chunks
    from ...data.vocab import UNK_ID

    get = vocab.index.get
    for sents, _ in iter_sentence_chunks(path, opts):
        flat = with_ends(sents)
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


def read_text(sp: Spill, path: str, opts, chunk_bytes: int | None = None) -> tuple[Vocab, object]:
    """One pass over a text file for both its vocabulary and its id stream: the :class:`Vocab` that
    :func:`sampledlm.data.corpus.build_vocab` builds, and windows of the id stream that
    :func:`text_chunks` yields with it (the same ids), read back from the spill file ``raw``.

    Words get provisional ids in order of first appearance while the text is read (the dictionary
    lookups of the ids already seen run at C speed; only a window's new words take a Python step),
    their counts by ``bincount``; once the vocabulary is known, a table maps provisional ids to its
    ids as each window is read back. The text is read once (``--train -`` works), not twice."""
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


def _rechunk(chunks, size: int):
    """The same stream cut into windows of at most ``size`` elements."""
    for c in chunks:
        for s in range(0, len(c), size):
            yield c[s : s + size]


# --- stage 1: pad ----------------------------------------------------------------------------------------
def pad(sp: Spill, chunks, width: int, bos: int) -> tuple[np.ndarray, int]:
    """Write ``padded`` (int32 ids) and ``pos`` (uint8, place in sentence, capped at 255); unigram counts."""
    sp.create("padded", np.int32)
    sp.create("pos", np.uint8)
    uni = np.zeros(width, dtype=np.int64)
    at_start, last_pos, last_id, n_tokens = True, 0, EOS_ID, 0
    for ids in chunks:
        ids = np.asarray(ids, dtype=np.int64)
        if not len(ids):
            continue
        if ids.min() < 0 or ids.max() >= width - 1:
            raise UserError("training ids fall outside the vocabulary (was the stream encoded with another vocabulary?)")
        n_tokens += len(ids)
        starts = np.zeros(len(ids), dtype=bool)
        starts[1:] = ids[:-1] == EOS_ID
        starts[0] = at_start
        where = np.flatnonzero(starts)
        padded = np.insert(ids, where, bos)
        is_start = np.zeros(len(padded), dtype=bool)
        is_start[where + np.arange(len(where))] = True
        idx = np.arange(len(padded), dtype=np.int64)
        last = np.maximum.accumulate(np.where(is_start, idx, -1))
        pos = np.where(last >= 0, idx - last, last_pos + 1 + idx)
        sp.append("padded", padded)
        sp.append("pos", np.minimum(pos, 255).astype(np.uint8))
        uni += np.bincount(padded, minlength=width)
        at_start, last_pos, last_id = bool(ids[-1] == EOS_ID), int(pos[-1]), int(ids[-1])
    if n_tokens == 0:
        raise UserError("cannot train an n-gram model on an empty corpus")
    if last_id != EOS_ID:  # a stream not ending with </s> gets one (pad_stream's rule)
        sp.append("padded", np.array([EOS_ID]))
        sp.append("pos", np.array([min(last_pos + 1, 255)], dtype=np.uint8))
        uni[EOS_ID] += 1
    return uni, n_tokens


# --- stage 2: count --------------------------------------------------------------------------------------
def count_order(sp: Spill, k: int, width: int, need_index: bool, bar) -> int:
    """Order-k table files (``keys_k``, ``cnt_k``, ``sfx_k``, ``bos_k``) and, if ``need_index``, ``idx_k``."""
    prev = "padded" if k == 2 else f"idx_{k - 1}"
    total = sp.length("padded")
    runs = []  # (start position, positions, uniques)
    for s in range(0, total, sp.window):
        n = min(sp.window, total - s)
        pos = sp.read("pos", s, n)
        cur = sp.read(prev, s, n)
        before = sp.read(prev, s - 1, 1) if s else np.full(1, -1, cur.dtype)
        shifted = np.concatenate([before, cur[:-1]])  # index of the (k-1)-gram ending one position earlier
        at = np.flatnonzero(pos >= k - 1)
        keys = shifted[at].astype(np.int64) * width + sp.read("padded", s, n)[at]
        uniq, first_at, inv, cnt = group_keys(keys)
        r = len(runs)
        sp.append(f"run{r}.keys", uniq)
        sp.append(f"run{r}.cnt", cnt.astype(np.int64))
        sp.append(f"run{r}.sfx", cur[at[first_at]])
        sp.append(f"run{r}.bos", (pos[at[first_at]] == k - 1).astype(np.uint8))
        if need_index:  # each position's place among its run's uniques (< window: int32)
            loc = np.full(n, -1, dtype=np.int32)
            loc[at] = inv.reshape(-1)
            sp.append(f"loc_{k}", loc)
        runs.append((s, n, len(uniq)))
        bar.update(n)
    if not any(u for _, _, u in runs):  # no sentence this long: the caller refuses the order
        return 0
    ranks_dtype = index_dtype(sum(u for _, _, u in runs))  # the table has at most that many n-grams
    sp.create(f"rank_{k}", ranks_dtype, sum(u for _, _, u in runs))
    merge_runs(sp, k, [u for _, _, u in runs])
    if need_index:
        sp.create(f"idx_{k}", ranks_dtype)
        off = 0
        for r, (s, n, u) in enumerate(runs):
            loc = sp.read(f"loc_{k}", s, n)
            ranks = sp.read(f"rank_{k}", off, u)
            sp.append(f"idx_{k}", np.where(loc >= 0, ranks[np.maximum(loc, 0)], -1).astype(ranks_dtype))
            off += u
        sp.remove(f"loc_{k}")
    sp.remove(f"rank_{k}")
    if k > 2:
        sp.remove(f"idx_{k - 1}")
    return sp.length(f"keys_{k}")


# --- stages 3 and 4: adjust, discount, interpolate -----------------------------------------------------
def adjusted(sp: Spill, k: int, n: int, bos_id: int) -> None:
    """``a_k`` (int64): raw counts at the highest order and for n-grams starting with <s>, else N1+(. w_1..w_k)."""
    if k == n:  # the raw counts themselves (cnt_k stays: count pruning reads it)
        sp.link(f"cnt_{k}", f"a_{k}")
        return
    m = sp.length(f"keys_{k}")
    sp.create(f"cont_{k}", np.int64, m)
    for _, sfx in sp.chunks(f"sfx_{k + 1}"):
        sp.count_at(f"cont_{k}", sfx)
    sp.create(f"a_{k}", np.int64)
    for s, cont in sp.chunks(f"cont_{k}"):
        bos = sp.read(f"bos_{k}", s, len(cont)).astype(bool)
        sp.append(f"a_{k}", np.where(bos, sp.read(f"cnt_{k}", s, len(cont)), cont))
    sp.remove(f"cont_{k}")


def counts_of_counts(sp: Spill, name: str) -> np.ndarray:
    n = np.zeros(5, dtype=np.int64)
    for _, a in sp.chunks(name):
        n += np.bincount(a[(a >= 1) & (a <= 4)], minlength=5)
    return n


def grouped_sums(sp: Spill, k: int, values):
    """Per context of order k (runs of equal ``keys // W``): sums of each value stream, added in index order.

    ``values(s, a, cnt)`` -> list of float arrays for the window at ``s``. Yields ``(ctx ids, [sums])``
    in increasing ctx; a context cut by a window boundary carries its partial sum into the next window
    as its first addend, so each sum is formed exactly as ``np.bincount`` forms it over the whole array.
    """
    pending = None
    for s, keys in sp.chunks(f"keys_{k}"):
        a = sp.read(f"a_{k}", s, len(keys))
        cnt = sp.read(f"cnt_{k}", s, len(keys))
        ctx = keys // sp.W
        vals = values(s, a, cnt)
        if pending is not None:
            if ctx[0] == pending[0]:
                ctx = np.concatenate([[pending[0]], ctx])
                vals = [np.concatenate([[p], v]) for p, v in zip(pending[1], vals)]
            else:
                yield np.array([pending[0]]), [np.array([p]) for p in pending[1]]
        new = np.ones(len(ctx), dtype=bool)
        new[1:] = ctx[1:] != ctx[:-1]
        gid = np.cumsum(new) - 1
        ids = ctx[new]
        sums = [np.bincount(gid, weights=v, minlength=len(ids)).astype(np.float64) for v in vals]
        pending = (ids[-1], [x[-1] for x in sums])
        if len(ids) > 1:
            yield ids[:-1], [x[:-1] for x in sums]
    if pending is not None:
        yield np.array([pending[0]]), [np.array([p]) for p in pending[1]]


def context_weights(sp: Spill, k: int, d: np.ndarray, prune_at: int) -> None:
    """``denom_k`` and ``gamma_k`` over every order-(k-1) n-gram (contexts without extensions: 0 and 1)."""
    m_ctx = sp.length(f"keys_{k - 1}") if k > 2 else sp.W

    def values(s, a, cnt):
        a = a.astype(np.float64)
        disc = d[np.minimum(a, 3).astype(np.int64)] * (a > 0)
        if prune_at > 0:
            disc = np.where(cnt <= prune_at, a, disc)
        return [a, disc]

    sp.create(f"denom_{k}", np.float64)
    sp.create(f"gamma_{k}", np.float64)
    done = 0
    for ids, (denom, mass) in grouped_sums(sp, k, values):
        full_d = np.zeros(int(ids[-1]) + 1 - done)
        full_m = np.zeros(len(full_d))
        full_d[ids - done] = denom
        full_m[ids - done] = mass
        with np.errstate(divide="ignore", invalid="ignore"):
            gamma = np.where(full_d > 0, full_m / full_d, 1.0)
        sp.append(f"denom_{k}", full_d)
        sp.append(f"gamma_{k}", gamma)
        done = int(ids[-1]) + 1
    if done < m_ctx:
        for s in range(done, m_ctx, sp.window):
            e = min(s + sp.window, m_ctx)
            sp.append(f"denom_{k}", np.zeros(e - s))
            sp.append(f"gamma_{k}", np.ones(e - s))


def interpolate_order(sp: Spill, k: int, d: np.ndarray, bar) -> None:
    """``prob_k`` = alpha + gamma(h) p(w|h'); then ``logp_k``, and ``bow_{k-1}`` = log10 gamma_k."""
    sp.create(f"prob_{k}", np.float64)
    sp.create(f"logp_{k}", np.float64)
    for s, keys in sp.chunks(f"keys_{k}"):
        a = sp.read(f"a_{k}", s, len(keys)).astype(np.float64)
        ctx = keys // sp.W
        denom = sp.gather_sorted(f"denom_{k}", ctx)
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha = np.where(a > 0, (a - d[np.minimum(a, 3).astype(np.int64)]) / denom, 0.0)
        lower = sp.gather(f"prob_{k - 1}", sp.read(f"sfx_{k}", s, len(keys)))
        p = alpha + sp.gather_sorted(f"gamma_{k}", ctx) * lower
        sp.append(f"prob_{k}", p)
        sp.append(f"logp_{k}", _log10(p))
        bar.update(len(keys))
    sp.create(f"bow_{k - 1}", np.float64)
    for _, g in sp.chunks(f"gamma_{k}"):
        sp.append(f"bow_{k - 1}", _log10(g))
    sp.remove(f"denom_{k}", f"gamma_{k}", f"prob_{k - 1}", f"sfx_{k}", f"a_{k}")


# --- the pipeline -------------------------------------------------------------------------------------------
def train_bounded(chunks, vocab: Vocab | None, order: int, output: str, memory: int, temp_dir: str | None = None,
                  smoothing: str = "mkn", prune: list[int] | None = None, text: tuple | None = None,
                  binary: bool = False, locked: bool = False, dask: tuple | None = None,
                  window: int | None = None, ram: int | None = None) -> dict:
    """Estimate an order-``order`` Kneser-Ney model from the id stream windows ``chunks`` into the ARPA ``output``.

    ``memory``: the byte budget for the whole process (module docstring). ``text``: instead of
    ``chunks`` and ``vocab``, ``(path, TextOptions)`` of a text read once for both (:func:`read_text`).
    ``binary``: ``output`` is a binary model directory (:mod:`.binary_stream`; no ARPA text is written);
    ``locked``: the caller holds that directory's lock (:func:`.mapped.lock_directory`). ``dask``:
    ``(scheduler address or None, local workers)`` to count on a Dask cluster (:mod:`.dask_bounded`; the
    same model). ``window``: elements per window instead of what the budget leaves, the budget then
    unchecked (tests and the demo: many sorted runs from a small corpus). ``ram``: bytes of spill files held
    in memory instead of on disk (``None``: what the budget leaves beside the window, all of them when the
    corpus fits in one window; 0 with ``window`` given).
    Returns a report: n-grams per order, vocabulary size, discounts, the window, bytes spilled,
    seconds per stage.
    """
    check_streaming(smoothing)
    if not isinstance(order, (int, np.integer)) or not 1 <= order <= 254:
        raise UserError(f"order {order!r}: bounded estimation takes an integer 1 .. 254")
    thresholds = parse_thresholds(prune or [], int(order))
    info: dict = {"smoothing": smoothing, "order": order, "memory": memory, "seconds": {}}
    t = time.perf_counter()
    reserve = 0 if binary or "sampledlm.ngram.arpa_lines" in sys.modules else ARPA_KERNELS
    fixed = ram is not None or window is not None
    if window is None:
        check_budget(memory, reserve)
    ram = (ram or 0) if fixed else held_while_reading(memory, reserve, text[0] if text is not None else None)
    with Spill(temp_dir, MIN_WINDOW, ram) as sp, heap_kept(memory):
        if text is not None:
            vocab, chunks = read_text(sp, *text, chunk_bytes=text_chunk_bytes(memory, reserve) if window is None
                                      else 1 << 20)
        # sized after reading the text: what its strings leave resident (the allocator keeps freed arenas)
        # counts against the budget
        sp.window = window = info["window"] = window_for(memory, reserve) if window is None else int(window)
        W, V, bos = len(vocab) + 1, len(vocab), vocab.bos_id
        words = list(vocab.words) + [BOS]
        info["vocabulary"] = V
        sp.W = W
        if dask is not None:  # counted by the workers, merged here (:mod:`.dask_bounded`)
            from .dask_bounded import count_on_dask

            with progress.bar(desc="count on dask", unit="tok") as bar:
                uni, tokens, sizes, info["dask"] = count_on_dask(sp, _rechunk(chunks, window), W, order, bos, *dask,
                                                                 bar=bar)
            sp.remove("raw")
            check_order_supported(sizes, order)
            if not fixed:
                fit_window(sp, memory, reserve, max(sizes))
        else:
            with progress.bar(desc="pad", unit="tok") as bar:
                uni, tokens = pad(sp, _rechunk(chunks, window), W, bos)
                bar.update(tokens)
            sp.remove("raw")
            positions = sp.length("padded")
            if not fixed:
                fit_window(sp, memory, reserve, max(positions, W))
            sizes = [W]
            for k in range(2, order + 1):
                with progress.bar(total=positions, desc=f"count {k}-grams", unit="pos") as bar:
                    sizes.append(count_order(sp, k, W, k < order, bar))
                check_order_supported(sizes, order)
            sp.remove("padded", "pos")
        info["tokens"], info["window"] = tokens, sp.window
        info["seconds"]["count"] = round(time.perf_counter() - t, 3)
        # order 1 in memory, exactly as kneser_ney + interpolate compute it
        if order == 1:
            a1 = uni.astype(np.float64)
        else:
            sp.create("cont_1", np.int64, W)
            for _, sfx in sp.chunks("sfx_2"):
                sp.count_at("cont_1", sfx)
            a1 = sp.read("cont_1").astype(np.float64)
            a1[bos] = uni[bos]
        a1[bos] = 0
        modified = smoothing == "mkn"
        d1, fb1 = discounts_from_n(np.bincount(a1[(a1 >= 1) & (a1 <= 4)].astype(np.int64), minlength=5), modified)
        info["discounts"], info["fallback_orders"] = [[round(float(x), 6) for x in d1[1:]]], [1] if fb1 else []
        denom1 = np.array([a1.sum()], dtype=np.float64)
        mass1 = np.array([(d1[np.minimum(a1, 3).astype(np.int64)] * (a1 > 0)).sum()], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            alpha1 = np.where(a1 > 0, (a1 - d1[np.minimum(a1, 3).astype(np.int64)]) / denom1[np.zeros(W, np.int64)], 0.0)
            gamma1 = np.where(denom1 > 0, mass1 / denom1, 1.0)
        p1 = alpha1 + gamma1[0] / V
        p1[bos] = 0.0
        sp.create("prob_1", np.float64)
        sp.append("prob_1", p1)
        sp.create("logp_1", np.float64)
        sp.append("logp_1", _log10(p1))
        t = time.perf_counter()
        ds = {}
        for k in range(2, order + 1):
            adjusted(sp, k, order, bos)
            dk, fb = discounts_from_n(counts_of_counts(sp, f"a_{k}"), modified)
            ds[k] = dk
            info["discounts"].append([round(float(x), 6) for x in dk[1:]])
            if fb:
                info["fallback_orders"].append(k)
        info["seconds"]["adjust"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        with progress.bar(total=sum(sizes[1:]), desc="interpolate", unit="ngram") as bar:
            for k in range(2, order + 1):
                context_weights(sp, k, ds[k], thresholds[k - 1])
                interpolate_order(sp, k, ds[k], bar)
        sp.create(f"bow_{order}", np.float64)
        sp.remove(f"prob_{order}")
        kept = list(sizes)
        for k in range(2, order + 1):
            if thresholds[k - 1] > 0:
                kept[k - 1] = int(sum((c > thresholds[k - 1]).sum() for _, c in sp.chunks(f"cnt_{k}")))
        info["seconds"]["interpolate"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        if binary:
            from .binary_stream import write_binary_streaming

            model_info = {"smoothing": smoothing, "order": int(order), "ngrams": kept, "discounts": info["discounts"],
                          "fallback_orders": info["fallback_orders"], "estimation": "bounded"}
            if any(thresholds[1:]):
                model_info["prune"] = thresholds
            write_binary_streaming(sp, output, words, order, thresholds, kept, model_info, locked=locked)
        elif (sum(kept) <= PYTHON_LINES and "sampledlm.ngram.arpa_lines" not in sys.modules
              and sum(kept) * PYTHON_BYTES_PER_LINE <= _working(memory, 0)):
            write_arpa_held(sp, output, words, order, thresholds)
        else:
            with progress.bar(total=sum(sizes), desc="write ARPA", unit="ngram") as bar:
                write_arpa_streaming(sp, output, words, order, thresholds, kept, bar)
        info["seconds"]["write"] = round(time.perf_counter() - t, 3)
        info["ngrams"] = kept
        info["spilled_bytes"] = sp.spilled
        if any(thresholds[1:]):
            info["prune"] = thresholds
    return info
