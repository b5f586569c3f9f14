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
machine's load. Rows ``steady/{objective}/{10k|100k|full}``; with ``--repeats N`` the three V run N rounds, round k > 1
recorded as ``.../r{k}``, and the page shows the medians (this VM's speed moves by up to a quarter within minutes, so
one round can land on either side of a 0.7x target: hsm's single round read 0.65x, three rounds 0.66-0.70x).
"""

from __future__ import annotations

import json
import os
import shutil
from statistics import median

EPOCHS = 2
#: why an objective's speed falls with V, as found by profiling it at both ends (for the page's targets)
WHY_NOT_FLAT = {
    "class": "class scores and updates every word of each class its step's targets fall in, and that union grows "
             "with V (a step of 1,120 targets: 8.8k words at V = 10k, 176k at 485k, 504 of 1,393 classes), as does "
             "its class layer (C = 2 sqrt(V), 4 scores each); a two-level softmax is O(sqrt V) a word at best",
    "adaptive": "adaptive's tails are whole softmaxes over clusters of 28k-252k words at V = 485k (one tail of "
                "about 4.5k words at 10k): their products and dense gradients for the few targets in each took about "
                "80 % of the extra time",
    "hsm": "hsm's work a word grows little (2.47 levels of its 128-way nodes and 130 siblings a token at V = 10k, "
           "2.70 and 150 at 485k), but a step's distinct rows do: its 1,120 targets' paths pass 8.3k word and node "
           "rows at 10k and 21.6k at 485k (node rows 570 against 11k), each gathered, scored and updated",
}


def step(work: str, rows_path: str, objectives: tuple[str, ...], again: tuple[str, ...] = (),
         repeats: int = 1) -> None:
    """Run each objective's three V ``repeats`` times, round by round (10k, 485k, 100k; then again), so that each
    round's ratio comes from one stretch of the machine's load; round k > 1 records ``steady/{obj}/{V}/r{k}``. A
    stopped step run again without ``--again`` fills in the rounds it lacks."""
    from .large_vocab_record import read_rows

    sp = os.path.join(work, "speed")
    if not os.path.isfile(os.path.join(sp, "valid-tiny.txt")):
        raise SystemExit(f"steady: needs the speed step's files in {sp}: run the speed step first")
    rows = read_rows(rows_path)
    for obj in objectives:
        done = set() if obj in again else {k for k, r in rows.items() if r.get("rc") == 0}
        for k in range(1, repeats + 1):
            for name in ("10k", "full", "100k"):
                key = f"steady/{obj}/{name}" + (f"/r{k}" if k > 1 else "")
                base = rows.get(f"speed/{obj}/{name}")
                if key in done or not os.path.isfile(os.path.join(sp, f"train-{name}.txt")) or not base:
                    continue
                rows[key] = _run(sp, obj, name, key, base, rows_path, k)


def _run(sp: str, obj: str, name: str, key: str, base: dict, rows_path: str, rnd: int) -> dict:
    """One two-epoch run at one V, recorded under ``key``."""
    from .large_vocab_record import append_row, sampledlm, timed

    vocab = [] if name == "10k" else ["--vocab", os.path.join(sp, f"vocab-{name}.txt")]
    run_dir = os.path.join(sp, f"steady-{obj}-{name}")
    shutil.rmtree(run_dir, ignore_errors=True)
    argv = sampledlm("train", "--train", os.path.join(sp, f"train-{name}.txt"), "--valid",
                     os.path.join(sp, "valid-tiny.txt"), *vocab, "--model", "gru", "--objective", obj, "--device",
                     "cpu", "--threads", "1", "--epochs", str(EPOCHS), "-o", run_dir)
    r = timed(argv)
    r.pop("stdout", None)
    row = {"key": key, "objective": obj, "V": name, "round": rnd, "tokens": base["tokens"], "rc": r["rc"],
           "process": r, "command": " ".join(argv)}
    if r["rc"] == 0:
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
            m = [json.loads(line) for line in f if line.strip()]
        cpu = [m[0]["cpu_s"], m[-1]["cpu_s"] - m[-2]["cpu_s"]]
        with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
            options = json.load(f).get("objective", {}).get("options", {})  # defaults change over time
        row.update(epoch_cpu_s=cpu, words_per_cpu_s=[base["tokens"] / c for c in cpu], objective_options=options)
    shutil.rmtree(run_dir, ignore_errors=True)  # a run at V = 485k holds GBs of weights and Adam state
    return append_row(row, rows_path)


def rounds(rows: dict) -> dict[str, list[dict[str, dict]]]:
    """By objective, the latest set of rounds: ``[{V name: row}]``, round 1 first. A round k > 1 counts only when
    recorded after round 1 (an older set's later rounds are not mixed into a new first round)."""
    out: dict[str, list[dict[str, dict]]] = {}
    for k, r in rows.items():
        parts = k.split("/")
        if parts[0] != "steady" or len(parts) != 3 or r.get("rc") != 0:
            continue
        obj, name = parts[1], parts[2]
        sets = out.setdefault(obj, [])
        if not sets:
            sets.append({})
        sets[0][name] = r
    for obj, sets in out.items():
        first = min(r.get("date", "") for r in sets[0].values())
        for k in range(2, 100):
            got = {n: rows[f"steady/{obj}/{n}/r{k}"] for n in ("10k", "100k", "full")
                   if rows.get(f"steady/{obj}/{n}/r{k}", {}).get("rc") == 0
                   and rows[f"steady/{obj}/{n}/r{k}"].get("date", "") >= first}
            if not got:
                break
            sets.append(got)
    return out


def _round_ratios(sets: list[dict[str, dict]]) -> list[float]:
    """Each round's full-V over 10k second-epoch speed (rounds that ran both)."""
    return [s["full"]["words_per_cpu_s"][1] / s["10k"]["words_per_cpu_s"][1]
            for s in sets if "full" in s and "10k" in s]


def lines(rows: dict, vfull: str) -> list[str]:
    """The page's table of the steady-state speeds, or nothing before the step has run."""
    from .report import table

    by_obj = rounds(rows)
    if not by_obj:
        return []
    out = ["", "### In steady state (second epoch)", "",
           "The same runs for two epochs over the same prefixes (`python -m benchmarks.large_vocab steady`; "
           "`benchmarks/large_vocab_steady.py` says why and what it leaves out): words per CPU second of the second "
           "epoch, and of the first in brackets; the three V of an objective run one after another. Where an "
           "objective ran several rounds (`--repeats`), each cell is the median over them and the ratio the median "
           "of the rounds' own ratios, with their range.", ""]
    tr = []
    for o, sets in by_obj.items():
        cells = []
        for n in ("10k", "100k", "full"):
            got = [s[n]["words_per_cpu_s"] for s in sets if n in s]
            cells.append(f"{median([g[1] for g in got]):,.0f} ({median([g[0] for g in got]):,.0f})" if got else "-")
        rs = _round_ratios(sets)
        ratio = median(rs) if rs else None
        shown = "-" if ratio is None else f"{ratio:.2f}" + (f" ({min(rs):.2f}-{max(rs):.2f}, {len(rs)} rounds)"
                                                             if len(rs) > 1 else "")
        tr.append([o, *cells, shown, "met" if ratio and ratio >= 0.7 else "missed"])
    out.append(table(["objective", "V = 10k w/CPU-s", "V = 100k", f"V = {vfull}", f"{vfull} / 10k", ">= 0.7x"], tr))
    if any(k.startswith("steady/nce/") and r.get("rc") == 0 and "objective_options" not in r for k, r in rows.items()):
        out += ["", "nce's rows above ran its recurrent default before 3099dac: 20 noise words per position (now one "
                "bag of 1,000 shared by the batch; `steady --objectives nce --again nce` measures it anew)."]
    return out


def ratios(rows: dict) -> dict[str, float]:
    """Second-epoch words per CPU second at the full V over V = 10k, by objective (for the targets' summary): the
    median of the latest set's rounds."""
    return {o: median(rs) for o, sets in rounds(rows).items() if (rs := _round_ratios(sets))}
