"""The data path at 165M tokens (issue 56, deliverable 6): a neural run over the whole training text.

    python -m benchmarks.large_vocab datapath --data /work/data/wiki --work /work/data/wiki-runs

``sampledlm train`` of the default GRU with NCE on the corpus's whole ``train.txt`` (165M tokens, the count >= 3
vocabulary given with ``--vocab``), stopped after :data:`STEPS` optimiser steps (``--max-steps``: an epoch of this
text is about 4.5 CPU-hours), one thread, timed as a process (wall, CPU, peak RSS) twice:

- ``cold``: a fresh id cache (``SAMPLEDLM_CACHE`` pointed at an empty folder): the text hashed, read and encoded
  into its id stream (``int32``, written as a ``.npy`` file and memory-mapped from there);
- ``warm``: the same command again: the id stream memory-mapped from the cache, nothing encoded.

The training loop's own CPU seconds come from the run's ``metrics.jsonl``; the rest of the process (reading and
encoding the text, building the model and its optimiser state for 485k rows, writing the model) is the difference.
Rows ``datapath/cold`` and ``datapath/warm`` of ``benchmarks/notes/large-vocab.jsonl``.
"""

from __future__ import annotations

import json
import os
import shutil

STEPS = 300


def step(data: str, work: str, rows_path: str, steps: int = STEPS) -> None:
    from .large_vocab_record import append_row, read_rows, sampledlm, timed

    sp = os.path.join(work, "speed")
    valid, vocab = os.path.join(sp, "valid-tiny.txt"), os.path.join(sp, "vocab-full.txt")
    if not (os.path.isfile(valid) and os.path.isfile(vocab)):
        raise SystemExit(f"datapath: needs the speed step's {valid} and {vocab}: run the speed step first")
    base = os.path.join(work, "datapath")
    cache = os.path.join(base, "id-cache")
    rows = read_rows(rows_path)
    for kind in ("cold", "warm"):
        key = f"datapath/{kind}"
        if rows.get(key, {}).get("rc") == 0:
            continue
        if kind == "cold":
            shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(cache, exist_ok=True)
        run_dir = os.path.join(base, f"run-{kind}")
        shutil.rmtree(run_dir, ignore_errors=True)
        argv = sampledlm("train", "--train", os.path.join(data, "train.txt"), "--valid", valid, "--vocab", vocab,
                         "--model", "gru", "--objective", "nce", "--device", "cpu", "--threads", "1",
                         "--max-steps", str(steps), "-o", run_dir)
        env_before = os.environ.get("SAMPLEDLM_CACHE")
        os.environ["SAMPLEDLM_CACHE"] = cache
        try:
            r = timed(argv)
        finally:
            if env_before is None:
                os.environ.pop("SAMPLEDLM_CACHE", None)
            else:
                os.environ["SAMPLEDLM_CACHE"] = env_before
        r.pop("stdout", None)
        row = {"key": key, "rc": r["rc"], "steps": steps, "process": r,
               "command": "SAMPLEDLM_CACHE=... " + " ".join(argv)}
        if r["rc"] == 0:
            with open(os.path.join(run_dir, "metrics.jsonl")) as f:
                m = json.loads(f.readline())
            npy = [os.path.join(cache, n) for n in os.listdir(cache) if n.startswith("train.txt.")]
            row.update(train_cpu_s=m["cpu_s"], tokens_per_wall_s=m["tokens_per_s"],
                       epoch_fraction=m.get("epoch_fraction"),
                       id_stream_mb=round(sum(os.path.getsize(p) for p in npy) / 2**20, 1),
                       outside_loop_cpu_s=round(r["cpu_s"] - m["cpu_s"], 1))
        append_row(row, rows_path)
        shutil.rmtree(run_dir, ignore_errors=True)  # 1.5 GB of weights and optimiser state
    shutil.rmtree(cache, ignore_errors=True)


def lines(rows: dict) -> list[str]:
    """The page's paragraph, or nothing when not yet run."""
    got = {k: rows.get(f"datapath/{k}") for k in ("cold", "warm")}
    if not all(v and v.get("rc") == 0 for v in got.values()):
        return []
    c, w = got["cold"], got["warm"]
    out = ["", "### The data path at 165M tokens", "",
           f"`sampledlm train` of the default GRU with NCE on the whole training text (165M tokens, V = 485k), "
           f"stopped after {c['steps']} steps (`--max-steps`), one thread (`benchmarks/large_vocab_datapath.py`):", "",
           "| id cache | process wall s | process CPU s | training loop CPU s | rest of the process CPU s | "
           "peak RSS MB |", "|---|---|---|---|---|---|"]
    for name, r in (("cold: text hashed, read and encoded", c), ("warm: id stream memory-mapped", w)):
        p = r["process"]
        out.append(f"| {name} | {p['wall_s']:.0f} | {p['cpu_s']:.0f} | {r['train_cpu_s']:.0f} | "
                   f"{r['outside_loop_cpu_s']:.0f} | {p['peak_mb']:,.0f} |")
    out += ["", f"The id stream is {c['id_stream_mb']:,.0f} MB of int32 on disk, memory-mapped; encoding the text "
            f"cost {c['outside_loop_cpu_s'] - w['outside_loop_cpu_s']:.0f} CPU s once (the cold run's process less "
            "the warm one's, outside the training loop)."]
    return out
