"""Seed replicates of a learning-rate grid's chosen cells whose equal-epoch verdicts sit nearest their targets.

One seed decides each row's verdict on a grid page, and the same training moves by up to about 0.9 % in test
perplexity from seed to seed (the quality page's replicates of the Adam softmax: 92.01, 92.80, 92.32). Once the
softmax's grid and a row's grid are complete, a row whose gap against the tuned softmax lies within :data:`BAND` of
its target (either side) trains its chosen cell again at ``--seed`` 2 and 3 (seed 1 is the cell; the seed sets the
initial weights, the dropout masks and the batch order), and so does the softmax's chosen cell; the row is then judged
on its mean over the three seeds against the softmax's mean over the same seeds, and paired seed by seed (the same
seed gives both the same batch order).

Records: in the grid's own records file, kind :data:`KIND`, with ``seed`` and ``flags`` = the cell's flags plus
``--seed N`` (so the grid's cell lookup, which matches a cell's exact flags, never takes one for a cell).
"""

from __future__ import annotations

import math
import statistics

SEEDS = (2, 3)
BAND = 0.01  # a gap within one percentage point of its target
KIND = "seed"


def near_line(data: dict) -> list[dict]:
    """The summary rows (:func:`.lr_grid.summarise`) with a final verdict whose gap is within :data:`BAND` of the
    target, nearest first."""
    rows = [x for x in data["rows"] if x.get("verdict") in ("met", "missed") and x.get("vs_softmax") is not None
            and abs(x["vs_softmax"] - x["target"]) <= BAND]
    return sorted(rows, key=lambda x: abs(x["vs_softmax"] - x["target"]))


def wanted(data: dict, baseline) -> list[dict]:
    """The rows to replicate: the tuned softmax (``baseline``: :func:`.lr_grid.baseline_of`) first, then
    :func:`near_line`'s; none when no row is near its line."""
    near = near_line(data)
    soft = baseline(data["rows"])
    return [soft, *near] if near and soft is not None and soft.get("chosen_lr") is not None else []


def seed_flags(x: dict, seed: int, fmt) -> str:
    """Summary row ``x``'s chosen cell's flags with ``--seed``."""
    return f"{x['flags']} --lr {fmt(x['chosen_lr'])} --seed {seed}"


def found(x: dict, seed: int, records: list[dict], fmt) -> dict | None:
    """The latest replicate record of ``x``'s chosen cell at ``seed`` (same flags and objective version)."""
    want = seed_flags(x, seed, fmt)
    got = [r for r in records if r.get("kind") == KIND and r.get("row") == x["name"] and r.get("flags") == want
           and (r.get("version") or "") == (x.get("version") or "")]
    return got[-1] if got else None


def jobs(data: dict, records: list[dict], baseline, fmt) -> list[tuple[dict, int]]:
    """``(summary row, seed)`` for each replicate still to train, the softmax's first."""
    return [(x, s) for x in wanted(data, baseline) for s in SEEDS if found(x, s, records, fmt) is None]


def _sd(values: list[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None


def summarise(data: dict, records: list[dict], baseline, fmt) -> dict:
    """The replicates' figures: per wanted row its test perplexity by seed, mean and standard deviation; for the
    other rows, once every seed of both is in, the mean against the softmax's mean, the paired gaps and the verdict
    on the means."""
    out = []
    for x in wanted(data, baseline):
        ppl = {1: x["test_ppl"]}
        for s in SEEDS:
            rec = found(x, s, records, fmt)
            if rec is not None and rec.get("test_ppl") is not None and math.isfinite(rec["test_ppl"]):
                ppl[s] = rec["test_ppl"]
        done = len(ppl) == 1 + len(SEEDS)
        vals = list(ppl.values())
        out.append({"name": x["name"], "lr": x["chosen_lr"], "target": x.get("target"), "ppl": ppl,
                    "mean": statistics.mean(vals) if done else None, "sd": _sd(vals) if done else None})
    if not out:
        return {"rows": [], "softmax": None}
    soft = out[0]
    for r in out[1:]:
        r["vs_softmax_mean"] = r["verdict"] = None
        r["paired"] = [r["ppl"][s] / soft["ppl"][s] - 1 for s in (1, *SEEDS) if s in r["ppl"] and s in soft["ppl"]]
        if r["mean"] is not None and soft["mean"] is not None:
            r["vs_softmax_mean"] = r["mean"] / soft["mean"] - 1
            r["verdict"] = "met" if r["vs_softmax_mean"] <= r["target"] else "missed"
    return {"rows": out, "softmax": soft["name"]}


def render(seeds: dict, fmt, table) -> list[str]:
    """The page's section on the replicates (empty when no row is near its line)."""
    if not seeds or not seeds.get("rows"):
        return []
    cols = (1, *SEEDS)

    def cell(v):
        return "—" if v is None else f"{v:.2f}"

    def pct(v):
        return "—" if v is None else f"{100 * v:+.1f} %"

    body = [[r["name"], fmt(r["lr"]), *[cell(r["ppl"].get(s)) for s in cols], cell(r["mean"]), cell(r["sd"]),
             "—" if r["name"] == seeds["softmax"] else pct(r.get("vs_softmax_mean")),
             "—" if r["name"] == seeds["softmax"] else ", ".join(pct(p) for p in r.get("paired", [])),
             "" if r.get("target") is None else f"≤ {100 * r['target']:.0f} %", r.get("verdict") or ""]
            for r in seeds["rows"]]
    return ["## Seed replicates of the verdicts nearest their targets", "",
            f"The rows whose gap lies within {100 * BAND:.0f} percentage point of their target, and the tuned softmax, "
            "trained again at their chosen rate with `--seed` " + ", ".join(map(str, SEEDS)) + " (seed 1 is the grid's "
            "cell; the seed sets the initial weights, the dropout masks and the batch order), everything else the "
            "same. A verdict here is on the mean test perplexity over the seeds against the softmax's mean; paired: "
            "the row against the softmax of the same seed. '—': not yet trained.", "",
            table(["row", "rate", *[f"seed {s}" for s in cols], "mean", "sd", "mean vs softmax mean",
                   "paired, by seed", "target", "verdict on means"], body), ""]
