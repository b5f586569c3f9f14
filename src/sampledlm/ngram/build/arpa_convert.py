"""An ARPA file to a binary model directory within a memory budget (``ngram build-binary --memory``).

:func:`..arpa.read_arpa` parses the whole file into memory, a few hundred bytes an n-gram, so a 13 GB file from
KenLM needs tens of GB. This converter streams the file instead, its sections in file order:

1. the header and the 1-grams, held (an entry a word), ``<unk>`` and ``<s>`` added where absent as the reader
   adds them;
2. for each order k >= 2, windows of lines parsed by the reader's own parser (the same checks and messages,
   with file and line); each n-gram's key ``ctx * W + word`` (:mod:`..tables`) found from the lower orders
   already written to the directory (``keys_j.npy``, memory-mapped: a binary search a word); each run of
   windows sorted by key and put in a :class:`~.spill.Spill` (held in memory while it fits the budget, on
   disk in ``--temp-dir`` beyond);
3. the runs merged (:func:`merge_runs`) into the order's keys, log10 p and back-off weights, an n-gram listed
   twice reported with its line, and written a window at a time (:func:`..mapped.write_binary_arrays`).

The directory holds exactly the arrays of :func:`..mapped.write_binary` of the model :func:`..arpa.read_arpa` reads
(a test checks it) for every file whose n-grams' prefixes are all listed, as KenLM, SRILM and ``ngram train``
write them. An n-gram whose prefix is not listed stops the conversion at its line: the in-memory reader adds such
prefixes with their back-off probability, which needs every order at once.
"""

from __future__ import annotations

import os

import numpy as np

from ...errors import UserError
from ..arpa import _Section, _parse_section, check_count, scan, unigram_vocabulary
from ..tables import lookup_grams

#: working bytes a run element takes at its peak: key, log10 p, back-off and line (32 bytes) held, and the
#: sort's index and gathered copies beside them
BYTES_PER_ELEMENT = 96
#: a window of text being parsed takes about this many times its bytes (its lines split into Python strings)
PARSE_PER_BYTE = 32
#: of what the budget leaves beside the process, the parse and the lower orders' keys (memory-mapped: an order's
#: lookups touch every page of them), the shares of a sorted run (and the merge's buffers) and of the spill files
#: held in memory instead of on disk
RUN_SHARE, HELD_SHARE = 0.35, 0.3
#: what reading an ARPA file in memory takes beside the process, per byte of its text (measured 2026-12-05 on KN4
#: files of 1.7 and 31 MB: 9x, peaks 55 and 318 MiB over a 40 MiB process); a compressed file's text taken as 5x
#: its size
IN_MEMORY_PER_BYTE = 10
COMPRESSED_RATIO = 5
KEY_BYTES = 8  # an n-gram's key in keys_k.npy (int64)
MIN_CHUNK = 1 << 20  # the smallest window of text parsed at a time
SPILL_PER_NGRAM = 56  # bytes on disk an n-gram of the order being sorted takes: its run (32) and merged (24) entries
MIN_LEFT = 16 << 20  # bytes an order needs beyond the above to sort in runs of a useful size
FIELDS = (("keys", np.int64), ("logp", np.float64), ("bow", np.float64), ("line", np.int64))


class _Parts:
    """The file's :func:`..arpa.scan` events with one of look-ahead, so that a section ends where the next starts."""

    def __init__(self, path: str, chunk_bytes: int | None = None):
        self._it = scan(path, chunk_bytes)
        self._next = next(self._it, None)

    def peek(self):
        return self._next

    def pop(self):
        got, self._next = self._next, next(self._it, None)
        return got

    def close(self) -> None:
        self._it.close()


