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
- or it spends the budget on a **wider trunk** at its default epochs: the hidden state and the embedding both
  scaled by the largest factor in :data:`WIDEN` whose CPU seconds fit the budget, measured by two short probes
  (``--max-steps``; their difference gives the CPU seconds a step, their remainder the validation's), at its own
  chosen rate (not tuned again for the width);
- a wider run that **diverges** (its last validation perplexity above :data:`DIVERGED` times its best, as CSS-IS's
  did at h 512 and 0.008) is trained once more at half its rate, the same width: a wider trunk can need a lower rate,
  and a blown-up run says nothing about the width; the page shows both runs;
- the **1.5x trunk at half the row's rate** (every row, added on 2026-12-01): at the row's own rate the wider
  trunks gained where that rate is 0.004 and lost or tied where it is 0.008, and a wider trunk trained by Adam
  wants a smaller rate (Yang & Hu 2021 scale the hidden matrices' rate by 1 / width), so each row gets this try too;
- the **1.5x trunk for the epochs its share allows** (:mod:`.equal_cpu_fit`, added on 2026-12-03): its step cost
  against the softmax's measured side by side, at the better of its two rates above;
- the chosen runs within 1 % of the tuned softmax, either side, train again at ``--seed`` 2 and 3 and are judged
  again on their means (:mod:`.equal_cpu_seeds`, added on 2026-12-03);
- of the row's candidates that fit the budget (its grid cell at the default epochs, the longer run, the wider
  runs), the one with the lowest validation perplexity is **chosen**, and its test perplexity (best validation
  epoch, measured once) is the row's figure. The CPU seconds each run took are reported beside the budget; a run
  above :data:`OVER_BUDGET` of it is flagged and not chosen (cutting a cosine decay short would judge a model
  trained at a high rate, so runs are not cut).

Resumable across sessions: each finished row appends one JSON line to ``benchmarks/notes/equal-cpu.jsonl``
(:data:`RECORDS`); a start skips the rows whose rate, epochs and flags are there. A row whose chosen rate changes
(the grid still running) trains again; a row whose rate is not settled yet (:func:`settled`) waits.
The **Transformer** has a budget of its own (issue 55: at or below the tuned softmax GRU within
:data:`TRANSFORMER_BUDGET_S`): at its lr-grid rate (once settled) it trains ``--epochs E --lr-schedule cosine``, E
the number of its own epochs (from its chosen cell) that fits that budget, every other setting at its default; its
grid cells ran with its default plateau schedule, which stops after three halvings, long before the budget is spent.
Further budget runs each differ from it, or from an earlier try (:data:`TRANSFORMER_STACKED`), in one setting
(:data:`TRANSFORMER_TRIES`: its dropout, its optimiser, its input's word dropout, its window, its rate, its
depth); the lowest validation of the grid cell and those runs is judged; a try stopped early
(:data:`TRANSFORMER_STOPPED`) is shown only. A budget run that spent under :data:`RESIZE` of the budget trains again for the epochs
its own CPU seconds an epoch fit, as a longer GRU run does (:func:`try_entry`).
``--no-train`` builds the page from the two record files alone.
``--quick``: the lr-grid's quick rows (a tiny GRU, softmax and NCE), their grid run first when its records are
absent, every record in the output folder.
"""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile

import click

from sampledlm.errors import UserError
from sampledlm.store import write_json

from . import equal_cpu_adamw, equal_cpu_fit, equal_cpu_seeds, equal_cpu_share, lmruns, lr_grid, lr_grid_adamw, \
    lr_grid_seeds
from .report import REPO_DIR, new_figure, stamp, table, write_page

NAME = "equal-cpu"
RECORDS = os.path.join(REPO_DIR, "benchmarks", "notes", "equal-cpu.jsonl")
OVER_BUDGET = equal_cpu_share.TOLERANCE  # a run above this share of the budget is flagged and not chosen
WIDEN = (1.5, 2.0, 3.0)  # trunk widths tried (hidden and embedding), times the row's own; the widest that fits wins
DIVERGED = 10.0  # a run whose last validation perplexity is above this many times its best blew up
PROBE_STEPS = (20, 80)  # the two short runs that measure a wider trunk's CPU seconds a step
TRANSFORMER_BUDGET_S = 3 * 3600.0  # issue 55: the Transformer at or below the tuned softmax GRU within 3 CPU-hours
#: the Transformer's second budget run: its first (dropout 0.3, its default) ended at a training perplexity of 46.6
#: (dropout on) against 108.4 on validation, flat from epoch 20; the softmax GRU had its own dropout tries (0.15,
#: 0.35) on the quality page
TRANSFORMER_DROPOUT = 0.5
#: the Transformer's budget runs beyond the first, each differing from it in one setting: (key, label, flags, tag).
#: AdamW (added 2026-12-03): the dropout-0.5 run learnt too slowly to finish within the budget (120.73 on validation
#: after 25 epochs); decoupled weight decay (Loshchilov & Hutter 2019) regularises without slowing the early epochs,
#: 0.1 as in GPT-2's and nanoGPT's recipes. Embedding dropout (added 2026-12-03, while AdamW's run tracked the first
#: run's validation within 0.5 % to epoch 10): whole words dropped from the input, Merity et al. 2018's 0.1 on PTB;
#: added to the AdamW run (:data:`TRANSFORMER_STACKED`), the best by 3.5 % when this try was first run. A 128-token
#: window (added 2026-12-05): training attends within each [batch, bptt] segment alone, so at the default 64 half the
#: positions trained see under 32 words, where the GRU carries its state across segments; 16 rows of 128 keep a step's
#: 2,048 tokens (and so the steps and the schedule), evaluation slides by 64 (context / 2); added to the AdamW run.
#: Twice the rate (added 2026-12-05), added to the embedding-dropout run, the best by then: the rate was tuned under
#: Adam alone (the lr grid), and under AdamW the softmax GRU's best rate moved up by 2x (the AdamW grid: 0.004 to
#: 0.008); the Transformer had no AdamW grid of its own. Two blocks instead of four (added 2026-12-05), added to
#: the embedding-dropout run as well: it still ended at a training perplexity of 59.7 (dropout on) against 101.5 on
#: validation, and its four blocks hold 3.1M weights beside the GRU trunk's 0.4M on 0.93M training words. Half the
#: rate (added 2026-12-05), added to the embedding-dropout run: twice the rate trailed it by 6.6-8.3 % from epoch 13
#: (108.68 at the end, +7.0 %), and at the default plateau schedule 0.0005 ended lower than 0.001 over 21 epochs.
#: Embedding dropout 0.2 (added 2026-12-05), in place of that run's 0.1: its gap to the GRU is generalisation (more
#: context at evaluation gains nothing; training perplexity 59.7, dropout on), and of the settings tried only the two
#: regularisers that do not slow the early epochs gained (decay 3.5 %, word dropout 3.0 %)
_ADAMW = ("--optimizer", "adamw", "--weight-decay", "0.1")
_EDROP = (*_ADAMW, "--embed-dropout", "0.1")
TRANSFORMER_TRIES = (("run_dropout", f"dropout {TRANSFORMER_DROPOUT:g}", ("--dropout", f"{TRANSFORMER_DROPOUT:g}"),
                      f"-drop{TRANSFORMER_DROPOUT:g}"),
                     ("run_adamw", "AdamW, weight decay 0.1", _ADAMW, "-adamw0.1"),
                     ("run_embdrop", "AdamW 0.1 and embedding dropout 0.1", _EDROP, "-adamw0.1-edrop0.1"),
                     ("run_window", "AdamW 0.1 and a 128-token window",
                      (*_ADAMW, "--bptt", "128", "--batch-size", "16"), "-adamw0.1-ctx128"),
                     ("run_rate", "AdamW 0.1, embedding dropout 0.1, twice the rate", _EDROP,
                      "-adamw0.1-edrop0.1-lr2x"),
                     ("run_layers", "AdamW 0.1, embedding dropout 0.1, two blocks", (*_EDROP, "--layers", "2"),
                      "-adamw0.1-edrop0.1-l2"),
                     ("run_half_rate", "AdamW 0.1, embedding dropout 0.1, half the rate", _EDROP,
                      "-adamw0.1-edrop0.1-lr0.5x"),
                     ("run_embdrop2", "AdamW 0.1 and embedding dropout 0.2", (*_ADAMW, "--embed-dropout", "0.2"),
                      "-adamw0.1-edrop0.2"))
TRANSFORMER_RUNS = (("run", "budget run", (), ""), *TRANSFORMER_TRIES)  # the first budget run, then the tries
#: tries that add one setting to an earlier try rather than to the first run (their tag -> the earlier try's tag):
#: they train once that try is final, with the epochs of its run of lowest validation perplexity (its first run or
#: its re-sized one), and are not re-sized themselves
TRANSFORMER_STACKED = {"-adamw0.1-edrop0.1": "-adamw0.1", "-adamw0.1-ctx128": "-adamw0.1",
                       "-adamw0.1-edrop0.1-lr2x": "-adamw0.1-edrop0.1", "-adamw0.1-edrop0.1-l2": "-adamw0.1-edrop0.1",
                       "-adamw0.1-edrop0.1-lr0.5x": "-adamw0.1-edrop0.1", "-adamw0.1-edrop0.2": "-adamw0.1-edrop0.1"}
#: tries that train at a multiple of the row's rate (their tag -> the factor)
TRANSFORMER_RATE = {"-adamw0.1-edrop0.1-lr2x": 2.0, "-adamw0.1-edrop0.1-lr0.5x": 0.5}
#: tries stopped before their last epoch (their tag -> why): each is recorded from the epochs its run directory holds
#: (``stopped``, no test perplexity), shown beside its base run's validation at the same epoch, never chosen
TRANSFORMER_STOPPED = {"-adamw0.1-ctx128": "stopped on 2026-12-05 to free its core for the rate try: it trailed its "
                                           "base run (the AdamW try) at every epoch it ran, and only a run below the "
                                           "embedding-dropout try (3 % under that base at the end) could be chosen",
                       "-adamw0.1-edrop0.2": "stopped on 2026-12-05 after epoch 13 of 25 (the session's end): it "
                                             "trailed its base at every epoch, by 2.7 % at the 13th, and the row's "
                                             "target needed a test 7 % below that base's"}
#: the longer runs' second try: they ended at a lower training loss and a higher validation perplexity than 8 epochs
#: (overfitting at the default 0.25); 0.35 is the higher of the two dropouts the softmax GRU tried on the lr-grid page
LONGER_DROPOUT = 0.35


def chosen_cells(grid: list[lr_grid.Row], records: list[dict]) -> dict[str, dict]:
    """Row name -> the record of its chosen cell (lowest validation perplexity; finite)."""
    out = {}
    for r in grid:
        ok = {lr: rec for lr, rec in lr_grid.results(r, records).items() if math.isfinite(lr_grid.valid_of(rec))}
        if ok:
            out[r.name] = ok[min(ok, key=lambda lr: (lr_grid.valid_of(ok[lr]), lr))]
    return out


#: a longer run that spent under this share of the budget is run again, sized by its own CPU seconds an epoch
RESIZE = equal_cpu_share.RESIZE


def plan(grid: list[lr_grid.Row], records: list[dict],
         own: list[dict] | None = None) -> tuple[dict | None, list[dict]]:
    """``(the softmax's chosen cell, one entry per other GRU row)``: its rate, the epochs E that fit the budget,
    the CPU seconds an epoch took in its chosen cell and whether the rate is settled (both rates beside it tried);
    rows without a chosen cell are left out. ``own``: this page's records, where a longer run too short for the
    budget re-sizes its row (:func:`_resized`)."""
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
        entry = {"row": r, "lr": lr_grid.norm(cell["lr"]), "epochs": epochs, "epoch_cpu_s": per_epoch,
                 "cell": cell, "settled": settled(r, res)}
        out.append(entry if own is None else _resized(entry, own, soft["cpu_s"]))
    return soft, out


def epochs_ran(rec: dict) -> int:
    """The epochs a record's run trained: its per-epoch list's length (older records hold the count)."""
    return rec["epochs"] if isinstance(rec["epochs"], int) else len(rec["epochs"])


def _resized(entry: dict, records: list[dict], budget_s: float) -> dict:
    """``entry`` again with the epochs its own longer run's CPU seconds an epoch allow, where that run spent under
    :data:`RESIZE` of the budget (a cell's CPU an epoch, measured on another machine or under another load, can be
    twice the longer run's); the first longer run stays in ``resized_from``."""
    first = record_of(entry, records)
    if first is None or not first.get("epochs") or first["cpu_s"] >= RESIZE * budget_s:
        return entry
    ran = epochs_ran(first)
    per_epoch = first["cpu_s"] / ran
    epochs = int(budget_s // per_epoch)
    if epochs <= entry["epochs"]:
        return entry
    return {**entry, "epochs": epochs, "epoch_cpu_s": per_epoch, "resized_from": first}


def transformer_entry(grid: list[lr_grid.Row], records: list[dict],
                      budget_s: float = TRANSFORMER_BUDGET_S) -> dict | None:
    """The Transformer's budget run: its chosen rate, the epochs E of its own (CPU seconds an epoch from its chosen
    cell) that fit ``budget_s``, the cosine decay spread over them; None while its grid row has no finished cell."""
    row = next((r for r in grid if r.model == "transformer"), None)
    cell = None if row is None else chosen_cells([row], records).get(row.name)
    if cell is None or not cell.get("epochs"):
        return None
    per_epoch = cell["cpu_s"] / len(cell["epochs"])
    return {"row": row, "lr": lr_grid.norm(cell["lr"]), "epochs": max(len(cell["epochs"]), int(budget_s // per_epoch)),
            "epoch_cpu_s": per_epoch, "cell": cell, "settled": settled(row, lr_grid.results(row, records)),
            "budget_s": budget_s, "extra_flags": ("--lr-schedule", "cosine")}


def with_try(entry: dict, flags: tuple[str, ...], tag: str) -> dict:
    """The same budget run with ``flags`` added: a run of its own (its flags, its run directory's name ``tag``);
    ``first`` keeps the run it was made from."""
    first = entry.get("first", entry)
    return {**entry, "extra_flags": (*entry.get("extra_flags", ()), *flags), "tag": tag, "first": first,
            "lr": first["lr"] * TRANSFORMER_RATE.get(tag, 1.0)}


def with_dropout(entry: dict, dropout: float = TRANSFORMER_DROPOUT) -> dict:
    """The same run with ``--dropout``: a run of its own (its flags, its run directory's name)."""
    return {**with_try(entry, ("--dropout", f"{dropout:g}"), f"-drop{dropout:g}"), "dropout": dropout}


def try_entry(t: dict, extra: tuple[str, ...], tag: str, records: list[dict]) -> dict:
    """The Transformer's budget run with ``extra`` flags, re-sized as a longer GRU run is (:func:`_resized`): where
    its run spent under :data:`RESIZE` of the budget (an epoch on this machine can cost 0.6x the grid cell's, measured
    elsewhere), again with the epochs its own CPU seconds an epoch fit; the first run stays in ``resized_from``.
    A try in :data:`TRANSFORMER_STACKED` takes its earlier try's best run's epochs instead (:func:`_sized`)."""
    return _sized(with_try(t, extra, tag), records)


def _sized(entry: dict, records: list[dict]) -> dict:
    """A stacked try with its earlier try's best run's epochs (:func:`_stacked`, never re-sized: that try's own
    re-sizing measured the longer schedule already); any other try re-sized by its own run (:func:`_resized`)."""
    if entry.get("tag", "") in TRANSFORMER_STACKED:
        return _stacked(entry, records)
    return _resized(entry, records, entry["budget_s"])


def _base_run(entry: dict, records: list[dict]) -> tuple[dict | None, bool]:
    """The record of the earlier try's run a stacked ``entry`` adds its setting to: of that try's runs (its first
    and, where it was re-sized, the re-sized one), the one of lowest validation perplexity (greedy forward
    selection: a setting is added to the best run so far); and whether that try is final (its re-sized run has
    landed, or it needed none). None before any has landed; ``(None, True)`` for other runs."""
    base_tag = TRANSFORMER_STACKED.get(entry.get("tag", ""))
    if base_tag is None:
        return None, True
    _, _, extra, tag = next(r for r in TRANSFORMER_RUNS if r[3] == base_tag)
    base = try_entry(entry["first"], extra, tag, records)
    final = record_of(base, records)
    runs = [r for r in (final, base.get("resized_from")) if r is not None and r.get("best_valid") is not None]
    return min(runs, key=lambda r: r["best_valid"], default=None), final is not None


def _stacked(entry: dict, records: list[dict]) -> dict:
    """A stacked try (:data:`TRANSFORMER_STACKED`) with its earlier try's best run's epochs (the same schedule, one
    setting added) and that run's CPU seconds an epoch; any other ``entry`` as it is."""
    base, _ = _base_run(entry, records)
    if base is None or not base.get("epochs") or not base.get("cpu_s"):
        return entry
    return {**entry, "epochs": epochs_ran(base), "epoch_cpu_s": base["cpu_s"] / epochs_ran(base)}


def try_done(entry: dict, records: list[dict]) -> dict | None:
    """The record of a Transformer try (:func:`try_entry` of the un-sized ``entry``), None while it has to train."""
    return record_of(_sized(entry, records), records)


def train_try(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int, records: list[dict] | None = None) -> dict:
    """Train a Transformer try, sized by ``records`` (:func:`_sized`), and return its record; a stacked try only
    once its earlier try is final (else :class:`UserError`, and it is tried at the next pass)."""
    records = records or []
    if entry.get("tag") in TRANSFORMER_STOPPED:
        return stopped_record(st, _sized({**entry, "budget_s": budget_s}, records), budget_s)
    if not _base_run(entry, records)[1]:
        raise UserError(f"waits for the run it adds its setting to ({TRANSFORMER_STACKED[entry['tag']]}) to land")
    return train_row(st, _sized({**entry, "budget_s": budget_s}, records), budget_s, tokens)


def stopped_record(st: lmruns.Setting, entry: dict, budget_s: float) -> dict:
    """The record of a try stopped before its last epoch (:data:`TRANSFORMER_STOPPED`): the epochs its run directory
    holds, ``stopped`` the reason, no test perplexity (its model is not the one its schedule ends with)."""
    row, run = entry["row"], row_run(entry)
    rd = lmruns.run_dir(st.work, st.files, run)
    recs = lmruns.epochs(rd) if os.path.exists(os.path.join(rd, "metrics.jsonl")) else []
    best = min(recs, key=lambda m: m["valid_ppl"], default=None)
    meta = stamp()
    return {"row": row.name, "lr": entry["lr"], "flags": " ".join(run.options), "version": row.version,
            "budget_cpu_s": budget_s, "data": st.label, "commit": meta["commit"], "machine": meta["machine"],
            "date": meta["date"], "epochs_planned": entry["epochs"], "stopped": TRANSFORMER_STOPPED[entry["tag"]],
            "epochs": [{k: m[k] for k in ("epoch", "valid_ppl", "cpu_s", "wall_s", "lr", "train_loss") if k in m}
                       for m in recs],
            "best_valid": None if best is None else best["valid_ppl"], "best_epoch": None if best is None else
            best["epoch"], "cpu_s": recs[-1]["cpu_s"] if recs else None, "test_ppl": None,
            "run_dir": os.path.basename(rd)}


def drop_entry(entry: dict, records: list[dict], ratios: list[dict] | None = None) -> dict:
    """The longer run at :data:`LONGER_DROPOUT`: its epochs, or where the longer run went over the budget, the
    epochs its CPU seconds an epoch fit in the budget (never fewer than the default epochs). Where that dropout run
    itself spent under :data:`RESIZE` of the budget or over :data:`OVER_BUDGET` times it, it is run again with the
    epochs its own CPU seconds an epoch fit (the first run stays in ``resized_from``), as a longer run is
    (:func:`_resized`). Where ``ratios`` (:mod:`.equal_cpu_share`'s records) hold the row's step cost against the
    softmax's, measured side by side, that share replaces the CPU seconds read on the run's own day: a run outside
    [:data:`RESIZE`, :data:`OVER_BUDGET`] of the softmax's 8 epochs is run again with ``floor(8 * ratio)``."""
    first = record_of(entry, records)
    if first and first.get("cpu_s") and first.get("budget_cpu_s") and first["cpu_s"] > first["budget_cpu_s"]:
        entry = {**entry, "epochs": min(entry["epochs"], _fit(entry, first))}
    entry = with_dropout(entry, LONGER_DROPOUT)
    own = record_of(entry, records)
    if own and own.get("cpu_s") and own.get("budget_cpu_s") and own.get("epochs") and \
            not RESIZE * own["budget_cpu_s"] <= own["cpu_s"] <= OVER_BUDGET * own["budget_cpu_s"]:
        fit = _fit(entry, own)
        if fit != entry["epochs"]:
            entry = {**entry, "epochs": fit, "resized_from": own}
    ratio = equal_cpu_share.ratio_of(entry["row"].name, ratios or [])
    if ratio is None:
        return entry
    fit = max(len(entry["cell"]["epochs"]), equal_cpu_share.epochs_allowed(ratio))
    standing = record_of(entry, records) or entry.get("resized_from")  # the run the rules above stand by
    if standing is None:
        return {k: v for k, v in entry.items() if k != "resized_from"} | {"epochs": fit}
    if standing.get("epochs") and fit != entry["epochs"] and \
            not RESIZE <= equal_cpu_share.share(epochs_ran(standing), ratio) <= OVER_BUDGET:
        entry = {**entry, "epochs": fit, "resized_from": standing}
    return entry


def _fit(entry: dict, rec: dict) -> int:
    """The epochs that ``rec``'s CPU seconds an epoch fit in its budget, never fewer than the row's default."""
    return max(len(entry["cell"]["epochs"]), int(rec["budget_cpu_s"] // (rec["cpu_s"] / epochs_ran(rec))))


def drop_done(entry: dict, records: list[dict], ratios: list[dict] | None = None) -> dict | None:
    """The record of the longer run at :data:`LONGER_DROPOUT`, or None while it has still to train."""
    return record_of(drop_entry(entry, records, ratios), records)


def train_drop(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int,
               records: list[dict] | None = None, ratios: list[dict] | None = None) -> dict:
    """Train :func:`drop_entry` and return its record."""
    return train_row(st, drop_entry(entry, records or [], ratios), budget_s, tokens)


def settled(row: lr_grid.Row, res: dict[float, dict]) -> bool:
    """Whether the row's chosen rate can no longer move to a neighbour: both rates beside it tried, and no
    extension beyond the grid's edge called for (:func:`.lr_grid.next_rate`)."""
    valid = {lr: lr_grid.valid_of(rec) for lr, rec in res.items()}
    return bool(res) and lr_grid.beside_best(row, res) <= set(res) and \
        lr_grid.next_rate(valid, row.rates, row.max_extensions) is None


def flags(entry: dict) -> tuple[str, ...]:
    return (*entry["row"].flags, "--lr", lr_grid.fmt(entry["lr"]), "--epochs", str(entry["epochs"]),
            *entry.get("extra_flags", ()))


def record_of(entry: dict, records: list[dict]) -> dict | None:
    """The latest record of exactly this training (row, flags and objective version)."""
    want = (entry["row"].name, " ".join(flags(entry)), entry["row"].version)
    found = [rec for rec in records if (rec.get("row"), rec.get("flags"), rec.get("version", "")) == want
             and rec.get("kind", "longer") == "longer"]
    return found[-1] if found else None


def wide_records(entry: dict, records: list[dict]) -> list[dict]:
    """The records of the row's wider runs (or of its probes finding that no width fits) at its rate, oldest first
    (a retry at half the rate is recorded under the row's rate, with ``run_lr`` the rate it trained at)."""
    return of_kind(entry, records, "wide")


def of_kind(entry: dict, records: list[dict], kind: str) -> list[dict]:
    """The records of ``kind`` of the row at its rate (and objective version), oldest first."""
    want = (entry["row"].name, lr_grid.fmt(entry["lr"]), entry["row"].version)
    return [rec for rec in records if rec.get("kind") == kind
            and (rec.get("row"), lr_grid.fmt(rec.get("lr", 0)), rec.get("version", "")) == want]


def wide_record_of(entry: dict, records: list[dict]) -> dict | None:
    """The latest record of the row's wider run at its rate: the retry where the first run diverged."""
    found = wide_records(entry, records)
    return found[-1] if found else None


def diverged(rec: dict) -> bool:
    """Whether a run blew up: stopped by the trainer as diverged, or its last validation perplexity above
    :data:`DIVERGED` times its best, or not finite."""
    if rec.get("failed"):
        return True
    curve = [m["valid_ppl"] for m in rec.get("epochs", [])]
    return bool(curve) and (not all(map(math.isfinite, curve)) or curve[-1] > DIVERGED * min(curve))


def wide_done(entry: dict, records: list[dict]) -> dict | None:
    """The wider run's finished record, or None while it has still to train: never run, or run once and diverged
    (its retry at half the rate, :func:`train_wide`, has not run yet)."""
    rec = wide_record_of(entry, records)
    if rec is None or (diverged(rec) and "run_lr" not in rec):
        return None
    return rec


# --- the wider trunk ------------------------------------------------------------------------------------------------

def _value(flags: tuple[str, ...], names: tuple[str, ...], default):
    for i, f in enumerate(flags[:-1]):
        if f in names:
            return int(flags[i + 1])
    return default


def _without(flags: tuple[str, ...], names: set[str]) -> tuple[str, ...]:
    out, skip = [], False
    for f in flags:
        if skip:
            skip = False
        elif f in names:
            skip = True
        else:
            out.append(f)
    return tuple(out)


def own_width(row: lr_grid.Row) -> tuple[int, int]:
    """``(hidden, embedding)`` of the row's trunk: its flags, else its model's defaults."""
    from sampledlm.neural.registry import model_class

    cfg = model_class(row.model).Config()
    return (_value(row.flags, ("--hidden",), cfg.hidden), _value(row.flags, ("-d", "--embed-dim"), cfg.embed_dim))


def widths(row: lr_grid.Row) -> list[tuple[int, int]]:
    """The wider trunks tried, narrowest first (sizes rounded to multiples of 8)."""
    h, d = own_width(row)
    return [(8 * max(1, round(h * f / 8)), 8 * max(1, round(d * f / 8))) for f in WIDEN]


def wide_flags(entry: dict, width: tuple[int, int], lr: float | None = None) -> tuple[str, ...]:
    """The row's flags on the wider trunk at ``lr`` (default: the row's chosen rate)."""
    h, d = width
    return (*_without(entry["row"].flags, {"--hidden", "-d", "--embed-dim"}), "--hidden", str(h), "--embed-dim", str(d),
            "--lr", lr_grid.fmt(entry["lr"] if lr is None else lr))


def probe(st: lmruns.Setting, entry: dict, width: tuple[int, int], tokens: int) -> dict:
    """Estimate the CPU seconds of one epoch of the wider trunk from two short runs (:data:`PROBE_STEPS` steps):
    ``(cpu_b - cpu_a) / (b - a)`` a step times the steps of an epoch, plus what the shorter run spent besides its
    steps (start and validation)."""
    cpu = []
    base = _without(wide_flags(entry, width), {"--epochs"})
    for n in PROBE_STEPS:
        with tempfile.TemporaryDirectory(dir=st.work, prefix="eq-probe-") as tmp:
            out = os.path.join(tmp, "run")
            lmruns.cli("train", "--train", st.files["train"], "--valid", st.files["valid"], *base, "--epochs", "1",
                       "--max-steps", str(n), "-o", out)
            cpu.append(lmruns.epochs(out)[-1]["cpu_s"])
            with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
                train = json.load(f)["train"]
    a, b = PROBE_STEPS
    per_step = max(cpu[1] - cpu[0], 0.0) / (b - a)
    steps = math.ceil(tokens / (train["batch_size"] * train["bptt"]))
    return {"hidden": width[0], "embed": width[1], "probe_cpu_s": cpu, "step_cpu_s": per_step,
            "epoch_cpu_s": per_step * steps + max(cpu[0] - a * per_step, 0.0)}


def choose_width(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int) -> tuple[dict | None, list[dict]]:
    """The widest trunk of :func:`widths` whose estimated run (its default epochs) fits the budget, and every
    probe's estimate; narrowest first, stopping at the first that does not fit."""
    epochs = len(entry["cell"]["epochs"])
    found, probes = None, []
    for width in widths(entry["row"]):
        p = probe(st, entry, width, tokens)
        p["run_cpu_s"] = p["epoch_cpu_s"] * epochs
        probes.append(p)
        click.echo(f"  width {width[0]}/{width[1]}: about {p['run_cpu_s']:,.0f} CPU s for {epochs} epochs", err=True)
        if p["run_cpu_s"] > budget_s:
            break
        found = p
    return found, probes


def train_row(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int,
              records: list[dict] | None = None) -> dict:
    """Train one row for its E epochs and return its record (``records``: unused, as :func:`train_wide` takes)."""
    return _record(st, entry, row_run(entry), budget_s, tokens, {"epochs_planned": entry["epochs"]})


def row_run(entry: dict) -> lmruns.Run:
    """The run of a row's (or a Transformer try's) entry: its name from row, rate, epochs and tag; its flags."""
    row = entry["row"]
    return lmruns.Run(f"eq-{row.key}-{lr_grid.fmt(entry['lr'])}-e{entry['epochs']}{entry.get('tag', '')}",
                      flags(entry), version=row.version)


def train_wide(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int,
               records: list[dict] | None = None) -> dict:
    """Probe the wider trunks, train the widest that fits at the row's default epochs and return its record (one
    saying that none fits when even the narrowest would not); where ``records`` hold that run diverged, train the
    same width again at half the rate (recorded with ``run_lr``)."""
    row = entry["row"]
    cache = os.path.join(st.work, f"eq-width-{row.key}-{lr_grid.fmt(entry['lr'])}-{row.version or 'v0'}.json")
    if os.path.exists(cache):  # a resumed run keeps the width its probes chose
        with open(cache, encoding="utf-8") as f:
            found, probes = json.load(f)
    else:
        found, probes = choose_width(st, entry, budget_s, tokens)
        write_json(cache, [found, probes])
    extra = {"kind": "wide", "probes": probes, "epochs_planned": len(entry["cell"]["epochs"])}
    if found is None:
        return {"row": row.name, "lr": entry["lr"], "version": row.version, "budget_cpu_s": budget_s,
                "none_fits": True, **extra}
    width = (found["hidden"], found["embed"])
    before = wide_record_of(entry, records or [])
    if before is not None and not before.get("none_fits") and diverged(before):
        lr = entry["lr"] / 2
        extra["run_lr"] = lr
        click.echo(f"  its wider run at {lr_grid.fmt(entry['lr'])} diverged: again at {lr_grid.fmt(lr)}", err=True)
    lr = extra.get("run_lr", entry["lr"])
    run = lmruns.Run(f"eq-{row.key}-{lr_grid.fmt(lr)}-h{width[0]}", wide_flags(entry, width, lr),
                     version=row.version)
    return _record(st, entry, run, budget_s, tokens, {**extra, "hidden": width[0], "embed": width[1]})


def narrow_records(entry: dict, records: list[dict]) -> list[dict]:
    """The records of the row's narrowest wider trunk (:data:`WIDEN`'s first factor) at its rate."""
    return of_kind(entry, records, "wide-narrow")


def narrow_needed(entry: dict, records: list[dict]) -> bool:
    """Whether the row also trains the narrowest wider trunk: its wider run (finished) is on a trunk wider than
    that, and the narrowest one's probe fits the budget."""
    wide = wide_done(entry, records)
    if wide is None or wide.get("none_fits"):
        return False
    first = widths(entry["row"])[0]
    return (wide["hidden"], wide["embed"]) != first and any(
        (p["hidden"], p["embed"]) == first and p.get("run_cpu_s", 0) <= wide["budget_cpu_s"]
        for p in wide.get("probes", []))


def narrow_done(entry: dict, records: list[dict]) -> dict | None:
    """The narrowest wider run's record; ``{"not_needed": True}`` where :func:`narrow_needed` says no (nothing to
    train); None while it has still to train (or its wider run has)."""
    found = narrow_records(entry, records)
    if found:
        return found[-1]
    if wide_done(entry, records) is None:
        return None
    return None if narrow_needed(entry, records) else {"not_needed": True}


def train_narrow(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int,
                 records: list[dict] | None = None) -> dict:
    """Train the narrowest wider trunk at the row's rate and default epochs (beside the widest that fits, which at
    a rate tuned for the row's own width can go unstable) and return its record."""
    row = entry["row"]
    if wide_done(entry, records or []) is None:
        raise UserError(f"{row.name}: its wider run has not finished; the narrower one comes after it")
    width = widths(row)[0]
    run = lmruns.Run(f"eq-{row.key}-{lr_grid.fmt(entry['lr'])}-h{width[0]}", wide_flags(entry, width),
                     version=row.version)
    return _record(st, entry, run, budget_s, tokens, {"kind": "wide-narrow", "hidden": width[0], "embed": width[1],
                                                      "epochs_planned": len(entry["cell"]["epochs"])})


def half_records(entry: dict, records: list[dict]) -> list[dict]:
    """The records of the row's narrowest wider trunk at half its rate (kind ``wide-half``)."""
    return of_kind(entry, records, "wide-half")


def half_done(entry: dict, records: list[dict], ratios: list[dict] | None = None) -> dict | None:
    """The half-rate run's record; ``{"over_share": ...}`` where the 1.5x trunk's step cost, measured side by side,
    puts its default epochs over the share (nothing to train: it could not be chosen); None while it has still to
    train."""
    found = half_records(entry, records)
    if found:
        return found[-1]
    over = half_over_share(entry, ratios or [])
    return None if over is None else {"over_share": over}


def half_over_share(entry: dict, ratios: list[dict]) -> float | None:
    """The share of the half-rate run (the 1.5x trunk, default epochs) where it is over the tolerance, else None."""
    ratio = equal_cpu_share.ratio_of(entry["row"].name, ratios, equal_cpu_share.trunk_name(*widths(entry["row"])[0]))
    share = None if ratio is None else equal_cpu_share.share(len(entry["cell"]["epochs"]), ratio)
    return share if share is not None and share > OVER_BUDGET else None


def half_run(entry: dict) -> lmruns.Run:
    """The narrowest wider trunk at half the row's rate, its default epochs."""
    row, width, lr = entry["row"], widths(entry["row"])[0], entry["lr"] / 2
    return lmruns.Run(f"eq-{row.key}-{lr_grid.fmt(lr)}-h{width[0]}", wide_flags(entry, width, lr), version=row.version)


def train_half(st: lmruns.Setting, entry: dict, budget_s: float, tokens: int,
               records: list[dict] | None = None) -> dict:
    """Train :func:`half_run` and return its record."""
    width = widths(entry["row"])[0]
    return _record(st, entry, half_run(entry), budget_s, tokens,
                   {"kind": "wide-half", "hidden": width[0], "embed": width[1], "run_lr": entry["lr"] / 2,
                    "epochs_planned": len(entry["cell"]["epochs"])})


def _record(st: lmruns.Setting, entry: dict, run: lmruns.Run, budget_s: float, tokens: int, extra: dict) -> dict:
    """Train ``run`` and return its record; a run the trainer stops as diverged is recorded too (``failed``, no
    perplexities), so that it counts as run and is shown, not tried again at every start."""
    row = entry["row"]
    meta = stamp()
    base = {"row": row.name, "lr": entry["lr"], **extra, "flags": " ".join(run.options),
            "version": row.version, "budget_cpu_s": budget_s, "data": st.label, "training_predictions": tokens,
            "commit": meta["commit"], "machine": meta["machine"], "date": meta["date"],
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
    try:
        rd = lmruns.train(st.work, st.files, run)
    except UserError as e:
        if "diverged" not in str(e):
            raise
        return {**base, "failed": str(e).strip().splitlines()[-1][-400:], "epochs": [], "best_valid": None,
                "best_epoch": None, "cpu_s": None, "test_ppl": None}
    recs = lmruns.epochs(rd)
    best = min(recs, key=lambda m: m["valid_ppl"])
    return {**base,
            "epochs": [{k: m[k] for k in ("epoch", "valid_ppl", "cpu_s", "wall_s", "lr", "train_loss") if k in m}
                       for m in recs],
            "best_valid": best["valid_ppl"], "best_epoch": best["epoch"], "cpu_s": recs[-1]["cpu_s"],
            "test_ppl": lmruns.evaluate(rd, st.files, None)["ppl"], "run_dir": os.path.basename(rd)}


def summarise(grid: list[lr_grid.Row], grid_records: list[dict], records: list[dict],
              ratios: list[dict] | None = None, quality: list[dict] | None = None,
              adamw_grid: list[dict] | None = None) -> dict:
    """The page's data; ``quality``: the quality page's rows, for the softmax GRU's runs with the optimiser and input
    tries (:func:`softmax_baseline`), the baseline every row and the Transformer are judged against; ``adamw_grid``:
    the AdamW grid's records (:mod:`.lr_grid_adamw`; none: its rates are not used)."""
    adamw_grid = adamw_grid or []
    soft, entries = plan(grid, grid_records, records)
    budget = None if soft is None else soft["cpu_s"]
    rows = []
    for e in entries:
        x = summary_row(e, records, ratios, budget)
        x["adamw"], x["adamw_text"] = equal_cpu_adamw.summary(e, records, x)
        x["adamw_tuned"], x["adamw_tuned_text"] = equal_cpu_adamw.tuned_summary(e, records, x, adamw_grid)
        mark_shares(x, ratios or [])
        x["chosen"] = choose(x, budget)
        rows.append(x)
    soft_out = None if soft is None else {"lr": lr_grid.norm(soft["lr"]), "test_ppl": soft.get("test_ppl"),
                                          "best_valid": soft.get("best_valid"), "cpu_s": soft["cpu_s"],
                                          "epochs": len(soft["epochs"]), "curve": _curve(soft)}
    base = softmax_baseline(soft_out, quality or [], equal_cpu_adamw.grid_choice("softmax", adamw_grid))
    for x in rows:
        c = x["chosen"]
        x["vs_softmax"] = None if base is None or c is None else x[c]["test_ppl"] / base["test_ppl"] - 1
    return {"softmax": soft_out, "baseline": base, "rows": rows,
            "data": next((r.get("data") for r in grid_records), None),
            "transformer": summarise_transformer(grid, grid_records, records, base)}


def summary_row(e: dict, records: list[dict], ratios: list[dict] | None, budget: float | None) -> dict:
    """The page's row for entry ``e``: each candidate under Adam, and ``adam_chosen``, the one :func:`choose` takes
    among them (the AdamW candidate, :mod:`.equal_cpu_adamw`, is that run again with the optimiser changed)."""
    rec, wide = record_of(e, records), wide_record_of(e, records)
    first = e.get("resized_from")  # a candidate until its re-sized run lands
    cell = e["cell"]
    x = {"name": e["row"].name, "lr": e["lr"], "epochs": e["epochs"], "epoch_cpu_s": e["epoch_cpu_s"],
         "settled": e["settled"],
         "resize_pending": None if first is None or rec is not None else
         {"epochs": epochs_ran(first),
          "cpu_s": first["cpu_s"]},
         "equal_epochs": {"epochs": len(cell["epochs"]), "test_ppl": cell.get("test_ppl"),
                          "best_valid": cell.get("best_valid"), "cpu_s": cell.get("cpu_s"),
                          "curve": _curve(cell)},
         "run": None if (rec or first) is None else _candidate(rec or first),
         "wide": None if wide is None else (
             {"none_fits": True, "probes": wide.get("probes", [])} if wide.get("none_fits") else
             {**_candidate(wide), "hidden": wide["hidden"], "embed": wide["embed"],
              "epochs": wide.get("epochs_planned"), "probes": wide.get("probes", []),
              "run_lr": wide.get("run_lr"), "blew_up": diverged(wide),
              "diverged": [{**_candidate(r), "lr": r.get("run_lr", r["lr"])} for r in wide_records(e, records)
                           if r is not wide and not r.get("none_fits") and diverged(r)]})}
    narrow = narrow_records(e, records)
    x["narrow"] = None if not narrow else {**_candidate(narrow[-1]), "hidden": narrow[-1]["hidden"],
                                            "embed": narrow[-1]["embed"]}
    x["narrow_needed"] = bool(narrow) or wide_done(e, records) is None or narrow_needed(e, records)
    half = half_done(e, records)
    over = half_over_share(e, ratios or []) if half is None else None
    x["half_text"] = None if over is None else f"not run: {over:.2f} of its share at its default epochs"
    x["half"] = None if half is None else {**_candidate(half), "hidden": half["hidden"], "embed": half["embed"],
                                           "lr": half["run_lr"]}
    drop_e = drop_entry(e, records, ratios)
    drop = record_of(drop_e, records) or drop_e.get("resized_from")  # a candidate until its re-sized run lands
    x["drop_epochs"] = drop_e["epochs"]
    x["drop_resize_pending"] = None if drop is None or "resized_from" not in drop_e or drop is not \
        drop_e["resized_from"] else {"epochs": epochs_ran(drop)}
    x["drop"] = None if drop is None else {**_candidate(drop), "dropout": LONGER_DROPOUT}
    x["fit"], x["fit_text"] = equal_cpu_fit.summary(e, records, ratios or [])
    mark_shares(x, ratios or [])
    x["adam_chosen"] = choose(x, budget)
    return x


def softmax_baseline(soft: dict | None, quality: list[dict], adamw: dict | None = None) -> dict | None:
    """The tuned softmax GRU every row and the Transformer are judged against: of its lr-grid run (``soft``, whose
    CPU seconds are the budget) and its quality-page runs with the optimiser and input tries the other rows got
    (:data:`lr_grid.SOFTMAX_TRANSFORMER_TRIES`, 8 epochs at that rate: the same budget), the one of lowest validation
    perplexity; ``tried`` lists them, ``pending`` the tries not finished (a baseline gets the tuning of the methods
    compared with it). ``adamw``: the AdamW grid's choice for the softmax (:func:`.equal_cpu_adamw.grid_choice`),
    a try too where its rate is not the lr-grid's (at that rate it is the quality page's AdamW run)."""
    if soft is None:
        return None
    rows = {r["name"]: r for r in quality}
    tried = [{"name": "its lr-grid run", "run": "softmax", "test_ppl": soft["test_ppl"],
              "best_valid": soft["best_valid"]}]
    pending = []
    for name, what in lr_grid.SOFTMAX_TRANSFORMER_TRIES:
        r = rows.get(f"gru {name}")
        if r and r.get("curve") and r.get("test_ppl") is not None:
            curve = [{"epoch": i + 1, "valid_ppl": c["valid_ppl"], "cpu_s": c.get("cpu_s")}
                     for i, c in enumerate(r["curve"])]
            tried.append({"name": what, "run": name, "test_ppl": r["test_ppl"], "curve": curve,
                          "best_valid": min(c["valid_ppl"] for c in r["curve"])})
        else:
            pending.append(what)
    if adamw is not None and lr_grid.fmt(adamw["lr"]) != lr_grid.fmt(soft["lr"]):
        cell = adamw["cell"]
        tried.append({"name": f"AdamW 0.1 at the AdamW grid's rate {lr_grid.fmt(adamw['lr'])}"
                      + ("" if adamw["settled"] else " (that grid not settled)"),
                      "run": f"softmax-adamw0.1@{lr_grid.fmt(adamw['lr'])}", "test_ppl": cell["test_ppl"],
                      "best_valid": cell["best_valid"], "curve": _curve(cell)})
    best = min(tried, key=lambda c: c["best_valid"])
    return {**best, "tried": tried, "pending": pending}


def summarise_transformer(grid: list[lr_grid.Row], grid_records: list[dict], records: list[dict],
                          soft: dict | None) -> dict | None:
    """The Transformer's grid cell and budget runs (:data:`TRANSFORMER_RUNS`); the chosen one (lowest validation
    within the budget) against the test perplexity of ``soft``, the softmax GRU (:func:`softmax_baseline`)."""
    e = transformer_entry(grid, grid_records)
    if e is None:
        return None
    cell = e["cell"]
    x = {"name": e["row"].name, "lr": e["lr"], "epochs": e["epochs"], "epoch_cpu_s": e["epoch_cpu_s"],
         "settled": e["settled"], "budget_s": e["budget_s"], "flags": " ".join(flags(e)),
         "grid_cell": {"epochs": len(cell["epochs"]), "test_ppl": cell.get("test_ppl"),
                       "best_valid": cell.get("best_valid"), "cpu_s": cell.get("cpu_s"), "curve": _curve(cell)},
         "dropout": TRANSFORMER_DROPOUT, "baseline": soft,
         "tries": [[key, label, " ".join(extra) + (f" --lr {lr_grid.fmt(e['lr'] * TRANSFORMER_RATE[tag])}"
                                                   if tag in TRANSFORMER_RATE else "")]
                   for key, label, extra, tag in TRANSFORMER_TRIES],
         "stopped": {key: TRANSFORMER_STOPPED[tag] for key, _, _, tag in TRANSFORMER_TRIES
                     if tag in TRANSFORMER_STOPPED}}
    tried, x["planned"], keys = [], {}, ["grid_cell"]
    for key, _, extra, tag in TRANSFORMER_RUNS:
        te = try_entry(e, extra, tag, records)
        x["planned"][key] = te["epochs"]  # what a run not yet trained trains for
        tried.append(record_of(te, records) or te.get("resized_from"))  # a candidate until its re-sized run lands
        x[key] = None if tried[-1] is None else _candidate(tried[-1])
        keys.append(key)
        if x[key] is not None:
            x[key]["epochs"] = epochs_ran(tried[-1])
            if x[key].get("stopped"):
                x[key]["base_curve"] = _curve(_base_run(te, records)[0] or {})
            x[key]["resize_to"] = te["epochs"] if tried[-1] is te.get("resized_from") else None
        first = te.get("resized_from")
        if first is not None and tried[-1] is not first:  # both ran within the budget: both are candidates
            x[f"{key}_first"] = {**_candidate(first), "epochs": epochs_ran(first)}
            keys.append(f"{key}_first")
    ok = [k for k in keys if x.get(k) and not x[k].get("stopped") and
          x[k].get("best_valid") is not None and x[k]["cpu_s"] <= OVER_BUDGET * e["budget_s"]]
    x["chosen"] = min(ok, key=lambda k: x[k]["best_valid"]) if any(tried) and ok else None
    x["vs_softmax"] = None if soft is None or x["chosen"] is None else \
        x[x["chosen"]]["test_ppl"] / soft["test_ppl"] - 1
    return x


def _tried_text(base: dict, intro: str, after: str) -> str:
    """``intro``, the softmax runs :func:`softmax_baseline` chose from (valid / test), ``after``, what is pending."""
    text = intro + "; ".join(f"{c['name']} {_p(c['best_valid'])} / {_p(c['test_ppl'])}" for c in base["tried"]) + after
    return text + (f"; not yet finished: {', '.join(base['pending'])}." if base.get("pending") else ".")


def _row_baseline_text(base: dict) -> str:
    """What the tuned softmax the GRU rows are judged against was chosen from (:func:`softmax_baseline`)."""
    if not base.get("tried"):
        return "The tuned softmax is the lr-grid run whose CPU seconds are the budget."
    return _tried_text(base, "The tuned softmax every row is judged against is the best on validation of the "
                       "softmax's runs within the budget (8 epochs at its lr-grid rate): ",
                       " (valid / test; the quality page has them)")


def _baseline_text(base: dict) -> str:
    """What the softmax GRU the Transformer is judged against was chosen from (:func:`softmax_baseline`)."""
    if not base.get("tried"):
        return "The softmax GRU is its lr-grid run."
    return _tried_text(base, "The softmax GRU it is judged against got the Transformer's optimiser and input tries "
                       "too (8 epochs at its lr-grid rate, on the quality page; its dropout tries are there as well), "
                       "the one of lowest validation perplexity taken: ", " (valid / test)")


QUALITY_PAGE = os.path.join(REPO_DIR, "docs", "results", "quality-cpu.json")


def quality_rows() -> list[dict]:
    """The quality page's rows, its seed replicates among them ([] without the page)."""
    if not os.path.exists(QUALITY_PAGE):
        return []
    with open(QUALITY_PAGE, encoding="utf-8") as f:
        return json.load(f).get("data", {}).get("rows", [])


def softmax_seeds(rows: list[dict], base: dict | None = None, adamw_records: list[dict] | None = None
                  ) -> dict[int, float]:
    """Seed -> the tuned softmax's test perplexity: the replicates of the run ``base`` (:func:`softmax_baseline`)
    is, from the quality page's ``rows`` (:func:`quality_rows`) for its lr-grid run or one of its tries, from the
    AdamW grid's records (``adamw_records``, :mod:`.lr_grid_seeds`) for that grid's cell."""
    from .quality_cpu import seed_replicates

    run = (base or {}).get("run", "softmax")
    if "@" not in run:
        return seed_replicates(rows, run)
    key, lr = run.split("@")
    got = {r["seed"]: r["test_ppl"] for r in adamw_records or [] if r.get("kind") == lr_grid_seeds.KIND
           and r.get("row") == f"gru {key}" and lr_grid.fmt(r["lr"]) == lr and r.get("test_ppl") is not None}
    return {1: base["test_ppl"], **got} if got else {}


def train_seeds(st: lmruns.Setting, entries: list[dict], budget_s: float, tokens: int, grid: list[lr_grid.Row],
                grid_path: str, path: str, ratios: list[dict], only: set[str] | None) -> None:
    """Train the seed replicates of the chosen runs nearest the line (:mod:`.equal_cpu_seeds`), nearest first;
    nothing without the softmax's own replicates to judge them against."""
    data = summarise(grid, lr_grid.load_records(grid_path), lr_grid.load_records(path), ratios, quality_rows(),
                     lr_grid.load_records(lr_grid_adamw.RECORDS))
    seeds = softmax_seeds(quality_rows(), data["baseline"], lr_grid.load_records(lr_grid_adamw.RECORDS))
    if not seeds or abs(seeds.get(1, 0.0) - (data["baseline"] or {}).get("test_ppl", -1.0)) >= 0.005:
        return  # no replicates of the softmax the rows are judged against
    for e, cand, seed, flags in equal_cpu_seeds.jobs(data, entries, lr_grid.load_records(path)):
        if only is not None and e["row"].key not in only:
            continue
        click.echo(f"[equal-cpu] {e['row'].name} {LABEL[cand]} at --seed {seed} (budget {budget_s:,.0f} CPU s)",
                   err=True)
        try:
            lr_grid.append_record(path, equal_cpu_seeds.train(st, e, cand, seed, flags, budget_s, tokens))
        except UserError as err:
            click.echo(f"  {e['row'].name}: failed ({err}); tried again at the next start", err=True)


def seed_means(data: dict, quality_rows: list[dict]) -> list[dict]:
    """Rows chosen at their default epochs that miss on one seed, judged again on means: the quality page's seed
    replicates are the same training (its seed-1 row is the lr-grid cell at the default rate, checked by its test
    perplexity), so the row's mean over seeds against the softmax's mean over the same seeds, as that page judges."""
    from .quality_cpu import seed_replicates

    soft = seed_replicates(quality_rows, "softmax")
    if abs(soft.get(1, 0.0) - ((data.get("baseline") or data["softmax"] or {}).get("test_ppl") or -1.0)) >= 0.005:
        return []  # the replicates are of another softmax run than the one the rows are judged against
    out = []
    for x in data["rows"]:
        if x["chosen"] != "equal_epochs" or x["vs_softmax"] is None or x["vs_softmax"] <= 0:
            continue
        ppl = seed_replicates(quality_rows, x["name"].removeprefix("gru "))
        both = sorted(s for s in ppl if s in soft)
        same = 1 in ppl and abs(ppl[1] - (x["equal_epochs"]["test_ppl"] or 0)) < 0.005
        if same and len(both) >= 2:
            mean, soft_mean = (sum(d[s] for s in both) / len(both) for d in (ppl, soft))
            out.append({"name": x["name"], "seeds": {s: ppl[s] for s in both}, "softmax": {s: soft[s] for s in both},
                        "mean": mean, "softmax_mean": soft_mean, "vs_softmax_mean": mean / soft_mean - 1})
    return out


def render_seed_means(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    lines = ["", "**On the mean of seeds.** A row chosen at its default epochs is the lr grid's cell, the same "
             "training as the quality page's row, which has seed replicates (docs/results/quality-cpu.md). Where one "
             "seed misses, the row is judged again on its mean over the seeds the softmax also has, against the "
             "softmax's mean, as the quality page judges its targets:", ""]
    for r in rows:
        seeds = ", ".join(f"{r['seeds'][s]:.2f}" for s in sorted(r["seeds"]))
        verdict = "met" if r["vs_softmax_mean"] <= 0 else "missed"
        lines.append(f"- {r['name']}: seeds {seeds}, mean {r['mean']:.2f} against the softmax's "
                     f"{r['softmax_mean']:.2f}: {100 * r['vs_softmax_mean']:+.1f} %, **{verdict}** on the mean.")
    return lines


def _candidate(rec: dict) -> dict:
    return {"test_ppl": rec.get("test_ppl"), "best_valid": rec.get("best_valid"), "cpu_s": rec.get("cpu_s"),
            "best_epoch": rec.get("best_epoch"), "commit": rec.get("commit"), "date": rec.get("date"),
            "curve": _curve(rec), "flags": rec.get("flags"),
            **({"failed": rec["failed"]} if rec.get("failed") else {}),
            **({"stopped": rec["stopped"]} if rec.get("stopped") else {})}


#: the grid's cell, the longer run, the widest trunk that fits, the narrowest wider trunk (where the widest is wider),
#: the narrowest wider trunk at half the rate, the longer run at more dropout, the 1.5x trunk for its share's epochs,
#: and the best of these again under AdamW (:mod:`.equal_cpu_adamw`)
CANDIDATES = ("equal_epochs", "run", "wide", "narrow", "half", "drop", "fit", "adamw", "adamw_tuned")


def adam_finished(e: dict, records: list[dict], ratios: list[dict] | None = None) -> bool:
    """Whether every Adam candidate of entry ``e`` has finished or has nothing to train."""
    return all(done(e, records) is not None for done in _adam_done(ratios))


def _adam_done(ratios: list[dict] | None) -> tuple:
    return (record_of, wide_done, narrow_done, functools.partial(half_done, ratios=ratios),
            functools.partial(drop_done, ratios=ratios), functools.partial(equal_cpu_fit.fit_done, ratios=ratios))


def mark_shares(x: dict, ratios: list[dict]) -> None:
    """Give each finished candidate of summary row ``x`` its ``share`` of the softmax's 8 epochs where its trunk's
    step cost was measured side by side (:mod:`.equal_cpu_share`); None where it was not."""
    for k in CANDIDATES:
        c = x.get(k)
        if c and c.get("curve"):
            r = equal_cpu_share.ratio_of(x["name"], ratios, equal_cpu_share.trunk_of(x, k))
            c["share"] = None if r is None else equal_cpu_share.share(len(c["curve"]), r)


def fits(c: dict, budget: float) -> bool:
    """Whether a finished candidate kept to the budget: by its share measured side by side where there is one, else
    by its CPU seconds."""
    if c.get("share") is not None:
        return c["share"] <= OVER_BUDGET
    return c["cpu_s"] <= OVER_BUDGET * budget


def choose(row: dict, budget: float | None) -> str | None:
    """The candidate (a key of :data:`CANDIDATES`) with the lowest validation perplexity among those finished
    within the budget; None while the row has neither of its own runs (so that the page does not judge a row
    on its grid cell alone)."""
    if budget is None or (row["run"] is None and (row["wide"] is None or "none_fits" in row["wide"])):
        return None
    ok = [k for k in CANDIDATES if row.get(k) and row[k].get("best_valid") is not None
          and row[k].get("cpu_s") is not None and fits(row[k], budget)]
    return min(ok, key=lambda k: row[k]["best_valid"]) if ok else None


def _curve(rec: dict) -> list[dict]:
    return [{"epoch": m["epoch"], "valid_ppl": m["valid_ppl"], "cpu_s": m["cpu_s"]} for m in rec.get("epochs", [])]


def _p(v) -> str:
    return "—" if v is None else f"{v:.2f}"


def _cell_text(c: dict | None, budget: float, pending: str) -> str:
    if c is None:
        return pending
    if c.get("none_fits"):
        return "no wider trunk fits"
    if c.get("failed"):
        return "diverged (stopped by the trainer)"
    over = "" if fits(c, budget) else ", over its share" if c.get("share") is not None else ", over budget"
    return f"{_p(c['best_valid'])} / {_p(c['test_ppl'])} ({c['cpu_s']:,.0f} s{over})"


LABEL = {"equal_epochs": "default epochs", "run": "longer", "wide": "wider", "narrow": f"wider, {WIDEN[0]:g}x",
         "half": f"wider, {WIDEN[0]:g}x, half rate", "drop": f"longer, dropout {LONGER_DROPOUT:g}",
         "fit": equal_cpu_fit.LABEL, "adamw": equal_cpu_adamw.LABEL, "adamw_tuned": equal_cpu_adamw.TUNED_LABEL}


def render(data: dict) -> str:
    soft = data["softmax"]
    if soft is None:
        return "The lr-grid records hold no finished softmax GRU cell yet: no budget to give.\n"
    budget = soft["cpu_s"]
    lines = ["## Protocol", "",
             f"The budget is the CPU seconds of the softmax GRU-256 at its chosen rate on the lr-grid page "
             f"({lr_grid.fmt(soft['lr'])}, {soft['epochs']} epochs, cosine): **{budget:,.0f} CPU s** (the training "
             f"process's, validation included; one thread). Each other GRU row may spend it in these ways, at its own "
             f"chosen rate and every other setting at its default:", "",
             "- **longer**: as many epochs as fit the budget at its own CPU seconds an epoch (from its chosen cell; "
             "never fewer than its default epochs), the cosine decay spread over them; a longer run that spent under "
             f"{RESIZE:.0%} of the budget is run again with the epochs its own CPU seconds an epoch allow (a cell "
             "measured on another machine or under another load can take twice the CPU an epoch);",
             f"- **wider**: its default epochs on a trunk whose hidden state and embedding are both scaled by the "
             f"largest of {', '.join(f'{f:g}x' for f in WIDEN)} that fits the budget, as two short probes "
             f"({' and '.join(str(n) for n in PROBE_STEPS)} steps) measure it; a wider run that diverges (its last "
             f"validation above {DIVERGED:g}x its best) is trained once more at half its rate, the same width;",
             f"- **wider, {WIDEN[0]:g}x**: where the widest trunk that fits is wider than {WIDEN[0]:g}x, the "
             f"{WIDEN[0]:g}x trunk as well, the same way (added on 2026-12-01, after the widest trunks of CSS-IS, "
             "BlackOut and hsm went unstable at their rates: one more try each for those rows, and for NCE, "
             "whose widest trunk did not);",
             f"- **wider, {WIDEN[0]:g}x, half rate**: the {WIDEN[0]:g}x trunk at half the row's rate, every row (added "
             "on 2026-12-01: at the row's own rate the wider trunks gained where that rate is 0.004 and lost or tied "
             "where it is 0.008; Adam on a wider trunk wants a smaller rate, Yang & Hu 2021 scaling the hidden "
             "matrices' by 1 / width);",
             f"- **longer, dropout {LONGER_DROPOUT:g}**: the longer run again at dropout {LONGER_DROPOUT:g} "
             "(added on 2026-12-01: the longer runs ended at a lower training loss and a higher validation "
             "perplexity than the default epochs, class after 16 epochs at 3.90 and 99.72 against 4.08 and 97.58 "
             "after 8: they overfit at the default dropout 0.25; the softmax had its own tries at 0.15 and "
             f"{LONGER_DROPOUT:g} on the lr-grid page, its default 0.25 the best at its 8 epochs); a dropout run "
             f"that spent under {RESIZE:.0%} of the budget or over {OVER_BUDGET:g}x it is run again with the epochs "
             "its own CPU seconds an epoch fit, as a longer run is (added on 2026-12-03); where the row's step cost "
             "against the softmax's was measured side by side (the section below), its share of the softmax's 8 "
             "epochs decides instead, and the run again gets the epochs that share allows (added the same day: the "
             "CPU seconds of one run moved by up to 2x between days).",
             f"- **{equal_cpu_fit.LABEL}**: the {WIDEN[0]:g}x trunk at the better of its two rates (the row's, half "
             f"of it; on validation at the default epochs) for floor(8 x its step-cost ratio) epochs, the most its "
             f"share allows; at dropout {LONGER_DROPOUT:g} where that is more than the default epochs, else at the "
             "default (added on 2026-12-03: NCE and IS chose the 1.5x trunk at 8 epochs, about half their share; "
             "adaptive's 1.5x trunk costs 1.10x the softmax's step, so its 8 epochs were over the share; tried first "
             "on the rows that missed).",
             f"- **{equal_cpu_adamw.LABEL}**: the candidate above chosen under Adam, trained again with "
             "`--optimizer adamw --weight-decay 0.1` and every other flag the same (the same trunk and epochs, so "
             "the same share), once all of the row's Adam candidates have finished (added on 2026-12-03, after "
             "AdamW 0.1 moved the softmax's 8 epochs from 92.01 to 90.47: the one try the softmax got, given to "
             "each row; AdamW decays the row-sparse tables too, docs/neural.md).",
             f"- **{equal_cpu_adamw.TUNED_LABEL}**: that run again with its rate multiplied by the ratio of the "
             "row's rate on the AdamW grid (docs/results/lr-grid-adamw.md) to its rate on the Adam grid, once the "
             "AdamW grid has settled it (added on 2026-12-04, when the AdamW grid moved the softmax from 0.004 to "
             "a higher rate: the softmax's 8 epochs there are its try, the rows get this one).", "",
             _row_baseline_text(data.get("baseline") or soft), "",
             f"Of its candidates that fit (these and its lr-grid cell at the default epochs; a run above "
             f"{OVER_BUDGET:g}x the budget is shown but not chosen; where its trunk's step cost was measured side "
             f"by side, its share of the softmax's 8 epochs decides instead: above {OVER_BUDGET:g}, *over its "
             f"share*), the one with the lowest validation perplexity "
             f"is chosen and its test perplexity, measured once for the best validation epoch, is the row's. The "
             f"rates were chosen at the default epochs and width and not tuned again; dropout stays at its default "
             f"(0.25) but for the candidate that names it, and the softmax's own tries are those of the lr-grid "
             f"page. "
             f"Data: {data['data'] or 'PTB'}.", "",
             "## At the softmax's CPU seconds", "",
             f"Target (issue 55): every row at or below the tuned softmax "
             f"({_p((data.get('baseline') or soft)['test_ppl'])}). Each candidate "
             f"reads *valid / test (training CPU s)*. The figure shows the softmax and each row's chosen run: "
             f"validation perplexity after each epoch against the share of the softmax's CPU used by then (the run's "
             f"share, measured by step costs side by side, spread evenly over its epochs; the Transformer's CPU "
             f"seconds over the softmax's, on its own budget).", ""]
    body = []
    for x in data["rows"]:
        pending = "not yet run" if x["settled"] else "waits for its rate"
        w = x["wide"]
        c = x["chosen"]
        body.append([x["name"], lr_grid.fmt(x["lr"]),
                     _cell_text(x["equal_epochs"], budget, "—") + f" [{x['equal_epochs']['epochs']} ep]",
                     _cell_text(x["run"], budget, pending) + (
                         f" [{x['resize_pending']['epochs']} ep; re-sized to {x['epochs']} ep: not yet run]"
                         if x.get("resize_pending") else f" [{x['epochs']} ep]"),
                     _cell_text(w, budget, pending) + ("" if not w or w.get("none_fits")
                                                        else f" [h {w['hidden']}, d {w['embed']}"
                                                        + (f", lr {lr_grid.fmt(w['run_lr'])}]" if w.get("run_lr")
                                                           else "]")
                                                        + ("; diverged, again at half the rate: not yet run"
                                                           if w.get("blew_up") and not w.get("run_lr") else "")),
                     _narrow_text(x, budget, pending),
                     _cell_text(x.get("half"), budget, x.get("half_text") or pending) + (
                         f" [h {x['half']['hidden']}, lr {lr_grid.fmt(x['half']['lr'])}]" if x.get("half") else ""),
                     _cell_text(x.get("drop"), budget, pending) + (
                         f" [{x['drop_resize_pending']['epochs']} ep; re-sized to {x['drop_epochs']} ep: not yet run]"
                         if x.get("drop_resize_pending") else f" [{x['drop_epochs']} ep]"),
                     _fit_text(x, budget),
                     _adamw_text(x, budget), _adamw_text(x, budget, "adamw_tuned"),
                     "—" if c is None else LABEL[c], "—" if c is None else _p(x[c]["test_ppl"]),
                     "—" if x["vs_softmax"] is None else f"{100 * x['vs_softmax']:+.1f} %",
                     "—" if x["vs_softmax"] is None else ("met" if x["vs_softmax"] <= 0 else "missed")
                     + (" so far" if x.get("resize_pending") or x.get("drop_resize_pending") else "")])
    lines.append(table(["row", "rate", "default epochs", "longer", "wider", f"wider, {WIDEN[0]:g}x",
                        f"{WIDEN[0]:g}x, half rate", f"longer, dropout {LONGER_DROPOUT:g}",
                        f"{WIDEN[0]:g}x, its share's epochs", "its chosen run, AdamW 0.1",
                        "the same, AdamW grid's rate", "chosen", "test",
                        "vs tuned softmax", "verdict"], body))
    lines += ["", "A row *waits for its rate* while a rate beside its chosen one is not yet in the lr grid (a "
              "factor 2 beyond the grid where the chosen rate sits at its edge): a run at a rate the grid then "
              "moves would be thrown away. A row is judged once one of its own runs (longer or wider) is finished.",
              "", f"Records: `benchmarks/notes/{NAME}.jsonl` (one line per finished run: flags, commit, date, "
              "machine, per-epoch validation perplexity and CPU seconds; a wider run's probes and their "
              "estimates)."]
    retried = [(x, d) for x in data["rows"] for d in (x["wide"] or {}).get("diverged", [])]
    if retried:
        lines += ["", f"**Wider runs that diverged** (stopped by the trainer, or last validation above "
                  f"{DIVERGED:g}x the best) and were trained again at half the rate, the same width (the table's "
                  "wider column is the retry):", ""]
        lines += [f"- {x['name']} at {lr_grid.fmt(d['lr'])}: " + _blown_up_text(d) for x, d in retried]
    lines += equal_cpu_share.render(data.get("share", []), LABEL)
    lines += render_seed_means(data.get("seed_means", []))
    lines += equal_cpu_seeds.render(data.get("chosen_seeds", []), data.get("softmax_seeds", {}), LABEL)
    seeds, base = data.get("softmax_seeds") or {}, data.get("baseline") or soft
    if seeds and abs(seeds.get(1, 0.0) - (base.get("test_ppl") or -1.0)) >= 0.005:
        lines += ["", "**Seeds.** The softmax's seed replicates on the quality page are of another run "
                  f"({seeds[1]:.2f} at seed 1) than the tuned softmax judged against here "
                  f"({_p(base['test_ppl'])}): the rows are judged on one seed until it has replicates of its own."]
    elif seeds and not data.get("chosen_seeds"):
        lines += equal_cpu_seeds.render_none(data, seeds)
    lines += render_transformer(data.get("transformer"), soft)
    return "\n".join(lines) + "\n"


def _fit_text(x: dict, budget: float) -> str:
    """The cell of the 1.5x trunk trained for its share's epochs."""
    f = x.get("fit")
    if f is None:
        return x.get("fit_text") or "—"
    drop = "" if f.get("dropout") is None else f", dropout {f['dropout']:g}"
    return _cell_text(f, budget, "") + f" [h {f['hidden']}, lr {lr_grid.fmt(f['lr'])}, {f['epochs']} ep{drop}]"


def _adamw_text(x: dict, budget: float, key: str = "adamw") -> str:
    """The cell of the chosen Adam run trained again under AdamW (``key``: ``adamw_tuned`` at the AdamW grid's
    rate): its figures and the run it repeats."""
    a = x.get(key)
    if a is None:
        return x.get(f"{key}_text") or "—"
    lr = f", lr x {a['grid_lr'] / x['lr']:g}" if a.get("grid_lr") else ""
    return _cell_text(a, budget, "") + f" [{LABEL.get(a.get('base'), a.get('base'))}, {a.get('epochs')} ep{lr}]"


def _narrow_text(x: dict, budget: float, pending: str) -> str:
    """The narrowest wider trunk's cell: its run, pending, or "—" where it is not tried (the widest trunk that fits
    is that one, or none fits)."""
    n = x.get("narrow")
    if n is not None:
        return _cell_text(n, budget, pending) + f" [h {n['hidden']}, d {n['embed']}]"
    return pending if x.get("narrow_needed", True) else "—"


def _blown_up_text(d: dict) -> str:
    if d.get("failed"):
        return f"stopped by the trainer ({d['failed']})."
    return (f"best validation {_p(d['best_valid'])} (epoch {d['best_epoch']}), then blew up "
            f"({_p(d['curve'][-1]['valid_ppl']) if d['curve'] else '—'} at the end; {d['cpu_s']:,.0f} CPU s).")


def headline(data: dict) -> list[dict]:
    """The README's row: the Transformer's chosen run within its budget. No cost ratio: its CPU seconds a token,
    read on its own run's day, moved by 1.6x between two runs of the same model on this machine (the load on the
    SMT sibling), and its point is the budget, which the note gives."""
    t = data.get("transformer") or {}
    k = t.get("chosen")
    if not k or (t.get(k) or {}).get("test_ppl") is None:
        return []
    names = {"grid_cell": "its lr-grid cell", "run": "its defaults, cosine decay",
             **{key: label for key, label, _ in t.get("tries", [])}}
    c = t[k]
    return [{"method": f"Transformer, full softmax, {TRANSFORMER_BUDGET_S / 3600:g} CPU-hours",
             "test_ppl": c["test_ppl"], "relative_cost": None,
             "note": f"{NAME}: {names.get(k.removesuffix('_first'), k)}, {c['epochs']} epochs, one thread, "
                     f"{c['cpu_s']:,.0f} of its {t['budget_s']:,.0f} CPU s"}]


def render_transformer(t: dict | None, soft: dict) -> list[str]:
    """The section on the Transformer's own budget."""
    hours = TRANSFORMER_BUDGET_S / 3600
    base = (t or {}).get("baseline") or soft
    out = ["", f"## The Transformer within {hours:g} CPU-hours", "",
           f"Target (issue 55): the Transformer at or below the tuned softmax GRU ({_p(base['test_ppl'])}) within "
           f"{TRANSFORMER_BUDGET_S:,.0f} CPU s. It trains at its lr-grid rate for as many of its own epochs as fit "
           "that budget, the cosine decay spread over them (its grid cells used its default plateau schedule, "
           "which stops after three halvings long before the budget is spent); every other setting at its "
           "default. Each further budget run differs from it in one setting: its dropout "
           f"({TRANSFORMER_DROPOUT:g}, against the default 0.3: the first ended at a training perplexity of 46.6, "
           "dropout on, against 108.4 on validation), then, as the dropout run learnt too slowly to finish within the "
           "budget, its optimiser (AdamW, Loshchilov & Hutter 2019: Adam with a weight decay of 0.1 decoupled from "
           "the gradient, on the weight matrices, as GPT-2's and nanoGPT's recipes; added 2026-12-03), then its "
           "input, added to the AdamW try, the best by then (embedding dropout 0.1: whole words dropped from a "
           "training batch's input, Gal & Ghahramani 2016, Merity et al. 2018's value on PTB; added 2026-12-03; it "
           "trains once the AdamW try is final, with the epochs of that try's run of lower validation perplexity and "
           "is not re-sized: its re-sized 41-epoch run overfitted, 110.58 against its 25-epoch run's 104.64; until "
           "2026-12-04 it took the re-sized run's count, and that 43-epoch run was stopped at epoch 15, 110.39), "
           "then its window, added to the AdamW try as well (128 tokens, 16 rows a step so a step still reads "
           "2,048 tokens; added 2026-12-05: training attends within each segment alone, so at the default 64 half "
           "of the positions trained see fewer than 32 words, where the GRU carries its state across segments), then "
           "twice its rate, added to the embedding-dropout try, the best by then (added 2026-12-05: its rate was "
           "tuned under Adam alone, and under AdamW the softmax GRU's best rate moved up by 2x, 0.004 to 0.008), "
           "and two blocks instead of four, added to it too (added 2026-12-05: that run still ended at a training "
           "perplexity of 59.7, dropout on, against 101.5 on validation; its four blocks hold 3.1M weights beside "
           "the GRU trunk's 0.4M, on 0.93M training words), and half its rate, added to it as well (added "
           "2026-12-05: twice the rate trailed that run by 6.6-8.3 % from its epoch 13 and ended 7.0 % above it, and "
           "under the default "
           "plateau schedule 0.0005 had ended lower than 0.001 over 21 epochs), and embedding dropout 0.2 in place "
           "of its 0.1 (added 2026-12-05: more context at evaluation gains nothing, so its gap to the GRU is "
           "generalisation, and of the settings tried only the two regularisers that do not slow the early epochs, "
           "AdamW's decay and word dropout, gained). "
           + _baseline_text(base) + " A budget run that spent under "
           f"{RESIZE:.0%} of the budget trains again for the epochs its own CPU seconds an epoch fit (an epoch on "
           "one machine took 0.6x the CPU seconds of the grid cell's, measured on another), as a longer GRU run "
           "does; the first stays a candidate beside it (both kept to the budget; until 2026-12-03 the re-sized "
           "run replaced it). Of its grid cell and these runs, the one of lowest validation perplexity is judged.",
           ""]
    if t is None:
        return out + ["Not yet run: the lr grid holds no finished Transformer cell."]
    pending = "not yet run" if t["settled"] else "waits for its rate"
    c = t["chosen"]
    tries = t.get("tries", [])
    names = {"grid_cell": "grid cell", "run": "budget run", **{k: label for k, label, _ in tries}}
    names |= {f"{k}_first": f"{names[k]}, its first run ({t[f'{k}_first']['epochs']} ep)"
              for k in list(names) if t.get(f"{k}_first")}
    out.append(table(["row", "rate", "grid cell", "budget run", *(f"budget run, {label}" for _, label, _ in tries),
                      "chosen", "test", "vs tuned softmax GRU", "verdict"],
                     [[t["name"], lr_grid.fmt(t["lr"]),
                       _cell_text(t["grid_cell"], t["budget_s"], "—") + f" [{t['grid_cell']['epochs']} ep]",
                       *(_try_text(t.get(k), t["budget_s"], pending, t.get("planned", {}).get(k, t["epochs"]))
                         + _first_text(t.get(f"{k}_first"), t["budget_s"])
                         for k in ("run", *(k for k, _, _ in tries))),
                       "—" if c is None else names[c],
                       "—" if c is None else _p(t[c]["test_ppl"]),
                       "—" if t["vs_softmax"] is None else f"{100 * t['vs_softmax']:+.1f} %",
                       "—" if t["vs_softmax"] is None else ("met" if t["vs_softmax"] <= 0 else "missed")]]))
    also = ", ".join(f"`{extra}`" for _, _, extra in tries)
    out += ["", f"Its runs: `sampledlm train {t['flags']}`, and the same with each of {also}."]
    stopped = [f"{names[k]}: {why}." for k, why in t.get("stopped", {}).items() if t.get(k)]
    return out + (["", "Stopped before its last epoch (shown, never chosen): " + " ".join(stopped)] if stopped else [])


def _try_text(c: dict | None, budget: float, pending: str, epochs: int) -> str:
    """A Transformer try's cell: its run's figures and epochs, and the epochs it trains again for where it spent
    under :data:`RESIZE` of the budget."""
    if c and c.get("stopped"):
        return _stopped_text(c, epochs)
    text = _cell_text(c, budget, pending) + f" [{(c or {}).get('epochs', epochs)} ep, cosine]"
    if c and c.get("resize_to"):
        text += f"; under {RESIZE:.0%} of the budget: trains again for {c['resize_to']} epochs"
    return text


def _stopped_text(c: dict, planned: int) -> str:
    """A stopped try's cell: its last epoch's validation against its base run's at the same epoch, and the range
    of that gap over the epochs it ran."""
    curve, base = c["curve"], {m["epoch"]: m["valid_ppl"] for m in c.get("base_curve", [])}
    if not curve:
        return f"stopped before its first epoch [{planned} ep, cosine]"
    last = curve[-1]
    gaps = [m["valid_ppl"] / base[m["epoch"]] - 1 for m in curve if m["epoch"] in base]
    text = f"stopped after epoch {last['epoch']} of {planned}: validation {_p(last['valid_ppl'])}"
    if last["epoch"] in base:
        text += (f" against its base run's {_p(base[last['epoch']])} at that epoch "
                 f"({100 * gaps[-1]:+.1f} %; {100 * min(gaps):+.1f} % to {100 * max(gaps):+.1f} % over its epochs)")
    return text + f" ({c['cpu_s']:,.0f} s) [cosine]"


def _first_text(c: dict | None, budget: float) -> str:
    """A re-sized Transformer try's first run, a candidate beside the re-sized one (both within the budget)."""
    return "" if c is None else f"; its first run: {_cell_text(c, budget, '')} [{c['epochs']} ep]"


def _spent(x: dict, c: dict, budget: float) -> list[float]:
    """The part of the softmax's CPU that candidate ``c`` of row ``x`` had used at each epoch's end: by its share
    measured side by side where there is one (its step cost against the softmax's), else by its CPU seconds."""
    curve = c["curve"]
    if c.get("share") is not None:
        return [c["share"] * (i + 1) / len(curve) for i in range(len(curve))]
    return [m["cpu_s"] / budget for m in curve]


def figure(data: dict):
    """Validation perplexity of the softmax and of each row's chosen run against the part of the softmax's CPU
    spent (the Transformer's own budget is six times the softmax's); every other run is in the tables."""
    fig, ax = new_figure(figsize=(10, 5))
    soft = data["softmax"]
    if not soft:
        return fig
    budget = soft["cpu_s"]
    c = soft["curve"]
    ax.plot([(i + 1) / len(c) for i in range(len(c))], [m["valid_ppl"] for m in c], color="black", marker="o", ms=3,
            lw=2, label=f"softmax ({lr_grid.fmt(soft['lr'])}, {soft['epochs']} ep)")
    ax.axvline(1.0, color="black", lw=0.8, ls=":")
    base = data.get("baseline") or {}
    if base.get("curve"):  # the tuned softmax, where it is another run than the budget's: its own epochs' share
        bc = base["curve"]
        ax.plot([(i + 1) / len(bc) for i in range(len(bc))], [m["valid_ppl"] for m in bc], color="black", ls="--",
                marker="o", ms=3, lw=1.5, label=f"softmax, {base['name']} (the tuned softmax)")
    for i, x in enumerate(data["rows"]):
        k = x.get("chosen")
        if k is None or not (x.get(k) or {}).get("curve"):
            continue
        cand = x[k]
        ax.plot(_spent(x, cand, budget), [m["valid_ppl"] for m in cand["curve"]], marker="o", ms=3,
                color=f"C{i % 10}", label=f"{x['name'].removeprefix('gru ')}: {LABEL[k]} ({len(cand['curve'])} ep)")
    t = data.get("transformer") or {}
    k = t.get("chosen")
    tc = (t.get(k) or {}).get("curve") if k else None
    if tc:
        ax.plot([m["cpu_s"] / budget for m in tc], [m["valid_ppl"] for m in tc], marker="^", ms=3, color="grey",
                label=f"transformer ({lr_grid.fmt(t['lr'])}, {len(tc)} ep; its own budget)")
    ax.set_xscale("log")
    ax.set_xlabel("share of the softmax's 8 epochs of CPU (step costs measured side by side)")
    ax.set_ylabel("validation perplexity")
    ax.set_yscale("log")
    ax.set_ylim(0.9 * min(m["valid_ppl"] for m in c), 2.5 * min(m["valid_ppl"] for m in c))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.subplots_adjust(left=0.08, right=0.64)
    return fig


def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True, only: set[str] | None = None) -> dict:
    """Train the rows not yet in the records, or only those ``only`` names (the lr grid's row keys: ``css-is``,
    ``blackout``, ``transformer``, ...); ``train=False``: the page from the records alone."""
    grid = lr_grid.rows(quick)
    lmruns.check_only(only, [r.key for r in grid])
    own = quick or data_dir is not None
    grid_path = os.path.join(out_dir, lr_grid.NAME + ".jsonl") if own else lr_grid.RECORDS
    path = os.path.join(out_dir, NAME + ".jsonl") if own else RECORDS
    if own and train and not lr_grid.load_records(grid_path):
        lr_grid.run(quick=quick, data_dir=data_dir, out_dir=out_dir)
    meta = stamp()
    ratios = [] if own else equal_cpu_share.load()
    if train:
        st = lmruns.setting(quick, data_dir, with_kn3=False)
        if quick and data_dir is None:
            st.files = lr_grid.quick_files(st)
            st.label += ", a quarter of its training text"
        with open(st.files["train"], encoding="utf-8") as f:
            tokens = sum(len(line.split()) + 1 for line in f if line.strip())
        soft, entries = plan(grid, lr_grid.load_records(grid_path), lr_grid.load_records(path))
        # the rows best at the default epochs first: their runs say most about the target
        entries.sort(key=lambda e: lr_grid.valid_of(e["cell"]))
        jobs = [(e, what, done, fn, soft["cpu_s"]) for e in entries
                for what, done, fn in (("longer", record_of, train_row), ("wider", wide_done, train_wide),
                                       (f"wider {WIDEN[0]:g}x", narrow_done, train_narrow),
                                       (f"wider {WIDEN[0]:g}x at half the rate",
                                        functools.partial(half_done, ratios=ratios), train_half),
                                       (f"longer at dropout {LONGER_DROPOUT:g}",
                                        functools.partial(drop_done, ratios=ratios),
                                        functools.partial(train_drop, ratios=ratios)),
                                       (equal_cpu_fit.LABEL, functools.partial(equal_cpu_fit.fit_done, ratios=ratios),
                                        functools.partial(equal_cpu_fit.train_fit, ratios=ratios)),
                                       (equal_cpu_adamw.LABEL,
                                        functools.partial(equal_cpu_adamw.done, ratios=ratios, budget=soft["cpu_s"]),
                                        functools.partial(equal_cpu_adamw.train, ratios=ratios)),
                                       (equal_cpu_adamw.TUNED_LABEL,
                                        functools.partial(equal_cpu_adamw.tuned_done, ratios=ratios,
                                                          budget=soft["cpu_s"]),
                                        functools.partial(equal_cpu_adamw.tuned_train, ratios=ratios)))
                if not own or what != equal_cpu_adamw.TUNED_LABEL]
        t = transformer_entry(grid, lr_grid.load_records(grid_path))
        if t is not None:
            # each run twice: a try that spent under RESIZE of the budget trains again, re-sized, on the second pass
            jobs += [(with_try(t, extra, tag), f"{label}{again}", try_done, train_try, t["budget_s"])
                     for again in ("", ", re-sized to the budget where it spent too little")
                     for _, label, extra, tag in TRANSFORMER_RUNS]
        jobs = [j for j in jobs if only is None or j[0]["row"].key in only]
        waiting = []
        for e, what, done, fn, budget in jobs:
            if not e["settled"]:  # its run would be thrown away if the grid moved its rate
                if e["row"].name not in waiting:
                    waiting.append(e["row"].name)
                    click.echo(f"[equal-cpu] {e['row'].name}: waits for its lr-grid rate to settle", err=True)
            elif done(e, lr_grid.load_records(path)) is None:
                click.echo(f"[equal-cpu] {e['row'].name} {what}, the row's rate {lr_grid.fmt(e['lr'])} "
                           f"(budget {budget:,.0f} CPU s)", err=True)
                try:
                    lr_grid.append_record(path, fn(st, e, budget, tokens, lr_grid.load_records(path)))
                except UserError as err:
                    click.echo(f"  {e['row'].name}: failed ({err}); tried again at the next start", err=True)
        if not own:
            train_seeds(st, entries, soft["cpu_s"], tokens, grid, grid_path, path, ratios, only)
    quality = [] if own else quality_rows()
    adamw_grid = [] if own else lr_grid.load_records(lr_grid_adamw.RECORDS)
    data = summarise(grid, lr_grid.load_records(grid_path), lr_grid.load_records(path), ratios, quality, adamw_grid)
    if not own:
        data["share"] = equal_cpu_share.check(data, ratios)
    if quality:
        data["seed_means"] = seed_means(data, quality)
        data["softmax_seeds"] = softmax_seeds(quality, data.get("baseline"), adamw_grid)
        data["chosen_seeds"] = equal_cpu_seeds.means(data, lr_grid.load_records(path), data["softmax_seeds"])
    if not own:
        data["headline"] = headline(data)
    title = "Every output at the tuned softmax's CPU seconds (PTB, GRU-256, one thread)"
    write_page(out_dir, NAME, title, meta, data, render(data), figure=figure(data))
    return data
