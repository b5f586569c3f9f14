"""End-to-end training speed against the vocabulary size: ``sampledlm train`` tokens/s, as the trainer
reports it, on synthetic Zipf text at several V, for one or more source trees run side by side.

Setting. Words ``w0 .. w{V-3}`` (with ``</s>`` and ``<unk>``: V predicted words) drawn i.i.d. from
Zipf(1), ``p(w_r) ∝ 1 / (r + 1)``; sentences of 1-40 words (uniform); ``tokens`` training tokens and
``valid_tokens`` validation tokens (a small file: the exact validation pass is O(V) per token and is
not counted in tokens/s). The vocabulary file lists all V words with the counts of
:func:`~sampledlm.bench.scaling.zipf_counts`, so the model predicts V words even where the sample of
text never shows most of them (at V = 1M, 400k tokens see about a tenth of the words): the setting of
a user whose vocabulary comes from a larger corpus than the one run's text.

Each measurement is one ``python -m sampledlm train ... --epochs 1`` in a fresh process with
``PYTHONPATH`` set to one source tree; tokens/s is the ``tokens_per_s`` of its ``metrics.jsonl``
(training steps only: neither start-up nor the validation pass). The sides (source trees) are
alternated within each round, their order reversed every other round, so that load from other
processes spreads over them evenly.

Call it from Python::

    from sampledlm.bench.train_speed import ZIPF_RUNS, compare, jobs_for, summary, zipf_corpora
    jobs = jobs_for(ZIPF_RUNS, zipf_corpora("/tmp/train-speed", [10_000, 1_000_000]))
    rows = compare({"before": "/tmp/base/src", "after": "src"}, jobs, rounds=2, work="/tmp/train-speed")
    print(summary(rows))

or ``python -m sampledlm.bench.train_speed --side before=/tmp/base/src --side after=src -o rows.json``
(``--help``: PTB or other corpora beside the Zipf ones, a shorter text for a slow side).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

#: the runs of the acceptance check: name -> ``sampledlm train`` flags (each model's own defaults otherwise)
#: (the feed-forward model's exact validation takes 128 distinct histories at a time: its default 1,024 would
#: hold 1,024 x V scores, 4 GB at V = 1M; validation is not part of tokens/s)
ZIPF_RUNS: dict[str, list[str]] = {
    "ffnn css-is": ["--model", "ffnn", "--objective", "css-is", "--eval-batch", "128"],
    "gru (tied) css-is": ["--model", "gru", "--tie", "--objective", "css-is"],
}


def zipf_corpus(out_dir: str, V: int, tokens: int = 400_000, valid_tokens: int = 2_000, seed: int = 0) -> dict:
    """Write ``train.txt``, ``valid.txt`` and ``vocab.txt`` (V predicted words) into ``out_dir``; returns
    their paths. Deterministic in ``(V, tokens, valid_tokens, seed)``; an existing complete set is reused."""
    from ..data.textio import atomic_write
    from .scaling import zipf_counts

    os.makedirs(out_dir, exist_ok=True)
    files = {k: os.path.join(out_dir, f"{k}.txt") for k in ("train", "valid", "vocab")}
    done = os.path.join(out_dir, "done.json")
    spec = {"V": V, "tokens": tokens, "valid_tokens": valid_tokens, "seed": seed}
    if os.path.exists(done) and json.load(open(done)) == spec:
        return files
    n = V - 2  # </s> and <unk> are the other two predicted words
    counts = zipf_counts(n)
    with atomic_write(files["vocab"]) as f:
        f.write(f"</s>\t{int(counts[0])}\n<unk>\t0\n")
        f.write("".join(f"w{r}\t{int(c)}\n" for r, c in enumerate(counts.tolist())))
    rng = np.random.default_rng([seed, V])
    p = 1.0 / np.arange(1, n + 1)
    cdf = np.cumsum(p / p.sum())
    for name, total in (("train", tokens), ("valid", valid_tokens)):
        lines, k = [], 0
        while k < total:
            length = int(rng.integers(1, 41))
            ranks = np.minimum(np.searchsorted(cdf, rng.random(length)), n - 1)
            lines.append(" ".join(f"w{r}" for r in ranks.tolist()))
            k += length + 1  # the </s> is predicted too
        with atomic_write(files[name]) as f:
            f.write("\n".join(lines) + "\n")
    with open(done, "w") as f:
        json.dump(spec, f)
    return files


def train_once(src: str, files: dict, flags: list[str], run_dir: str, threads: int = 1, seed: int = 1) -> dict:
    """One epoch of ``sampledlm train`` with the package at ``src``: ``{"tokens_per_s", "valid_ppl",
    "train_loss", "wall_s"}`` (``wall_s``: the whole process, start-up and validation included)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [sys.executable, "-m", "sampledlm", "train", "--train", files["train"], "--valid", files["valid"],
           *(["--vocab", files["vocab"]] if files.get("vocab") else []), *flags,
           "--epochs", "1", "--seed", str(seed), "--threads", str(threads), "-o", run_dir]
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        m = json.loads(f.readline())
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"tokens_per_s": m["tokens_per_s"], "valid_ppl": m["valid_ppl"], "train_loss": m["train_loss"],
            "wall_s": wall}


