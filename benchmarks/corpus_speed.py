"""``corpus``: reading and encoding speed of the corpus pipeline (target: >= 2 M tokens/s on PTB train).

Measures, on the training file (PTB; ``--data``; ``--quick``: the built-in corpus), best of a few
runs with the cache off:

- count: read + tokenise + count words (what ``sampledlm vocab`` does);
- encode: read + tokenise + map to int32 ids (what the cache is built from);
- mmap: loading the cached stream (memory-mapped ``.npy``).

Tokens/s counts every prediction of the stream (words + ``</s>``).
"""

from __future__ import annotations

import os
import time

from .report import lm_data, new_figure, stamp, table, work_dir, write_page

NAME = "corpus"
TARGET = 2e6  # tokens/s for reading and encoding


def best_of(n: int, fn):
    times, out = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    from sampledlm.data.corpus import build_vocab, encode_file, load_ids

    meta = stamp()
    work = work_dir(NAME, quick)
    files, label = lm_data(data_dir, quick, os.path.join(work, "data"))
    train, repeats = files["train"], (2 if quick else 5)
    t_count, vocab = best_of(repeats, lambda: build_vocab(train))
    t_encode, ids = best_of(repeats, lambda: encode_file(train, vocab))
    n = len(ids)
    cache = os.path.join(work, "cache")  # a cache of its own: the mmap row reads a fresh copy
    before = os.environ.get("SAMPLEDLM_CACHE")
    os.environ["SAMPLEDLM_CACHE"] = cache
    try:
        load_ids(train, vocab)
        t_mmap, _ = best_of(repeats, lambda: load_ids(train, vocab))
    finally:
        if before is None:
            os.environ.pop("SAMPLEDLM_CACHE", None)
        else:
            os.environ["SAMPLEDLM_CACHE"] = before
    rows = [{"stage": "count (vocab)", "seconds": t_count, "tokens_per_s": n / t_count},
            {"stage": "encode to int32", "seconds": t_encode, "tokens_per_s": n / t_encode},
            {"stage": "load cached stream (mmap)", "seconds": t_mmap, "tokens_per_s": n / t_mmap}]
    data = {"setup": {"data": label, "file": os.path.basename(train), "predictions": n, "vocabulary": len(vocab),
                      "repeats": repeats, "quick": quick}, "rows": rows}
    enc = rows[1]["tokens_per_s"]
    body = "\n".join([
        f"Data: {label}, `{os.path.basename(train)}`: {n:,} predictions (words + `</s>`), vocabulary {len(vocab):,}. "
        f"Best of {repeats} runs each.", "",
        table(["stage", "seconds", "tokens/s"],
              [[r["stage"], f"{r['seconds']:.3f}", f"{r['tokens_per_s'] / 1e6:.2f} M"] for r in rows]), "",
        f"![tokens/s per stage]({NAME}.png)", "",
        "## Against the target", "",
        f"Reading and encoding at >= {TARGET / 1e6:.0f} M tokens/s: encoding "
        f"{'meets' if enc >= TARGET else 'DOES NOT meet'} it ({enc / 1e6:.2f} M tokens/s).",
    ])
    fig, ax = new_figure(figsize=(7, 3.2))
    ax.barh([r["stage"] for r in rows], [r["tokens_per_s"] / 1e6 for r in rows], color="C0")
    ax.axvline(TARGET / 1e6, color="C3", ls="--", label=f"target {TARGET / 1e6:.0f} M/s")
    ax.set_xscale("log")
    ax.set_xlabel("million tokens/s (log scale)")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    write_page(out_dir, NAME, "Corpus reading and encoding speed", meta, data, body, figure=fig)
    return data
