"""``lr-grid``: one learning-rate grid for every PTB row of the quality page (issue 55, deliverable 1).

Each row is trained exactly as the quality-cpu page trains it (:data:`.quality_cpu.BASE` with ``--objective X``
for the GRU-256 rows, :data:`.quality_cpu.TRUNKS` for the feed-forward and Transformer rows, each otherwise at its
defaults: the same epochs and schedule) with ``--lr R`` added, for R in :data:`RATES`; where a row's lowest
best-epoch validation perplexity sits at an edge of the rates it has tried, its grid goes a factor 2 beyond that
edge (:func:`next_rate`) until the best is interior. The chosen rate is the one of lowest validation perplexity;
the page shows the test perplexity of the chosen rate only.

Resumable across sessions: the run cache goes with the session, so every finished cell appends one JSON line to
``benchmarks/notes/lr-grid.jsonl`` (committed; :func:`append_record`), and a start skips the cells already there
(same row, rate, flags and objective version). ``--no-train`` builds the page from that file alone. ``--quick``:
two rows of a tiny GRU on a quarter of the built-in corpus, two rates, no extension, its records in the output
folder (never the committed file).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import subprocess
from dataclasses import dataclass
from typing import Callable

import click

from sampledlm.errors import UserError

from . import lmruns, lr_grid_seeds
from .lmruns import defaults
from .quality_cpu import BASE, OBJECTIVES, QUICK, TRUNKS, VERSIONS, row_name
from .quality_cpu import run_version as quality_run_version
from .report import REPO_DIR, new_figure, stamp, table, write_page

NAME = "lr-grid"
RATES = (0.001, 0.002, 0.004, 0.008)  # every row's grid; extended by factors of 2 where the best is at an edge
QUICK_RATES = (0.004, 0.008)
MAX_EXTENSIONS = 4  # per row and side: a safety stop (2^4 beyond the grid), not expected to be reached
RECORDS = os.path.join(REPO_DIR, "benchmarks", "notes", "lr-grid.jsonl")
#: the issue's targets at equal epochs: test perplexity at the chosen rate against the tuned softmax's
TARGETS = {"nce": 0.03, "is": 0.03, "css-is": 0.03, "blackout": 0.03, "adaptive": 0.02, "class": 0.02, "hsm": 0.05}
TRUNK_ORDER = ("ffnn", "transformer")
ADAMW_SUFFIX = "-adamw0.1"  # the AdamW grid's row keys (lr_grid_adamw.SUFFIX)  # last: the Transformer is the slowest per word and trains the most epochs


#: rows whose default rate is, on purpose, not the rate the grid chooses, and why
DEPARTURES = {
    "gru is": "0.008 validates 0.5 % better (97.09 against 97.57) and tests the same (92.29 against 92.26), but "
              "diverges once a run holds it for more than about 6,000 steps (PTB at a near-constant rate: step "
              "6,516; V = 485k: step ~7,700 of the first epoch), where 0.004 held 11,620 "
              "(benchmarks/notes/large-vocab-findings.md).",
}


def fmt(lr: float) -> str:
    """A rate as the flag and the records write it: ``0.004``, ``0.0005``, ``0.016``."""
    return f"{lr:g}"


def norm(lr: float) -> float:
    return float(fmt(lr))


class Row:
    """One row of the page: its run name (``softmax``, ``nce``, ``ffnn``), its flags without ``--lr``, its objective
    version (:data:`.quality_cpu.VERSIONS`), its default rate and its base grid."""

    def __init__(self, key: str, flags: tuple[str, ...], version: str, rates: tuple[float, ...],
                 max_extensions: int = MAX_EXTENSIONS):
        self.key, self.flags, self.version = key, tuple(flags), version
        self.name = row_name(key)
        self.rates = tuple(norm(r) for r in rates)
        self.max_extensions = max_extensions
        self.model = flags[flags.index("--model") + 1]
        self.objective = flags[flags.index("--objective") + 1] if "--objective" in flags else "softmax"
        epochs = int(flags[flags.index("--epochs") + 1]) if "--epochs" in flags else None
        optimizer = flags[flags.index("--optimizer") + 1] if "--optimizer" in flags else lmruns.PINNED[1]
        self.default_lr, self.schedule = defaults(self.model, self.objective, epochs, optimizer)

    def cell_flags(self, lr: float) -> str:
        return " ".join((*self.flags, "--lr", fmt(lr)))

    def run(self, lr: float) -> lmruns.Run:
        return lmruns.rate_run(self.key, self.flags, fmt(lr), self.version)

    def default_run(self) -> lmruns.Run:
        """The row's run without ``--lr`` (quality-cpu's run): the same training as the cell at the default rate."""
        return lmruns.Run(self.key, self.flags, version=quality_run_version(self.key, self.model, self.version))

    def __repr__(self):
        return f"Row({self.name!r})"


def rows(quick: bool) -> list[Row]:
    """The GRU-256 rows (every objective of the quality page, softmax first), then the feed-forward and Transformer
    trunks with the softmax; ``quick``: the softmax and NCE on a tiny GRU."""
    if quick:
        return [Row(o, (*BASE, *QUICK, "--objective", o), VERSIONS.get(o, ""), QUICK_RATES, max_extensions=0)
                for o in ("softmax", "nce")]
    out = [Row(o, (*BASE, "--objective", o), VERSIONS.get(o, ""), RATES) for o in OBJECTIVES]
    return out + [Row(t, TRUNKS[t], "", RATES) for t in TRUNK_ORDER]


# --- the records --------------------------------------------------------------------------------------------------

def cell_key(row: str, lr: float, flags: str, version: str) -> tuple:
    return (row, fmt(lr), flags, version or "")


def record_key(rec: dict) -> tuple:
    return cell_key(rec["row"], rec["lr"], rec["flags"], rec.get("version", ""))


def load_records(path: str) -> list[dict]:
    """The finished cells in ``path`` (one JSON object a line; a torn last line is ignored)."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and {"row", "lr", "flags"} <= set(rec):
                out.append(rec)
    return out


