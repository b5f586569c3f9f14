"""The memory budget of bounded estimation (:mod:`.external`): what ``--memory`` means, what this process
already takes, and how many elements a window holds beside it.

A budget counts the whole process: the interpreter and its libraries (:func:`current_rss`), what loads later
(``reserve``: the ARPA line kernels, :data:`ARPA_KERNELS`), and 80 % of the rest to work in, at
:data:`BYTES_PER_ELEMENT` bytes per windowed element. :func:`fit_window` sizes the window and the spill files held
in memory once the stream's length is known.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ...data.textio import CHUNK_BYTES
from ...errors import UserError
from ...memory import available_memory, current_rss, physical_memory  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    from .spill import Spill

BYTES_PER_ELEMENT = 160  # peak working bytes per windowed element (group_keys: index/inverse/counts, sorts)
MIN_WINDOW = 1024
MIN_WORKING = 96 << 20  # bytes a budget must leave above the process's footprint (a 1 MiB chunk of text, windows)
# numba and the compiled ARPA line kernels (arpa_lines), loaded when an ARPA file starts to be written: measured
# 130 MB of a 2-gram model's 172 MB peak on a 3-line text (a binary directory needs neither: 44 MB)
ARPA_KERNELS = 136 << 20


# bytes on disk per token at the spill's peak (the files of every stage that live at once), per order above 1 and
# for the id stream itself; measured peaks at 2.3M tokens of the Wikipedia text: 25, 52 and 120 B/token for orders
# 2, 3 and 5 (PTB, order 5: 113), where this gives 54, 84 and 144 -- a little above, since the n-grams per token
# fall as a corpus grows (2.0 at 165M tokens, order 5, against 2.85 at 2.3M)
SPILL_PER_ORDER = 30
SPILL_BASE = 24


def spill_need(tokens: int | None, order: int) -> int | None:
    """Bytes an order-``order`` bounded estimation of ``tokens`` tokens takes in its temporary directory at its
    peak, all files on disk (an estimate, on the high side: :data:`SPILL_PER_ORDER`); None when ``tokens`` is."""
    if tokens is None:
        return None
    return int(tokens) * (SPILL_BASE + SPILL_PER_ORDER * (int(order) - 1))


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
        given = next((f"{budget // unit}{suffix}" for unit, suffix in ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))
                      if budget >= unit and budget % unit == 0),
                     f"{budget / (1 << 20):.1f}M" if budget >= 1 << 20 else f"{budget:,} bytes")  # 1M, not 1024K
        raise UserError(f"--memory {given} is less than this process needs: the interpreter and "
                        f"its libraries take about {have >> 20} MiB, and bounded estimation needs "
                        f"{MIN_WORKING >> 20} MiB more to work in; give at least --memory {mib}M")


def window_for(budget: int, reserve: int = 0) -> int:
    """Elements per window: what the budget leaves above the interpreter's own footprint and ``reserve``."""
    return max(MIN_WINDOW, working_bytes(budget, reserve) // BYTES_PER_ELEMENT)


def working_bytes(budget: int, reserve: int) -> int:
    """Bytes to work in: 80 % of what the budget leaves above the process's footprint and ``reserve``."""
    return int((budget - current_rss() - reserve) * 0.8)


def held_while_reading(budget: int, reserve: int = 0, path: str | None = None) -> int:
    """Bytes of spill files held in memory while the text is read and padded: a corpus that fits in one window
    (:func:`window_for`) has at most 9 bytes a position in them (``raw`` 4, ``padded`` 4, ``pos`` 1). 0 when
    the text file ``path`` is too large to fit (4 bytes of text a position; compressed: 4:1), so that what
    those files would leave resident once moved to disk does not narrow the window of a large corpus."""
    from ...data.textio import file_size

    working = working_bytes(budget, reserve)
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
    sp.ram = sp.held + max(0, working_bytes(budget, reserve) - sp.window * BYTES_PER_ELEMENT)



#: an ARPA line's bytes besides its words (log10 probability, back-off weight, two tabs, the newline), about
ARPA_LINE_BYTES = 20
#: a binary model's bytes per n-gram, about (measured: PTB and War and Peace, orders 3 and 5)
BINARY_NGRAM_BYTES = 24


def output_need(words: list[str], unigram_counts, ngrams: list[int], binary: bool) -> int:
    """Bytes the model file (``binary``: directory) of ``ngrams[k-1]`` n-grams of each order k takes, an estimate:
    an ARPA line holds k words of the running text's mean length (``unigram_counts`` weigh ``words``). Measured on
    PTB and War and Peace at orders 3 and 5: 0.97-1.09x the ARPA file's size, 1.0x the binary directory's."""
    import numpy as np

    lengths = np.fromiter((len(w.encode("utf-8")) for w in words), dtype=np.float64, count=len(words))
    if binary:
        return int(sum(ngrams) * BINARY_NGRAM_BYTES + lengths.sum() + len(words))
    counts = np.asarray(unigram_counts, dtype=np.float64)[: len(words)]
    mean = float((counts * lengths).sum() / counts.sum()) if counts.sum() > 0 else float(lengths.mean())
    return int(sum(n * (ARPA_LINE_BYTES + k * (mean + 1)) for k, n in enumerate(ngrams, 1)))


#: the share of :func:`output_need` that must be free where the model goes, or the run is refused (the estimate was
#: within 9 % of the file's size where measured: a refusal is certain to be right)
OUTPUT_ROOM_SHARE = 0.8


def check_output_room(output: str, need: int, when: str) -> None:
    """A :class:`UserError` when the file system of ``output`` (its nearest existing directory) has less than
    :data:`OUTPUT_ROOM_SHARE` of ``need`` bytes free: said ``when`` (after counting, rather than hours later when
    the model is written)."""
    from ...memory import gigabytes
    from .spill import disk_free

    where = os.path.abspath(output)
    while not os.path.isdir(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    free = disk_free(where)
    if free is not None and free < OUTPUT_ROOM_SHARE * need:
        raise UserError(f"{output}: not enough free space for the model ({when}): it takes about "
                        f"{gigabytes(need)} and {gigabytes(free)} is free on that disk; free some room there, or "
                        "write the model elsewhere (-o), or prune it (--prune)")
