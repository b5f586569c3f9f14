"""Issue 56, deliverable 7: the large-vocabulary rows on a lent GPU, and their section of the page.

    bash benchmarks/notes/gpu-wiki.sh                  (on the device machine: what it runs, how to prepare it)
    python -m benchmarks.large_vocab_gpu ingest DIR --date "2026-11-29 22:13 UTC" --commit 6c7d516 --machine "..."

A device call is at most ten minutes and a session's device time fifteen, so the rows there are not the CPU rows'
budget: every row trains **one full epoch over the same prefix** of the training text (whole lines, about 5.9M
tokens), V = 485k, all at once on the one GPU, each at its objective's defaults (``--device cuda --threads 1
--epochs 1`` and nothing else: no rate race, which would need several epochs a rate), and is then scored exactly,
normalised over all V words, on the whole test text. That makes them a comparison **at equal training data**,
the softmax included (out of reach on one CPU thread at this V, affordable on the GPU). Their speeds are not
compared: the processes shared the GPU by time slices (its utilisation 98 % a minute in), so each ran at about the
same tokens a second whatever its own cost.

``ingest`` reads a call's output (``RUN/metrics.jsonl`` and ``config.json``, ``NAME.eval.json``, ``NAME.log``; as
``gpu-wiki.sh`` leaves them under ``/tmp/q`` and packs them) and appends one ``gpu/NAME`` row each to
``benchmarks/notes/large-vocab.jsonl``, with the date, commit and machine given (the device's, not this one's).
"""

from __future__ import annotations

import argparse
import json
import os
import re

from .large_vocab_record import NOTES

LABELS = {"softmax": "GRU, softmax", "nce": "GRU, NCE", "is": "GRU, IS", "css-is": "GRU, CSS-IS",
          "blackout": "GRU, BlackOut", "adaptive": "GRU, adaptive", "class": "GRU, class", "hsm": "GRU, hsm"}