def append_record(path: str, rec: dict) -> None:
    """Append ``rec`` as one complete line, in one write, flushed and synced (after a newline if a torn line
    ends the file, so that the new record stands on a line of its own)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    line = json.dumps(rec, default=float) + "\n"
    with open(path, "a+b") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                line = "\n" + line
        f.write(line.encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def results(row: Row, records: list[dict]) -> dict[float, dict]:
    """The row's finished cells by rate (the latest record of a cell wins)."""
    out = {}
    for rec in records:
        lr = norm(rec["lr"])
        if record_key(rec) == cell_key(row.name, lr, row.cell_flags(lr), row.version):
            out[lr] = rec
    return out


def valid_of(rec: dict) -> float:
    """A cell's best-epoch validation perplexity; infinite for a run that diverged."""
    v = rec.get("best_valid")
    return math.inf if v is None or not math.isfinite(v) else v


# --- the grid -------------------------------------------------------------------------------------------------------

def next_rate(valid: dict[float, float], base: tuple[float, ...], max_extensions: int = MAX_EXTENSIONS) -> float | None:
    """The edge-extension rule. ``valid``: the row's finished rates -> best validation perplexity (``inf``: the run
    diverged). Returns the rate a factor 2 beyond the edge where the best rate tried sits, or None (the best is
    interior, or not yet known to be at an edge).

    The best (ties: the lower rate) calls for a rate below it when it is the lowest rate tried, and above it when
    it is the highest (and finite). With the base grid complete that is all; before, only where the best is at or
    beyond the base grid's own edge and its neighbour inside (the rate a factor 2 from it) has been tried and
    lost, so that an extension the base grid makes certain runs without waiting for the grid's far end (which can
    only move the best away from this edge, to the other). At most ``max_extensions`` rates beyond the base grid
    on either side."""
    base = tuple(norm(r) for r in base)
    tried = sorted(valid)
    if not tried:
        return None
    complete = all(r in valid for r in base)
    best = min(tried, key=lambda r: (valid[r], r))
    if best == tried[0] and (complete or (best <= min(base) and norm(best * 2) in valid)):
        if sum(r < min(base) for r in tried) >= max_extensions:
            return None
        return norm(best / 2)
    if best == tried[-1] and math.isfinite(valid[best]) and (
            complete or (best >= max(base) and norm(best / 2) in valid)):
        if sum(r > max(base) for r in tried) >= max_extensions:
            return None
        return norm(best * 2)
    return None


def priority(rates: tuple[float, ...], default: float) -> list[float]:
    """A row's base rates, the most informative first: those above its default rate (nearest first), then those
    below (nearest first), the default's own last."""
    up = sorted(r for r in rates if r > default)
    down = sorted((r for r in rates if r < default), reverse=True)
    return up + down + [r for r in rates if r == default]