def jobs_for(runs: dict[str, list[str]], corpora: dict[str, dict]) -> list[dict]:
    """Every run on every corpus: ``[{"run", "flags", "corpus", "files"}]``."""
    return [{"run": r, "flags": f, "corpus": c, "files": files} for r, f in runs.items() for c, files in corpora.items()]


def zipf_corpora(work: str, sizes: list[int], tokens: int = 400_000, valid_tokens: int = 2_000) -> dict[str, dict]:
    """``{"zipf V=10,000": files, ...}``: :func:`zipf_corpus` at each V."""
    return {f"zipf V={V:,}": zipf_corpus(os.path.join(work, f"zipf-{V}-{tokens}"), V, tokens, valid_tokens)
            for V in sizes}


def compare(sides: dict[str, str], jobs: list[dict], rounds: int, work: str, threads: int = 1, log=print,
            replace: dict[tuple[str, str], dict] | None = None) -> list[dict]:
    """Tokens/s of every job (:func:`jobs_for`) for every side (label -> the source directory holding
    ``sampledlm``), alternating the sides within each round and reversing their order every other round.

    ``replace``: ``{(side, corpus): files}``, other files for one side on one corpus (a shorter training text
    where that side is too slow to train a whole one; tokens/s is a rate, so it stays comparable).
    Returns one row per (job, side, round); :func:`summary` reduces them.
    """
    rows = []
    labels = list(sides)
    for r in range(rounds):
        order = labels if r % 2 == 0 else labels[::-1]
        for job in jobs:
            for side in order:
                files = (replace or {}).get((side, job["corpus"]), job["files"])
                out = train_once(sides[side], files, job["flags"], os.path.join(work, "run"), threads)
                row = {"run": job["run"], "corpus": job["corpus"], "side": side, "round": r,
                       "train_file": files["train"], **out}
                rows.append(row)
                log(f"{job['run']:>20} {job['corpus']:>16} {side:>8} round {r}: {out['tokens_per_s']:9,.0f} tok/s  "
                    f"valid ppl {out['valid_ppl']:10.1f}  ({out['wall_s']:.0f} s)")
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Median tokens/s (and the first round's valid ppl) per (run, corpus, side)."""
    keys = list(dict.fromkeys((r["run"], r["corpus"], r["side"]) for r in rows))
    out = []
    for run, corpus, side in keys:
        sel = [r for r in rows if (r["run"], r["corpus"], r["side"]) == (run, corpus, side)]
        out.append({"run": run, "corpus": corpus, "side": side, "tokens_per_s": statistics.median(
            r["tokens_per_s"] for r in sel), "all_tokens_per_s": [r["tokens_per_s"] for r in sel],
            "valid_ppl": sel[0]["valid_ppl"]})
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--side", action="append", required=True, help="LABEL=SRC_DIR (repeat)")
    ap.add_argument("--size", type=int, action="append", help="V (repeat) [10,000 and 1,000,000]")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=400_000)
    ap.add_argument("--valid-tokens", type=int, default=2_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--short", action="append", default=[], metavar="SIDE:V=TOKENS",
                    help="SIDE trains on only TOKENS Zipf tokens at V (a side too slow for the whole text; repeat)")
    ap.add_argument("--data", action="append", default=[], metavar="LABEL=TRAIN,VALID",
                    help="another corpus, measured with --data-run (repeat)")
    ap.add_argument("--run", action="append", default=[], metavar="NAME=FLAGS",
                    help="runs on the Zipf corpora instead of ZIPF_RUNS, e.g. 'ffnn softmax=--model ffnn' (repeat)")
    ap.add_argument("--data-run", action="append", default=[], metavar="NAME=FLAGS",
                    help="runs on the --data corpora (repeat; default: --run's or ZIPF_RUNS)")
    ap.add_argument("--work", default="/tmp/sampledlm-train-speed")
    ap.add_argument("-o", "--output", help="write the rows and the summary here (JSON)")
    a = ap.parse_args(argv)
    sides = dict(s.split("=", 1) for s in a.side)
    runs = {k: v.split() for k, v in (r.split("=", 1) for r in a.run)} or ZIPF_RUNS
    data_runs = {k: v.split() for k, v in (r.split("=", 1) for r in a.data_run)} or runs
    sizes = a.size or [10_000, 1_000_000]
    jobs = jobs_for(runs, zipf_corpora(a.work, sizes, a.tokens, a.valid_tokens))
    data = {}
    for d in a.data:
        label, paths = d.split("=", 1)
        train, valid = paths.split(",")
        data[label] = {"train": train, "valid": valid}
    jobs += jobs_for(data_runs, data)
    replace = {}
    for sh in a.short:
        side, rest = sh.split(":", 1)
        V, n = (int(x) for x in rest.split("="))
        replace[(side, f"zipf V={V:,}")] = zipf_corpora(a.work, [V], n, a.valid_tokens)[f"zipf V={V:,}"]
    rows = compare(sides, jobs, a.rounds, a.work, a.threads, replace=replace)
    summ = summary(rows)
    for s in summ:
        print(f"{s['run']:>20} {s['corpus']:>16} {s['side']:>8}: {s['tokens_per_s']:9,.0f} tok/s (median of "
              f"{len(s['all_tokens_per_s'])})  valid ppl {s['valid_ppl']:.1f}")
    if a.output:
        with open(a.output, "w") as f:
            json.dump({"argv": sys.argv if argv is None else argv, "rows": rows, "summary": summ}, f, indent=1)


if __name__ == "__main__":
    main()
