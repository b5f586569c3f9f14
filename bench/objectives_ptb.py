"""Quality of each output objective on PTB (issue 5 acceptance: quality).

Trains the feed-forward trigram model of seed 000 §3.2 (d = 50, h = 200, tanh) on PTB with each
objective through the CLI (``sampledlm train``), then reports the exact test perplexity alone and
linearly interpolated with a Kneser-Ney trigram (weight tuned by EM on validation), and the
training time to the best validation epoch. Targets: binary (alpha = 5 %, variable subsets) within
3 % of the softmax model's test perplexity; CSS-IS and BlackOut with S = 250 within 5 %.

Runs are kept in ``--runs`` (outside the repository); a finished run is reused, so the script can
be run again to add objectives or just to rebuild the table.

    python bench/objectives_ptb.py                                  # all objectives (hours on 2 cores)
    python bench/objectives_ptb.py --objectives binary,css-is,blackout,softmax --epochs 8
    python bench/objectives_ptb.py --table-only                     # rebuild the page from finished runs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import REPO, stamp, write_results  # noqa: E402

PTB = os.path.join(os.path.dirname(REPO), "shared", "data", "ptb")
ALL = ["softmax", "binary", "is", "css-is", "css-bernoulli", "nce", "neg", "blackout", "ranking"]
OPTIONS = {  # the settings: alpha = 5 % variable for binary, S = 250 for the sampled ones
    "softmax": [],
    "binary": ["--neg-rate", "0.05", "--neg-subset", "variable"],
}
TARGET = {"binary": 0.03, "css-is": 0.05, "blackout": 0.05}
#: runs kept (when present) from before the trainer called ``objective.prepare`` on fresh models
EARLIER = {"binary_noprepare": "binary"}


def options(obj: str) -> list[str]:
    return OPTIONS.get(obj, ["--samples", "250"])


def run(cmd: list[str], log: str | None = None) -> str:
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "a") as f:
            f.write(p.stdout + p.stderr)
    if p.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p.stdout + p.stderr


def finished(run_dir: str) -> bool:
    path = os.path.join(run_dir, "model.safetensors")
    if not os.path.exists(path):
        return False
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        return (f.metadata() or {}).get("finalized") == "true"


def ppl_of(text: str, pattern: str = r"ppl ([0-9.]+)") -> float:
    """The perplexity the CLI printed (``pattern``'s first group, last occurrence)."""
    m = re.findall(pattern, text)
    if not m:
        raise RuntimeError(f"no match for {pattern!r} in: {text[-500:]}")
    return float(m[-1])


def train_one(obj: str, runs: str, args) -> None:
    rd = os.path.join(runs, obj)
    if finished(rd):
        print(f"{obj}: finished run found in {rd}", flush=True)
        return
    cmd = ["sampledlm", "train", "--train", f"{PTB}/ptb.train.txt", "--valid", f"{PTB}/ptb.valid.txt",
           "--model", "ffnn", "--order", "3", "-d", "50", "--hidden", "200", "--objective", obj, *options(obj),
           "--epochs", str(args.epochs), "--threads", str(args.threads), "--seed", "1"]
    cmd += ["--resume", rd] if os.path.exists(os.path.join(rd, "config.json")) else ["-o", rd]
    t0 = time.time()
    run(cmd, log=os.path.join(runs, f"{obj}.log"))
    print(f"{obj}: trained in {time.time() - t0:.0f} s", flush=True)


def evaluate(obj: str, runs: str, arpa: str, label: str | None = None) -> dict | None:
    """Evaluate the finished run ``runs/<obj>`` (``label``: the objective it trained, when the
    directory name is not one)."""
    rd = os.path.join(runs, obj)
    if not finished(rd):
        return None
    cache = os.path.join(rd, "bench_eval.json")
    if os.path.exists(cache) and os.path.getmtime(cache) > os.path.getmtime(os.path.join(rd, "model.safetensors")):
        with open(cache) as f:
            return json.load(f)
    metrics = [json.loads(line) for line in open(os.path.join(rd, "metrics.jsonl")) if line.strip()]
    epochs = [m for m in metrics if "valid_ppl" in m]
    best = min(epochs, key=lambda m: m["valid_ppl"])
    test = ppl_of(run(["sampledlm", "eval", rd, "--test", f"{PTB}/ptb.test.txt"]))
    inter = ppl_of(run(["sampledlm", "eval", rd, "--test", f"{PTB}/ptb.test.txt", "--interpolate", arpa,
                        "--weight", "auto", "--interp-valid", f"{PTB}/ptb.valid.txt"]),
                   r"interpolated \(W=[0-9.]+\) ([0-9.]+)")
    out = {"objective": obj, "options": " ".join(options(label or obj)), "epochs": len(epochs), "best_epoch": best["epoch"],
           "valid_ppl": best["valid_ppl"], "test_ppl": test, "test_ppl_interp_kn3": inter,
           "train_s_to_best": best.get("wall_s"), "tokens_per_s": best.get("tokens_per_s")}
    with open(cache, "w") as f:
        json.dump(out, f)
    return out


def table(rows: list[dict], kn3: float, epochs: int) -> str:
    soft = next((r for r in rows if r["objective"] == "softmax"), None)
    lines = ["| objective | options | epochs (best) | valid ppl | test ppl | test ppl + KN3 | train time to best | "
             "vs softmax | target |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rel = f"{100 * (r['test_ppl'] / soft['test_ppl'] - 1):+.1f} %" if soft else "n/a"
        tgt = TARGET.get(r["objective"])
        verdict = ""
        if tgt is not None and soft:
            verdict = f"within {100 * tgt:.0f} %: " + ("yes" if r["test_ppl"] <= soft["test_ppl"] * (1 + tgt) else "**no**")
        t = r["train_s_to_best"]
        lines.append(f"| {r['objective']} | {r['options']} | {r['epochs']} ({r['best_epoch']}) | {r['valid_ppl']:.1f} | "
                     f"{r['test_ppl']:.1f} | {r['test_ppl_interp_kn3']:.1f} | "
                     f"{'%.0f s' % t if t is not None else '?'} | {rel} | {verdict} |")
    body = [
        "Feed-forward trigram NNLM (d = 50, h = 200, tanh; seed 000 §3.2) trained on PTB with each output objective "
        f"(`sampledlm train`, SGD, lr halving on validation, at most {epochs} epochs, seed 1, 1 thread); exact "
        "test perplexity over 82,430 predictions; `+ KN3`: linear interpolation with an interpolated Kneser-Ney "
        f"trigram (test ppl alone {kn3:.1f}), weight tuned by EM on ptb.valid.txt. Script: `bench/objectives_ptb.py`.",
        "",
        "\n".join(lines),
        "",
        "Paper figures for reference (seed 000 tables 6-7, variable subsets): standard NNLM 154.3 (132.7 with KN3), "
        "binary NNLM 5 % 152.1 (132.2); KN trigram 153.0.",
        "",
        "Notes. (1) Every model here is far from converged: the trainer's SGD uses lr 0.1 on the *mean* batch loss "
        "(128 times smaller steps than the paper's per-example SGD) and the runs stop after "
        f"{epochs} epochs, so the softmax model is well above the paper's 154; the comparison is at equal epochs. "
        "(2) CSS-IS and BlackOut follow the softmax validation curve epoch by epoch at a fraction of its training "
        "time. (3) `objective.prepare(model)`, which the trainer calls on a fresh model, starts the output biases "
        "at log p(w) - log alpha for binary and at log p(w) for the other sampled objectives. Rows marked "
        "'(zero-initialised biases)' were trained before the trainer called it: binary then starts with every "
        "sigmoid at 1/2 (V/2 in total) and spends its first epochs pulling them down. The CSS-IS and BlackOut "
        "rows also predate that change (zero-initialised biases); they track the softmax without it.",
    ]
    return "\n".join(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objectives", default=",".join(ALL))
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", default="/tmp/sampledlm_objectives_ptb", help="where the runs live (outside the repo)")
    ap.add_argument("--table-only", action="store_true", help="do not train; tabulate finished runs")
    args = ap.parse_args()
    if not os.path.exists(f"{PTB}/ptb.train.txt"):
        sys.exit(f"PTB not found at {PTB}")
    meta = stamp()
    os.makedirs(args.runs, exist_ok=True)
    arpa = os.path.join(args.runs, "kn3.arpa")
    if not os.path.exists(arpa):
        run(["sampledlm", "ngram", "train", "--train", f"{PTB}/ptb.train.txt", "--order", "3", "--smoothing", "kn",
             "-o", arpa])
    kn3 = ppl_of(run(["sampledlm", "ngram", "eval", arpa, "--test", f"{PTB}/ptb.test.txt"]), r"perplexity ([0-9.]+)")
    objs = [o for o in args.objectives.split(",") if o]
    if not args.table_only:
        for obj in objs:
            train_one(obj, args.runs, args)
    rows = [r for o in ALL if (r := evaluate(o, args.runs, arpa))]
    rows += [{**r, "objective": f"{obj} (zero-initialised biases)"} for name, obj in EARLIER.items()
             if (r := evaluate(name, args.runs, arpa, label=obj))]
    body = table(rows, kn3, args.epochs)
    load = os.getloadavg()[0]
    body += (f"\n\nTimes were taken on a shared {os.cpu_count()}-core machine with other engineers' jobs running "
             f"(load average {load:.1f} when the table was written), so they are inflated and noisy; "
             "see objectives.md for controlled throughput figures.\n")
    write_results("objectives_ptb", "Sampled output objectives: quality on PTB", meta,
                  {"rows": rows, "kn3_test_ppl": kn3, "epochs": args.epochs}, body)
    print(body)


if __name__ == "__main__":
    main()