def convert(path: str, out_dir: str, budget: int, temp_dir: str | None = None, progress=None,
            window: int | None = None, chunk_bytes: int | None = None) -> dict:
    """Write the binary model directory of the ARPA file ``path`` to ``out_dir`` (the caller holds its lock),
    using at most about ``budget`` bytes; returns ``{"counts", "spilled"}`` (bytes written to ``temp_dir``).
    ``progress(k, n)``: called as ``n`` more lines of order k are read. ``window`` (elements a sorted run holds)
    and ``chunk_bytes`` (text parsed at a time) default to their shares of the budget."""
    from .budget import current_rss
    from .spill import Spill
    from ..mapped import write_binary_arrays

    counts = header_counts(path)
    chunk = chunk_bytes or text_window(budget, current_rss(), counts)
    parts = _Parts(path, chunk)
    _header(path, parts)
    words, logp1, bow1, index, info = _unigrams(path, parts, counts)
    counts = [len(words), *counts[1:]]
    base = current_rss() + PARSE_PER_BYTE * chunk  # the interpreter, the words and a window of text being parsed
    _share(None, budget, base, KEY_BYTES * sum(counts[1:-1]), len(counts), window)  # the highest order, before any work
    with Spill(temp_dir, window or 1024) as sp:
        # at its peak the spill holds one order's runs and its merged arrays: a full disk is refused before the first
        # write (Spill.check_room), naming --temp-dir
        sp.estimate = lambda: SPILL_PER_NGRAM * max(counts[1:], default=0)
        def arrays(name: str, k: int):
            if k == 1:
                yield {"keys": np.arange(len(words), dtype=np.int64), "logp": logp1, "bow": bow1}[name]
                return
            if name == "keys":
                mapped = sum(os.path.getsize(os.path.join(out_dir, f"keys_{j}.npy")) for j in range(2, k))
                _share(sp, budget, base, mapped, k, window)
                _order(path, parts, sp, out_dir, words, index, k, counts, chunk, progress)
            for _, part in sp.chunks(f"{name}_{k}"):
                yield part
            if name == "bow":
                sp.remove(*(f"{f}_{k}" for f, _ in FIELDS))

        write_binary_arrays(out_dir, words, counts, info, arrays, locked=True)
        return {"counts": counts, "spilled": sp.spilled}


def in_memory_need(path: str) -> int | None:
    """About the peak of a process that reads the file with :func:`..arpa.read_arpa` (its present size and
    :data:`IN_MEMORY_PER_BYTE`); None where the file cannot be read (the reader then names the problem)."""
    from .budget import current_rss

    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return None
    compressed = head[:2] == b"\x1f\x8b" or head[:3] == b"BZh" or head[:6] == b"\xfd7zXZ\x00"
    return current_rss() + size * IN_MEMORY_PER_BYTE * (COMPRESSED_RATIO if compressed else 1)


def mib(n: int) -> str:
    """Bytes as ``--memory`` reads them back: whole MiB, rounded up (``1,234M``)."""
    return f"{-(-int(n) // (1 << 20)):,}M"


