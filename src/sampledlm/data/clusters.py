"""Word classes from a corpus by the exchange algorithm (Kneser & Ney 1993; Martin, Liermann & Ney 1998),
the flat form of Brown et al. (1992)'s clustering, and the word-classes file that carries them.

The objective is the likelihood of the corpus under the class bigram model
P(w_i | w_{i-1}) = P(c(w_i) | c(w_{i-1})) P(w_i | c(w_i)). Up to terms that do not depend on the
classes (the words' own unigram entropy) its log is::

    F = sum_{c, d} f(N(c, d)) - sum_c f(N(c, .)) - sum_d f(N(., d)),      f(x) = x log x

with N(c, d) the number of bigrams whose first word is in class c and second in d, N(c, .) and
N(., d) the class counts as first and as second word. The exchange algorithm takes each word in
turn (by decreasing count), removes it from its class and puts it in the class that maximises F,
computing each candidate's change from the word's bigram counts with the classes that follow and
precede it: O(C (r + l)) per word, r and l the numbers of distinct classes after and before it, so
an iteration costs at most O(C * distinct bigrams). It stops when an iteration moves fewer than
0.1 % of the words, or after ``iterations``. Bigrams are the consecutive pairs of the id stream
(:mod:`sampledlm.data.corpus`), ``</s>`` included, so the pair (``</s>``, w) counts w as a sentence
start. A class is never emptied (its last word stays). Initial classes: the words by decreasing
count dealt round-robin into the C classes (Martin et al.'s start, the C-1 most frequent words alone
and the rest in one class, ended within 0.4 % of the same class bigram perplexity on PTB with 200
classes: 229.9 against 230.7). It is a local search: it ends where no single move raises F, which
need not be the best assignment. On PTB (10k words, 200 classes) 20 passes take about 5 CPU s; at V = 485k with
1,393 classes, a 1M-token prefix of English Wikipedia takes 9 passes and about 145 CPU s (one thread, Zen 4).

The word-classes file is the three-column layout of Liang's ``brown-cluster`` ``paths`` output::

    class<TAB>word<TAB>count

one word per line; the class is any label (here the class number; a bit string from
``brown-cluster`` works as it is), the count is informational. The models that use classes
(``--objective class`` and ``hsm`` with ``--word-classes FILE``) read it with
:func:`read_word_classes` and save the assignment with their weights.
"""

from __future__ import annotations

import math
import os
import zipfile

import numpy as np

from ..errors import UserError
from .textio import atomic_write, iter_lines, read_error

MIN_MOVED = 0.001  # stop when an iteration moves fewer than this share of the words


def bigram_tables(ids: np.ndarray, num_words: int):
    """The corpus's bigram counts as two CSR tables: ``(indptr, next_word, count)`` by first word and
    ``(indptr, prev_word, count)`` by second word; ``int64`` arrays."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) < 2:
        empty = (np.zeros(num_words + 1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        return empty, empty
    keys, counts = np.unique(ids[:-1] * num_words + ids[1:], return_counts=True)
    first, second = keys // num_words, keys % num_words
    right = (np.searchsorted(first, np.arange(num_words + 1)), second, counts.astype(np.int64))
    order = np.lexsort((first, second))
    left = (np.searchsorted(second[order], np.arange(num_words + 1)), first[order], counts[order].astype(np.int64))
    return right, left


def class_bigram_objective(ids: np.ndarray, cls: np.ndarray) -> float:
    """F of the module docstring for the assignment ``cls [V]`` (nats; higher is better)."""
    ids = np.asarray(ids, dtype=np.int64)
    c = np.asarray(cls)[ids]
    n_cls = int(np.max(cls)) + 1
    pair = np.bincount(c[:-1] * n_cls + c[1:], minlength=n_cls * n_cls).astype(np.float64)
    row = np.bincount(c[:-1], minlength=n_cls).astype(np.float64)
    col = np.bincount(c[1:], minlength=n_cls).astype(np.float64)

    def f(x):
        x = x[x > 0]
        return float((x * np.log(x)).sum())

    return f(pair) - f(row) - f(col)


def class_bigram_perplexity(ids: np.ndarray, cls: np.ndarray) -> float:
    """Perplexity of ``ids`` under its own class bigram model (maximum likelihood):
    ``exp(-(F + sum_w f(N(., w))) / (n - 1))``, each word's count as second word completing F."""
    ids = np.asarray(ids, dtype=np.int64)
    n2 = np.bincount(ids[1:]).astype(np.float64)
    n2 = n2[n2 > 0]
    ll = class_bigram_objective(ids, cls) + float((n2 * np.log(n2)).sum())
    return math.exp(-ll / max(1, len(ids) - 1))


