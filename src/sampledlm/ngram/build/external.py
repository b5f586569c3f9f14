"""Kneser-Ney estimation within a memory budget: the stages of :mod:`.estimate` over sorted runs, the one
pipeline that ``mkn`` and ``kn`` models are estimated by (as lmplz is one pipeline whatever its ``-S``).

The in-memory estimator (:func:`.estimate.train_ngram`) holds every n-gram of every order at once (about 180
bytes each). Here the same numbers are computed with at most a *window* of elements in memory at any time (the
window follows from the budget: ``--memory``, or half the available memory), the rest living in flat files of
a :class:`~.spill.Spill` -- held in memory while the budget leaves room beside the window, so that a corpus that
fits in one window writes nothing to disk, spilled to its directory otherwise (:func:`.budget.fit_window`). The tables
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

This module is the pipeline (:func:`train_bounded`); each stage is a module of its own: the budget
(:mod:`.budget`), the id stream in windows (:mod:`.id_stream`), stages 1-2 (:mod:`.count_stream`, or
:mod:`.dask_bounded` on a cluster), 3-4 (:mod:`.kn_stream`) and 5 (:mod:`.arpa_stream`, :mod:`.binary_stream`).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from ... import progress
from ...data.vocab import BOS, Vocab
from ...errors import UserError
from .arpa_stream import PYTHON_BYTES_PER_LINE, PYTHON_LINES, write_arpa_held, write_arpa_streaming
from .budget import (ARPA_KERNELS, MIN_WINDOW, check_budget, check_output_room, fit_window, held_while_reading,
                     output_need, spill_need, text_chunk_bytes, window_for, working_bytes)
from .count_stream import count_order, pad
from .counts import check_order_supported
from .estimate import _log10
from .id_stream import TokenMeter, read_text, rechunk
from .kn_stream import adjusted, context_weights, counts_of_counts, interpolate_order
from .kneser_ney import discounts_from_n
from .prune import parse_thresholds
from .spill import Spill, heap_kept

STREAMING = ("mkn", "kn")


def check_streaming(smoothing: str) -> None:
    """A :class:`UserError` for a smoothing that bounded estimation cannot stream."""
    if smoothing not in STREAMING:
        raise UserError(f"--smoothing {smoothing} needs the whole model in memory; bounded estimation (--memory) "
                        f"streams {' and '.join(STREAMING)} only: leave out --memory for {smoothing}")


def train_bounded(chunks, vocab: Vocab | None, order: int, output: str, memory: int, temp_dir: str | None = None,
                  smoothing: str = "mkn", prune: list[int] | None = None, text: tuple | None = None,
                  binary: bool = False, locked: bool = False, dask: tuple | None = None,
                  window: int | None = None, ram: int | None = None, meter: TokenMeter | None = None) -> dict:
    """Estimate an order-``order`` Kneser-Ney model from the id stream windows ``chunks`` into the ARPA ``output``.

    ``memory``: the byte budget for the whole process (module docstring). ``text``: instead of
    ``chunks`` and ``vocab``, ``(path, TextOptions)`` of a text read once for both (:func:`.id_stream.read_text`).
    ``binary``: ``output`` is a binary model directory (:mod:`.binary_stream`; no ARPA text is written);
    ``locked``: the caller holds that directory's lock (:func:`.mapped.lock_directory`). ``dask``:
    ``(scheduler address or None, local workers)`` to count on a Dask cluster (:mod:`.dask_bounded`; the
    same model). ``window``: elements per window instead of what the budget leaves, the budget then
    unchecked (tests and the demo: many sorted runs from a small corpus). ``ram``: bytes of spill files held
    in memory instead of on disk (``None``: what the budget leaves beside the window, all of them when the
    corpus fits in one window; 0 with ``window`` given). ``meter``: counts the tokens ``chunks`` reads from
    its text (:class:`.id_stream.TokenMeter`), for the check of the temporary directory's free space before the
    first spill (:meth:`.spill.Spill.check_room`; without it the check waits until the stream's length is known).
    Returns a report: n-grams per order, vocabulary size, discounts, the window, bytes spilled,
    seconds per stage.
    """
    check_streaming(smoothing)
    if not isinstance(order, (int, np.integer)) or not 1 <= order <= 254:
        from ...config import setting_value

        raise UserError(f"{setting_value('order', order)}: Kneser-Ney (mkn, kn) estimation takes an integer 1 .. 254")
    thresholds = parse_thresholds(prune or [], int(order))
    info: dict = {"smoothing": smoothing, "order": order, "memory": memory, "seconds": {}}
    t = time.perf_counter()
    reserve = 0 if binary or "sampledlm.ngram.arpa_lines" in sys.modules else ARPA_KERNELS
    fixed = ram is not None or window is not None
    if window is None:
        check_budget(memory, reserve)
    ram = (ram or 0) if fixed else held_while_reading(memory, reserve, text[0] if text is not None else None)
    if text is not None:
        meter = TokenMeter(text_size(text[0]))
    with Spill(temp_dir, MIN_WINDOW, ram) as sp, heap_kept(memory):
        sp.estimate = lambda: spill_need(meter.expected() if meter is not None else None, order)
        if text is not None:
            vocab, chunks = read_text(sp, *text, chunk_bytes=text_chunk_bytes(memory, reserve) if window is None
                                      else 1 << 20, meter=meter)
        # sized after reading the text: what its strings leave resident (the allocator keeps freed arenas)
        # counts against the budget
        sp.window = info["window"] = window_for(memory, reserve) if window is None else int(window)
        info["vocabulary"] = len(vocab)
        sp.W = len(vocab) + 1
        uni, sizes = _count(sp, chunks, order, vocab.bos_id, dask, None if fixed else (memory, reserve), info)
        info["seconds"]["count"] = round(time.perf_counter() - t, 3)
        words = list(vocab.words) + [BOS]
        if not any(thresholds[1:]):  # every n-gram counted is written: the output's size is known now
            check_output_room(output, output_need(words, uni, sizes, binary), "found after counting")
        modified = smoothing == "mkn"
        _unigrams(sp, uni, order, vocab.bos_id, modified, info)
        t = time.perf_counter()
        ds = _adjust(sp, order, vocab.bos_id, modified, sizes, info)
        info["seconds"]["adjust"] = round(time.perf_counter() - t, 3)
        t = time.perf_counter()
        kept = _interpolate(sp, order, ds, thresholds, sizes)
        info["seconds"]["interpolate"] = round(time.perf_counter() - t, 3)
        check_output_room(output, output_need(words, uni, kept, binary), "found before writing it")
        t = time.perf_counter()
        _write(sp, output, words, order, thresholds, kept, sizes, memory, binary, locked, info)
        info["seconds"]["write"] = round(time.perf_counter() - t, 3)
        info["ngrams"] = kept
        info["spilled_bytes"] = sp.spilled
        if any(thresholds[1:]):
            info["prune"] = thresholds
    return info


def text_size(path: str) -> int | None:
    """Bytes of the text ``path`` once decompressed: its size, 4x for a compressed one (about what text
    compresses by; the check after reading has the exact length); None for standard input."""
    from ...data.textio import COMPRESSED_SUFFIXES, file_size

    size = file_size(path)
    return size * 4 if size is not None and path.endswith(COMPRESSED_SUFFIXES) else size


def _counted(chunks, bar):
    """The windows ``chunks``, each one's length added to the progress ``bar`` as it is taken."""
    for c in chunks:
        bar.update(len(c))
        yield c


def _room_known(sp: Spill, tokens: int, order: int) -> None:
    """Once the stream's length is known (and the window fitted to it): the free-space check again, exact."""
    sp.estimate = lambda: spill_need(tokens, order)
    sp.check_room()


def _count(sp: Spill, chunks, order: int, bos: int, dask: tuple | None, budget: tuple | None,
           info: dict) -> tuple[np.ndarray, list[int]]:
    """Stages 1 and 2: the stream padded and counted here (:mod:`.count_stream`) or by Dask's workers
    (:mod:`.dask_bounded`), the window then fitted to the stream (:func:`.budget.fit_window`, unless the window or
    the held bytes were given: ``budget`` None, else ``(memory, reserve)``). Unigram counts and n-grams per order."""
    W = sp.W
    if dask is not None:  # counted by the workers, merged here (:mod:`.dask_bounded`)
        from .dask_bounded import count_on_dask

        with progress.bar(desc="count on dask", unit="tok") as bar:
            uni, tokens, sizes, info["dask"] = count_on_dask(sp, rechunk(chunks, sp.window), W, order, bos, *dask,
                                                             bar=bar)
        sp.remove("raw")
        check_order_supported(sizes, order)
        if budget is not None:
            fit_window(sp, *budget, max(sizes))
        _room_known(sp, tokens, order)
    else:
        with progress.bar(total=sp.length("raw") or None, desc="pad", unit="tok") as bar:  # raw: a text's ids
            uni, tokens = pad(sp, _counted(rechunk(chunks, sp.window), bar), W, bos)
        sp.remove("raw")
        positions = sp.length("padded")
        if budget is not None:
            fit_window(sp, *budget, max(positions, W))
        _room_known(sp, tokens, order)
        sizes = [W]
        for k in range(2, order + 1):
            with progress.bar(total=positions, desc=f"count {k}-grams", unit="pos") as bar:
                sizes.append(count_order(sp, k, W, k < order, bar))
            check_order_supported(sizes, order)
        sp.remove("padded", "pos")
    info["tokens"], info["window"] = tokens, sp.window
    return uni, sizes


def _unigrams(sp: Spill, uni: np.ndarray, order: int, bos: int, modified: bool, info: dict) -> None:
    """Order 1 in memory, exactly as kneser_ney + interpolate compute it: ``prob_1`` and ``logp_1``; its
    discounts (and whether they fell back) recorded in ``info``."""
    W, V = sp.W, sp.W - 1
    if order == 1:
        a1 = uni.astype(np.float64)
    else:
        sp.create("cont_1", np.int64, W)
        for _, sfx in sp.chunks("sfx_2"):
            sp.count_at("cont_1", sfx)
        a1 = sp.read("cont_1").astype(np.float64)
        a1[bos] = uni[bos]
    a1[bos] = 0
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


def _adjust(sp: Spill, order: int, bos: int, modified: bool, sizes: list[int], info: dict) -> dict[int, np.ndarray]:
    """Stage 3 for orders 2..n: adjusted counts and their discounts (recorded in ``info``), by order."""
    ds = {}
    with progress.bar(total=sum(sizes[1:]), desc="adjust", unit="ngram") as bar:
        for k in range(2, order + 1):
            adjusted(sp, k, order, bos)
            dk, fb = discounts_from_n(counts_of_counts(sp, f"a_{k}"), modified)
            ds[k] = dk
            info["discounts"].append([round(float(x), 6) for x in dk[1:]])
            if fb:
                info["fallback_orders"].append(k)
            bar.update(sizes[k - 1])
    return ds


def _interpolate(sp: Spill, order: int, ds: dict, thresholds: list[int], sizes: list[int]) -> list[int]:
    """Stage 4, bottom up: each order's probabilities and its context's back-off weights; the n-grams kept per
    order (count pruning drops those at or below its threshold)."""
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
    return kept


def _write(sp: Spill, output: str, words: list[str], order: int, thresholds: list[int], kept: list[int],
           sizes: list[int], memory: int, binary: bool, locked: bool, info: dict) -> None:
    """Stage 5: the binary directory, or the ARPA file (held and written at once when small, else streamed)."""
    if binary:
        from .binary_stream import write_binary_streaming

        model_info = {"smoothing": info["smoothing"], "order": int(order), "ngrams": kept,
                      "discounts": info["discounts"], "fallback_orders": info["fallback_orders"],
                      "estimation": "bounded"}
        if any(thresholds[1:]):
            model_info["prune"] = thresholds
        write_binary_streaming(sp, output, words, order, thresholds, kept, model_info, locked=locked)
    elif (sum(kept) <= PYTHON_LINES and "sampledlm.ngram.arpa_lines" not in sys.modules
          and sum(kept) * PYTHON_BYTES_PER_LINE <= working_bytes(memory, 0)):
        write_arpa_held(sp, output, words, order, thresholds)
    else:
        with progress.bar(total=sum(sizes), desc="write ARPA", unit="ngram") as bar:
            write_arpa_streaming(sp, output, words, order, thresholds, kept, bar)
