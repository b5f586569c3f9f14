"""The equal-CPU page's last candidate: the 1.5x trunk trained for the epochs its share of the softmax's allows.

The page's other candidates spend the softmax's CPU one way each: more epochs on the row's own trunk (at the default
dropout, then at 0.35), or a wider trunk for the default 8 epochs (at the row's rate, then at half of it). Where
a row's 1.5x trunk still costs less a step than the softmax, 8 epochs of it leave CPU unspent; where it costs more
(adaptive's: 1.10x the softmax's step), 8 epochs are over the budget and the candidate is not chosen at all. This one
combines the two: the 1.5x trunk, at the better of its two rates at the default epochs (on validation), for

    E = floor(8 x ratio)

epochs, ``ratio`` the softmax's step cost over the 1.5x trunk's, measured side by side
(:mod:`.equal_cpu_share`). E above the default epochs trains at the longer runs' dropout (0.35: longer runs
overfit at 0.25); E at or below them keeps the default dropout, as the 8-epoch wider runs did. E equal to the
default epochs would repeat a run already on the page, and is not trained (``same``).
"""

from __future__ import annotations

from . import equal_cpu_share, lmruns, lr_grid

KIND = "wide-fit"
LABEL = "wider, 1.5x, its share's epochs"


def _eq():
    from . import equal_cpu  # the page's module imports this one

    return equal_cpu


def width(entry: dict) -> tuple[int, int]:
    """``(hidden, embedding)`` of the row's 1.5x trunk."""
    return _eq().widths(entry["row"])[0]


def trunk(entry: dict) -> str:
    """The 1.5x trunk as the ratio records name it."""
    return equal_cpu_share.trunk_name(*width(entry))


def rate(entry: dict, records: list[dict]) -> float | None:
    """The rate of the row's better 1.5x run at its default epochs, on validation: the row's own rate (its wider
    or narrowest wider run on that trunk) or half of it; None while neither has finished without blowing up."""
    eq, w = _eq(), width(entry)
    own = [r for r in (*eq.wide_records(entry, records), *eq.narrow_records(entry, records))
           if (r.get("hidden"), r.get("embed")) == w]
    runs = [r for r in (*own, *eq.half_records(entry, records))
            if r.get("best_valid") is not None and not eq.diverged(r)]
    if not runs:
        return None
    best = min(runs, key=lambda r: r["best_valid"])
    return best.get("run_lr", best["lr"])


def fit_entry(entry: dict, records: list[dict], ratios: list[dict]) -> dict:
    """What this candidate trains for ``entry``'s row: ``{"epochs", "lr", "dropout", "ratio", "flags"}``, or a
    ``{"state": ...}`` saying why not yet (``no ratio``: the 1.5x trunk's step cost not measured; ``waits``: its
    default-epoch runs not finished) or not at all (``same``: the share allows exactly the default epochs)."""
    ratio = equal_cpu_share.ratio_of(entry["row"].name, ratios, trunk(entry))
    if ratio is None:
        return {"state": "no ratio"}
    lr = rate(entry, records)
    if lr is None:
        return {"state": "waits"}
    eq = _eq()
    default = len(entry["cell"]["epochs"])
    epochs = max(1, equal_cpu_share.epochs_allowed(ratio))
    if epochs == default:
        return {"state": "same", "ratio": ratio}
    dropout = eq.LONGER_DROPOUT if epochs > default else None
    flags = (*eq._without(eq.wide_flags(entry, width(entry), lr), {"--epochs"}), "--epochs", str(epochs),
             *(() if dropout is None else ("--dropout", f"{dropout:g}")))
    return {"epochs": epochs, "lr": lr, "dropout": dropout, "ratio": ratio, "flags": flags}


def fit_done(entry: dict, records: list[dict], ratios: list[dict] | None = None) -> dict | None:
    """The candidate's record; ``{"not_needed": ...}`` where there is nothing to train (no ratio measured, or the
    share allows the default epochs); None while it has still to train (or waits for the 1.5x runs)."""
    f = fit_entry(entry, records, ratios or [])
    if f.get("state") == "waits":
        return None
    if "state" in f:
        return {"not_needed": f["state"]}
    want = " ".join(f["flags"])
    found = [r for r in _eq().of_kind(entry, records, KIND) if r.get("flags") == want]
    return found[-1] if found else None


def train_fit(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int,
              records: list[dict] | None = None, ratios: list[dict] | None = None) -> dict:
    """Train :func:`fit_entry`'s run and return its record."""
    f = fit_entry(entry, records or [], ratios or [])
    if "state" in f:
        raise ValueError(f"{entry['row'].name}: nothing to train ({f['state']})")
    h, d = width(entry)
    row = entry["row"]
    run = lmruns.Run(f"eq-{row.key}-{lr_grid.fmt(f['lr'])}-h{h}-e{f['epochs']}", f["flags"], version=row.version)
    return _eq()._record(st, entry, run, budget_s, tokens,
                         {"kind": KIND, "hidden": h, "embed": d, "run_lr": f["lr"], "epochs_planned": f["epochs"],
                          "dropout": f["dropout"], "ratio": f["ratio"]})


def summary(entry: dict, records: list[dict], ratios: list[dict]) -> tuple[dict | None, str]:
    """``(the page's candidate or None, the cell's text while it has none)``."""
    rec = fit_done(entry, records, ratios)
    if rec is None:
        return None, "waits for its 1.5x runs" if fit_entry(entry, records, ratios).get("state") else "not yet run"
    if "not_needed" in rec:
        return None, {"no ratio": "its trunk's step cost not measured", "same": "—"}[rec["not_needed"]]
    eq = _eq()
    return {**eq._candidate(rec), "hidden": rec["hidden"], "embed": rec["embed"], "lr": rec["run_lr"],
            "epochs": rec["epochs_planned"], "dropout": rec.get("dropout")}, ""
