"""How many of its own epochs does each GRU row of the equal-CPU page get for the softmax's 8, at today's code and
under today's load? The page's budget is the softmax cell's CPU seconds from the lr grid (1,765 s, measured on
2026-11-28 at commit 1ce94ca); the rows' runs came days and many speed-ups later, on a machine whose two vCPUs are
SMT siblings (a busy sibling stretches a process's CPU seconds). This measures the CPU seconds of one optimiser step
of the softmax GRU and of each row, alternating softmax and row in pairs within one run: two short runs each (A and
B steps, one thread, the rows' lr-grid flags), the step's cost from their difference, so that start-up and the
closing validation cancel. Prints and appends to equal-cpu-speed-ratio.jsonl beside this file.

Usage: PYTHONPATH=src python benchmarks/notes/equal-cpu-speed-ratio.py [--wide] [ROW ...]   (rows by key: hsm ...)

With ``--wide`` each row is measured on its 1.5x trunk (``--hidden 384 --embed-dim 304``, the trunk of the page's
"wider, 1.5x" candidates; they train the default 8 epochs), so that a chosen wider run is checked the same way.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from benchmarks import equal_cpu, lmruns, lr_grid  # noqa: E402

A, B = 60, 260  # steps of the two short runs whose difference gives a step's CPU seconds
OUT = os.path.join(os.path.dirname(__file__), "equal-cpu-speed-ratio.jsonl")


def run_cpu(st: lmruns.Setting, flags: tuple[str, ...], steps: int) -> float:
    """The training process's CPU seconds (metrics.jsonl) of a ``steps``-step run of ``flags``."""
    with tempfile.TemporaryDirectory(dir=st.work, prefix="eq-ratio-") as tmp:
        out = os.path.join(tmp, "run")
        lmruns.cli("train", "--train", st.files["train"], "--valid", st.files["valid"], *flags, "--epochs", "1",
                   "--max-steps", str(steps), "-o", out)
        return lmruns.epochs(out)[-1]["cpu_s"]


def step_cpu(st: lmruns.Setting, flags: tuple[str, ...]) -> float:
    return (run_cpu(st, flags, B) - run_cpu(st, flags, A)) / (B - A)


WIDE = ("--hidden", "384", "--embed-dim", "304")


def main(keys: list[str]) -> None:
    wide = "--wide" in keys
    keys = [k for k in keys if k != "--wide"]
    grid = lr_grid.rows(quick=False)
    soft_row = next(r for r in grid if r.model == "gru" and r.objective == "softmax")
    _, entries = equal_cpu.plan(grid, lr_grid.load_records(lr_grid.RECORDS))
    st = lmruns.setting(False, None, with_kn3=False)
    with open(st.files["train"], encoding="utf-8") as f:
        tokens = sum(len(line.split()) + 1 for line in f if line.strip())
    soft_flags = soft_row.flags
    for e in entries:
        if keys and e["row"].key not in keys:
            continue
        flags = (*e["row"].flags, "--lr", lr_grid.fmt(e["lr"]), *(WIDE if wide else ()))
        pairs = []
        for _ in range(2):  # softmax, row, softmax, row
            pairs.append((step_cpu(st, soft_flags), step_cpu(st, flags)))
        soft_s = sum(p[0] for p in pairs) / len(pairs)
        row_s = sum(p[1] for p in pairs) / len(pairs)
        ratio = soft_s / row_s
        rec = {"row": e["row"].name, "trunk": "h 384, d 304" if wide else "default",
               "soft_step_cpu_s": soft_s, "row_step_cpu_s": row_s, "pairs": pairs,
               "ratio": ratio, "epochs_for_softmax_8": 8 * ratio, "page_epochs": e["epochs"],
               "cell_epoch_cpu_s": e["epoch_cpu_s"], "tokens": tokens, "steps": [A, B],
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "load_average": os.getloadavg()}
        print(json.dumps(rec), flush=True)
        with open(OUT, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
