"""Training speed against V in steady state (issue 56, deliverable 5): the speed step's runs, two epochs each.

    python -m benchmarks.large_vocab steady --data /work/data/wiki --work /work/data/wiki-runs

The speed step (``speed/...`` rows) times one pass over its 300,000-token prefix: a few hundred steps, so its
figure holds what a run pays once (the first touch of the output rows' and optimiser state's memory, the
allocator's first large blocks, numba's compiled kernels loaded) spread over few words, and that share grows
with V. The budgeted neural rows at V = 485k ran 1.25-1.31x (NCE) and 1.14x (IS) the speed rows' words per CPU
second over their first few thousand steps. This step trains the same prefixes (V = 10k PTB, 100k, 485k; the
speed step's ``train-*.txt`` and ``vocab-*.txt``) for two epochs and reports the second epoch's words per CPU
second (``metrics.jsonl``: the CPU seconds are cumulative, so epoch 2's are the difference), the rows' memory
already touched, as in a long run. It reads the same words again, so it leaves out the first touch of rows a
long run meets later (a page fault per 4 KiB of rows and their Adam state: small against a step). For each
objective the three V run one after another (10k, 485k, 100k), so the ratio comes from one stretch of the
machine's load. Rows ``steady/{objective}/{10k|100k|full}``.
"""

from __future__ import annotations

import json
import os
import shutil

EPOCHS = 2


def step(work: str, rows_path: str, objectives: tuple[str, ...], again: tuple[str, ...] = ()) -> None:
    from .large_vocab_record import append_row, read_rows, sampledlm, timed

    sp = os.path.join(work, "speed")
    valid = os.path.join(sp, "valid-tiny.txt")
    if not os.path.isfile(valid):
        raise SystemExit(f"steady: needs the speed step's files in {sp}: run the speed step first")
    rows = read_rows(rows_path)
    for obj in objectives:
        for name in ("10k", "full", "100k"):
            key = f"steady/{obj}/{name}"
            train = os.path.join(sp, f"train-{name}.txt")
            base = rows.get(f"speed/{obj}/{name}")
            if (rows.get(key, {}).get("rc") == 0 and obj not in again) or not os.path.isfile(train) or not base:
                continue
            vocab = [] if name == "10k" else ["--vocab", os.path.join(sp, f"vocab-{name}.txt")]
            run_dir = os.path.join(sp, f"steady-{obj}-{name}")
            shutil.rmtree(run_dir, ignore_errors=True)
            argv = sampledlm("train", "--train", train, "--valid", valid, *vocab, "--model", "gru", "--objective",
                             obj, "--device", "cpu", "--threads", "1", "--epochs", str(EPOCHS), "-o", run_dir)
            r = timed(argv)
            r.pop("stdout", None)
            row = {"key": key, "objective": obj, "V": name, "tokens": base["tokens"], "rc": r["rc"], "process": r,
                   "command": " ".join(argv)}
            if r["rc"] == 0:
                with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
                    m = [json.loads(line) for line in f if line.strip()]
                cpu = [m[0]["cpu_s"], m[-1]["cpu_s"] - m[-2]["cpu_s"]]
                with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
                    options = json.load(f).get("objective", {}).get("options", {})  # defaults change over time
                row.update(epoch_cpu_s=cpu, words_per_cpu_s=[base["tokens"] / c for c in cpu],
                           objective_options=options)
            rows[key] = append_row(row, rows_path)
            shutil.rmtree(run_dir, ignore_errors=True)  # a run at V = 485k holds GBs of weights and Adam state


def lines(rows: dict, vfull: str) -> list[str]:
    """The page's table of the steady-state speeds, or nothing before the step has run."""
    from .report import table

    got = {k: v for k, v in rows.items() if k.startswith("steady/") and v.get("rc") == 0}
    if not got:
        return []
    objs = list(dict.fromkeys(v["objective"] for v in got.values()))
    out = ["", "### In steady state (second epoch)", "",
           "The same runs for two epochs over the same prefixes (`python -m benchmarks.large_vocab steady`; "
           "`benchmarks/large_vocab_steady.py` says why and what it leaves out): words per CPU second of the second "
           "epoch, and of the first in brackets; the three V of an objective run one after another.", ""]
    tr = []
    for o in objs:
        cells, w = [], {}
        for n in ("10k", "100k", "full"):
            r = got.get(f"steady/{o}/{n}")
            if r:
                w[n] = r["words_per_cpu_s"][1]
                cells.append(f"{w[n]:,.0f} ({r['words_per_cpu_s'][0]:,.0f})")
            else:
                cells.append("-")
        ratio = w["full"] / w["10k"] if "full" in w and "10k" in w else None
        tr.append([o, *cells, f"{ratio:.2f}" if ratio else "-", "met" if ratio and ratio >= 0.7 else "missed"])
    out.append(table(["objective", "V = 10k w/CPU-s", "V = 100k", f"V = {vfull}", f"{vfull} / 10k", ">= 0.7x"], tr))
    if any(k.startswith("steady/nce/") and "objective_options" not in r for k, r in got.items()):
        out += ["", "nce's rows above ran its recurrent default before 3099dac: 20 noise words per position (now one "
                "bag of 1,000 shared by the batch; `steady --objectives nce --again nce` measures it anew)."]
    return out


def ratios(rows: dict) -> dict[str, float]:
    """Second-epoch words per CPU second at the full V over V = 10k, by objective (for the targets' summary)."""
    out = {}
    for k, r in rows.items():
        if k.startswith("steady/") and k.endswith("/full") and r.get("rc") == 0:
            small = rows.get(k[: -len("full")] + "10k")
            if small and small.get("rc") == 0:
                out[r["objective"]] = r["words_per_cpu_s"][1] / small["words_per_cpu_s"][1]
    return out
