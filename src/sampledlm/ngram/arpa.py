"""ARPA back-off files: writing ours, reading anyone's (SRILM, KenLM, IRSTLM, ...).

The format (Doug Paul's ARPA format, as SRILM and KenLM write it)::

    <blank>
    \\data\\
    ngram 1=10003
    ngram 2=...
    <blank>
    \\1-grams:
    -1.234567<TAB>word<TAB>-0.301     log10 p(w), word, log10 back-off weight (optional)
    ...
    \\2-grams:
    -0.9<TAB>w1 w2<TAB>-0.2
    ...
    \\N-grams:
    -0.5<TAB>w1 .. wN                 (the highest order has no back-off weight)
    <blank>
    \\end\\

``<s>`` is a unigram with probability -99 (never predicted) and a back-off weight; ``</s>``
and ``<unk>`` are ordinary unigrams. We write probabilities with Python's shortest
8 decimals: the estimator rounds its log10 values to exactly those decimals, so reading our
file back gives bit-identical float64 values (other models are written with ``repr``).

The reader accepts any whitespace between fields, text before ``\\data\\`` and blank lines,
n-grams in any order, and n-grams whose prefix is missing (the prefix is added with its
back-off probability and weight 1, as KenLM does). A file without ``<unk>`` gets one with
log10 p = -100, as KenLM does ("The ARPA file is missing <unk>. Substituting log10
probability -100"); ``info["added"]`` then lists ``<unk>`` and :class:`~.lm.ArpaLM` prints
that warning. A file without ``<s>`` gets it with -99. IRSTLM's ``<s> <s> w`` padding
n-grams are read but, as in KenLM, never used: a sentence's history holds one ``<s>``
(:meth:`~.model.NgramLM.logprob10_ids`). Anything malformed is a
:class:`~sampledlm.errors.UserError` naming the file and line.

Files may be gzip, bzip2 or xz compressed (read by content, :mod:`sampledlm.data.textio`);
:func:`write_arpa` compresses when the name ends in ``.gz``, ``.bz2`` or ``.xz``.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import re

import numpy as np

from ..errors import UserError
from ..data.textio import atomic_write, iter_chunks
from ..data.vocab import BOS, EOS, UNK
from .model import NgramLM, NgramTable
from .tables import lookup_grams

_COUNT_RE = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_SECTION_RE = re.compile(r"^\\(\d+)-grams:\s*$")
UNK_LOGP = -100.0
BOS_LOGP = -99.0
MAX_COUNT = 2**63 - 1  # n-gram counts are int64


# --- writing -------------------------------------------------------------------------------------
DECIMALS = 8  # estimated models hold log10 values rounded to 8 decimals (see estimate.py)


def _float_format(values: np.ndarray) -> str:
    """``%.8f`` when every value is exactly a rounded-to-8-decimals double (round trip exact), else ``%r``."""
    return f"%.{DECIMALS}f" if np.array_equal(np.round(values, DECIMALS), values) else "%r"


def ngram_texts(lm: NgramLM) -> list[list[str]]:
    """The words of every stored n-gram, space-joined, per order (in table order)."""
    texts = [list(lm.words)]
    for t in lm.tables[1:]:
        ctx = (t.keys // lm.width).tolist()
        last = (t.keys % lm.width).tolist()
        prev, words = texts[-1], lm.words
        texts.append([prev[c] + " " + words[w] for c, w in zip(ctx, last)])
    return texts


def write_arpa(lm: NgramLM, path: str) -> None:
    """Write ``lm`` to ``path`` in ARPA format (atomic; ``-`` for stdout).

    Lower orders carry a back-off weight on every line (0 where the n-gram is not a
    context), the highest order none. Lines are formatted in bulk (one ``%`` per order).
    """
    for w in lm.words:
        if not w or any(ch.isspace() for ch in w):
            raise UserError(f"{path}: cannot write word {w!r} to an ARPA file: it is empty or contains whitespace")
    texts = ngram_texts(lm)
    with atomic_write(path) as f:
        f.write("\n\\data\\\n")
        f.write("".join(f"ngram {k}={len(t)}\n" for k, t in enumerate(lm.tables, 1)))
        for k, (t, text) in enumerate(zip(lm.tables, texts), 1):
            f.write(f"\n\\{k}-grams:\n")
            pf = _float_format(t.logp)
            if k < lm.order:
                line = f"{pf}\t%s\t{_float_format(t.bow)}\n"
                args = tuple(itertools.chain.from_iterable(zip(t.logp.tolist(), text, t.bow.tolist())))
            else:
                line = f"{pf}\t%s\n"
                args = tuple(itertools.chain.from_iterable(zip(t.logp.tolist(), text)))
            f.write((line * len(text)) % args)
        f.write("\n\\end\\\n")


# --- reading -------------------------------------------------------------------------------------
class _Section:
    """The raw lines of one ``\\k-grams:`` section and the file line number of the first."""

    def __init__(self, order: int, first_line: int, header_line: int):
        self.order, self.first_line, self.header_line = order, first_line, header_line
        self.pieces: list[str] = []  # runs of whole lines, each joined by newlines

    @property
    def text(self) -> str:
        return "\n".join(self.pieces)

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")


def _split_file(path: str, on_bytes=None) -> tuple[list[int], list[_Section]]:
    """Scan the file: the header's n-gram counts and the lines of each section (one pass)."""
    counts: list[int] = []
    sections: list[_Section] = []
    for kind, value in scan(path, on_bytes=on_bytes):
        if kind == "counts":
            counts = value
        elif kind == "section":
            sections.append(value)
        else:
            sections[-1].pieces.append(value[0])
    if len(sections) != len(counts):
        raise UserError(f"{path}: header lists {len(counts)} orders but the file has {len(sections)} sections")
    return counts, sections