def exchange_classes(ids: np.ndarray, num_words: int, num_classes: int, counts=None, iterations: int = 20,
                     report=None, progress: bool = False, resume=None, checkpoint=None) -> np.ndarray:
    """Word classes ``int64 [V]`` (``0 .. C-1``) of the id stream ``ids`` by the exchange algorithm.

    ``counts [V]`` orders the words (decreasing; default: counts in ``ids``); ``report(iteration,
    moved)`` is called after each pass; ``progress``: a bar a pass on stderr (:mod:`sampledlm.progress`) counting
    each word's distinct bigrams, both sides (what its turn costs). ``num_classes`` is capped at V.

    ``checkpoint(passes_done, cls)`` is called after each pass that does not end the search, and
    ``resume=(passes_done, cls)`` starts from such a state: every count the passes keep is a function of the
    assignment alone, so a resumed search ends with the classes an uninterrupted one would have found.
    """
    v = int(num_words)
    c_total = max(1, min(int(num_classes), v))
    ids = np.asarray(ids, dtype=np.int64)
    if counts is None:
        counts = np.bincount(ids, minlength=v)
    order = np.argsort(-np.asarray(counts, dtype=np.float64), kind="stable").astype(np.int64)
    cls = np.empty(v, dtype=np.int64)
    cls[order] = np.arange(v) % c_total
    done = 0
    if resume is not None:
        done, cls = int(resume[0]), np.array(resume[1], dtype=np.int64)
    if len(ids) < 2 or c_total == 1 or done >= iterations:
        return cls
    if progress:
        from ..progress import say

        again = f" (resumed after pass {done})" if done else ""
        say(f"word classes: counting the bigrams of {len(ids):,} tokens (V = {v:,}, C = {c_total:,}), then up to "
            f"{iterations} exchange passes{again}")
    (r_ptr, r_nbr, r_cnt), (l_ptr, l_nbr, l_cnt) = bigram_tables(ids, v)
    u_right = np.diff(np.concatenate([[0], np.cumsum(r_cnt)])[r_ptr])  # each word's count as first word
    u_left = np.diff(np.concatenate([[0], np.cumsum(l_cnt)])[l_ptr])  # ... and as second word
    c_ids = cls[ids]
    m = np.bincount(c_ids[:-1] * c_total + c_ids[1:], minlength=c_total * c_total).reshape(c_total, c_total)
    row, col = m.sum(1), m.sum(0)
    size = np.bincount(cls, minlength=c_total).astype(np.int64)
    from .exchange_kernel import exchange_pass, log_tables

    tables = log_tables(m, row, col)
    neighbours = np.diff(r_ptr) + np.diff(l_ptr)
    order = order[neighbours[order] > 0]  # a word not in the text never moves (every class gains it nothing)
    stretches = pass_stretches(neighbours[order])
    weights = [int(neighbours[order[lo:hi]].sum()) for lo, hi in stretches]
    for it in range(done + 1, iterations + 1):
        moved = 0
        with progress_bar(progress, int(neighbours.sum()), f"word classes (exchange pass {it} of at most {iterations})") as pb:
            for (lo, hi), weight in zip(stretches, weights):
                moved += exchange_pass(order[lo:hi], cls, size, m, row, col, tables, r_ptr, r_nbr, r_cnt, l_ptr,
                                       l_nbr, l_cnt, u_right, u_left)
                pb.update(weight)
        if report is not None:
            report(it, int(moved))
        if moved < MIN_MOVED * v:
            break
        if checkpoint is not None and it < iterations:
            checkpoint(it, cls)
    return cls


#: bumped whenever the algorithm's moves change, so that cached classes of an older one are not reused
ALGORITHM_VERSION = 1