def at_least(need: int) -> str:
    """The ``--memory`` to name for a need of ``need`` bytes: 8 MiB over it (the process grows a little as it
    works), rounded up to 16 MiB."""
    step = 16 << 20
    return mib(-(-(need + (8 << 20)) // step) * step)


def minimum_budget(rss: int, counts: list[int]) -> int:
    """The smallest budget a conversion of a model of ``counts`` n-grams takes beside a process of ``rss`` bytes:
    the parse of the smallest window of text, the keys of every order below the highest (memory-mapped while the
    highest is read) and :data:`MIN_LEFT` to sort in."""
    return rss + PARSE_PER_BYTE * MIN_CHUNK + KEY_BYTES * sum(counts[1:-1]) + MIN_LEFT


def text_window(budget: int, rss: int, counts: list[int]) -> int:
    """Text parsed at a time: a third of what the budget leaves above :func:`minimum_budget`'s other parts, as
    Python strings (:data:`PARSE_PER_BYTE`), within [:data:`MIN_CHUNK`, the reader's 8 MiB]; a budget below the
    minimum is a :class:`UserError` saying what to give."""
    from ...data.textio import CHUNK_BYTES

    need = minimum_budget(rss, counts)
    if budget < need:
        raise UserError(f"--memory {mib(budget)} is too little to convert this model: the process takes "
                        f"{mib(rss)}, the keys of its orders below the highest {mib(KEY_BYTES * sum(counts[1:-1]))} "
                        f"(read by every lookup), and reading and sorting need {mib(need - rss - KEY_BYTES * sum(counts[1:-1]))}"
                        f" more; give at least --memory {at_least(need)}")
    spare = budget - need + PARSE_PER_BYTE * MIN_CHUNK
    return int(min(CHUNK_BYTES, max(MIN_CHUNK, spare // (3 * PARSE_PER_BYTE))))


def _share(sp, budget: int, base: int, mapped: int, k: int, window: int | None) -> None:
    """Size order k's sorted runs and the spill files held in memory (``sp``; None: only check) to what the budget
    leaves beside ``base`` and the ``mapped`` bytes of the lower orders' keys; too little is a :class:`UserError`."""
    left = budget - base - mapped
    if left < MIN_LEFT:
        raise UserError(f"--memory {mib(budget)} is too little for this model's {k}-grams: the lower orders' keys take "
                        f"{mib(mapped)} (memory-mapped, read by every lookup) and the process {mib(base)}; give at "
                        f"least --memory {at_least(base + mapped + MIN_LEFT)}")
    if sp is not None:
        sp.window = window or max(1024, int(left * RUN_SHARE) // BYTES_PER_ELEMENT)
        sp.ram = max(sp.held, int(left * HELD_SHARE))


def header_counts(path: str) -> list[int]:
    """The n-gram counts of the file's header (read up to its first section)."""
    parts = _Parts(path)
    try:
        return _header(path, parts)
    finally:
        parts.close()


def _header(path: str, parts: _Parts) -> list[int]:
    kind, counts = parts.pop()  # scan yields the counts first, or raises
    assert kind == "counts"
    return counts


def _section_text(parts: _Parts, budget_bytes: int | None):
    """The next piece of the current section's lines: ``(text, first line, lines)``, joined from the scan's runs
    up to about ``budget_bytes`` (None: the whole section); None where the section has ended."""
    texts, first, n, size = [], None, 0, 0
    while parts.peek() is not None and parts.peek()[0] == "lines":
        text, start, count = parts.pop()[1]
        first = start if first is None else first
        texts.append(text)
        n += count
        size += len(text)
        if budget_bytes is not None and size >= budget_bytes:
            break
    return None if first is None else ("\n".join(texts), first, n)


def _section(path: str, parts: _Parts, k: int) -> _Section:
    event = parts.pop()
    if event is None or event[0] != "section" or event[1].order != k:  # scan has checked the order already
        raise UserError(f"{path}: the file ends before its \\{k}-grams: section")
    return event[1]


def _unigrams(path: str, parts: _Parts, counts: list[int]):
    """The words, their log10 p, back-off weights, index and the model's ``info``, as :func:`..arpa.read_arpa`
    makes them (:func:`..arpa.unigram_vocabulary`)."""
    sec = _section(path, parts, 1)
    got = _section_text(parts, None)
    if got is not None:
        sec.pieces.append(got[0])
    words, logp, bow, rows = _parse_section(path, sec, None, highest=(len(counts) == 1), expected=counts[0])
    check_count(path, sec, counts[0], len(words))
    return unigram_vocabulary(path, sec, words, logp, bow, rows)


def _order(path: str, parts: _Parts, sp, out_dir: str, words: list[str], index: dict[str, int], k: int,
           counts: list[int], chunk: int, progress) -> None:
    """Read the \\k-grams: section into sorted runs, then merge them into ``keys_k``, ``logp_k``, ``bow_k``."""
    sec = _section(path, parts, k)
    W = len(words)
    lower = [np.zeros(0, dtype=np.int64)] + [np.load(os.path.join(out_dir, f"keys_{j}.npy"), mmap_mode="r")
                                             for j in range(2, k)]
    runs: list[int] = []
    held: list[tuple] = []
    found = 0
    while (got := _section_text(parts, chunk)) is not None:
        text, first, _ = got
        body = text.rstrip()
        piece = _Section(k, first, sec.header_line)
        piece.pieces.append(body)
        n_lines = body.count("\n") + 1 if body else 0
        ids, logp, bow, rows = _parse_section(path, piece, index, highest=(k == len(counts)), expected=n_lines)
        ctx = lookup_grams(lower, ids[:, :-1], W) if len(ids) else np.zeros(0, dtype=np.int64)
        if (ctx < 0).any():
            r = int(np.flatnonzero(ctx < 0)[0])
            prefix = " ".join(words[i] for i in ids[r, :-1].tolist())
            raise UserError(f"{path}:{first + int(rows[r])}: this {k}-gram's prefix {prefix!r} is not among the "
                            f"{k - 1}-grams: a conversion within a budget needs every prefix listed; reading the "
                            f"file in memory adds the missing ones (give --memory {mib(in_memory_need(path) or 0)} "
                            "or more, about what that takes)")
        held.append((ctx * W + ids[:, -1], logp, bow, first + np.asarray(rows, dtype=np.int64)))
        found += len(ids)
        if progress is not None:
            progress(k, len(ids))
        if found - sum(runs) >= sp.window:  # the windows held since the last run
            runs.append(_spill_run(sp, k, len(runs), held))
            held = []
    if held or not runs:
        runs.append(_spill_run(sp, k, len(runs), held))
    check_count(path, sec, counts[k - 1], found)
    merge_runs(path, sp, k, runs)


def _spill_run(sp, k: int, r: int, held: list[tuple]) -> int:
    """One sorted run ``r{k}.{r}.*`` of the windows ``held``; returns its length."""
    cols = [np.concatenate([h[j] for h in held]) if held else np.zeros(0, dtype=dt)
            for j, (_, dt) in enumerate(FIELDS)]
    order = np.lexsort((cols[3], cols[0]))  # by key, then by line: a repeat comes after its first listing
    for (name, dt), col in zip(FIELDS, cols):
        sp.create(f"r{k}.{r}.{name}", dt)
        sp.append(f"r{k}.{r}.{name}", col[order])
    return len(order)


def merge_runs(path: str, sp, k: int, lengths: list[int]) -> None:
    """k-way merge of the sorted runs ``r{k}.{r}.*`` into ``keys_k``, ``logp_k``, ``bow_k``; an n-gram listed twice
    is a :class:`UserError` naming its second line (the first repeat by key, as :func:`..arpa.read_arpa` names).

    Each step merges every run's buffered elements up to the smallest last key among the buffers of runs not yet
    at their end: no key above it is in a run's past, so the copies of a repeated key meet in one step."""
    R = len(lengths)
    for name, dt in FIELDS[:3]:
        sp.create(f"{name}_{k}", dt)
    cap = max(sp.window // max(R, 1), 256)
    pos = [0] * R
    buf = [_read_run(sp, k, r, 0, min(cap, lengths[r])) for r in range(R)]
    while any(len(b[0]) for b in buf):
        ends = [b[0][-1] for r, b in enumerate(buf) if len(b[0]) and pos[r] + len(b[0]) < lengths[r]]
        bound = min(ends) if ends else None
        take, rest = [], []
        for b in buf:
            cut = len(b[0]) if bound is None else int(np.searchsorted(b[0], bound, side="right"))
            take.append([c[:cut] for c in b])
            rest.append([c[cut:] for c in b])
        cols = [np.concatenate([t[j] for t in take]) for j in range(len(FIELDS))]
        order = np.lexsort((cols[3], cols[0]))
        keys = cols[0][order]
        dup = np.flatnonzero(keys[1:] == keys[:-1])
        if len(dup):
            first, line = (int(x) for x in cols[3][order][dup[0]:dup[0] + 2])
            raise UserError(f"{path}:{line}: this {k}-gram was already listed at line {first}")
        for j, (name, _) in enumerate(FIELDS[:3]):
            sp.append(f"{name}_{k}", cols[j][order])
        for r in range(R):
            pos[r] += len(take[r][0])
            left = rest[r]
            more = min(cap - len(left[0]), lengths[r] - pos[r] - len(left[0]))
            if len(left[0]) < cap // 2 and more > 0:  # topped up, so that no step waits on a nearly empty buffer
                left = [np.concatenate([a, b]) for a, b in zip(left, _read_run(sp, k, r, pos[r] + len(left[0]), more))]
            buf[r] = left
    for r in range(R):
        sp.remove(*(f"r{k}.{r}.{name}" for name, _ in FIELDS))


def _read_run(sp, k: int, r: int, start: int, n: int) -> list[np.ndarray]:
    return [sp.read(f"r{k}.{r}.{name}", start, n) for name, _ in FIELDS]
