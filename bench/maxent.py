"""Maximum-entropy LMs on PTB (Xu et al. tables 1 and fig. 2): binary vs standard MELM, subsampling, shards.

Runs, each in its own process (so wall time and peak memory are the run's own):

- KN3 reference: ``sampledlm ngram train --order 3`` (interpolated modified Kneser-Ney), when available.
- binary MELM Feat-I and Feat-II, standard (softmax) MELM Feat-I, all data (table 1).
- the subsampling curve (fig. 2): binary Feat-I at negative rates alpha = 10/5/2/1 %, and the
  standard MELM trained on the same fractions of the training positions.
- speed-up: binary Feat-I at alpha = 5 % for a fixed number of epochs on 1 and on 2 local ranks
  (the two models must be identical).

Writes docs/results/maxent.{md,json} and maxent.png (or into --out); partial results are written after
every run. The runs themselves (worker, KN3, child processes, the plot) are
:mod:`sampledlm.experiments.melm_runs`, shared with ``sampledlm bench xu-melm``.

    python bench/maxent.py [--quick] [--data ../shared/data/ptb] [--out DIR] [--epochs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import REPO, RESULTS, stamp  # noqa: E402

from sampledlm.errors import UserError  # noqa: E402
from sampledlm.experiments import report  # noqa: E402
from sampledlm.experiments.melm_runs import curve_figure, feat_i, run_child  # noqa: E402

ALPHAS = (1.0, 0.1, 0.05, 0.02, 0.01)


def plan(args) -> list[dict]:
    """The runs, most important first (a cut-off bench still reports the main comparisons)."""
    base = {"files": report.data_files(args.data), "lr": args.lr, "epochs": args.epochs}
    curve = {**base, "epochs": args.curve_epochs, "features": "feat-i", "curve": True}

    def binary_curve(a):
        return {**curve, "name": f"binary MELM, Feat-I, alpha {a:g}, {args.curve_epochs} epochs", "objective": "binary",
                "alpha": a}

    runs = [
        {**base, "name": "binary MELM, Feat-I", "objective": "binary", "alpha": 1.0, "features": "feat-i"},
        {**base, "name": "standard MELM, Feat-I", "objective": "softmax", "alpha": 1.0, "features": "feat-i",
         "lr": args.softmax_lr},
    ]
    for ranks in (1, 2):
        runs.append({**base, "name": f"binary Feat-I alpha 0.05, {args.speed_epochs} epochs, {ranks} rank(s)",
                     "objective": "binary", "alpha": 0.05, "features": "feat-i", "epochs": args.speed_epochs,
                     "min_gain": -1.0, "ranks": ranks, "speed": True})
    for a in ALPHAS[1:]:  # cheap: a fraction of the data
        runs.append({**curve, "name": f"standard MELM, Feat-I, {a:g} of the data", "objective": "softmax", "alpha": a,
                     "lr": args.softmax_lr, "epochs": args.epochs})
    runs += [binary_curve(a) for a in (1.0, 0.1, 0.01)]
    runs.append({**base, "name": "binary MELM, Feat-II", "objective": "binary", "alpha": 1.0, "features": "feat-ii",
                 "epochs": args.feat2_epochs})
    runs += [binary_curve(a) for a in (0.05, 0.02)]
    runs.append({**base, "name": f"binary MELM, Feat-II, up to {args.feat2_long_epochs} epochs", "objective": "binary",
                 "alpha": 1.0, "features": "feat-ii", "epochs": args.feat2_long_epochs})
    for obj, label in (("binary", "binary"), ("softmax", "standard")):  # the paper's standard MELM is L2-regularised
        runs.append({**base, "name": f"{label} MELM, Feat-I, L2 {args.l2:g}", "objective": obj, "alpha": 1.0,
                     "features": "feat-i", "l2": args.l2, "lr": args.lr if obj == "binary" else args.softmax_lr})
    for a in (0.01, 0.1):  # the subsampled binary models trained as long as the main one (alpha 1: "binary MELM, Feat-I")
        runs.append({**base, "name": f"binary MELM, Feat-I, alpha {a:g}, up to {args.epochs} epochs", "objective": "binary",
                     "alpha": a, "features": "feat-i", "long_curve": True})
    runs.append({**base, "name": f"binary MELM, Feat-I, alpha 0.01, variable negatives, up to {args.epochs} epochs",
                 "objective": "binary", "alpha": 0.01, "features": "feat-i", "neg_subset": "variable"})
    if args.quick:
        runs = [r for r in runs if r["name"] in ("binary MELM, Feat-I", "standard MELM, Feat-I") or r.get("speed")]
    return runs


def plot(rows: list[dict], args, kn: dict | None = None):
    """The subsampling curves (cf. the paper's fig. 2) as a matplotlib figure."""

    def points(keep):
        return [(r["alpha"], r["test_ppl"]) for r in rows if "test_ppl" in r and feat_i(r)
                and not r.get("l2") and not r.get("speed") and keep(r)]

    series = [
        (f"binary MELM, negatives at rate alpha, {args.curve_epochs} epochs", "o-",
         points(lambda r: r["objective"] == "binary" and r.get("curve"))),
        (f"binary MELM, negatives at rate alpha, <= {args.epochs} epochs", "o-",
         points(lambda r: r["objective"] == "binary" and (r.get("long_curve") or r["name"] == "binary MELM, Feat-I"))),
        (f"standard MELM, fraction alpha of the data, <= {args.epochs} epochs", "s--",
         points(lambda r: r["objective"] == "softmax" and (r.get("curve") or r["alpha"] == 1.0))),
    ]
    return curve_figure(series, kn["test_ppl"] if kn else None, "Subsampled binary vs standard MELM, Feat-I "
                        "(cf. Xu et al. fig. 2)", "PTB test perplexity")


NOTES = """How the models were trained (all runs): SGD over shuffled positions with per-parameter AdaGrad step
sizes started at 1 (`step = lr g / sqrt(1 + sum g^2)`), lr 1, halved once the validation perplexity improves by
less than 0.3 % and stopped at the next such epoch (or at the epoch cap), weights rolled back to the best epoch;
no regularisation unless the name says L2. In development, plain SGD at the paper's lr 0.1 converged several times
more slowly per epoch than this (not re-run here). Binary models: V independent logistic
classifiers, negatives kept at rate alpha by a hash of (seed, stream position, word) (the same subset every epoch, as
in the paper's MELM runs), calibrated by + log alpha on the biases, evaluated renormalised over V (eq. 8). Standard
MELM at alpha < 1: a fixed random fraction alpha of the training positions (features from that fraction only).
Feat-I = unigram, bigram, trigram (no cut-off); Feat-II adds skip-1 bigrams (w-2), skip-1 trigrams (w-3 w-2) and
200k trigger pairs (a word 3..20 tokens back, selected by average mutual information, count >= 3).

Cost: with the sparse normaliser an epoch costs O(active (feature, word) pairs) (column "pairs/pos": the pairs
gathered per training position, V = 10,000 would be the dense cost), for every alpha: subsampling the negatives only skips their updates (and at
alpha < 1 their sigmoid), it does not shrink the pass that gathers the scores. The paper's O(alpha V T) saving is
against a dense O(V T) epoch, which the Wu-Khudanpur decomposition already avoids for both models; in our
kernel the subsampled epochs are still faster (compare the epoch times in maxent.json).

Why the subsampled binary models fall short of the paper's fig. 2: with a fixed subset, a (context, word) pair whose
context occurs fewer than about 1/alpha times sees no negative at all, so its weight is only ever pushed up; the
log-alpha shift of the bias corrects the average odds, not these pairs. New subsets every epoch
(`--neg-subset variable`) may help: see the "variable negatives" row, when present. The 2-rank timing includes process start-up,
loading the compiled kernels and each rank building the feature dictionary, and was taken while other jobs kept
both cores busy, so it shows no speed-up; the models of 1 and 2 ranks are bit-identical.
"""


def acceptance(rows: list[dict], ref: float) -> list[str]:
    """The issue's targets, each with the measured figure and met / not met (computed, not written by hand)."""
    by = {r["name"]: r for r in rows if "test_ppl" in r}

    def rel(a, b):
        return 100 * (a / b - 1)

    out = ["Targets (issue 6):", ""]
    b1 = by.get("binary MELM, Feat-I")
    if b1:
        d = rel(b1["test_ppl"], ref)
        out.append(f"- binary MELM Feat-I within 2 % of KN3: {d:+.1f} % ({b1['test_ppl']:.2f} vs {ref:.2f}): "
                   f"{'met' if abs(d) <= 2 else 'NOT met'}")
    f2 = [r for r in by.values() if r["objective"] == "binary" and not feat_i(r) and not r.get("l2")]
    if f2:
        best = min(f2, key=lambda r: r["valid_ppl"])
        d = rel(best["test_ppl"], ref)
        out.append(f"- binary MELM Feat-II at least 5 % below KN3: {d:+.1f} % ({best['name']}, {best['test_ppl']:.2f}; "
                   f"picked by valid ppl): {'met' if d <= -5 else 'NOT met'}")
    for label, full, low in ((f"{r['epochs']} epochs", r, by.get(r["name"].replace("alpha 1,", "alpha 0.01,")))
                             for r in by.values() if r.get("curve") and r["objective"] == "binary" and r["alpha"] == 1.0):
        if low:
            d = rel(low["test_ppl"], full["test_ppl"])
            out.append(f"- binary at alpha 1 % within 2 % of its own 100 % ({label}): {d:+.1f} % "
                       f"({low['test_ppl']:.2f} vs {full['test_ppl']:.2f}): {'met' if d <= 2 else 'NOT met'}")
    low = next((r for r in by.values() if r.get("long_curve") and r["alpha"] == 0.01), None)
    if b1 and low:
        d = rel(low["test_ppl"], b1["test_ppl"])
        out.append(f"- the same, trained as long as the main run: {d:+.1f} % ({low['test_ppl']:.2f} vs "
                   f"{b1['test_ppl']:.2f}): {'met' if d <= 2 else 'NOT met'}")
    var = next((r for r in by.values() if r.get("neg_subset") == "variable" and r["alpha"] == 0.01), None)
    if b1 and var:
        d = rel(var["test_ppl"], b1["test_ppl"])
        out.append(f"- the same with new negatives every epoch (variable): {d:+.1f} % ({var['test_ppl']:.2f} vs "
                   f"{b1['test_ppl']:.2f}): {'met' if d <= 2 else 'NOT met'}")
    return out


def markdown(rows: list[dict], kn: dict | None, args) -> str:
    ref = kn["test_ppl"] if kn else 148.28
    ref_name = "our KN3" if kn else "KN3 reference (KenLM lmplz 148.28; `sampledlm ngram` unavailable)"
    out = ["Exact perplexity on PTB (82,430 test predictions: words and `</s>`). Runs one at a time on a shared",
           "2-core machine while other engineers' jobs ran, so wall times are upper bounds.", ""]
    out.append(f"Reference: {ref_name}: test {ref:.2f}" + (f", valid {kn['valid_ppl']:.2f}" if kn else "") + "\n")
    out.append("| model | features | pairs/pos | epochs | valid ppl | test ppl | vs KN3 | wall s | peak MB |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "test_ppl" not in r:
            out.append(f"| {r['name']} | | | | | failed: {r.get('error')} | | | |")
            continue
        counts = r.get("feature_counts") or r["features"]
        feats = counts["total"]
        ppos = f"{r['pairs_per_position']:,.0f}" if "pairs_per_position" in r else "-"
        out.append(f"| {r['name']} | {feats:,} | {ppos} | {r['epochs_run']} | {r['valid_ppl']:.2f} | {r['test_ppl']:.2f} | "
                   f"{100 * (r['test_ppl'] / ref - 1):+.1f}% | {r['wall_s']:.0f} | {r['peak_rss_mb']:.0f} |")
    out.append("")
    out += acceptance(rows, ref)
    out.append("")
    out.append(NOTES)
    speed = {r["ranks"]: r for r in rows if r.get("speed") and "wall_s" in r}
    if 1 in speed and 2 in speed:
        same = speed[1]["weights_checksum"] == speed[2]["weights_checksum"] and speed[1]["test_ppl"] == speed[2]["test_ppl"]
        out.append("")
        out.append(f"Speed-up of 2 ranks over 1 (binary Feat-I, alpha 0.05, {args.speed_epochs} epochs, gloo on CPU): "
                   f"{speed[1]['wall_s'] / speed[2]['wall_s']:.2f}x ({speed[1]['wall_s']:.0f} s vs {speed[2]['wall_s']:.0f} s); "
                   f"models identical: {'yes' if same else 'NO'}.")
    return "\n".join(out)


def kn3(data: str) -> dict | None:
    """Our KN3 (``sampledlm ngram``) on ``data``, or None when it failed."""
    row = run_child({"kind": "kn3", "name": "KN3 (sampledlm ngram, modified KN)", "files": report.data_files(data)})
    return None if "error" in row else row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(REPO), "shared", "data", "ptb"),
                    help="Directory with ptb.{train,valid,test}.txt or {train,valid,test}.txt.")
    ap.add_argument("--out", default=RESULTS, help="Where to write maxent.md/.json/.png.")
    ap.add_argument("--quick", action="store_true", help="Feat-I binary and standard, and the speed-up runs only.")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--speed-epochs", type=int, default=1)
    ap.add_argument("--curve-epochs", type=int, default=3)
    ap.add_argument("--feat2-epochs", type=int, default=5)
    ap.add_argument("--feat2-long-epochs", type=int, default=12)
    ap.add_argument("--l2", type=float, default=0.5, help="L2 strength of the regularised Feat-I runs.")
    ap.add_argument("--resume", action="store_true", help="Keep the runs already in OUT/maxent.json.")
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--softmax-lr", type=float, default=1.0)
    args = ap.parse_args()
    try:
        report.data_files(args.data)
    except UserError as e:
        sys.exit(f"maxent: {e}")
    meta = stamp()
    done: dict[str, dict] = {}
    kn = None
    if args.resume and os.path.exists(os.path.join(args.out, "maxent.json")):
        with open(os.path.join(args.out, "maxent.json"), encoding="utf-8") as f:
            old = json.load(f)
        done = {r["name"]: r for r in old["data"]["runs"] if "test_ppl" in r}
        kn = old["data"]["kn3"]
        meta["command"] += f" (resumed; earlier runs from {old['meta']['date']}, commit {old['meta']['commit']})"
    kn = kn or kn3(args.data)
    rows: list[dict] = []
    for spec in plan(args):
        if spec["name"] in done:
            rows.append(done[spec["name"]])
            continue
        print(f"== {spec['name']}", file=sys.stderr, flush=True)
        rows.append(run_child(spec))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "epoch_log"}), file=sys.stderr, flush=True)
        write(rows, kn, meta, args)
    write(rows, kn, meta, args)


def write(rows: list[dict], kn: dict | None, meta: dict, args) -> None:
    """The results page, its JSON and the plot, from the runs so far."""
    body = markdown(rows, kn, args)
    report.write_page(args.out, "maxent", "Maximum-entropy LMs on PTB: binary vs standard MELM", meta,
                      {"kn3": kn, "runs": rows}, body + "\n\n![subsampling curve](maxent.png)\n",
                      figure=plot(rows, args, kn))


if __name__ == "__main__":
    main()
