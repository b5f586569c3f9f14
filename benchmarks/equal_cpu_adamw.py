"""The equal-CPU page's AdamW candidate: each GRU row's chosen run under Adam, trained again with decoupled weight
decay (``--optimizer adamw --weight-decay 0.1``, Loshchilov & Hutter 2019) and nothing else changed.

The tuned softmax the rows are judged against is the best of its lr-grid run and its runs with the optimiser and
input tries (8 epochs each, the budget itself); AdamW 0.1 moved it from 92.01 to 90.47. Every other row gets the
same one try, on the run it spends the budget best with: the same trunk, epochs, rate and dropout, so the same
share of the softmax's CPU (AdamW's per-step cost is Adam's plus one multiply of each table, deferred for the
row-sparse ones: docs/neural.md). It trains once every Adam candidate of its row is finished, since the chosen one
can move until then; a row whose chosen run is its lr-grid cell gets none here (the quality page has that run).

A second candidate (:data:`TUNED_KIND`) is the same run at the rate the AdamW grid chose (:mod:`.lr_grid_adamw`):
its rate multiplied by the ratio of the row's AdamW-grid rate to its Adam-grid rate (a run at half the row's rate
stays at half), once the AdamW grid has settled that rate; none where the two grids chose the same rate.
"""

from __future__ import annotations

from sampledlm.errors import UserError

from . import lmruns, lr_grid

KIND = "adamw"
TUNED_KIND = "adamw-tuned"
TUNED_LABEL = "the same, at the AdamW grid's rate"
LABEL = "its chosen run, AdamW 0.1"
FLAGS = ("--optimizer", "adamw", "--weight-decay", "0.1")
_REPLACED = {"--optimizer", "--weight-decay"}


def _eq():
    from . import equal_cpu  # the page's module imports this one

    return equal_cpu


def adamw_flags(flags: str) -> tuple[str, ...]:
    """A run's ``sampledlm train`` flags with its optimiser and weight decay replaced by :data:`FLAGS`."""
    return (*_eq()._without(tuple(flags.split()), _REPLACED), *FLAGS)


def plan(x: dict) -> dict:
    """What the candidate trains for summary row ``x`` (:func:`.equal_cpu.summary_row`): ``{"base", "flags"}``, or
    ``{"state": ...}``: ``waits`` while the row has no chosen Adam run, ``grid cell`` where that run is its lr-grid
    cell (nothing to train on this page)."""
    base = x.get("adam_chosen")
    if base is None:
        return {"state": "waits"}
    if base == "equal_epochs" or not (x[base] or {}).get("flags"):
        return {"state": "grid cell"}
    return {"base": base, "flags": adamw_flags(x[base]["flags"])}


def record(e: dict, records: list[dict], x: dict, p: dict | None = None, kind: str = KIND) -> dict | None:
    """The candidate's latest record of ``kind`` for entry ``e`` whose summary row is ``x`` (trained as plan ``p``
    says; default :func:`plan`), or None."""
    p = plan(x) if p is None else p
    if "state" in p:
        return None
    want = " ".join(p["flags"])
    found = [r for r in _eq().of_kind(e, records, kind) if r.get("flags") == want]
    return found[-1] if found else None


def summary(e: dict, records: list[dict], x: dict) -> tuple[dict | None, str]:
    """``(the page's candidate or None, the cell's text while it has none)``."""
    rec = record(e, records, x)
    if rec is None:
        state = plan(x).get("state")
        return None, {"waits": "waits for its Adam runs", "grid cell": "— (its grid cell: the quality page's AdamW "
                      "row)"}.get(state, "not yet run")
    eq = _eq()
    trunk = {k: rec[k] for k in ("hidden", "embed") if rec.get(k)}
    return {**eq._candidate(rec), **trunk, "base": rec.get("base"), "epochs": len(rec.get("epochs") or [])}, ""


def _row(e: dict, records: list[dict], ratios: list[dict] | None, budget: float) -> dict | None:
    """Entry ``e``'s summary row, or None while one of its Adam candidates has still to train."""
    if not _eq().adam_finished(e, records, ratios):
        return None
    return _eq().summary_row(e, records, ratios, budget)


def done(e: dict, records: list[dict], ratios: list[dict] | None = None, budget: float = 0.0) -> dict | None:
    """The candidate's record; ``{"not_needed": ...}`` where there is nothing to train (the chosen run is the grid
    cell); None while it has still to train or waits for its row's Adam runs."""
    x = _row(e, records, ratios, budget)
    if x is None:
        return None
    p = plan(x)
    if p.get("state") == "grid cell":
        return {"not_needed": "grid cell"}
    return None if "state" in p else record(e, records, x)


def train(st: lmruns.Setting, e: dict, budget_s: float, tokens: int, records: list[dict] | None = None,
          ratios: list[dict] | None = None) -> dict:
    """Train the candidate of entry ``e`` and return its record."""
    x = _row(e, records or [], ratios, budget_s)
    p = {"state": "waits"} if x is None else plan(x)
    if "state" in p:
        raise UserError(f"{e['row'].name}: nothing to train yet ({p['state']})")
    base = x[p["base"]]
    row = e["row"]
    run = lmruns.Run(f"eq-{row.key}-{lr_grid.fmt(e['lr'])}-{p['base']}-adamw0.1", p["flags"], version=row.version)
    trunk = {k: base[k] for k in ("hidden", "embed") if base.get(k)}
    return _eq()._record(st, e, run, budget_s, tokens,
                         {"kind": KIND, "base": p["base"], **trunk, "epochs_planned": len(base.get("curve", []))})