def scan(path: str, chunk_bytes: int | None = None, on_bytes=None):
    """The file's parts in order, checked as they come: ``("counts", [M_1 .. M_N])`` when the first section
    starts, ``("section", _Section)`` (no lines yet) at each section header, then ``("lines", (text, first, n))``
    for each run of its lines (``n`` lines joined by newlines, the first at line ``first``). A malformed header,
    a section out of order or a file that ends before ``\\end\\`` raises :class:`UserError` naming the line.
    ``chunk_bytes``: about how much of the file is read at a time; ``on_bytes(n)``: called with each chunk's bytes."""
    counts: list[int] = []
    state = "pre"  # pre -> counts -> body -> end
    sections = 0
    line_no = 0
    # no NUL sniffing of the whole head: a word of the text may hold a NUL (ngram train writes it as it is);
    # before \data\ a NUL still means a binary file
    for lines, nbytes in iter_chunks(path, sniff=False, chunk_bytes=chunk_bytes):
        if on_bytes is not None:
            on_bytes(nbytes)
        marks = [j for j, ln in enumerate(lines) if ln[:1] == "\\"]  # section headers and the end marker
        mi, i = 0, 0
        while i < len(lines):
            if state == "body":  # bulk-copy entry lines up to the next marker
                while mi < len(marks) and marks[mi] < i:
                    mi += 1
                j = marks[mi] if mi < len(marks) else len(lines)
                if j > i:
                    yield "lines", ("\n".join(lines[i:j]), line_no + 1, j - i)
                line_no += j - i
                i = j
                if i == len(lines):
                    break
            line = lines[i]
            i += 1
            line_no += 1
            s = line.strip()
            if state == "pre":
                if s == "\\data\\":
                    state = "counts"
                elif "\x00" in s:
                    raise UserError(f"{path}: looks like a binary file (NUL byte), not an ARPA file")
                continue
            if state == "end":
                if s:
                    raise UserError(f"{path}:{line_no}: text after \\end\\")
                continue
            if not s:
                continue
            m = _SECTION_RE.match(s)
            if state == "counts" and not m:
                counts.append(_header_count(path, line_no, s, len(counts)))
                continue
            if m:
                k = int(m.group(1))
                if not counts:
                    raise UserError(f"{path}:{line_no}: section \\{k}-grams: before any 'ngram N=COUNT' line")
                if k > len(counts):
                    raise UserError(f"{path}:{line_no}: section \\{k}-grams:, but the header lists orders "
                                    f"1..{len(counts)} only (a missing 'ngram {k}=COUNT' line?)")
                if k != sections + 1:
                    raise UserError(f"{path}:{line_no}: expected section \\{sections + 1}-grams:, "
                                    f"found \\{k}-grams:")
                if state == "counts":
                    yield "counts", list(counts)
                sections += 1
                yield "section", _Section(k, line_no + 1, line_no)
                state = "body"
                continue
            if s == "\\end\\" and state == "body":
                state = "end"
                continue
            raise UserError(f"{path}:{line_no}: unexpected line {s[:60]!r}")
    if state == "pre" and line_no == 0:  # nothing at all: say so (an empty pipe reads as no \data\ line too)
        raise UserError("-: standard input is empty: expected an ARPA file" if path == "-"
                        else f"{path}: the file is empty: expected an ARPA file")
    if state == "pre":
        raise UserError(f"{path}: not an ARPA file: no \\data\\ line")
    if state != "end":
        raise UserError(f"{path}:{line_no}: file ends before \\end\\ (truncated?)")


