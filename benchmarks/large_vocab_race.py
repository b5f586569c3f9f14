"""Issue 56: each neural row's learning rate chosen on validation at V = 485k, the same way for every row.

The protocol (decided 2026-11-29; the issue asks for every row's rate chosen on the validation text the same way,
and a 2-CPU-hour row leaves no room for PTB's whole grid):

- Candidates: the row's default rate (its objective's on a recurrent trunk as PTB's lr grid chose it, or the
  Transformer's), then half of it; then each time the lowest rate tried is the best so far (or every one tried
  diverged), half of that, down to 1/2^:data:`MAX_HALVINGS` of the default. PTB's defaults are each objective's best
  there; at V = 485k the question is whether they must come down (IS at its PTB rate 0.008 diverged in epoch 1), so
  the candidates go down from them, and further only while going down helps (the PTB grid goes further where its
  best sits at an edge, the same way). A row whose default wins costs one extra epoch.
- Each candidate trains the row's plan (the same training text, epochs and cosine decay over all the epochs, the
  same validation subset) through its **first epoch**; the lowest validation perplexity after it wins, and the
  winner's run goes on to the end of the budget. Under the cosine decay over 4 epochs the rate stays within 15 % of
  its peak through epoch 1 (0.5 (1 + cos(pi / 4)) = 0.85), so epoch 1 is where the rates differ most, and a rate
  that diverges does so there.
- A candidate whose running training loss (the progress lines of its log) climbs :data:`DIVERGE_NATS` above the
  lowest it reached is stopped and counted as diverged, without spending the rest of its epoch.
- The CPU seconds of the losing candidates are recorded beside the row as its tuning cost, outside its budget (as
  PTB's grid cells are outside the rows they choose).

State: ``WORK/neural/<row>/lr-race.json`` (so a stopped race resumes where it was). The default candidate trains in
``run`` (logging to ``train.log``), the others in ``run-lr<rate>`` (``train-lr<rate>.log``). A settled candidate is
also recorded in the committed notes (key ``neural-race/<row>/lr<rate>``, :func:`as_record`), and a race that starts
in an empty work directory (a new machine: the work directory goes with the machine) takes those records in
(:func:`merge_recorded`) instead of training the candidates again; the winner's own run, if it is not on the machine,
trains again from its first step (the same command and seed).
"""

from __future__ import annotations

import json
import math
import os
import re

from . import lmruns

MAX_HALVINGS = 3
DIVERGE_NATS = 2.0
_PROGRESS = re.compile(r"^epoch (\d+): +\d+%\s+loss (\S+)")


def candidate(lr: float | None, default: bool) -> dict:
    """A candidate's bookkeeping (``lr`` None: the default, not yet read from the run's config)."""
    if default:
        return {"lr": lr, "dir": "run", "log": "train.log", "explicit": False}
    return {"lr": lr, "dir": f"run-lr{lr:g}", "log": f"train-lr{lr:g}.log", "explicit": True}


def path(d: str) -> str:
    return os.path.join(d, "lr-race.json")


def load(d: str, max_halvings: int = MAX_HALVINGS) -> dict:
    """The row's race state: ``{"max_halvings", "default_lr", "candidates": [...], "chosen"}`` (a new one: the
    default candidate alone; :func:`extend` adds the others)."""
    if os.path.exists(path(d)):
        with open(path(d), encoding="utf-8") as f:
            state = json.load(f)
        state.pop("factors", None)  # a state from the first version of the race (fixed candidates), carried on
        state.setdefault("max_halvings", max_halvings)
        return state
    return {"max_halvings": max_halvings, "default_lr": None, "candidates": [candidate(None, True)], "chosen": None}


def save(d: str, state: dict) -> None:
    os.makedirs(d, exist_ok=True)
    with open(path(d) + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1)
    os.replace(path(d) + ".tmp", path(d))


def set_default(state: dict, default_lr: float) -> dict:
    """The default candidate's rate, once its run has started (its config.json)."""
    state["default_lr"] = default_lr
    state["candidates"][0]["lr"] = default_lr
    return state


def extend(state: dict) -> dict:
    """Add the next candidate when every one so far is settled and the lowest rate tried is the best (or all
    diverged), halving it, at most ``max_halvings`` times below the default. Candidates already there (one taken in
    from an earlier run) stay."""
    cands = state["candidates"]
    if state["default_lr"] is None or not all(settled(c) for c in cands):
        return state
    lowest = min(cands, key=lambda c: c["lr"])
    best = choose(state)
    if best is not None and best is not lowest:
        return state
    lr = float(f"{lowest['lr'] / 2:.6g}")
    if lr < state["default_lr"] / 2 ** state["max_halvings"] * 0.999:
        return state
    cands.append(candidate(lr, False))
    return state


