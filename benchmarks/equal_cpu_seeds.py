"""Seed replicates of the equal-CPU page's chosen runs whose verdicts sit nearest the line.

One seed decides each row's verdict on the page, and the same training moves by up to about 0.9 % in test perplexity
from seed to seed (the quality page's replicates of the tuned softmax: 92.01, 92.80, 92.32). A chosen run within
:data:`BAND` of the tuned softmax, on either side of it, trains again at ``--seed`` 2 and 3 (seed 1 is the chosen run;
the seed sets the initial weights, the dropout masks and the batch order), everything else the same, and the row is
judged again on its mean over the three seeds against the softmax's mean over the same seeds (the quality page's
replicates of the tuned softmax: its 8 epochs at its rate, seed 1 the page's budget run), as the quality page judges
its own targets. A row further from the line keeps its one seed: a replicate would not move its verdict.

Records: kind :data:`KIND` in ``benchmarks/notes/equal-cpu.jsonl``, each with its ``seed`` and the ``candidate`` it
repeats; a record is matched to its run by its flags (the chosen run's, plus ``--seed N``), so a row whose chosen run
changes gets replicates of the new one.
"""

from __future__ import annotations

from . import lmruns

SEEDS = (2, 3)
BAND = 0.01
KIND = "chosen-seed"


def _eq():
    from . import equal_cpu  # the page's module imports this one

    return equal_cpu


def near_line(data: dict) -> list[dict]:
    """The page's summary rows whose chosen run is within :data:`BAND` of the tuned softmax (either side), nearest
    first; a chosen run with no recorded flags (an old record) is left out."""
    rows = [x for x in data["rows"] if x.get("chosen") and x.get("vs_softmax") is not None
            and abs(x["vs_softmax"]) <= BAND and (x[x["chosen"]] or {}).get("flags")]
    return sorted(rows, key=lambda x: abs(x["vs_softmax"]))


def seed_flags(flags: str, seed: int) -> str:
    """The chosen run's flags with ``--seed``."""
    return f"{flags} --seed {seed}"


def found(name: str, flags: str, records: list[dict]) -> dict | None:
    """The latest replicate record of row ``name`` trained with exactly ``flags``."""
    got = [r for r in records if r.get("kind") == KIND and r.get("row") == name and r.get("flags") == flags]
    return got[-1] if got else None


def jobs(data: dict, entries: list[dict], records: list[dict]) -> list[tuple[dict, str, int, str]]:
    """``(entry, candidate, seed, flags)`` for each replicate still to train."""
    by_name = {e["row"].name: e for e in entries}
    out = []
    for x in near_line(data):
        for s in SEEDS:
            flags = seed_flags(x[x["chosen"]]["flags"], s)
            if x["name"] in by_name and found(x["name"], flags, records) is None:
                out.append((by_name[x["name"]], x["chosen"], s, flags))
    return out


def train(st: lmruns.Setting, entry: dict, candidate: str, seed: int, flags: str, budget_s: float,
          tokens: int) -> dict:
    """Train one replicate and return its record."""
    row = entry["row"]
    run = lmruns.Run(f"eq-{row.key}-{candidate}-seed{seed}", tuple(flags.split()), version=row.version)
    return _eq()._record(st, entry, run, budget_s, tokens, {"kind": KIND, "seed": seed, "candidate": candidate})


def means(data: dict, records: list[dict], softmax_seeds: dict[int, float]) -> list[dict]:
    """Each near-the-line row's test perplexity by seed (None: not yet trained; ``diverged``: stopped by the trainer),
    and, once every seed has a figure, its mean against the softmax's over the same seeds. ``softmax_seeds``: seed ->
    the tuned softmax's test perplexity (its seed 1 must be the page's baseline, the tuned softmax, else nothing is
    judged: replicates of another softmax run say nothing of that one)."""
    soft = data.get("baseline") or data.get("softmax") or {}
    if abs(softmax_seeds.get(1, 0.0) - (soft.get("test_ppl") or -1.0)) >= 0.005:
        return []
    out = []
    for x in near_line(data):
        c = x[x["chosen"]]
        ppl: dict[int, float | None] = {1: c["test_ppl"]}
        diverged = []
        for s in SEEDS:
            rec = found(x["name"], seed_flags(c["flags"], s), records)
            ppl[s] = None if rec is None else rec.get("test_ppl")
            if rec is not None and rec.get("failed"):
                diverged.append(s)
        row = {"name": x["name"], "candidate": x["chosen"], "seeds": ppl, "diverged": diverged,
               "one_seed": x["vs_softmax"], "mean": None, "softmax_mean": None, "vs_softmax_mean": None}
        seeds = sorted(ppl)
        if all(ppl[s] is not None for s in seeds) and all(s in softmax_seeds for s in seeds):
            row["mean"] = sum(ppl[s] for s in seeds) / len(seeds)
            row["softmax_mean"] = sum(softmax_seeds[s] for s in seeds) / len(seeds)
            row["vs_softmax_mean"] = row["mean"] / row["softmax_mean"] - 1
            row["paired"] = [ppl[s] / softmax_seeds[s] - 1 for s in seeds]
        out.append(row)
    return out


