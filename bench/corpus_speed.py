"""Reading and encoding speed of the corpus pipeline (issue 2: >= 2 M tokens/s on PTB train).

Measures, on one file, best of --repeats runs with the cache off:
  count   : read + tokenise + count words (what `sampledlm vocab` does)
  encode  : read + tokenise + map to int32 ids (what the cache is built from)
  mmap    : loading the cached stream (memory-mapped .npy)
Tokens/s counts every prediction of the stream (words + </s>).

    python bench/corpus_speed.py [--train ../shared/data/ptb/ptb.train.txt] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

from _report import REPO, stamp, write_results

from sampledlm.data.corpus import build_vocab, encode_file, load_ids


def best_of(n: int, fn):
    times = []
    out = None
    for _ in range(n):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", default=os.path.join(REPO, "..", "shared", "data", "ptb", "ptb.train.txt"))
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    if not os.path.exists(args.train):
        sys.exit(f"corpus_speed: {args.train} not found (PTB lives in ../shared/data/ptb; pass --train FILE)")

    t_count, vocab = best_of(args.repeats, lambda: build_vocab(args.train))
    t_encode, ids = best_of(args.repeats, lambda: encode_file(args.train, vocab))
    n = len(ids)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["SAMPLEDLM_CACHE"] = cache
        load_ids(args.train, vocab)
        t_mmap, _ = best_of(args.repeats, lambda: load_ids(args.train, vocab))

    rows = [
        {"stage": "count (vocab)", "seconds": t_count, "tokens_per_s": n / t_count},
        {"stage": "encode to int32", "seconds": t_encode, "tokens_per_s": n / t_encode},
        {"stage": "load cached stream (mmap)", "seconds": t_mmap, "tokens_per_s": n / t_mmap},
    ]
    body = [
        f"File: `{os.path.relpath(args.train, REPO)}`: {n:,} predictions (words + `</s>`), vocabulary {len(vocab):,}.",
        f"Best of {args.repeats} runs each. Target (issue 2): reading and encoding at >= 2 M tokens/s.",
        "",
        "| stage | seconds | tokens/s |",
        "|---|---:|---:|",
    ]
    body += [f"| {r['stage']} | {r['seconds']:.3f} | {r['tokens_per_s'] / 1e6:.2f} M |" for r in rows]
    verdict = "meets" if rows[1]["tokens_per_s"] >= 2e6 else "DOES NOT meet"
    body += ["", f"Encoding {verdict} the 2 M tokens/s target ({rows[1]['tokens_per_s'] / 1e6:.2f} M tokens/s)."]
    mpath, _ = write_results("corpus", "Corpus reading and encoding speed", stamp(), rows, "\n".join(body))
    print(open(mpath).read())


if __name__ == "__main__":
    main()
