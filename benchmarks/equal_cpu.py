"""``equal-cpu``: every sampled and structured GRU-256 row of the lr-grid page given the tuned softmax's CPU
seconds (issue 55, deliverable 3). At equal epochs the sampled rows are judged on a fraction of the softmax's CPU
(they train 2-3.5x more words per CPU second); here each trains for as long as the softmax did.

Protocol, from the lr-grid records alone (:mod:`.lr_grid`, ``benchmarks/notes/lr-grid.jsonl``):

- the **budget** is the CPU seconds (the training process's, validation included) of the softmax GRU at its
  chosen rate: its 8 epochs with the cosine decay;
- each other GRU row trains at **its own chosen rate** with ``--epochs E``: E the largest number of its own epochs
  (CPU seconds an epoch from its chosen cell) that fits the budget, never fewer than the row's default epochs; the
  cosine decay spans the E epochs; every other setting is the row's default. The rate is the one chosen at the
  default epochs, not tuned again for E (the page says so);
- the test perplexity of the kept model (best validation epoch) is measured once; the CPU seconds a run took are
  reported beside the budget (a run that needs more than the budget is flagged, not cut: cutting a cosine decay
  short would judge a model trained at a high rate).

Resumable across sessions: each finished row appends one JSON line to ``benchmarks/notes/equal-cpu.jsonl``
(:data:`RECORDS`); a start skips the rows whose rate, epochs and flags are there. A row whose chosen rate changes
(the grid still running) trains again; a row whose rate is not settled yet (:func:`settled`) waits.
``--no-train`` builds the page from the two record files alone.
``--quick``: the lr-grid's quick rows (a tiny GRU, softmax and NCE), their grid run first when its records are
absent, every record in the output folder.
"""

from __future__ import annotations

import math
import os

import click

from sampledlm.errors import UserError

from . import lmruns, lr_grid
from .report import REPO_DIR, new_figure, stamp, table, write_page

NAME = "equal-cpu"
RECORDS = os.path.join(REPO_DIR, "benchmarks", "notes", "equal-cpu.jsonl")
OVER_BUDGET = 1.05  # a run above this share of the budget is flagged


def chosen_cells(grid: list[lr_grid.Row], records: list[dict]) -> dict[str, dict]:
    """Row name -> the record of its chosen cell (lowest validation perplexity; finite)."""
    out = {}
    for r in grid:
        ok = {lr: rec for lr, rec in lr_grid.results(r, records).items() if math.isfinite(lr_grid.valid_of(rec))}
        if ok:
            out[r.name] = ok[min(ok, key=lambda lr: (lr_grid.valid_of(ok[lr]), lr))]
    return out