def verdict(row: dict) -> str:
    if row["diverged"]:
        return "missed (seed " + ", ".join(str(s) for s in row["diverged"]) + " diverged)"
    if row["vs_softmax_mean"] is None:
        return "seeds still to train"
    return "met" if row["vs_softmax_mean"] <= 0 else "missed"


def render(rows: list[dict], softmax_seeds: dict[int, float], labels: dict[str, str]) -> list[str]:
    """The section: the protocol in words and one line per replicated row (``labels``: the candidates' names)."""
    if not rows:
        return []
    seeds = (1, *SEEDS)
    soft = ", ".join(f"{softmax_seeds[s]:.2f}" for s in seeds if s in softmax_seeds)
    lines = ["", "## The chosen runs nearest the line, on three seeds", "",
             f"A chosen run within {100 * BAND:g} % of the tuned softmax, either side, trained again at `--seed` "
             f"{', '.join(str(s) for s in SEEDS)} (seed 1 is the table's run; the seed sets the initial weights, the "
             "dropout masks and the batch order; every other flag the same), and judged on its mean over the seeds "
             f"against the tuned softmax's mean over the same seeds ({soft}: the quality page's replicates, seed 1 "
             "the budget above), as the quality page judges its targets. Paired: against the softmax of the same "
             "seed. Rows further from the line keep their one seed.", "",
             "| row | chosen run | " + " | ".join(f"seed {s}" for s in seeds)
             + " | mean | softmax's mean | mean vs softmax mean | paired, by seed | one seed | verdict on the mean |",
             "|" + "---|" * (len(seeds) + 8)]
    for r in rows:
        cells = [("diverged" if s in r["diverged"] else "—") if r["seeds"][s] is None else f"{r['seeds'][s]:.2f}"
                 for s in seeds]
        if r["vs_softmax_mean"] is None:
            judged = ["—"] * 4
        else:
            judged = [f"{r['mean']:.2f}", f"{r['softmax_mean']:.2f}", f"{100 * r['vs_softmax_mean']:+.2f} %",
                      ", ".join(f"{100 * p:+.2f} %" for p in r["paired"])]
        lines.append(f"| {r['name']} | {labels.get(r['candidate'], r['candidate'])} | " + " | ".join(cells + judged)
                     + f" | {100 * r['one_seed']:+.1f} % | {verdict(r)} |")
    return lines


def render_none(data: dict, softmax_seeds: dict[int, float]) -> list[str]:
    """The section when no chosen run is within :data:`BAND` of the tuned softmax: the nearest row's margin against
    the spread of the softmax's own seeds, so that a reader sees why one seed each suffices."""
    judged = [x for x in data["rows"] if x.get("vs_softmax") is not None]
    if not judged:
        return []
    near = min(judged, key=lambda x: abs(x["vs_softmax"]))
    seeds = [softmax_seeds[s] for s in sorted(softmax_seeds)]
    spread = max(seeds) / min(seeds) - 1
    return ["", f"**Seeds.** No chosen run is within {100 * BAND:g} % of the tuned softmax, so none is trained again "
            f"on other seeds: the nearest, {near['name']}, is {100 * near['vs_softmax']:+.1f} % from it, where the "
            f"tuned softmax's own seeds ({', '.join(f'{v:.2f}' for v in seeds)}, the quality page's replicates) "
            f"spread by {100 * spread:.1f} %."]