def cached_exchange_classes(ids: np.ndarray, num_words: int, num_classes: int, counts=None,
                            iterations: int = 20, progress: bool = False, report=None) -> np.ndarray:
    """:func:`exchange_classes`, kept in the cache of id streams (``$SAMPLEDLM_CACHE``, default
    ``~/.cache/sampledlm``) under a hash of everything that decides the classes: the id stream's bytes, V, C,
    the counts that order the words, the passes and :data:`ALGORITHM_VERSION`. ``--word-classes auto`` clusters a
    text once: the rates a tuning run tries, a resumed-from-scratch run, ``sampledlm classes``, and class and hsm on
    the same text reuse the classes (at V = 485k a 6M-token text takes about 16 CPU-minutes). The search's state
    after each pass is kept beside (``KEY.pass.npz``), so a run stopped while clustering takes it up at the pass it
    had reached. A cache that cannot be read or written is passed by: the classes are then computed."""
    import hashlib

    from .corpus import cache_dir

    ids = np.ascontiguousarray(np.asarray(ids, dtype=np.int64))  # one key whatever the stream's integer type
    h = hashlib.sha1(f"{int(num_words)} {int(num_classes)} {int(iterations)} v{ALGORITHM_VERSION}".encode())
    h.update(memoryview(ids).cast("B") if ids.size else b"")
    h.update(np.asarray([] if counts is None else counts, dtype=np.float64).tobytes())
    path = os.path.join(cache_dir(), "word-classes", f"{h.hexdigest()[:24]}.npy")
    partial = path[: -len(".npy")] + ".pass.npz"
    try:
        cls = np.load(path)
        if cls.shape == (int(num_words),) and cls.dtype == np.int64:
            if progress:
                from ..progress import say

                say(f"word classes: this text's clustering (C = {num_classes:,}) is already cached, in {path}")
            return cls
    except (OSError, ValueError):
        pass
    cls = exchange_classes(ids, num_words, num_classes, counts, iterations=iterations, progress=progress,
                           report=report, resume=_read_pass_state(partial, int(num_words), int(num_classes)),
                           checkpoint=lambda done, state: _save_quietly(partial, passes=done, cls=state))
    _save_quietly(path, cls=cls)
    try:
        os.remove(partial)
    except OSError:
        pass
    return cls


