"""The equal-CPU budget checked by step costs measured side by side.

The equal-CPU page gives every row the softmax cell's CPU seconds from the lr grid (measured on one date, at one
commit). On a machine whose two vCPUs are SMT siblings the CPU seconds of one and the same run move by up to 2x
with the load on the sibling (hsm's 21-epoch run at dropout 0.35 took 113 CPU s an epoch, its 15-epoch rerun 57),
so CPU seconds read on different days do not compare. What does compare is a ratio measured in one run, the two
sides alternating: ``benchmarks/notes/equal-cpu-speed-ratio.py`` times one optimiser step of the softmax GRU and of
a row (the difference of a 60- and a 260-step run, so that start-up and the closing validation cancel),
softmax, row, softmax, row, and writes ``equal-cpu-speed-ratio.jsonl``.

A chosen candidate that ran ``E`` epochs at step cost ``c_row`` used

    share = E * c_row / (8 * c_softmax) = E / (8 * ratio)

of the softmax's 8 epochs; the epochs its share allows are ``floor(8 * ratio)`` (dropout does not change a step's
cost, so the default trunk's ratio serves the dropout runs; a wider candidate needs its own trunk's).
"""

from __future__ import annotations

import json
import math
import os

from .report import table

RECORDS = os.path.join(os.path.dirname(__file__), "notes", "equal-cpu-speed-ratio.jsonl")
SOFTMAX_EPOCHS = 8
#: a share above this is over the softmax's CPU (the page's own tolerance for a run against its budget)
TOLERANCE = 1.05
#: a run under this share of its budget is run again with the epochs the budget allows
RESIZE = 0.75


def load(path: str = RECORDS) -> list[dict]:
    """The ratio records, latest last; none where the file is absent (a clone that never measured them)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def ratio_of(row: str, records: list[dict], trunk: str = "default") -> float | None:
    """The latest ratio measured for ``row`` on ``trunk``, or None."""
    found = [r["ratio"] for r in records if r["row"] == row and r.get("trunk", "default") == trunk]
    return found[-1] if found else None


def share(epochs: int, ratio: float) -> float:
    """The part of the softmax's 8 epochs' CPU that ``epochs`` of a row ``ratio`` times cheaper a step use."""
    return epochs / (SOFTMAX_EPOCHS * ratio)


def epochs_allowed(ratio: float) -> int:
    """The row's epochs that fit the softmax's 8 at ``ratio``."""
    return math.floor(SOFTMAX_EPOCHS * ratio)


def trunk_name(hidden: int, embed: int) -> str:
    """A trunk as the ratio records name it."""
    return f"h {hidden}, d {embed}"


def trunk_of(row: dict, key: str) -> str:
    """The trunk a candidate ran on, as the ratio records name it."""
    c = row.get(key) or {}
    return trunk_name(c["hidden"], c["embed"]) if c.get("hidden") else "default"


#: the summary's candidates that run on the row's own trunk (the others name a wider one)
OWN_TRUNK = ("equal_epochs", "run", "drop")


def _longest(x: dict, ratio: float | None) -> int | None:
    """The most epochs any of the row's own-trunk candidates ran within its share (all of them where no ratio)."""
    runs = [len(x[k]["curve"]) for k in OWN_TRUNK if x.get(k) and x[k].get("curve")]
    runs = [n for n in runs if ratio is None or share(n, ratio) <= TOLERANCE]
    return max(runs) if runs else None