def base_order(grid: list[Row]) -> list[tuple[Row, float]]:
    """Every base cell, in the order they train: the softmax GRU above its default rate; each other GRU row at
    the rates its default is not, round-robin by rank (the first rate above each default, then the next, ...);
    the rest of the softmax's grid; the GRU rows at their default rates; then the other trunks, row by row."""
    gru = [r for r in grid if r.model == "gru"]
    trunks = [r for r in grid if r.model != "gru"]
    soft = [r for r in gru if r.objective == "softmax"][:1]
    others = [r for r in gru if r not in soft]
    order: list[tuple[Row, float]] = []
    for r in soft:
        order += [(r, lr) for lr in priority(r.rates, r.default_lr) if lr > r.default_lr]
    ranked = {r.name: [lr for lr in priority(r.rates, r.default_lr) if lr != r.default_lr] for r in others}
    for i in range(max((len(v) for v in ranked.values()), default=0)):
        order += [(r, ranked[r.name][i]) for r in others if i < len(ranked[r.name])]
    for r in soft:  # its default rate (the quality page's row) first
        order += [(r, lr) for lr in ([r.default_lr] if r.default_lr in r.rates else [])
                  + [lr for lr in priority(r.rates, r.default_lr) if lr < r.default_lr]]
    order += [(r, r.default_lr) for r in others if r.default_lr in r.rates]
    for r in trunks:
        order += [(r, lr) for lr in priority(r.rates, r.default_lr)]
    return order


def pending(grid: list[Row], records: list[dict], skip: set = frozenset()) -> list[tuple[Row, float]]:
    """The cells still to train, in order: the base cells not in ``records`` (:func:`base_order`), with a row's
    extension cell (:func:`next_rate`) first as soon as its finished rates call for one (a row whose best sits at
    an edge is where the next cell tells most), then the cells beside a row's best so far (:func:`beside_best`),
    then the rest. ``skip``: cells (row name, rate) to leave out (failed here)."""
    ext = []
    for r in grid:
        res = results(r, records)
        nxt = next_rate({lr: valid_of(rec) for lr, rec in res.items()}, r.rates, r.max_extensions)
        if nxt is not None and (r.name, nxt) not in skip:
            ext.append((r, nxt))
    todo = [(r, lr) for r, lr in base_order(grid) if lr not in results(r, records) and (r.name, lr) not in skip]
    near = {r.name: beside_best(r, results(r, records)) for r in grid}
    return ext + [c for c in todo if near_best(c, near)] + [c for c in todo if not near_best(c, near)]


def beside_best(row: Row, res: dict[float, dict]) -> set[float]:
    """The row's best finished rate and the rates either side of it, on its base grid with the rates it tried; for
    a row with nothing finished, its default rate (where the best is expected) and the rates either side."""
    rates = sorted({norm(r) for r in row.rates} | set(res) | {row.default_lr})
    best = min(res, key=lambda r: (valid_of(res[r]), r)) if res else row.default_lr
    i = rates.index(best)
    return set(rates[max(i - 1, 0):i + 2])


def near_best(cell: tuple[Row, float], near: dict[str, set[float]]) -> bool:
    """Whether a cell can still change its row's choice at once: a rate beside the best so far (a cell two rates
    beyond a rate that already lost to the best runs after every such cell, since the grid is complete only with
    it, but it is the least likely to move the choice)."""
    return cell[1] in near[cell[0].name]


# --- training a cell ------------------------------------------------------------------------------------------------

def _src_state() -> dict:
    """The commit and, where the tree has changes, a hash of the source's diff (which code trained the cell)."""
    meta = stamp()
    out = {"commit": meta["commit"], "machine": meta["machine"]}
    if meta["commit"].endswith("+dirty"):
        try:
            diff = subprocess.run(["git", "diff", "HEAD", "--", "src"], cwd=REPO_DIR, capture_output=True,
                                  timeout=30).stdout
            out["src_diff_sha1"] = hashlib.sha1(diff).hexdigest()[:12]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return out


def reusable(st: lmruns.Setting, row: Row, lr: float) -> str | None:
    """The quality page's finished run of ``row`` when ``lr`` is the row's default rate and that run trained at it
    (not at an earlier default): the same training as the cell; else None."""
    if lr != row.default_lr:
        return None
    alias = lmruns.run_dir(st.work, st.files, row.default_run())
    trained = lmruns.trained_lr(alias)
    return alias if lmruns.finished(alias) and trained is not None and norm(trained) == norm(lr) else None