def read_run(d: str, name: str) -> dict:
    """One row of a device call's output folder ``d``: its training's last epoch, its test evaluation, and how
    its training ended (``TRAIN_RC``: 124 when the call's time ran out)."""
    log = open(os.path.join(d, f"{name}.log"), encoding="utf-8", errors="replace").read()
    rc = re.findall(r"TRAIN_RC=(\d+) wall=(\d+)", log)
    row = {"key": f"gpu/{name}", "name": name, "train_rc": int(rc[-1][0]) if rc else None,
           "train_wall_s": int(rc[-1][1]) if rc else None}
    metrics = os.path.join(d, name, "metrics.jsonl")
    if os.path.exists(metrics):
        with open(metrics, encoding="utf-8") as f:
            epochs = [json.loads(line) for line in f if line.strip()]
        with open(os.path.join(d, name, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        last = epochs[-1]
        row.update(model=cfg["model"]["type"], objective=cfg["objective"]["name"], lr=cfg["train"]["lr"],
                   options=cfg["objective"]["options"], epochs=len(epochs), steps=last["step"],
                   valid_ppl=last["valid_ppl"], tokens_per_s=last["tokens_per_s"], wall_s=last["wall_s"])
    else:
        why = re.findall(r"--word-classes auto: .*?into (\d+) classes", log)
        progress = _PROGRESS.findall(log)
        if why:
            row["why"] = ("not finished within the call: the exchange algorithm's " + why[0] + " word classes "
                          "(on the CPU, before training) were still running")
        elif progress:
            pct, tok_s, elapsed = progress[-1]
            row.update(partial_pct=int(pct), partial_tokens_per_s=int(tok_s))
            row["why"] = (f"not finished within the call: {pct} % of its epoch after {elapsed} of training, at "
                          f"{int(tok_s):,} tokens a second (its last progress line)")
        else:
            row["why"] = "not finished within the call"
    try:
        with open(os.path.join(d, f"{name}.eval.json"), encoding="utf-8") as f:
            e = json.load(f)
        # a run stopped within its epoch is scored from its last checkpoint: not a row of equal training data
        row["test" if "epochs" in row else "partial_test"] = {k: e[k] for k in ("ppl", "predictions", "seconds_score")
                                                              if k in e}
    except (OSError, ValueError):
        pass
    return row


_PROGRESS = re.compile(r"^epoch 1: +(\d+)%\s+loss \S+\s+(\d+) tok/s\s+(\S+) elapsed", re.M)


def ingest(d: str, date: str, commit: str, machine: str, tokens: int, notes: str = NOTES) -> list[dict]:
    names = sorted(n[: -len(".log")] for n in os.listdir(d) if n.endswith(".log"))
    rows = [{**read_run(d, n), "date": date, "commit": commit, "machine": machine, "epoch_tokens": tokens}
            for n in names]
    with open(notes, "a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return rows


def from_later_call(r: dict, first: dict) -> bool:
    """Whether ``r`` was measured by another device call than the section's first."""
    return (r.get("date"), r.get("commit")) != (first.get("date"), first.get("commit"))


def later_call(r: dict, first: dict) -> str:
    """What a row of another device call than the section's first says of itself: its date and commit, and
    where its word classes came from when they were given as a file (clustered beforehand, off the device)."""
    note = ""
    if from_later_call(r, first):
        note += f" (call of {r.get('date')}, commit {r.get('commit')}"
        classes = (r.get("options") or {}).get("word_classes")
        if classes not in (None, "auto", "none"):
            note += "; its `--word-classes auto` classes clustered beforehand and given as a file"
        note += ")"
    return note


def later_speeds(got: list[dict], first: dict) -> list[str]:
    """A sentence on the rows of later calls: they shared the GPU with fewer rows, so their wall seconds do not
    compare with the first call's; their own tokens a second (the epoch's average) are given instead."""
    later = [r for r in got if r.get("test") and r.get("tokens_per_s") and from_later_call(r, first)]
    if not later:
        return []
    speeds = "; ".join(f"{LABELS.get(r['name'].split('-', 1)[-1], r['name']).removeprefix('GRU, ')} "
                       f"{r['tokens_per_s']:,.0f}" for r in later)
    paths = "" if not any(r.get("objective") in ("class", "hsm") for r in later) else (
        " Class and hsm ran there with the layers' GPU paths of 2026-12-04 (one product against the batch's classes, "
        "each step gathering its siblings; benchmarks/notes/gpu-2026-12-04.md has the speeds before and after).")
    return ["", f"Rows of a later call shared the GPU with fewer rows than the first call's, so their wall seconds do "
            f"not compare with those above; their epochs' tokens a second: {speeds}.{paths}"]


def section(rows: dict) -> list[str]:
    """The page's section on the GPU rows (nothing while none is recorded)."""
    got = [r for k, r in rows.items() if k.startswith("gpu/")]
    if not got:
        return []
    soft = next((r["test"]["ppl"] for r in got if r.get("objective") == "softmax" and r.get("test")), None)
    first = min(got, key=lambda r: r.get("date", ""))  # the first call: the section's header is its; later ones say theirs
    out = ["", f"## The rows on a GPU: one epoch of the same {first['epoch_tokens'] / 1e6:.1f}M-token prefix each "
           "(deliverable 7)", "",
           f"A lent device ({first['machine']}), {first['date']}, commit {first['commit']}: "
           f"`bash benchmarks/notes/gpu-wiki.sh` (`benchmarks/large_vocab_gpu.py` has every decision). Each row "
           f"trains one full epoch over the first {first['epoch_tokens']:,} training tokens (whole lines) with V = "
           "485k and its objective's defaults (`sampledlm train --model M --objective X --device cuda --epochs 1`, "
           "no rate race), all rows at once on the one GPU, then exact test perplexity over the whole test text "
           "(normalised over all V). A device call is ten minutes at most, so this is a comparison at **equal "
           "training data**, not the CPU rows' budget, and the softmax is in it. Speeds are not compared: the rows "
           "shared the GPU by time slices, each at about the same tokens a second.", "",
           "| row | lr | valid ppl (subset) | test ppl (whole text) | vs the softmax | wall s (shared GPU) |",
           "|---|---|---|---|---|---|"]
    order = {n: i for i, n in enumerate(("softmax", "is", "nce", "css-is", "blackout", "adaptive", "class", "hsm"))}
    for r in sorted(got, key=lambda r: (r.get("model") == "transformer", r.get("test", {}).get("ppl", 1e9),
                                        order.get(r["name"].split("-", 1)[-1], 99))):
        name = r["name"].split("-", 1)[-1]
        label = ("Transformer, " + r.get("objective", "?").upper()) if r["name"].startswith("t-") else LABELS.get(
            name, name)
        label += later_call(r, first)
        if not r.get("test"):
            part = r.get("partial_test")
            why = r.get("why", "failed") + (f"; its last checkpoint scores {part['ppl']:.2f} on the test text"
                                            if part else "")
            out.append(f"| {label} | — | — | — | — | {why} |")
            continue
        t = r["test"]["ppl"]
        vs = "" if soft is None or r.get("objective") == "softmax" and r.get("model") == "gru" else \
            f"{100 * (t / soft - 1):+.1f} %"
        out.append(f"| {label} | {r['lr']:g} | {r['valid_ppl']:.2f} | **{t:.2f}** | {vs} | {r['wall_s']:,.0f} |")
    cut = [LABELS.get(r["name"].split("-", 1)[-1], r["name"]) for r in got if r.get("partial_tokens_per_s")]
    if cut:
        out += ["", "Cut within their epoch: " + "; ".join(cut) + ". On a GPU the class layer then scored a batch "
                "class by class and hsm each busy parent as its own block, a small product each; since 2026-12-04 "
                "they take one product against the batch's classes and gather each step's siblings where the model "
                "is not on the CPU (the cause and the speed-up, measured on the same device: "
                "benchmarks/notes/gpu-2026-12-04.md). Their full epoch with that change is not yet measured."]
    out += later_speeds(got, first)
    gru = [r for r in got if r.get("model") == "gru" and r.get("test") and r.get("objective") != "softmax"]
    if soft is not None and gru:
        below = sorted((r for r in gru if r["test"]["ppl"] < soft), key=lambda r: r["test"]["ppl"])
        above = sorted((r for r in gru if r["test"]["ppl"] >= soft), key=lambda r: r["test"]["ppl"])
        name = lambda r: LABELS.get(r["objective"], r["objective"]).removeprefix("GRU, ")
        out += ["", f"At equal training data the softmax GRU scores {soft:.2f}; "
                + (", ".join(name(r) for r in below) + " below it" if below else "no output below it")
                + ("; " + ", ".join(name(r) for r in above) + " above" if above else "")
                + ". One epoch over this prefix is far from convergence (every figure is well above KN5's on the "
                "whole corpus, and above the CPU rows' after four epochs of several times the text), so these say "
                "how the outputs start, not where they end."]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ingest", help="append a device call's rows to the record")
    p.add_argument("dir")
    p.add_argument("--date", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--machine", required=True)
    p.add_argument("--tokens", type=int, required=True, help="training tokens of the prefix (words and </s>)")
    a = ap.parse_args(argv)
    for r in ingest(a.dir, a.date, a.commit, a.machine, a.tokens):
        print(json.dumps(r)[:300])


if __name__ == "__main__":
    main()