def plan(grid: list[lr_grid.Row], records: list[dict]) -> tuple[dict | None, list[dict]]:
    """``(the softmax's chosen cell, one entry per other GRU row)``: its rate, the epochs E that fit the budget,
    the CPU seconds an epoch took in its chosen cell and whether the rate is settled (both rates beside it tried);
    rows without a chosen cell are left out."""
    chosen = chosen_cells(grid, records)
    soft = next((chosen[r.name] for r in grid if r.model == "gru" and r.objective == "softmax"
                 and r.name in chosen), None)
    if soft is None:
        return None, []
    out = []
    for r in grid:
        cell = chosen.get(r.name)
        if r.model != "gru" or r.objective == "softmax" or cell is None or not cell.get("epochs"):
            continue
        per_epoch = cell["cpu_s"] / len(cell["epochs"])
        epochs = max(len(cell["epochs"]), int(soft["cpu_s"] // per_epoch))
        res = lr_grid.results(r, records)
        out.append({"row": r, "lr": lr_grid.norm(cell["lr"]), "epochs": epochs, "epoch_cpu_s": per_epoch,
                    "cell": cell, "settled": settled(r, res)})
    return soft, out


def settled(row: lr_grid.Row, res: dict[float, dict]) -> bool:
    """Whether the row's chosen rate can no longer move to a neighbour: both rates beside it tried, and no
    extension beyond the grid's edge called for (:func:`.lr_grid.next_rate`)."""
    valid = {lr: lr_grid.valid_of(rec) for lr, rec in res.items()}
    return bool(res) and lr_grid.beside_best(row, res) <= set(res) and \
        lr_grid.next_rate(valid, row.rates, row.max_extensions) is None


def flags(entry: dict) -> tuple[str, ...]:
    return (*entry["row"].flags, "--lr", lr_grid.fmt(entry["lr"]), "--epochs", str(entry["epochs"]))


def record_of(entry: dict, records: list[dict]) -> dict | None:
    """The latest record of exactly this training (row, flags and objective version)."""
    want = (entry["row"].name, " ".join(flags(entry)), entry["row"].version)
    found = [rec for rec in records if (rec.get("row"), rec.get("flags"), rec.get("version", "")) == want]
    return found[-1] if found else None


def train_row(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int) -> dict:
    """Train one row for its E epochs and return its record."""
    row = entry["row"]
    run = lmruns.Run(f"eq-{row.key}-{lr_grid.fmt(entry['lr'])}-e{entry['epochs']}", flags(entry),
                     version=row.version)
    rd = lmruns.train(st.work, st.files, run)
    recs = lmruns.epochs(rd)
    best = min(recs, key=lambda m: m["valid_ppl"])
    meta = stamp()
    return {"row": row.name, "lr": entry["lr"], "epochs_planned": entry["epochs"], "flags": " ".join(flags(entry)),
            "version": row.version, "budget_cpu_s": budget_s, "data": st.label, "training_predictions": tokens,
            "commit": meta["commit"], "machine": meta["machine"], "date": meta["date"],
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "epochs": [{k: m[k] for k in ("epoch", "valid_ppl", "cpu_s", "wall_s", "lr", "train_loss") if k in m}
                       for m in recs],
            "best_valid": best["valid_ppl"], "best_epoch": best["epoch"], "cpu_s": recs[-1]["cpu_s"],
            "test_ppl": lmruns.evaluate(rd, st.files, None)["ppl"], "run_dir": os.path.basename(rd)}


def summarise(grid: list[lr_grid.Row], grid_records: list[dict], records: list[dict]) -> dict:
    soft, entries = plan(grid, grid_records)
    rows = []
    for e in entries:
        rec = record_of(e, records)
        cell = e["cell"]
        rows.append({"name": e["row"].name, "lr": e["lr"], "epochs": e["epochs"], "epoch_cpu_s": e["epoch_cpu_s"],
                     "settled": e["settled"],
                     "equal_epochs": {"epochs": len(cell["epochs"]), "test_ppl": cell.get("test_ppl"),
                                      "best_valid": cell.get("best_valid"), "cpu_s": cell.get("cpu_s"),
                                      "curve": _curve(cell)},
                     "run": None if rec is None else {
                         "test_ppl": rec["test_ppl"], "best_valid": rec["best_valid"], "cpu_s": rec["cpu_s"],
                         "best_epoch": rec["best_epoch"], "commit": rec.get("commit"), "date": rec.get("date"),
                         "curve": _curve(rec)}})
    soft_out = None if soft is None else {"lr": lr_grid.norm(soft["lr"]), "test_ppl": soft.get("test_ppl"),
                                          "best_valid": soft.get("best_valid"), "cpu_s": soft["cpu_s"],
                                          "epochs": len(soft["epochs"]), "curve": _curve(soft)}
    for x in rows:
        x["vs_softmax"] = None if soft_out is None or x["run"] is None else \
            x["run"]["test_ppl"] / soft_out["test_ppl"] - 1
    return {"softmax": soft_out, "rows": rows, "data": next((r.get("data") for r in grid_records), None)}


def _curve(rec: dict) -> list[dict]:
    return [{"epoch": m["epoch"], "valid_ppl": m["valid_ppl"], "cpu_s": m["cpu_s"]} for m in rec.get("epochs", [])]


def _p(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def render(data: dict) -> str:
    soft = data["softmax"]
    if soft is None:
        return "The lr-grid records hold no finished softmax GRU cell yet: no budget to give.\n"
    budget = soft["cpu_s"]
    lines = ["## Protocol", "",
             f"The budget is the CPU seconds of the softmax GRU-256 at its chosen rate on the lr-grid page "
             f"({lr_grid.fmt(soft['lr'])}, {soft['epochs']} epochs, cosine): **{budget:,.0f} CPU s** (the training "
             f"process's, validation included; one thread). Each other GRU row trains at its own chosen rate with as "
             f"many epochs as fit that budget at its own CPU seconds an epoch (from its chosen cell; never fewer than "
             f"its default epochs), the cosine decay spread over them, every other setting at its default. The rates "
             f"were chosen at the default epochs and not tuned again for the longer runs. Test perplexity of the model "
             f"kept (best validation epoch), measured once. Data: {data['data'] or 'PTB'}.", "",
             "## At the softmax's CPU seconds", "",
             f"Target (issue 55): every row at or below the tuned softmax ({_p(soft['test_ppl'])}).", ""]
    body = []
    for x in data["rows"]:
        run, eq = x["run"], x["equal_epochs"]
        over = run is not None and run["cpu_s"] > OVER_BUDGET * budget
        body.append([x["name"], lr_grid.fmt(x["lr"]), x["epochs"], f"{x['epoch_cpu_s']:,.0f}",
                     ("not yet run" if x["settled"] else "waits for its rate") if run is None
                     else f"{run['cpu_s']:,.0f}" + (" (over budget)" if over else ""),
                     _p(None if run is None else run["best_valid"]), _p(None if run is None else run["test_ppl"]),
                     "—" if x["vs_softmax"] is None else f"{100 * x['vs_softmax']:+.1f} %",
                     "—" if x["vs_softmax"] is None else ("met" if x["vs_softmax"] <= 0 else "missed"),
                     f"{_p(eq['test_ppl'])} ({eq['epochs']} ep)"])
    lines.append(table(["row", "rate", "epochs", "CPU s an epoch", "CPU s (run)", "best valid", "test",
                        "vs tuned softmax", "verdict", "test at equal epochs"], body))
    lines += ["", "A row *waits for its rate* while a rate beside its chosen one is not yet in the lr grid (a "
              "factor 2 beyond the grid where the chosen rate sits at its edge): a run at a rate the grid then "
              "moves would be thrown away.", "",
              f"Records: `benchmarks/notes/{NAME}.jsonl` (one line per finished row: flags, commit, date, machine, "
              "per-epoch validation perplexity and CPU seconds)."]
    return "\n".join(lines) + "\n"


def figure(data: dict):
    fig, ax = new_figure(figsize=(8.5, 5))
    soft = data["softmax"]
    if soft:
        c = soft["curve"]
        ax.plot([m["cpu_s"] for m in c], [m["valid_ppl"] for m in c], color="black", marker="o", ms=3, lw=2,
                label=f"softmax ({lr_grid.fmt(soft['lr'])}, {soft['epochs']} ep)")
        ax.axvline(soft["cpu_s"], color="black", lw=0.8, ls=":")
    for i, x in enumerate(data["rows"]):
        c = (x["run"] or {}).get("curve") or []
        if c:
            ax.plot([m["cpu_s"] for m in c], [m["valid_ppl"] for m in c], marker="o", ms=3, color=f"C{i % 10}",
                    label=f"{x['name'].removeprefix('gru ')} ({lr_grid.fmt(x['lr'])}, {x['epochs']} ep)")
    ax.set_xlabel("training CPU seconds (one thread)")
    ax.set_ylabel("validation perplexity")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    return fig


def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True) -> dict:
    """Train the rows not yet in the records (``train=False``: the page from the records alone)."""
    grid = lr_grid.rows(quick)
    own = quick or data_dir is not None
    grid_path = os.path.join(out_dir, lr_grid.NAME + ".jsonl") if own else lr_grid.RECORDS
    path = os.path.join(out_dir, NAME + ".jsonl") if own else RECORDS
    if own and train and not lr_grid.load_records(grid_path):
        lr_grid.run(quick=quick, data_dir=data_dir, out_dir=out_dir)
    meta = stamp()
    if train:
        st = lmruns.setting(quick, data_dir, with_kn3=False)
        if quick and data_dir is None:
            st.files = lr_grid.quick_files(st)
            st.label += ", a quarter of its training text"
        with open(st.files["train"], encoding="utf-8") as f:
            tokens = sum(len(line.split()) + 1 for line in f if line.strip())
        soft, entries = plan(grid, lr_grid.load_records(grid_path))
        for e in entries:
            if record_of(e, lr_grid.load_records(path)) is not None:
                continue
            if not e["settled"]:  # its run would be thrown away if the grid moved its rate
                click.echo(f"[equal-cpu] {e['row'].name}: waits for its lr-grid rate to settle", err=True)
                continue
            click.echo(f"[equal-cpu] {e['row'].name} at --lr {lr_grid.fmt(e['lr'])}, {e['epochs']} epochs "
                       f"(budget {soft['cpu_s']:,.0f} CPU s)", err=True)
            try:
                lr_grid.append_record(path, train_row(st, e, soft["cpu_s"], tokens))
            except UserError as err:
                click.echo(f"  {e['row'].name}: failed ({err}); tried again at the next start", err=True)
    data = summarise(grid, lr_grid.load_records(grid_path), lr_grid.load_records(path))
    title = "Every output at the tuned softmax's CPU seconds (PTB, GRU-256, one thread)"
    write_page(out_dir, NAME, title, meta, data, render(data), figure=figure(data))
    return data