def _read_pass_state(path: str, num_words: int, num_classes: int):
    """``(passes done, classes)`` from a pass-state file, or None when there is none or it is not a whole one."""
    try:
        with np.load(path) as f:
            done, cls = int(f["passes"]), np.array(f["cls"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    ok = cls.shape == (num_words,) and cls.dtype == np.int64 and done > 0
    return (done, cls) if ok and cls.min(initial=0) >= 0 and cls.max(initial=0) < num_classes else None


def _save_quietly(path: str, cls: np.ndarray, passes=None) -> None:
    """Write ``cls`` (``.npy``) or ``cls`` and ``passes`` (``.npz``) atomically; a cache that cannot take it is
    passed by."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with atomic_write(path, "wb") as f:
            if passes is None:
                np.save(f, cls)
            else:
                np.savez(f, cls=cls, passes=np.int64(passes))
    except (OSError, UserError):
        pass


def pass_stretches(cost: np.ndarray, parts: int = 100) -> list[tuple[int, int]]:
    """``[lo, hi)`` stretches of a pass whose words' ``cost`` are about equal (``parts`` of them at most): the
    progress bar moves between them."""
    if len(cost) == 0:
        return []
    ends = np.searchsorted(np.cumsum(cost), np.linspace(0, cost.sum(), parts + 1)[1:], side="left") + 1
    bounds = np.unique(np.concatenate([[0], np.minimum(ends, len(cost))]))
    if bounds[-1] != len(cost):
        bounds = np.append(bounds, len(cost))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def progress_bar(shown: bool, total: int, desc: str):
    """A progress bar when ``shown``, else one that shows nothing."""
    from .. import progress

    return progress.bar(total=total, desc=desc, unit="pair") if shown else progress.bar(total=total, disable=True)


def write_word_classes(path: str, words: list[str], cls: np.ndarray, counts=None) -> None:
    """Write ``class<TAB>word<TAB>count`` lines (by class, then by decreasing count), atomically."""
    counts = np.zeros(len(words), dtype=np.int64) if counts is None else np.asarray(counts)
    order = np.lexsort((-counts.astype(np.float64), np.asarray(cls)))
    with atomic_write(path) as f:
        for i in order.tolist():
            f.write(f"{int(cls[i])}\t{words[i]}\t{int(counts[i])}\n")


def read_word_classes(path: str, words: list[str], labels: bool = False):
    """The classes of the vocabulary ``words`` from a word-classes file: ``(cls int64 [V], missing)``, and with
    ``labels`` each class's label as the file writes it (``None`` for the class of the missing words) third.

    Class labels are numbered in order of first appearance. Words of the file outside the vocabulary are
    ignored; vocabulary words the file lacks (``missing`` of them) share one extra class. A malformed
    line (fewer than two columns, a word given twice) is a UserError naming the file and line.
    """
    index = {w: i for i, w in enumerate(words)}
    label_id: dict[str, int] = {}
    first_line: dict[str, int] = {}
    cls = np.full(len(words), -1, dtype=np.int64)
    seen: dict[str, int] = {}
    try:
        for n, line in enumerate(iter_lines(path), 1):
            if not line.strip():
                continue
            parts = line.rstrip("\r\n").split("\t")
            if not 2 <= len(parts) <= 3 or not parts[0] or not parts[1]:
                raise UserError(f"{path}:{n}: expected 'class<TAB>word[<TAB>count]', got {line.strip()[:60]!r}")
            label, word = parts[0], parts[1]
            _check_fields(path, n, label, word, parts[2] if len(parts) == 3 else None)
            first_line.setdefault(label, n)
            if word in seen:
                raise UserError(f"{path}:{n}: word {word!r} already given a class on line {seen[word]}")
            seen[word] = n
            if word in index:
                cls[index[word]] = label_id.setdefault(label, len(label_id))
    except OSError as e:
        raise read_error(path, e) from None
    if not label_id:
        raise UserError(f"{path}: no word of the vocabulary has a class")
    _check_tree_labels(path, first_line)
    missing = int((cls < 0).sum())
    if missing:
        cls[cls < 0] = len(label_id)
    # renumber densely (a label whose words are all outside the vocabulary takes no number)
    kept, cls = np.unique(cls, return_inverse=True)
    if not labels:
        return cls.astype(np.int64), missing
    names = [*label_id, None]
    return cls.astype(np.int64), missing, [names[k] for k in kept.tolist()]


def is_bit_path(label) -> bool:
    """Whether a class label is a path in a binary tree, as Brown clustering writes them (``0110``)."""
    return isinstance(label, str) and label != "" and set(label) <= {"0", "1"}


def _check_fields(path: str, n: int, label: str, word: str, count: str | None) -> None:
    """A UserError naming ``path:n`` for a label or word holding white space (a space typed for the tab would
    make a class named '1 just' of the word after the next tab) or a count that is not a whole number."""
    for what, text in (("class label", label), ("word", word)):
        if any(ch.isspace() for ch in text):
            raise UserError(f"{path}:{n}: {what} {text!r} holds white space; a line is 'class<TAB>word[<TAB>count]'")
    if count is not None and not count.strip().isdigit():
        raise UserError(f"{path}:{n}: count {count!r} is not a whole number")


def _check_tree_labels(path: str, first_line: dict[str, int]) -> None:
    """A file whose labels are mostly bit paths (a tree: ``classes --tree``, Liang's ``brown-cluster`` paths) but
    not all: one label typed wrong would turn the whole file into flat classes without a word, since ``hsm``
    arranges its tree by the paths only when every label is one. Decimal class numbers (the exchange algorithm's
    0, 1, 2, ...) hold few bit paths of two digits or more (10, 11, 100, ...), so they never count as a tree."""
    bits = [lab for lab in first_line if is_bit_path(lab)]
    others = [lab for lab in first_line if not is_bit_path(lab)]
    if others and 2 * len(bits) > len(first_line) and any(len(lab) > 1 for lab in bits):
        lab = min(others, key=first_line.get)
        raise UserError(f"{path}:{first_line[lab]}: class label {lab!r} is not a bit path, while {len(bits):,} of the "
                        f"file's {len(first_line):,} labels are (a tree's paths: hsm follows them only when every "
                        "label is one); correct the line, or give every class a plain name")


def check_class_file(path: str) -> str:
    """The absolute path of a readable word-classes file (the run directory must find it from anywhere)."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such word-classes file (make one with: sampledlm classes TRAIN -o FILE)")
    return os.path.abspath(path)