def check(data: dict, records: list[dict]) -> list[dict]:
    """One line per judged row of the equal-CPU summary: its chosen candidate's epochs, the step-cost ratio of that
    candidate's trunk (the latest record), the share of the softmax's 8 epochs it used and the epochs it allowed.
    ``ratio`` is None where that trunk was not measured."""
    latest = {(r["row"], r.get("trunk", "default")): r for r in records}  # the latest line of a key wins
    out = []
    for x in data.get("rows", []):
        key = x.get("chosen")
        if key is None:
            continue
        trunk = trunk_of(x, key)
        epochs = len(x[key].get("curve") or []) or x.get("epochs")
        rec = latest.get((x["name"], trunk))
        ratio = None if rec is None else rec["ratio"]
        own = ratio_of(x["name"], records)
        out.append({"row": x["name"], "candidate": key, "trunk": trunk, "epochs": epochs, "ratio": ratio,
                    "longest": _longest(x, own), "allowed_own": None if own is None else epochs_allowed(own),
                    "share": None if ratio is None else share(epochs, ratio),
                    "epochs_allowed": None if ratio is None else epochs_allowed(ratio),
                    "verdict": x.get("vs_softmax"),
                    "date": None if rec is None else rec.get("date"),
                    "soft_step_cpu_s": None if rec is None else rec["soft_step_cpu_s"],
                    "row_step_cpu_s": None if rec is None else rec["row_step_cpu_s"]})
    return out


def reading(s: dict) -> str:
    """What the share says about the row's verdict."""
    if s["share"] is None:
        return "not measured"
    met = s["verdict"] is not None and s["verdict"] <= 0
    if s["share"] > TOLERANCE:
        return "over its share: the verdict does not stand at equal CPU" if met else "over its share, and missed"
    if met:
        return "within its share: the verdict stands"
    room = 0 if s.get("allowed_own") is None or s.get("longest") is None else s["allowed_own"] - s["longest"]
    return (f"within its share, missed; its longest run on its own trunk had {s['longest']} epochs, {room} more "
            "would fit" if room > 0 else "within its share, missed")


def render(shares: list[dict], labels: dict[str, str]) -> list[str]:
    """The page's section; nothing where no ratio was measured."""
    if not any(s["ratio"] is not None for s in shares):
        return []
    dates = sorted({s["date"] for s in shares if s["date"]})
    body = [[s["row"], labels.get(s["candidate"], s["candidate"]), s["trunk"], str(s["epochs"]),
             "—" if s["ratio"] is None else f"{s['soft_step_cpu_s']:.4f} / {s['row_step_cpu_s']:.4f}",
             "—" if s["ratio"] is None else f"{s['ratio']:.2f}",
             "—" if s["ratio"] is None else str(s["epochs_allowed"]),
             "—" if s["share"] is None else f"{s['share']:.2f}", reading(s)] for s in shares]
    return ["", "## The budget checked by step costs measured side by side", "",
            "The budget above is CPU seconds read on one date; the rows' runs came on other dates, and on this "
            "machine (two vCPUs that are SMT siblings) the same run's CPU seconds move by up to 2x with the load "
            "on the sibling (hsm's 21-epoch dropout run: 113 CPU s an epoch; its 15-epoch rerun: 57). So each "
            "chosen candidate is checked again by a ratio measured in one run: one optimiser step of the softmax "
            "GRU and of the candidate's trunk, alternating softmax, row, softmax, row (each step's CPU seconds "
            "from a 60- and a 260-step run, one thread; `benchmarks/notes/equal-cpu-speed-ratio.py`, "
            f"{', '.join(dates)}). *share* = the candidate's epochs / (8 x the ratio): the part of the softmax's "
            f"8 epochs it used; above {TOLERANCE:g} it had more than the softmax. Dropout does not change a step's "
            "cost, so a dropout run is checked by its trunk's ratio. In the table above, a candidate whose trunk was "
            "measured is judged by its share instead of its CPU seconds (above the tolerance: *over its share*, "
            f"not chosen), and a dropout run outside [{RESIZE:g}, {TOLERANCE:g}] of its share is run again with the "
            "epochs the share allows.", "",
            *table(["row", "chosen", "trunk", "epochs", "step CPU s, softmax / row", "ratio",
                    "epochs for the softmax's 8", "share", "reading"], body).splitlines()]
