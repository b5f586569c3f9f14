"""faster-rnnlm against ours at speed-first settings: the large-vocabulary page's second round (issue 56, item 4).

The first round (:mod:`.large_vocab_faster_rnnlm`'s rows in ``faster-rnnlm-wiki-quiet.jsonl``) put ours at 0.41-0.90x
faster-rnnlm's words per CPU second with our defaults and on its model. A profile of ours on its model at V = 485k
(``benchmarks/notes/large-vocab-findings.md``, 2026-12-04) found the step's time spread: the recurrent products and
their backward about 40 %, the row-sparse Adam 7-13 %, sampling 5-6 %, dropout 6 %, the rest autograd and small
kernels. What a user who wants speed at this size would set, none of it new code: 128-512 BPTT rows a step (the
optimiser's, sampling's and autograd's fixed work a step spread over 4-8x the words), no dropout (one pass over a
large corpus barely overfits: the best row at this V has none) and bfloat16 products. Each of these runs is also
scored (exact over all V, on a strided subset of the test text) after its one epoch, so that speed and perplexity
come from the same run: each tool read the same text, ours with fewer CPU seconds where it is faster.

Records: ``benchmarks/notes/faster-rnnlm-wiki-amd.jsonl`` (``python -m benchmarks.large_vocab_faster_rnnlm --runs ...
--score ... --test-tokens 3000 --out ...``; the command is in the note), one row per run, the tools alternated, every
other job on the machine stopped (SIGSTOP) while they ran.
"""

from __future__ import annotations

import datetime
import json
import math
import statistics
import os
import subprocess
import sys

from . import large_vocab_faster_rnnlm as frnn
from .report import REPO_DIR

#: this round's records since the command line asks for huge pages (``sampledlm.cli.huge_page_tensors``)
RECORDS = os.path.join(REPO_DIR, "benchmarks", "notes", "faster-rnnlm-wiki-amd-thp.jsonl")
#: the same round's runs before that change (4 KB pages: up to a quarter of ours' loop in page faults)
BEFORE = os.path.join(REPO_DIR, "benchmarks", "notes", "faster-rnnlm-wiki-amd.jsonl")
MACHINE = "the first round's AMD EPYC machine (Zen 4, 2 vCPUs, AVX512-BF16)"
TARGET = 1.2  # ours >= 1.2x faster-rnnlm's words per CPU second
#: our rows of this round: (the records' name, what the page calls it, faster-rnnlm's output it is set against)
ROWS = (("nce20frb128bf16", "NCE-20 per position, 128 rows, bf16", "nce"),
        ("nce20frb256bf16", "NCE-20 per position, 256 rows, bf16", "nce"),
        ("nce20frb512bf16", "NCE-20 per position, 512 rows, bf16", "nce"),
        ("nce20frb128", "NCE-20 per position, 128 rows, float32", "nce"),
        ("nce20frbf16", "NCE-20 per position, 32 rows, bf16", "nce"),
        ("nce", "NCE, our defaults", "nce"),
        ("hsm2frb128bf16", "binary tree, 128 rows, bf16", "hs"),
        ("hsm2frb256bf16", "binary tree, 256 rows, bf16", "hs"),
        ("hsm2frb128", "binary tree, 128 rows, float32", "hs"),
        ("hsm2", "binary tree, our defaults", "hs"))
FAST = {"nce": ("nce20frb128bf16", "nce20frb256bf16", "nce20frb512bf16"), "hs": ("hsm2frb128bf16", "hsm2frb256bf16")}