# --- the same at the AdamW grid's rate -------------------------------------------------------------------------------

def grid_choice(key: str, records: list[dict] | None = None) -> dict | None:
    """The AdamW grid's choice for the row whose lr-grid key is ``key`` (``nce``): ``{"lr", "settled", "cell"}``,
    None while it has no finished cell. ``records``: the AdamW grid's (default: its committed file)."""
    from . import lr_grid_adamw

    rows = [r for r in lr_grid_adamw.rows(False) if r.key == f"{key}{lr_grid_adamw.SUFFIX}"]
    recs = lr_grid.load_records(lr_grid_adamw.RECORDS) if records is None else records
    if not rows:
        return None
    res = lr_grid.results(rows[0], recs)
    ok = {lr: rec for lr, rec in res.items() if lr_grid.valid_of(rec) < float("inf")}
    if not ok:
        return None
    lr = min(ok, key=lambda r: (lr_grid.valid_of(ok[r]), r))
    return {"lr": lr, "settled": _eq().settled(rows[0], res), "cell": ok[lr]}


def _with_lr(flags: tuple[str, ...], factor: float) -> tuple[str, ...]:
    i = flags.index("--lr")
    return (*flags[:i + 1], lr_grid.fmt(lr_grid.norm(float(flags[i + 1]) * factor)), *flags[i + 2:])


def tuned_plan(e: dict, x: dict, grid_records: list[dict] | None = None) -> dict:
    """What the tuned candidate trains: the AdamW candidate's plan (:func:`plan`) with ``--lr`` scaled, or
    ``{"state": ...}`` (``waits``, ``grid cell``, ``waits for the AdamW grid``, ``same rate``)."""
    p = plan(x)
    if "state" in p:
        return p
    g = grid_choice(e["row"].key, grid_records)
    if g is None or not g["settled"]:
        return {"state": "waits for the AdamW grid"}
    factor = g["lr"] / e["lr"]
    if lr_grid.fmt(g["lr"]) == lr_grid.fmt(e["lr"]):
        return {"state": "same rate"}
    return {**p, "flags": _with_lr(p["flags"], factor), "factor": factor, "grid_lr": g["lr"]}


def tuned_record(e: dict, records: list[dict], x: dict, grid_records: list[dict] | None = None) -> dict | None:
    return record(e, records, x, tuned_plan(e, x, grid_records), TUNED_KIND)


def tuned_summary(e: dict, records: list[dict], x: dict, grid_records: list[dict] | None = None
                  ) -> tuple[dict | None, str]:
    """``(the page's tuned candidate or None, the cell's text while it has none)``."""
    rec = tuned_record(e, records, x, grid_records)
    if rec is None:
        state = tuned_plan(e, x, grid_records).get("state")
        return None, {"waits": "waits for its Adam runs", "grid cell": "— (its grid cell: the AdamW grid's cell)",
                      "waits for the AdamW grid": "waits for the AdamW grid",
                      "same rate": "— (the AdamW grid chose the same rate)"}.get(state, "not yet run")
    trunk = {k: rec[k] for k in ("hidden", "embed") if rec.get(k)}
    return {**_eq()._candidate(rec), **trunk, "base": rec.get("base"), "epochs": len(rec.get("epochs") or []),
            "grid_lr": rec.get("grid_lr")}, ""


def tuned_done(e: dict, records: list[dict], ratios: list[dict] | None = None, budget: float = 0.0) -> dict | None:
    """The tuned candidate's record; ``{"not_needed": ...}`` where there is nothing to train; None while it has
    still to train or waits."""
    x = _row(e, records, ratios, budget)
    if x is None:
        return None
    p = tuned_plan(e, x)
    if p.get("state") in ("grid cell", "same rate"):
        return {"not_needed": p["state"]}
    return None if "state" in p else tuned_record(e, records, x)


def tuned_train(st: lmruns.Setting, e: dict, budget_s: float, tokens: int, records: list[dict] | None = None,
                ratios: list[dict] | None = None) -> dict:
    """Train the tuned candidate of entry ``e`` and return its record."""
    x = _row(e, records or [], ratios, budget_s)
    p = {"state": "waits"} if x is None else tuned_plan(e, x)
    if "state" in p:
        raise UserError(f"{e['row'].name}: nothing to train yet ({p['state']})")
    base = x[p["base"]]
    row = e["row"]
    run = lmruns.Run(f"eq-{row.key}-{lr_grid.fmt(e['lr'])}-{p['base']}-adamw0.1-lr{lr_grid.fmt(p['grid_lr'])}",
                     p["flags"], version=row.version)
    trunk = {k: base[k] for k in ("hidden", "embed") if base.get(k)}
    return _eq()._record(st, e, run, budget_s, tokens,
                         {"kind": TUNED_KIND, "base": p["base"], **trunk, "grid_lr": p["grid_lr"],
                          "epochs_planned": len(base.get("curve", []))})