def _header_count(path: str, line_no: int, s: str, have: int) -> int:
    """The count of an ``ngram K=COUNT`` header line, K the next order after ``have``."""
    mc = _COUNT_RE.match(s)
    if not mc:
        raise UserError(f"{path}:{line_no}: expected 'ngram N=COUNT' or '\\1-grams:', found {s[:60]!r}")
    k, c = int(mc.group(1)), int(mc.group(2))
    if c > MAX_COUNT:
        raise UserError(f"{path}:{line_no}: ngram {mc.group(1)}={c}: a count this large does not fit "
                        "in 64 bits (corrupt header?)")
    if k != have + 1:
        raise UserError(f"{path}:{line_no}: n-gram orders in the header must be 1, 2, 3, ...; found {k}")
    return c


def _bad_float(path: str, sec: _Section, rows: np.ndarray, fields: list[list[str]], col) -> None:
    for r in rows.tolist():
        f = fields[r]
        c = col if col >= 0 else len(f) - 1
        try:
            float(f[c])
        except ValueError:
            raise UserError(f"{path}:{sec.first_line + r}: {f[c]!r} is not a number") from None


_INNER_BLANK = re.compile(r"\n[ \t\r\f\v]*\n[ \t\r\f\v]*\S")


def _parse_fast(sec: _Section, index: dict[str, int] | None, highest: bool, expected: int):
    """The common case in bulk: every line has the same fields, the header's count is right, all is valid.

    One ``split`` of the whole section and column slices replace per-line work; anything
    unexpected returns None, and the line-by-line parser finds and names the bad line.
    """
    k = sec.order
    text = sec.text
    if not text[:1].strip() or _INNER_BLANK.search(text):
        return None
    tokens = text.split()
    width = next((f for f in ((k + 1,) if highest else (k + 2, k + 1)) if len(tokens) == expected * f), None)
    if width is None:
        return None
    cols = [tokens[j::width] for j in range(width)]
    try:
        logp = np.array(cols[0], dtype=np.float64)
        bow = np.array(cols[k + 1], dtype=np.float64) if width == k + 2 else np.zeros(expected)
        if index is None:
            words = cols[1]
        else:
            words = np.stack([np.fromiter(map(index.__getitem__, c), dtype=np.int64, count=expected)
                              for c in cols[1 : k + 1]], axis=1)
    except (ValueError, KeyError):
        return None
    logp, bow = _zero_as_minus_99(logp), _zero_as_minus_99(bow)
    if not (np.isfinite(logp).all() and (logp <= 1e-6).all() and np.isfinite(bow).all()):
        return None
    return words, logp, bow, np.arange(expected)


def _zero_as_minus_99(values: np.ndarray) -> np.ndarray:
    """``-inf`` (a zero probability, as some tools write it; KenLM reads it) as -99, SRILM's value for it (``<s>``'s
    probability), so that every number of the model stays finite; +inf and nan stay refused."""
    return np.where(values == -np.inf, -99.0, values) if np.isneginf(values).any() else values