def records(path: str = RECORDS) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def measured(rows: list[dict]) -> dict[tuple, dict]:
    """(tool, objective, threads) -> one row standing for its finished runs: the median words per CPU second of
    all of them (``n`` runs, ``low``-``high`` their range: the same commands moved by up to 17 % between the first
    round and this one, faster-rnnlm's slower and ours faster), the test perplexity of the last run scored, the
    dates spanned."""
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("rc") == 0 and r.get("kind") != "budget":
            by.setdefault((r["tool"], r["objective"], r["threads"]), []).append(r)
    out = {}
    for key, runs in by.items():
        speeds = sorted(r["words_per_cpu_s"] for r in runs)
        scored = [r["test"] for r in runs if (r.get("test") or {}).get("ppl")]
        dates = sorted(r["date"] for r in runs)
        out[key] = {**runs[-1], "words_per_cpu_s": round(statistics.median(speeds)), "n": len(runs),
                    "low": speeds[0], "high": speeds[-1], "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                    "test": scored[-1] if scored else None, "date": dates[-1], "first_date": dates[0]}
    return out


def budget_rows(rows: list[dict]) -> list[dict]:
    """The budget runs (:func:`train_and_score`), latest per faster-rnnlm run they face."""
    return list({r["theirs_key"]: r for r in rows if r.get("kind") == "budget"}.values())


def _resumed(r: dict) -> bool:
    """A budget run stopped and resumed: its last process saw only the last stretch of the training loop."""
    return (r.get("process_cpu_s") or 0) < r["cpu_s"]


def _spent(r: dict) -> str:
    if _resumed(r):
        return f"{r['cpu_s']:,.0f} CPU s of its training loop (resumed, so no process total)"
    return f"{r['process_cpu_s']:,.0f} process CPU s"


def budget_lines(rows: list[dict]) -> list[str]:
    got = budget_rows(rows)
    if not got:
        return []
    out = ["Under faster-rnnlm's budget: the fastest of these settings for an output and thread count, trained for "
           f"the steps that fit {SAFETY:.0%} of the CPU seconds faster-rnnlm's 2-CPU-hour run of that output spent "
           "(the table above), at the words per CPU second measured here, over as many passes of the whole corpus "
           "as they need (CPU s: the training loop's, validation included; in brackets the processes', with the "
           "numbering of the corpus at the start, as faster-rnnlm's are counted); scored as faster-rnnlm's run was, "
           "on its 20,000-token test subset "
           "(`python -m benchmarks.large_vocab_frnn_fast --runs nce-1`; resumable).", "",
           "| ours | threads | steps | CPU s (process) | test ppl (subset) | faster-rnnlm's run: CPU s | its test ppl "
           "| measured |",
           "|---|---|---|---|---|---|---|---|"]
    for r in got:
        shown = "resumed: no one process" if _resumed(r) else f"{r['process_cpu_s']:,.0f}"
        out.append(f"| {_label(r['row'])} | {r['threads']} | {r['steps']:,} | {r['cpu_s']:,.0f} ({shown}) | "
                   f"{r['test']['ppl']:,.2f} | {r['theirs_cpu_s']:,.0f} "
                   f"({r['cpu_s'] / r['theirs_cpu_s']:.0%} of it) | {_fmt_ppl(r['theirs_test_ppl'])} | {r['date']} |")
    return out + [""]


def _fmt_ppl(x) -> str:
    return f"{x:,.2f}" if x else "—"


def _ppl(r: dict) -> str:
    t = r.get("test") or {}
    return f"{t['ppl']:,.2f}" if t.get("ppl") else ("failed" if t.get("failed") else "")


def table(got: dict[tuple, dict]) -> list[str]:
    """One line per run: theirs, then ours set against it, with the ratio and the test subset's perplexity."""
    out = ["| tool | output | threads | words / CPU s (median) | runs: range | against faster-rnnlm | training CPU s "
           "| test ppl (subset) | measured |", "|---|---|---|---|---|---|---|---|---|"]
    for theirs_obj, theirs_name in (("nce", "NCE-20"), ("hs", "binary Huffman tree (HS)")):
        for t in (1, 2):
            th = got.get(("faster-rnnlm", theirs_obj, t))
            if th is None:
                continue
            out.append(f"| faster-rnnlm | {theirs_name} | {t} | {th['words_per_cpu_s']:,} | {_spread(th)} | 1.00x | "
                       f"{th['cpu_s']:,.1f} | {_ppl(th)} | {_when(th)} |")
            for name, label, obj in ROWS:
                o = got.get(("sampledlm", name, t))
                if obj != theirs_obj or o is None:
                    continue
                out.append(f"| sampledlm | {label} | {t} | {o['words_per_cpu_s']:,} | {_spread(o)} | "
                           f"{_ratio(o, th):.2f}x | {o['cpu_s']:,.1f} | {_ppl(o)} | "
                           f"{_when(o)} |")
    return out


def _spread(r: dict) -> str:
    return f"{r['n']}: {r['low']:,}-{r['high']:,}" if r["n"] > 1 else "1"


def _when(r: dict) -> str:
    return r["date"] if r["first_date"] == r["date"] else f"{r['first_date']} to {r['date'][11:]}"


def best_pairs(got: dict[tuple, dict]) -> list[tuple[str, int, dict, dict]]:
    """(faster-rnnlm's output, threads, our fastest speed-first row, theirs) for each pair measured."""
    out = []
    for obj, names in FAST.items():
        for t in (1, 2):
            th = got.get(("faster-rnnlm", obj, t))
            ours = [got[("sampledlm", n, t)] for n in names if ("sampledlm", n, t) in got]
            if th and ours:
                out.append((obj, t, max(ours, key=lambda r: r["words_per_cpu_s"]), th))
    return out


def _label(name: str) -> str:
    return next(label for n, label, _ in ROWS if n == name)


def _ratio(o: dict, th: dict) -> float:
    """Ours over theirs in words per CPU second, cut (not rounded) to 2 decimals: 1.195 is not shown as 1.20."""
    return math.floor(100 * o["words_per_cpu_s"] / th["words_per_cpu_s"]) / 100


def _verdict(o: dict, th: dict) -> str:
    ratio = _ratio(o, th)
    po, pt = (o.get("test") or {}).get("ppl"), (th.get("test") or {}).get("ppl")
    better = "" if not (po and pt) else f", test {po:,.2f} against {pt:,.2f}"
    return f"{ratio:.2f}x ({_label(o['objective'])}{better})"


def target_part(path: str = RECORDS) -> str:
    """The target line's clause for this round: '' before it is run."""
    pairs = best_pairs(measured(records(path)))
    if not pairs:
        return ""
    parts = [f"{'NCE' if obj == 'nce' else 'HS'} at {t} thread{'s' if t > 1 else ''} {_verdict(o, th)}"
             for obj, t, o, th in pairs]
    ok = all(o["words_per_cpu_s"] >= TARGET * th["words_per_cpu_s"] for _, _, o, th in pairs) and len(pairs) == 4
    some = sum(o["words_per_cpu_s"] >= TARGET * th["words_per_cpu_s"] for _, _, o, th in pairs)
    verdict = "met" if ok else f"**missed** ({some} of 4 pairs at or above {TARGET}x)"
    budget = [f"{_label(r['row'])} at {r['threads']} thread{'s' if r['threads'] > 1 else ''}, in "
              f"{_spent(r)}: test {r['test']['ppl']:,.2f} against faster-rnnlm's {_fmt_ppl(r['theirs_test_ppl'])} in "
              f"{r['theirs_cpu_s']:,.0f}" for r in budget_rows(records(path))]
    if budget:
        verdict += "; under faster-rnnlm's budget: " + "; ".join(budget)
    return ("at speed-first settings (second round, one epoch of the same 1M tokens, "
            f"{MACHINE}): " + ", ".join(parts) + f": {verdict}")


FIRST_ROUND = os.path.join(REPO_DIR, "benchmarks", "notes", "faster-rnnlm-wiki-quiet.jsonl")


def drift(got: dict[tuple, dict], first_round: str = FIRST_ROUND) -> str:
    """A sentence on the commands measured in both rounds: their words per CPU second then and now."""
    then = {(r["tool"], r["objective"], r["threads"]): r for r in records(first_round) if r.get("rc") == 0}
    both = [(k, then[k]["words_per_cpu_s"], got[k]["words_per_cpu_s"]) for k in sorted(got) if k in then]
    if not both:
        return ""
    return (" The same commands in both rounds (words per CPU second then, now): "
            + "; ".join(f"{tool} {obj} at {t}: {a:,}, {b:,} ({b / a - 1:+.0%})" for (tool, obj, t), a, b in both)
            + ": the machine's speed moves between rounds, so only ratios within a round are compared.")


def before_line(before: str = BEFORE) -> str:
    """A sentence on the same round's runs before the command line asked for huge pages (medians, as here)."""
    pairs = best_pairs(measured(records(before)))
    if not pairs:
        return ""
    n = len([r for r in records(before) if r.get("rc") == 0])
    return (f" Before the command line asked torch for huge pages (`{os.path.basename(before)}`, {n} runs, "
            "4 KB pages), "
            "the fastest speed-first row against faster-rnnlm read: "
            + "; ".join(f"{'NCE' if obj == 'nce' else 'HS'} at {t}: {_ratio(o, th):.2f}x"
                        for obj, t, o, th in pairs) + ".")


def section(path: str = RECORDS, first_round: str = FIRST_ROUND, before: str = BEFORE) -> list[str]:
    """The page's section for this round ([] before it is run)."""
    got = measured(records(path))
    if not got:
        return []
    tested = {r["test"]["text"] for r in got.values() if (r.get("test") or {}).get("text")}
    dates = sorted([r["first_date"] for r in got.values()] + [r["date"] for r in got.values()])
    commits = sorted({r["sampledlm_commit"] for r in got.values() if r.get("sampledlm_commit")})
    return ["", "### faster-rnnlm against ours at speed-first settings (second round)", "",
            f"Measured {dates[0]} to {dates[-1][11:]} on {MACHINE}, our commit {', '.join(commits)}, "
            "every other job on the machine stopped while the tools ran, one run at a time, the tools alternated "
            "(`benchmarks/large_vocab_frnn_fast.py` has the reasons; the command is in "
            "benchmarks/notes/large-vocab-findings.md, 2026-12-04). The same 1,000,018 training tokens and "
            "vocabulary as the first round, one epoch each, faster-rnnlm as there. Ours on faster-rnnlm's model "
            "(`-d 256 --no-input-weights`) with its output's arithmetic (NCE: 20 noise words for each position; "
            "HS: `--objective hsm --word-classes none --arity 2 --components 1`), and the settings a user who wants "
            "speed at this size would give: `-b 128`, `-b 256` or (NCE at two threads) `-b 512` BPTT rows a step "
            "(our default 32), `--dropout 0` and `--precision bf16`; every other setting at its default (so AdamW at "
            "0.008 for a run of this few "
            "steps). Words per CPU second of the training loop, as in the first round. *test ppl*: the run's model "
            "after its epoch, exact over all V, on every k-th line of the test text (about 3,000 tokens: "
            f"{', '.join(sorted(os.path.basename(t) for t in tested))}; faster-rnnlm scores word by word, so a "
            "larger subset would cost it CPU-hours): both tools read the same text, ours in fewer CPU seconds where "
            "the ratio is above 1. One epoch of 1M tokens is an early point of training: the 2-CPU-hour runs below "
            "are the comparison at a real budget. Each speed is the median of the runs of that command. "
            + frnn.TWICE_EOS
            + drift(got, first_round) + before_line(before), "", *table(got), "", *budget_lines(records(path))]


# --- the fastest setting under faster-rnnlm's budget -------------------------------------------------------------
DATA = "/work/data/wiki-runs/neural/data"  # the neural rows' vocabulary and valid/test subsets (frnn_budget's too)
CORPUS = "/work/data/wiki"
WORK = "/work/data/wiki-runs/frnn-fast-budget"
SAFETY = 0.9  # the share of faster-rnnlm's CPU seconds the steps are sized for (speeds vary with the load)
BPTT = 35
CHECKPOINT_STEPS = 3_000  # about 5 CPU-minutes at 128 rows: a stop loses little
VALID_STEPS = 10_000  # the learning curve against CPU seconds (1,000 validation tokens: seconds each)


def budget_plan(objective: str, threads: int, rows: dict, fast: list[dict], corpus_tokens: int) -> dict | None:
    """How our fastest speed-first row of this round trains under faster-rnnlm's budget run of the same output and
    threads (``rows``: the large-vocabulary records, ``frnn-budget/<output>-<threads>``): its steps sized so that
    they take :data:`SAFETY` of that run's process CPU seconds at the row's measured words per CPU second, over
    as many passes of the whole corpus as they need. None before both are recorded."""
    theirs = rows.get(f"frnn-budget/{objective}-{threads}", {})
    got = measured(fast)
    ours = [got[("sampledlm", n, threads)] for n in FAST[objective] if ("sampledlm", n, threads) in got]
    if theirs.get("rc") != 0 or not theirs.get("process_cpu_s") or not ours:
        return None
    best = max(ours, key=lambda r: r["words_per_cpu_s"])
    flags = frnn.OURS_FLAGS[best["objective"]]
    batch = int(flags[flags.index("-b") + 1])
    steps = int(SAFETY * theirs["process_cpu_s"] * best["words_per_cpu_s"] // (batch * BPTT))
    return {"row": best["objective"], "threads": threads, "flags": flags, "steps": steps,
            "epochs": math.ceil(steps * batch * BPTT / corpus_tokens),
            "theirs_key": f"frnn-budget/{objective}-{threads}",
            "theirs_cpu_s": theirs["process_cpu_s"], "theirs_test_ppl": (theirs.get("test") or {}).get("ppl"),
            "planned_words_per_cpu_s": best["words_per_cpu_s"]}


def train_and_score(plan: dict, work: str = WORK, data: str = DATA, corpus: str = CORPUS) -> dict:
    """Train (or resume) the planned run, score it on the budget runs' test subset, and return its record."""
    from . import lmruns

    rd = os.path.join(work, f"{plan['row']}-{plan['threads']}")
    os.makedirs(work, exist_ok=True)
    if os.path.exists(os.path.join(rd, "checkpoint.json")):
        cmd = ["train", "--resume", rd]
    else:
        cmd = ["train", "--train", os.path.join(corpus, "train.txt"), "--valid", os.path.join(data, "valid-1000.txt"),
               "--vocab", os.path.join(data, "vocab-full.txt"), "--model", "gru", "--device", "cpu", "--threads",
               str(plan["threads"]), "--epochs", str(plan["epochs"]), "--max-steps", str(plan["steps"]), "-o", rd,
               "--checkpoint-every", str(CHECKPOINT_STEPS), "--valid-every", str(VALID_STEPS), *plan["flags"]]
    env = dict(os.environ, OMP_NUM_THREADS=str(plan["threads"]))
    spent = os.path.join(work, f"{plan['row']}-{plan['threads']}.process-cpu.jsonl")  # one line a start
    if not lmruns.finished(rd):
        before = os.times()
        r = subprocess.run([sys.executable, "-m", "sampledlm", *cmd], env=env)
        with open(spent, "a", encoding="utf-8") as f:
            f.write(json.dumps({"rc": r.returncode, "process_cpu_s": frnn.children_cpu(before)}) + "\n")
        if r.returncode != 0 or not lmruns.finished(rd):
            raise SystemExit(f"frnn-fast budget: training stopped (exit {r.returncode}); run again to resume {rd}")
    with open(os.path.join(rd, "metrics.jsonl"), encoding="utf-8") as f:
        curve = [json.loads(line) for line in f if line.strip()]
    ev = frnn.eval_ours(rd, os.path.join(data, "test-20000.txt"))
    if "failed" in ev:
        raise SystemExit(f"frnn-fast budget: scoring {rd} failed: {ev['failed']}")
    with open(spent, encoding="utf-8") as f:
        process_cpu = sum(json.loads(line)["process_cpu_s"] for line in f if line.strip())
    return {**plan, "kind": "budget", "tool": "sampledlm", "run_dir": rd, "cpu_s": curve[-1]["cpu_s"],
            "process_cpu_s": round(process_cpu, 1),
            "curve": [{k: m.get(k) for k in ("epoch", "step", "valid_ppl", "cpu_s")} for m in curve],
            "test": ev,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "sampledlm_commit": subprocess.run(["git", "-C", REPO_DIR, "rev-parse", "--short", "HEAD"],
                                               capture_output=True, text=True).stdout.strip()}


def main(argv=None) -> None:
    import argparse

    from .large_vocab_record import NOTES, read_rows

    ap = argparse.ArgumentParser(description="our fastest speed-first row of the second round under faster-rnnlm's "
                                 "budget run of the same output (resumable: run again after a stop)")
    ap.add_argument("--runs", default="nce-1", help="comma-separated OUTPUT-THREADS (nce-1, hs-2, ...)")
    a = ap.parse_args(argv)
    with open(os.path.join(CORPUS, "stats.json"), encoding="utf-8") as f:
        corpus_tokens = json.load(f)["tokenize"]["splits"]["train"]["tokens"]
    for spec in a.runs.split(","):
        objective, threads = spec.rsplit("-", 1)
        done = [r for r in records() if r.get("kind") == "budget" and r["theirs_key"] == f"frnn-budget/{spec}"]
        if done:
            continue
        plan = budget_plan(objective, int(threads), read_rows(NOTES), records(), corpus_tokens)
        if plan is None:
            raise SystemExit(f"frnn-fast budget: {spec} needs faster-rnnlm's budget run and this round's speed rows")
        rec = train_and_score(plan)
        with open(RECORDS, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