def train_cell(st: lmruns.Setting, row: Row, lr: float, tokens: int, seed: int | None = None) -> dict:
    """Train (or take an identical finished run of) one cell and return its record; UserError when training fails
    (a diverged run's record is returned instead, marked ``failed``). ``seed``: a replicate of the cell at that
    ``--seed`` (:mod:`.lr_grid_seeds`), never taken from another page."""
    flags = row.cell_flags(lr) + ("" if seed is None else f" --seed {seed}")
    base = {"row": row.name, "lr": lr, "flags": flags, "version": row.version, "data": st.label,
            **({} if seed is None else {"kind": lr_grid_seeds.KIND, "seed": seed}),
            "training_predictions": tokens, **_src_state(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    rd = reusable(st, row, lr) if seed is None else None
    if rd is not None:
        base["ran_as"] = " ".join(row.flags) + f" (the row's default rate {fmt(lr)}; a finished run reused)"
        click.echo(f"  {row.name} at {fmt(lr)}: quality-cpu's finished run reused ({rd})", err=True)
    if rd is None:
        try:
            run = row.run(lr) if seed is None else lmruns.Run(f"{row.run(lr).name}-seed{seed}", tuple(flags.split()),
                                                                version=row.version)
            rd = lmruns.train(st.work, st.files, run)
        except UserError as e:
            if "diverged" not in str(e):
                raise
            return {**base, "failed": str(e).strip().splitlines()[-1][-400:], "best_valid": None, "test_ppl": None}
    recs = lmruns.epochs(rd)
    best = min(recs, key=lambda m: m["valid_ppl"])
    test = lmruns.evaluate(rd, st.files, None)["ppl"]
    cpu = recs[-1]["cpu_s"]
    return {**base, "epochs": [{k: m[k] for k in ("epoch", "valid_ppl", "cpu_s", "wall_s", "lr", "train_loss")
                                if k in m} for m in recs],
            "best_valid": best["valid_ppl"], "best_epoch": best["epoch"], "test_ppl": test, "cpu_s": cpu,
            "words_per_cpu_s": tokens * len(recs) / cpu if cpu else None, "run_dir": os.path.basename(rd)}


def quick_files(st: lmruns.Setting) -> dict:
    """The built-in corpus with a quarter of its training text (so that the quick grid runs in seconds)."""
    short = os.path.join(st.work, "data-short")
    os.makedirs(short, exist_ok=True)
    out = dict(st.files)
    with open(st.files["train"], encoding="utf-8") as f:
        lines = f.readlines()
    out["train"] = os.path.join(short, "train.txt")
    with open(out["train"], "w", encoding="utf-8") as f:
        f.writelines(lines[: max(1, len(lines) // 4)])
    return out


# --- the page -------------------------------------------------------------------------------------------------------

def summarise(grid: list[Row], records: list[dict]) -> dict:
    """The page's data from the records alone: per row its cells, chosen rate, test at that rate, the gap against
    the tuned softmax and the target's verdict; and the cells not yet run."""
    todo = pending(grid, records)
    waiting = {(r.name, lr) for r, lr in todo}
    out = []
    for r in grid:
        res = results(r, records)
        cells = [{"lr": lr, "best_valid": rec.get("best_valid"), "best_epoch": rec.get("best_epoch"),
                  "epochs": len(rec.get("epochs", [])), "cpu_s": rec.get("cpu_s"),
                  "words_per_cpu_s": rec.get("words_per_cpu_s"), "failed": rec.get("failed"),
                  "commit": rec.get("commit"), "date": rec.get("date"),
                  "curve": [{"epoch": e["epoch"], "valid_ppl": e["valid_ppl"], "cpu_s": e["cpu_s"]}
                            for e in rec.get("epochs", [])]}
                 for lr, rec in sorted(res.items())]
        ok = {lr: rec for lr, rec in res.items() if math.isfinite(valid_of(rec))}
        chosen = min(ok, key=lambda lr: (valid_of(ok[lr]), lr)) if ok else None
        rest = sorted(lr for name, lr in waiting if name == r.name)
        out.append({"name": r.name, "flags": " ".join(r.flags), "version": r.version, "default_lr": r.default_lr,
                    "schedule": r.schedule, "base_rates": list(r.rates), "cells": cells,
                    "complete": not rest, "not_yet_run": rest, "chosen_lr": chosen,
                    "chosen_valid": None if chosen is None else ok[chosen]["best_valid"],
                    "default_valid": None if r.default_lr not in ok else ok[r.default_lr]["best_valid"],
                    # the test perplexity of the chosen rate only (the records hold every cell's)
                    "test_ppl": None if chosen is None else ok[chosen].get("test_ppl"),
                    "cpu_s": None if chosen is None else ok[chosen].get("cpu_s"),
                    "words_per_cpu_s": None if chosen is None else ok[chosen].get("words_per_cpu_s"),
                    "target": TARGETS.get(r.objective) if r.model == "gru" else None})
    soft = baseline_of(out)
    for x in out:
        x["vs_softmax"] = x["vs_softmax_valid"] = x["verdict"] = None
        if soft is None or soft["test_ppl"] is None or x["test_ppl"] is None or x is soft:
            continue
        x["vs_softmax"] = x["test_ppl"] / soft["test_ppl"] - 1
        x["vs_softmax_valid"] = x["chosen_valid"] / soft["chosen_valid"] - 1
        if x["target"] is not None:
            x["verdict"] = ("met" if x["vs_softmax"] <= x["target"] else "missed") + \
                ("" if x["complete"] and soft["complete"] else " so far")
    data_label = next((rec.get("data") for rec in records if rec.get("data")), None)
    return {"rows": out, "not_yet_run": [{"row": r.name, "lr": lr} for r, lr in todo], "data": data_label,
            "rates": list(RATES), "cells_run": sum(len(x["cells"]) for x in out),
            "cpu_s_total": sum(c["cpu_s"] or 0 for x in out for c in x["cells"])}


def baseline_of(rows_: list[dict]) -> dict | None:
    """The page's tuned softmax: its first GRU row trained with the softmax (``gru softmax``, or ``gru
    softmax-adamw0.1`` on the AdamW grid)."""
    return next((x for x in rows_ if x["name"].split()[0] == "gru" and x["name"].split()[1].startswith("softmax")),
                None)


def _ppl(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def _pct(v) -> str:
    return "—" if v is None else f"{100 * v:+.1f} %"


#: the softmax GRU's tries on its own settings, as NCE's samples had three: quality-cpu runs (name, what it changes)
SOFTMAX_TRIES = (("softmax-notie", "untied"), ("softmax-drop0.15", "dropout 0.15"),
                 ("softmax-drop0.35", "dropout 0.35"))
#: the Transformer's tries on the equal-CPU page, given to the softmax GRU as well (quality-cpu runs)
SOFTMAX_TRANSFORMER_TRIES = (("softmax-adamw0.1", "AdamW, weight decay 0.1"),
                             ("softmax-adamw0.1-edrop0.1", "AdamW 0.1 and embedding dropout 0.1"))
QUALITY_PAGE = os.path.join(REPO_DIR, "docs", "results", "quality-cpu.json")


def softmax_tries_text(page: str = QUALITY_PAGE) -> str:
    """What the quality page's runs of the softmax GRU at other settings of its own gave (at its chosen rate), or
    that they have not yet run."""
    try:
        with open(page, encoding="utf-8") as f:
            rows = {r["name"]: r for r in json.load(f)["data"]["rows"]}
    except (OSError, ValueError, KeyError):
        rows = {}
    done = [(what, rows[f"gru {name}"]) for name, what in SOFTMAX_TRIES if f"gru {name}" in rows]
    todo = [what for name, what in SOFTMAX_TRIES if f"gru {name}" not in rows]
    if not done:
        return ("The softmax GRU's own settings (dropout, tying) get as many tries as NCE's samples had (three: "
                f"{', '.join(todo)}, at its chosen rate, on the quality page); none has finished yet.")
    default = rows.get("gru softmax", {}).get("test_ppl")
    text = ("The softmax GRU's own settings get as many tries as NCE's samples had, at its chosen rate on the quality "
            "page (docs/results/quality-cpu.md), against its default (tied, dropout 0.25"
            + (f": {default:.2f}" if default else "") + "): "
            + ", ".join(f"{what} {r['test_ppl']:.2f}" for what, r in done) + " (test)")
    text += f"; not yet finished: {', '.join(todo)}." if todo else "."
    return text


def render(data: dict, records_path: str, quick: bool, spec: "Spec | None" = None) -> str:
    spec = spec or ADAM
    rows_ = data["rows"]
    rates = sorted({c["lr"] for x in rows_ for c in x["cells"]} | {lr for x in rows_ for lr in x["base_rates"]}
                   | {n["lr"] for n in data["not_yet_run"]})
    soft = baseline_of(rows_)
    grid_cells = []
    for x in rows_:
        by = {c["lr"]: c for c in x["cells"]}
        line = [x["name"]]
        for lr in rates:
            c = by.get(lr)
            if c is None:
                line.append("not yet run" if lr in x["not_yet_run"] else "")
            elif c["failed"]:
                line.append("diverged")
            else:
                v = f"{c['best_valid']:.2f}"
                line.append(f"**{v}**" if lr == x["chosen_lr"] else v)
        line.append("" if x["chosen_lr"] is None else fmt(x["chosen_lr"]) + ("" if x["complete"] else " (so far)"))
        grid_cells.append(line)
    summary_cells = [[x["name"], fmt(x["default_lr"]), _ppl(x["default_valid"]),
                      "—" if x["chosen_lr"] is None else fmt(x["chosen_lr"]), _ppl(x["chosen_valid"]),
                      _ppl(x["test_ppl"]), "—" if x is soft else _pct(x["vs_softmax"]),
                      "" if x["target"] is None else f"≤ {100 * x['target']:.0f} %",
                      x["verdict"] or ("" if x["target"] is None else "not yet judged"),
                      "—" if x["cpu_s"] is None else f"{x['cpu_s']:,.0f}",
                      "—" if x["words_per_cpu_s"] is None else f"{x['words_per_cpu_s']:,.0f}",
                      "complete" if x["complete"] else f"{len(x['not_yet_run'])} to run"] for x in rows_]
    schedules = {}
    for x in rows_:
        schedules.setdefault(x["schedule"], []).append(x["name"])
    lines = [
        f"Data: {data['data'] or 'none yet'}. " + ("**Quick run**: a tiny GRU on a quarter of the built-in corpus, two "
                                                   "rates, no extension; a smoke test, not the figures. " if quick else ""),
        "",
        "## Protocol", "",
        spec.intro + "Every row is trained as the quality-cpu page trains it, `sampledlm train` with the row's flags "
        "below and "
        "nothing else but `--lr R` (each objective's other settings at their defaults; one thread, `--device cpu`), "
        "for R in " + ", ".join(fmt(r) for r in data["rates"]) + ". Where the lowest best-epoch validation perplexity "
        "of a row sits at an edge of the rates it has tried, the row's grid extends by a factor 2 beyond that edge "
        "(0.016, 0.0005, ...) until the best is interior (such a cell runs as soon as the best so far lies at or beyond the base grid's edge "
        "and has beaten its neighbour, without waiting for the grid's far end); a run that diverges counts as "
        "infinitely bad. Epochs and "
        "schedule are each row's defaults, the same at every rate: "
        + "; ".join(f"{', '.join(names)}: {s}" for s, names in schedules.items()) + ". "
        "The validation perplexity of a cell is that of its best epoch (the model a run keeps). The chosen rate is "
        "the row's rate of lowest validation perplexity; **the test perplexity is reported for the chosen rate only** (it was measured for every "
        "cell and is kept in the records, but it chose nothing and is not shown for the other rates). The gaps are "
        "test perplexities against the softmax GRU at its own chosen rate (the tuned softmax), at equal epochs.", "",
        "Only the rate is tuned here. The objectives' other settings (samples, sample mode, head size, classes, "
        "components, arity) are their defaults, which earlier notes chose for each (benchmarks/notes). "
        + ("" if quick else spec.tries()),
        "",
        f"Records: `{records_path}`, one line per finished cell (the flags, commit, date, machine, per-epoch "
        "validation perplexity and CPU seconds, test perplexity); a new start skips the cells it holds and this page "
        "is built from it alone. CPU seconds: the training process's, validation included; words/CPU-s: training "
        "predictions x epochs / CPU seconds.", "",
        "## Validation perplexity by learning rate", "",
        "Best-epoch validation perplexity; bold: the chosen rate; blank: not in the row's grid.", "",
        table(["row", *[fmt(r) for r in rates], "chosen"], grid_cells), "",
        f"![validation perplexity against the learning rate]({spec.name}.png)", "",
        "## Against the issue's targets", "",
        "Test perplexity at the chosen rate; the gap against the tuned softmax GRU"
        + (f" ({_ppl(soft['test_ppl'])} at {fmt(soft['chosen_lr'])}{'' if soft['complete'] else ', its grid not complete'})"
           if soft and soft["test_ppl"] is not None else " (not yet run)")
        + ". Targets at equal epochs (issue 55): NCE, IS, CSS-IS and BlackOut within 3 %, adaptive and class "
        "within 2 %, hsm within 5 %; a verdict is final once both grids are complete (else 'so far'). The "
        "feed-forward and Transformer rows have no equal-epoch target (the Transformer's is at equal CPU time, "
        "judged on the quality page).", "",
        table(["row", "default rate", "valid at default", "chosen rate", "valid at chosen", "test at chosen",
               "vs tuned softmax", "target", "verdict", "CPU s (chosen)", "words/CPU-s (chosen)", "grid"],
              summary_cells), "",
    ]
    departs = [x for x in rows_ if x.get("default_lr") is not None and x.get("chosen_lr") is not None
               and fmt(x["default_lr"]) != fmt(x["chosen_lr"])]
    if departs:
        lines += ["Defaults that are not the chosen rate:", ""] + [
            f"- {x['name']}: {fmt(x['default_lr'])}, not {fmt(x['chosen_lr'])}: "
            + DEPARTURES.get(x["name"], "the default has not been moved to the chosen rate yet.") for x in departs] + [""]
    todo = data["not_yet_run"]
    lines += ["## Not yet run", ""]
    lines += (["Cells not yet run, in the order they train (an extension cell appears once its row's finished "
               "rates call for it): " + ", ".join(f"{n['row']} at {fmt(n['lr'])}" for n in todo) + "."]
              if todo else ["None: every row's grid is complete."])
    failed = [f"{x['name']} at {fmt(c['lr'])}: {c['failed']}" for x in rows_ for c in x["cells"] if c["failed"]]
    if failed:
        lines += ["", "## Diverged cells", ""] + [f"- {f}" for f in failed]
    lines += ["", *lr_grid_seeds.render(data.get("seeds") or {}, fmt, table)]
    lines += ["", f"{data['cells_run']} cells run, {data['cpu_s_total'] / 3600:.1f} CPU-hours of training in all."]
    return "\n".join(lines)


def figure(data: dict):
    import matplotlib
    import matplotlib.ticker

    colours = matplotlib.colormaps["tab10"]
    fig, ax = new_figure(figsize=(8.5, 5))
    for i, x in enumerate(data["rows"]):
        pts = [(c["lr"], c["best_valid"]) for c in x["cells"] if not c["failed"] and c["best_valid"] is not None]
        if not pts:
            continue
        colour = colours(i % 10)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, color=colour,
                ls="--" if x["name"].split()[0] != "gru" else "-",
                label=x["name"] + ("" if x["chosen_lr"] is None else f" (best {fmt(x['chosen_lr'])})"))
        if x["chosen_lr"] is not None:
            ax.plot([x["chosen_lr"]], [x["chosen_valid"]], marker="*", ms=12, color=colour)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("learning rate (log scale)")
    ax.set_ylabel("best-epoch validation perplexity")
    rates = sorted({c["lr"] for x in data["rows"] for c in x["cells"]})
    if rates:  # a tick at each rate tried, written as the flag is
        ax.set_xticks(rates, [fmt(r) for r in rates])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def write(out_dir: str, grid: list[Row], records_path: str, quick: bool, meta: dict | None = None,
          spec: "Spec | None" = None) -> dict:
    """Build the page from the records in ``records_path`` alone; returns its data."""
    spec = spec or ADAM
    records = load_records(records_path)
    data = summarise(grid, records)
    if spec.seeds:
        data["seeds"] = lr_grid_seeds.summarise(data, records, baseline_of, fmt)
    if spec.headline:
        data["headline"] = headline(data, spec.headline)
    shown = os.path.relpath(records_path, REPO_DIR) if os.path.abspath(records_path).startswith(REPO_DIR) \
        else records_path
    data["records"] = shown
    write_page(out_dir, spec.name, spec.title, meta or stamp(), data, render(data, shown, quick, spec),
               figure=figure(data))
    return data


#: the README's names of the GRU rows' outputs
METHODS = {"softmax": "full softmax", "nce": "NCE", "is": "IS", "css-is": "CSS-IS", "blackout": "BlackOut",
           "class": "class-based softmax", "adaptive": "adaptive softmax", "hsm": "hierarchical softmax"}


def headline(data: dict, note: str) -> list[dict]:
    """The README's rows (:mod:`.headline`): each complete GRU row whose chosen rate is its default, at that rate;
    relative cost = the tuned softmax's words per CPU second / the row's."""
    soft = baseline_of(data["rows"])
    if soft is None or not soft.get("words_per_cpu_s"):
        return []
    out = []
    for x in data["rows"]:
        key = x["name"].split()[1].removesuffix(ADAMW_SUFFIX)
        if x["name"].split()[0] != "gru" or key not in METHODS or not x["complete"] or x["test_ppl"] is None \
                or fmt(x["chosen_lr"]) != fmt(x["default_lr"]) or not x.get("words_per_cpu_s"):
            continue
        out.append({"method": f"GRU 256, {METHODS[key]}", "test_ppl": x["test_ppl"],
                    "relative_cost": soft["words_per_cpu_s"] / x["words_per_cpu_s"], "note": note})
    return out


@dataclass(frozen=True)
class Spec:
    """One grid's page: its name (the page's and the quick records' file name), title, committed records, rows
    (``quick`` -> the rows), a paragraph opening its protocol, and the text on the softmax's other tries."""
    name: str
    title: str
    records: str
    rows: Callable[[bool], list[Row]]
    intro: str = ""
    tries: Callable[[], str] = softmax_tries_text
    #: seed replicates of the verdicts nearest their targets (:mod:`.lr_grid_seeds`), once the grids are complete
    seeds: bool = False
    #: the README's rows (:func:`headline`): the GRU rows whose chosen rate is their default, with this note
    headline: str = ""


ADAM = Spec(NAME, "One learning-rate grid for every row: a tuned softmax and each output at its best rate", RECORDS,
            rows)


# --- the experiment -------------------------------------------------------------------------------------------------

def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True, only: set[str] | None = None,
        spec: Spec = ADAM) -> dict:
    """Train the cells not yet in the records (all of them, or those of the rows ``only`` names: ``softmax``,
    ``nce``, ``ffnn``, ``transformer``, ...), the page rewritten after each; ``train=False``: the page from the
    records alone. The records: :data:`RECORDS` for PTB, else ``<out_dir>/lr-grid.jsonl`` (``--quick`` or
    ``--data``)."""
    grid = spec.rows(quick)
    lmruns.check_only(only, [r.key for r in grid])
    path = spec.records if not quick and data_dir is None else os.path.join(out_dir, spec.name + ".jsonl")
    meta = stamp()
    if not train:
        return write(out_dir, grid, path, quick, meta, spec)
    st = lmruns.setting(quick, data_dir, with_kn3=False)
    if quick and data_dir is None:
        st.files = quick_files(st)
        st.label += ", a quarter of its training text"
    with open(st.files["train"], encoding="utf-8") as f:
        tokens = sum(len(line.split()) + 1 for line in f if line.strip())
    skip: set = set()  # cells that failed in this process (other than by diverging): tried again at the next start
    while True:
        todo = [(r, lr) for r, lr in pending(grid, load_records(path), skip) if only is None or r.key in only]
        if not todo:
            break
        # a cell whose training has finished on the quality page costs only its evaluation: recorded first
        row, lr = next((c for c in todo if reusable(st, *c)), todo[0])
        click.echo(f"[lr-grid, {len(todo)} cells known to run] {row.name} at --lr {fmt(lr)}", err=True)
        try:
            rec = train_cell(st, row, lr, tokens)
        except UserError as e:
            click.echo(f"  {row.name} at {fmt(lr)}: failed (tried again at the next start): {e}", err=True)
            skip.add((row.name, lr))
            continue
        append_record(path, rec)
        write(out_dir, grid, path, quick, meta, spec)
    if spec.seeds:
        train_seeds(st, grid, path, tokens, only, lambda: write(out_dir, grid, path, quick, meta, spec))
    return write(out_dir, grid, path, quick, meta, spec)


def train_seeds(st: lmruns.Setting, grid: list[Row], path: str, tokens: int, only: set[str] | None, after) -> None:
    """Train the seed replicates :mod:`.lr_grid_seeds` asks for (of the rows ``only`` names, or all), ``after()``
    each; a failed one is tried again at the next start."""
    by_name = {r.name: r for r in grid}
    skip: set = set()
    while True:
        todo = [(x, s) for x, s in lr_grid_seeds.jobs(summarise(grid, load_records(path)), load_records(path),
                                                       baseline_of, fmt)
                if (x["name"], s) not in skip and (only is None or by_name[x["name"]].key in only)]
        if not todo:
            return
        x, seed = todo[0]
        click.echo(f"[lr-grid seeds, {len(todo)} to run] {x['name']} at --lr {fmt(x['chosen_lr'])} --seed {seed}",
                   err=True)
        try:
            append_record(path, train_cell(st, by_name[x["name"]], x["chosen_lr"], tokens, seed))
        except UserError as e:
            click.echo(f"  {x['name']} seed {seed}: failed (tried again at the next start): {e}", err=True)
            skip.add((x["name"], seed))
        after()