def _parse_section(path: str, sec: _Section, index: dict[str, int] | None, highest: bool, expected: int = -1):
    """Parse one section: (word ids [M, k] or the unigram words, log10 p [M], log10 b [M], line of each row)."""
    fast = _parse_fast(sec, index, highest, expected) if expected >= 0 else None
    if fast is not None:
        return fast
    k = sec.order
    fields = [ln.split() for ln in sec.lines]
    lens = np.fromiter(map(len, fields), dtype=np.int64, count=len(fields))
    rows = np.flatnonzero(lens > 0)
    bad = rows[(lens[rows] != k + 1) & (lens[rows] != k + 2)]
    if len(bad):
        r = int(bad[0])
        raise UserError(f"{path}:{sec.first_line + r}: a {k}-gram line needs a probability, {k} word(s) and an "
                        f"optional back-off weight; found {lens[r]} field(s)")
    if highest:
        with_bow = rows[lens[rows] == k + 2]
        if len(with_bow):
            r = int(with_bow[0])
            raise UserError(f"{path}:{sec.first_line + r}: back-off weight on a highest-order ({k}-gram) entry")
    fl = [fields[r] for r in rows.tolist()]
    try:
        logp = np.array([f[0] for f in fl], dtype=np.float64)
    except ValueError:
        _bad_float(path, sec, rows, fields, 0)
        raise
    bow = np.zeros(len(fl))
    has_bow = lens[rows] == k + 2
    if has_bow.any():
        try:
            bow[has_bow] = np.array([f[k + 1] for f, h in zip(fl, has_bow.tolist()) if h], dtype=np.float64)
        except ValueError:
            _bad_float(path, sec, rows[has_bow], fields, -1)
            raise
    logp, bow = _zero_as_minus_99(logp), _zero_as_minus_99(bow)
    bad = np.flatnonzero(~np.isfinite(logp) | (logp > 1e-6) | ~np.isfinite(bow))
    if len(bad):
        r = int(rows[bad[0]])
        raise UserError(f"{path}:{sec.first_line + r}: log10 probability must be a finite number <= 0, "
                        f"back-off weight finite; found {' '.join(fields[r][:1] + fields[r][k + 1:])}")
    if index is None:
        return [f[1] for f in fl], logp, bow, rows
    flat = list(itertools.chain.from_iterable(f[1 : k + 1] for f in fl))
    try:
        ids = np.fromiter(map(index.__getitem__, flat), dtype=np.int64, count=len(flat)).reshape(len(fl), k)
    except KeyError:
        r = next(r for r, f in enumerate(fl) if any(x not in index for x in f[1 : k + 1]))
        w = next(x for x in fl[r][1 : k + 1] if x not in index)
        raise UserError(f"{path}:{sec.first_line + int(rows[r])}: word {w!r} is not among the 1-grams") from None
    return ids, logp, bow, rows


def _sorted_table(path, sec, keys, logp, bow, rows) -> NgramTable:
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    dup = np.flatnonzero(keys[1:] == keys[:-1])
    if len(dup):
        first, r = int(rows[order[dup[0]]]), int(rows[order[dup[0] + 1]])
        raise UserError(f"{path}:{sec.first_line + r}: this {sec.order}-gram was already listed at line "
                        f"{sec.first_line + first}")
    return NgramTable(keys, logp[order], bow[order])