def first_epoch_valid(rd: str) -> float | None:
    """Validation perplexity after the run's first epoch (its metrics.jsonl), or None. A point within the epoch
    (``--valid-every``) is not its end; the end of an epoch that a budget stopped is."""
    m = os.path.join(rd, "metrics.jsonl")
    if not os.path.exists(m):
        return None
    with open(m, encoding="utf-8") as f:
        recs = [json.loads(line) for line in f if line.strip()]
    for i, r in enumerate(recs):
        if "epoch_fraction" not in r or i == len(recs) - 1 and lmruns.finished(rd):
            return float(r["valid_ppl"])
    return None


def diverged(log: str) -> str | None:
    """Why the run logging to ``log`` counts as diverged (its running training loss in epoch 1 rose
    :data:`DIVERGE_NATS` above its lowest, or is not a finite number), or None."""
    if not os.path.exists(log):
        return None
    low, high_after = math.inf, None
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = _PROGRESS.match(line.strip())
            if not m or m.group(1) != "1":
                continue
            try:
                loss = float(m.group(2))
            except ValueError:
                continue
            if not math.isfinite(loss):
                return f"running training loss {m.group(2)} in epoch 1"
            if loss < low:
                low, high_after = loss, None
            elif loss > low + DIVERGE_NATS and (high_after is None or loss > high_after):
                high_after = loss
    if high_after is not None:
        return f"running training loss rose from {low:.2f} to {high_after:.2f} in epoch 1"
    return None


def record_key(row: str, lr: float) -> str:
    return f"neural-race/{row}/lr{lr:g}"


def as_record(row: str, plan: dict, c: dict) -> dict:
    """A settled candidate as a line of the notes: the row's plan it trained (its epoch's predictions), whether it
    was the default's, its epoch-1 validation or why it diverged, its processes' CPU seconds."""
    return {"key": record_key(row, c["lr"]), "row": row, "lr": c["lr"], "default": c["dir"] == "run",
            "epoch_predictions": plan.get("epoch_predictions"), "revision": plan.get("revision", 1),
            **{k: c[k] for k in ("epoch1_valid", "diverged", "process_cpu_s") if c.get(k) is not None}}


def merge_recorded(state: dict, rows: dict, row: str, plan: dict) -> dict:
    """The candidates recorded in the notes for this row and plan (the same epoch's predictions), settled, in
    place of the ones this work directory has not settled (a race carried on on another machine); only those of the
    plan's revision of the row's code (``revision``, 1 when absent)."""
    prefix = f"neural-race/{row}/"
    recs = [r for k, r in rows.items() if k.startswith(prefix)
            and r.get("epoch_predictions") == plan.get("epoch_predictions")
            and r.get("revision", 1) == plan.get("revision", 1)]
    for r in sorted(recs, key=lambda r: (not r["default"], -r["lr"])):
        if r["default"] and state["default_lr"] is None:
            set_default(state, r["lr"])
        c = next((c for c in state["candidates"] if (c["dir"] == "run") == r["default"] and c["lr"] == r["lr"]),
                 None)
        if c is None:
            c = candidate(r["lr"], r["default"])
            state["candidates"].append(c)
        if settled(c):
            continue
        c.update({k: r[k] for k in ("epoch1_valid", "diverged", "process_cpu_s") if r.get(k) is not None})
        c["recorded"] = r.get("date", True)
    return state


def settled(c: dict) -> bool:
    return c.get("epoch1_valid") is not None or bool(c.get("diverged"))


def choose(state: dict) -> dict | None:
    """The candidate of lowest validation perplexity after epoch 1 (None when none has one)."""
    ok = [c for c in state["candidates"] if c.get("epoch1_valid") is not None and not c.get("diverged")
          and math.isfinite(c["epoch1_valid"])]
    return min(ok, key=lambda c: c["epoch1_valid"]) if ok else None


def summary(state: dict) -> list[dict]:
    """The candidates as the row records them: rate, epoch-1 validation perplexity or why it diverged, CPU."""
    return [{k: c.get(k) for k in ("lr", "epoch1_valid", "diverged", "process_cpu_s") if c.get(k) is not None}
            for c in sorted(state["candidates"], key=lambda c: -c["lr"])]