def _add_missing_prefixes(grams: list[np.ndarray], logps: list, bows: list, rows: list) -> None:
    """Make the n-gram set prefix-closed: every (k-1)-word prefix of a k-gram gets an entry.

    Missing entries get log10 p = NaN (filled later by back-off) and back-off weight 0.
    """
    for k in range(len(grams), 1, -1):
        pre = np.unique(grams[k - 1][:, :-1], axis=0)
        both = np.concatenate([grams[k - 2], pre])
        _, inv = np.unique(both, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        have = np.zeros(inv.max() + 1, dtype=bool)
        have[inv[: len(grams[k - 2])]] = True
        missing = pre[~have[inv[len(grams[k - 2]):]]]
        if len(missing):
            grams[k - 2] = np.concatenate([grams[k - 2], missing])
            logps[k - 2] = np.concatenate([logps[k - 2], np.full(len(missing), np.nan)])
            bows[k - 2] = np.concatenate([bows[k - 2], np.zeros(len(missing))])
            rows[k - 2] = np.concatenate([rows[k - 2], np.full(len(missing), -1)])


def read_arpa(path: str, cache: bool = True, on_bytes=None) -> NgramLM:
    """Read an ARPA back-off model (ours or another tool's) into an :class:`NgramLM`.

    The model's word ids follow the order of the file's 1-grams; ``<unk>`` and ``<s>`` are
    added when absent (module docstring). Errors name the file and line. With ``cache`` the
    parsed tables are kept as safetensors in the corpus cache directory and reused while the
    file is unchanged (:mod:`.binary`). ``on_bytes(n)``: called as ``n`` more bytes of the file are read.
    """
    if cache:
        from .binary import cached_read

        return cached_read(path, lambda p: read_arpa(p, cache=False, on_bytes=on_bytes))
    with _gc_paused():
        return _read_arpa(path, on_bytes)


@contextlib.contextmanager
def _gc_paused():
    """Millions of small lists make Python's cyclic GC rescan the heap again and again; pause it."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def unigram_vocabulary(path: str, sec: _Section, words: list[str], logp: np.ndarray, bow: np.ndarray, rows):
    """The model's words from its parsed 1-grams: a repeat refused (naming its line), ``</s>`` required, ``<unk>``
    and ``<s>`` appended where absent (module docstring); returns ``(words, logp, bow, index, info)``."""
    index: dict[str, int] = {}
    for i, w in enumerate(words):
        if w in index:
            raise UserError(f"{path}:{sec.first_line + int(rows[i])}: 1-gram {w!r} was already listed at line "
                            f"{sec.first_line + int(rows[index[w]])}")
        index[w] = i
    info: dict = {"source": path, "added": []}
    if EOS not in index:
        raise UserError(f"{path}: no </s> among the 1-grams: this does not look like a sentence-level language model")
    for special, lp in ((UNK, UNK_LOGP), (BOS, BOS_LOGP)):
        if special not in index:
            index[special] = len(words)
            words.append(special)
            logp, bow = np.append(logp, lp), np.append(bow, 0.0)
            info["added"].append(special)
    return words, logp, bow, index, info


def _read_arpa(path: str, on_bytes=None) -> NgramLM:
    counts, sections = _split_file(path, on_bytes)
    n = len(counts)
    words, logp1, bow1, rows1 = _parse_section(path, sections[0], None, highest=(n == 1), expected=counts[0])
    found = [len(words)]
    words, logp1, bow1, index, info = unigram_vocabulary(path, sections[0], words, logp1, bow1, rows1)
    width = len(words)
    grams, logps, bows, rows = [np.arange(width, dtype=np.int64)[:, None]], [logp1], [bow1], [None]
    for sec in sections[1:]:
        g, lp, bw, r = _parse_section(path, sec, index, highest=(sec.order == n), expected=counts[sec.order - 1])
        for lst, x in ((grams, g), (logps, lp), (bows, bw), (rows, r)):
            lst.append(x)
        found.append(len(g))
    _check_counts(path, counts, sections, found)
    tables = _build_tables(path, sections, words, grams, logps, bows, rows)
    if tables is None:
        _add_missing_prefixes(grams, logps, bows, rows)
        info["added"].append("missing n-gram prefixes")
        tables = _build_tables(path, sections, words, grams, logps, bows, rows)
    return NgramLM(words, tables, info)


def _build_tables(path, sections, words, grams, logps, bows, rows) -> list[NgramTable] | None:
    """Sorted tables for every order; None when some n-gram's prefix is not stored."""
    width = len(words)
    tables = [NgramTable(np.arange(width, dtype=np.int64), logps[0], bows[0])]
    keys = [tables[0].keys]
    for k in range(2, len(grams) + 1):
        g = grams[k - 1]
        ctx = lookup_grams(keys, g[:, :-1], width)
        if (ctx < 0).any():
            return None
        table = _sorted_table(path, sections[k - 1], ctx * width + g[:, -1], logps[k - 1], bows[k - 1], rows[k - 1])
        holes = np.flatnonzero(np.isnan(table.logp))
        if len(holes):  # added prefixes: their probability by back-off from the lower orders
            lower = NgramLM(words, tables, {})
            ctx = table.keys[holes] // width  # p(w | h) = b(h) p(w | h'), h = the (k-1)-word prefix
            hist = _grams_of(keys, ctx, width, k - 1)
            table.logp[holes] = tables[k - 2].bow[ctx] + lower.logprob10_ids(hist, table.keys[holes] % width)
        tables.append(table)
        keys.append(table.keys)
    return tables


def _grams_of(keys: list[np.ndarray], idx: np.ndarray, width: int, k: int) -> np.ndarray:
    """The words [len(idx), k] of order-k n-grams given their table indices (inverse of lookup)."""
    out = np.empty((len(idx), k), dtype=np.int64)
    cur = np.asarray(idx, dtype=np.int64)
    for j in range(k - 1, 0, -1):
        key = keys[j][cur]
        out[:, j] = key % width
        cur = key // width
    if k:
        out[:, 0] = cur
    return out


def _check_counts(path: str, counts: list[int], sections: list[_Section], found: list[int]) -> None:
    for want, got, sec in zip(counts, found, sections):
        check_count(path, sec, want, got)


def check_count(path: str, sec: _Section, want: int, got: int) -> None:
    """A section whose entries are not as many as its header line says is a :class:`UserError` naming that line."""
    if want != got:
        raise UserError(f"{path}:{sec.header_line}: the header says ngram {sec.order}={want} but the section has "
                        f"{got} entries")
