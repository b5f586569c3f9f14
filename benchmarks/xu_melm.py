"""``xu-melm``: Xu et al. 2011 (Xu, Gunawardana & Khudanpur) table 1 and fig. 2 -- binary vs standard MELM.

Table 1 (no subsampling): KN3, the standard MELM (softmax, eq. 10) and the binarized MELM
(V logistic classifiers, eq. 12, renormalised for evaluation, eq. 8), with Feat-I (unigram, bigram,
trigram features, no cut-off) and Feat-II (+ skip-1 bigrams, skip-1 trigrams and trigger pairs).

Fig. 2 (subsampling): the binary Feat-I MELM trained on every positive example and a fraction
alpha of the negatives (cost O(alpha V T), sec. 2.1; calibrated by + log alpha on the biases), and
the standard Feat-I MELM trained on a fraction alpha of the training positions, for
alpha = 100, 10, 5, 2, 1 %.

Every model is trained in its own process by :mod:`.melm_runs` (wall time and peak memory are the
run's own) and evaluated by exact perplexity (every word and ``</s>``). Finished runs are kept in
:func:`.report.work_dir` (one JSON per run, named by a hash of its spec), so re-running the full
experiment reuses them; the page is rewritten after every run, unfinished rows showing "not run".
Training: SGD with AdaGrad step sizes, lr 1,
halved when the validation perplexity gains less than 0.3 %, stopped at the next such epoch or the
epoch cap, best epoch kept.
"""

from __future__ import annotations

import json
import math
import os
import sys

from sampledlm.errors import UserError

from . import report
from .melm_runs import cached, curve_figure, run_child

NAME = "xu-melm"
#: Xu et al. 2011, table 1 (PTB, their split: sections 00-20 train, 972K tokens; 23-24 test).
PAPER_TABLE1 = {"kn3": 153.0, "standard": 154.2, "binary": 153.7, "standard-feat2": 140.2, "binary-feat2": 141.1}
ALPHAS = (1.0, 0.1, 0.05, 0.02, 0.01)
#: L2 strengths tried on the binary Feat-I MELM (the paper used none); the page picks one on validation
L2_SWEEP = (0.1, 0.2, 0.3, 0.5)
#: (lr, L2) pairs tried beside lr 1 on the binary Feat-I MELM
LR_SWEEP = ((0.5, 0.3), (2.0, 0.3), (4.0, 0.3), (2.0, 0.2), (2.0, 0.5), (4.0, 0.5))
#: the strength validation picked for the binary 100 % model (the page recomputes the pick), reused at 1 %
L2_PICKED = 0.3
QUICK_ALPHAS = (1.0, 0.01)
#: Feat-II's trigger pairs need lift P(w | v in window) / P(w) above this (``--trigger-min-lift``, its default)
TRIGGER_MIN_LIFT = 10.0
#: other lifts tried on the binary Feat-II MELM (1: every positively correlated pair, as before the rule)
TRIGGER_LIFT_SWEEP = (1.0, 20.0, 40.0)


def settings(quick: bool) -> dict:
    """Epoch caps (the paper trains its binary MELM for about 20 iterations; the halving rule
    usually stops earlier), lr, the fig. 2 rates, and the epochs of the sharding speed runs."""
    return {"epochs": 3, "feat2_epochs": 2, "lr": 1.0, "alphas": QUICK_ALPHAS, "speed_epochs": 1} if quick else \
        {"epochs": 20, "feat2_epochs": 20, "lr": 1.0, "alphas": ALPHAS, "speed_epochs": 2}


def prepare_vocab(files: dict[str, str], work: str) -> str:
    """The vocabulary shared by every model, saved in ``work``: every training word, or (when the
    training text has no ``<unk>`` of its own, e.g. an open-vocabulary corpus) words seen twice or
    more, so that ``<unk>`` is trained on the singletons."""
    from sampledlm.data.corpus import build_vocab

    vocab = build_vocab(files["train"])
    if vocab.counts[1] == 0:
        vocab = build_vocab(files["train"], min_count=2)
    path = os.path.join(work, f"vocab-{vocab.fingerprint()}.txt")
    if not os.path.exists(path):
        vocab.save(path)
    return path


def plan(quick: bool, files: dict[str, str], vocab: str) -> list[dict]:
    """The runs, most important first (an interrupted experiment still has the main comparisons)."""
    s = settings(quick)
    base = {"files": files, "vocab": vocab, "lr": s["lr"], "epochs": s["epochs"], "features": "feat-i", "alpha": 1.0}

    def binary(a, subset="variable"):
        extra = {} if a == 1.0 else {"neg_subset": subset}
        return {**base, "id": f"binary-a{a:g}" + ("-fixed" if subset == "fixed" else ""), "objective": "binary",
                "alpha": a, "name": f"binary MELM, Feat-I, {100 * a:g} % of the negatives"
                + (" (the same subset every epoch)" if subset == "fixed" else ""), **extra}

    def standard(a):
        return {**base, "id": f"standard-a{a:g}", "objective": "softmax", "alpha": a,
                "name": f"standard MELM, Feat-I, {100 * a:g} % of the training positions"}

    low = [a for a in s["alphas"] if a < 1.0]
    runs = [
        {"id": "kn3", "kind": "kn3", "name": "KN3 (sampledlm ngram, interpolated modified Kneser-Ney)",
         "files": files, "vocab": vocab},
        {**standard(1.0), "id": "standard", "name": "standard MELM, Feat-I"},
        {**binary(1.0), "id": "binary", "name": "binary MELM, Feat-I"},
        binary(0.01),
        {**base, "id": "binary-feat2", "name": "binary MELM, Feat-II", "objective": "binary",
         "features": "feat-ii", "trigger_min_lift": TRIGGER_MIN_LIFT, "epochs": s["feat2_epochs"]},
    ]
    runs += [standard(a) for a in low]
    runs += [binary(a) for a in low if a != 0.01]
    if not quick:
        runs.append(binary(0.01, "fixed"))
        runs.append({**base, "id": "standard-feat2", "name": "standard MELM, Feat-II", "objective": "softmax",
                     "features": "feat-ii", "trigger_min_lift": TRIGGER_MIN_LIFT, "epochs": s["feat2_epochs"]})
        # the paper trains its binary MELM without regularisation; a light L2 helps here (an exploration beyond the paper)
        runs.append({**binary(1.0), "id": "binary-l2", "name": "binary MELM, Feat-I, L2 0.1", "l2": 0.1})
        runs += [{**binary(1.0), "id": f"binary-l2-{l2:g}", "name": f"binary MELM, Feat-I, L2 {l2:g}", "l2": l2}
                 for l2 in L2_SWEEP[1:]]
        # fig. 2 again with the L2 that validation picked for the binary 100 % model
        runs.append({**binary(0.01), "id": "binary-a0.01-l2", "l2": L2_PICKED,
                     "name": f"binary MELM, Feat-I, 1 % of the negatives, L2 {L2_PICKED:g}"})
        # is the gap to KN3 the binary model's, or MaxEnt's with n-gram features? the exact model, regularised alike
        runs.append({**standard(1.0), "id": "standard-l2-0.1", "name": "standard MELM, Feat-I, L2 0.1", "l2": 0.1})
        runs.append({**base, "id": "binary-feat2-l2", "name": "binary MELM, Feat-II, L2 0.1", "objective": "binary",
                     "features": "feat-ii", "trigger_min_lift": TRIGGER_MIN_LIFT, "epochs": s["feat2_epochs"], "l2": 0.1})
        # how strong a trigger pair must be (what chose the default): the binary Feat-II MELM at other lifts
        runs += [{**base, "id": f"binary-feat2-lift{lift:g}", "name": f"binary MELM, Feat-II, trigger lift > {lift:g}",
                  "objective": "binary", "features": "feat-ii", "trigger_min_lift": lift, "epochs": s["feat2_epochs"]}
                 for lift in TRIGGER_LIFT_SWEEP]
        # Polyak-Ruppert averaging of the weights from epoch 2 on (the paper does not average)
        by_id = {r["id"]: r for r in runs}
        # the AdaGrad learning rate of the L2 runs (lr 1 above)
        runs += [{**by_id[f"binary-l2-{l2:g}" if l2 != 0.1 else "binary-l2"], "id": f"binary-lr{lr:g}-l2-{l2:g}",
                  "lr": lr, "name": f"binary MELM, Feat-I, L2 {l2:g}, lr {lr:g}"} for lr, l2 in LR_SWEEP]
        by_id = {r["id"]: r for r in runs}
        runs += [averaged(by_id[k], how) for how in AVERAGE_HOW for k in AVERAGED[how]]
        # averages gain slowly, so the 0.3 % rule stops them early: the same at 0.1 %
        runs += [{**averaged(by_id[k], "run"), "id": f"avg-run-{k}-gain0.1", "min_gain": 0.001,
                  "name": f"{by_id[k]['name']}, averaged weights (run), stopping at 0.1 % gains"} for k in LONGER]
    runs += speed_runs(base, s["speed_epochs"])
    return runs


#: the averaging rules tried (``--average``), and the runs repeated with each (``avg-<how>-<id>``)
AVERAGE_HOW = ("run", "auto")
AVERAGED = {"run": ("binary", "binary-l2", f"binary-l2-{L2_PICKED:g}", f"binary-lr2-l2-{L2_PICKED:g}",
                    f"binary-lr4-l2-{L2_PICKED:g}", "binary-a0.01", "standard"),
            "auto": ("binary", f"binary-l2-{L2_PICKED:g}", "binary-a0.01", "standard")}

#: averaged (run) runs repeated with a stopping threshold of 0.1 % instead of 0.3 % (``avg-run-<id>-gain0.1``)
LONGER = ("binary", f"binary-l2-{L2_PICKED:g}", "binary-a0.01")


def averaged(spec: dict, how: str) -> dict:
    """``spec`` with averaged weights (``--average how``)."""
    return {**spec, "id": f"avg-{how}-{spec['id']}", "name": f"{spec['name']}, averaged weights ({how})",
            "average": how}


def speed_runs(base: dict, epochs: int) -> list[dict]:
    """Sharded training: the binary Feat-I MELM at alpha 5 % for a fixed number of epochs
    on 1 and on 2 local ranks (gloo); the two models must be identical."""
    return [{**base, "id": f"speed-{ranks}", "objective": "binary", "alpha": 0.05, "neg_subset": "variable",
             "epochs": epochs, "min_gain": -1.0, "ranks": ranks, "speed": True,
             "name": f"binary MELM, Feat-I, 5 % of the negatives, {epochs} epoch(s), {ranks} rank(s)"}
            for ranks in (1, 2)]


def carried_runs(out_dir: str) -> dict[str, dict]:
    """The finished rows of the page already in ``out_dir`` (its JSON) by run id, each marked with the
    commit it comes from (``--only`` keeps them)."""
    path = os.path.join(out_dir, NAME + ".json")
    if not os.path.exists(path):
        raise UserError(f"--only keeps the other runs' rows from {path}, which does not exist")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    commit = doc.get("meta", {}).get("commit", "?")
    return {r["id"]: {**r, "carried": r.get("carried") or commit}
            for r in doc.get("data", {}).get("runs", []) if done(r)}


def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True, only: set[str] | None = None) -> dict:
    """Train (or reuse) every run of the plan, rewriting the page ``out_dir/xu-melm.md`` after each.
    ``train=False``: only the finished runs (the others show "not run"). ``only``: train just these
    run ids; the others are reused from the run cache or else kept from the page in ``out_dir``.
    ``python -m benchmarks maxent`` is another name for this experiment (the same runs and page)."""
    carried = carried_runs(out_dir) if only is not None else {}
    meta = report.stamp()
    work = report.work_dir(NAME, quick)
    files, label = report.lm_data(data_dir, quick, os.path.join(work, "data"))
    specs = plan(quick, files, prepare_vocab(files, work))
    unknown = sorted(set(only or ()) - {sp["id"] for sp in specs})
    if unknown:
        raise UserError(f"--only: no run with id {', '.join(unknown)} in this experiment's plan "
                        f"({', '.join(sp['id'] for sp in specs)})")
    rows = {}
    data = write(out_dir, meta, label, quick, specs, rows)
    for spec in specs:
        reused = cached(spec, work) is not None
        if only is not None and spec["id"] not in only and not reused:
            if spec["id"] in carried:
                rows[spec["id"]] = carried[spec["id"]]
            continue
        if not train and not reused:
            continue
        print(f"== {NAME}: {spec['name']}" + (" (finished earlier: reused)" if reused else ""), file=sys.stderr,
              flush=True)
        rows[spec["id"]] = {**run_child(spec, cache=work), "reused": reused}
        data = write(out_dir, meta, label, quick, specs, rows)
    return write(out_dir, meta, label, quick, specs, rows)  # rows carried after the last run trained


# --- the page -------------------------------------------------------------------------------

def done(r: dict | None) -> bool:
    return r is not None and "test_ppl" in r and math.isfinite(r["test_ppl"])


def headline(by: dict) -> list[dict]:
    """Rows for the README's headline table: relative_cost = training wall time / the standard MELM's."""
    std = by.get("standard")
    base = std["wall_s"] if done(std) else None
    out = []
    for key, method, note in (
            ("kn3", "KN3 (interpolated modified Kneser-Ney)", "count-based reference"),
            ("standard", "standard MELM, Feat-I", "exact softmax, sparse normaliser"),
            ("binary", "binary MELM, Feat-I", "V logistic classifiers, all negatives"),
            ("binary-feat2", "binary MELM, Feat-II", "+ skip-1 n-grams and trigger pairs"),
            ("binary-a0.01", "binary MELM, Feat-I, 1 % of negatives",
             "new negatives every epoch, log-alpha calibrated")):
        r = by.get(key)
        if done(r):
            cost = None if key == "kn3" or base is None else r["wall_s"] / base
            out.append({"method": method, "test_ppl": r["test_ppl"], "relative_cost": cost, "note": note})
    return out


def epoch_seconds(r: dict) -> float | None:
    """Mean wall time of a training epoch (validation included), from the run's epoch log."""
    secs = [e["seconds"] for e in r.get("epoch_log", [])[1:] if "seconds" in e]
    return sum(secs) / len(secs) if secs else None


def _f(x, fmt=".2f", missing="not run"):
    return missing if x is None else format(x, fmt)


def _rel(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else 100 * (a / b - 1)


def table1(by: dict) -> str:
    kn = by["kn3"]["test_ppl"] if done(by.get("kn3")) else None
    rows = []
    for key, label in (("kn3", "KN trigram"), ("standard", "standard MELM, Feat-I"), ("binary", "binary MELM, Feat-I"),
                       ("standard-feat2", "standard MELM, Feat-II"), ("binary-feat2", "binary MELM, Feat-II")):
        r, paper = by.get(key), PAPER_TABLE1[key]
        ours = r["test_ppl"] if done(r) else None
        feats = r.get("feature_counts", {}).get("total") if done(r) else None
        rows.append([label, f"{paper:.1f}", f"{_rel(paper, PAPER_TABLE1['kn3']):+.1f} %",
                     _f(ours), _f(r["valid_ppl"]) if done(r) else "-", _f(_rel(ours, kn), "+.1f", "-"),
                     _f(feats, ",", "-"), r.get("epochs_run", "-") if done(r) else "-",
                     _f(r["wall_s"], ".0f", "-") if done(r) else "-",
                     _f(r["peak_rss_mb"], ".0f", "-") if done(r) else "-"])
    return report.table(["model", "paper ppl", "paper vs KN3", "our test ppl", "our valid ppl", "ours vs our KN3 (%)",
                         "features", "epochs", "train wall s", "peak MB"], rows)


def curve_rows(by: dict, alphas) -> tuple[str, list[dict]]:
    """The fig. 2 table: binary at rate alpha of the negatives, standard at fraction alpha of the data."""
    std = by.get("standard")
    base = std["wall_s"] if done(std) else None
    out, rows = [], []
    for a in alphas:
        b = by.get("binary" if a == 1.0 else f"binary-a{a:g}")
        s = by.get("standard" if a == 1.0 else f"standard-a{a:g}")
        bp, sp = (b["test_ppl"] if done(b) else None), (s["test_ppl"] if done(s) else None)
        b1, s1 = by.get("binary"), by.get("standard")
        item = {"alpha": a, "binary_test_ppl": bp, "standard_test_ppl": sp,
                "binary_wall_s": b["wall_s"] if done(b) else None, "standard_wall_s": s["wall_s"] if done(s) else None}
        out.append(item)
        rows.append([f"{100 * a:g} %", _f(bp), _f(_rel(bp, b1["test_ppl"] if done(b1) else None), "+.1f", "-"),
                     _f(item["binary_wall_s"] / base if base and bp else None, ".2f", "-"),
                     _f(sp), _f(_rel(sp, s1["test_ppl"] if done(s1) else None), "+.1f", "-"),
                     _f(item["standard_wall_s"] / base if base and sp else None, ".2f", "-")])
    t = report.table(["alpha", "binary: test ppl", "vs binary 100 % (%)", "binary: train time (x standard 100 %)",
                      "standard: test ppl", "vs standard 100 % (%)", "standard: train time (x standard 100 %)"], rows)
    return t, out


def figure(by: dict, alphas, label: str):
    def pts(prefix, full):
        keys = [(a, full if a == 1.0 else f"{prefix}-a{a:g}") for a in alphas]
        return [(a, by[k]["test_ppl"]) for a, k in keys if done(by.get(k))]

    fixed = by.get("binary-a0.01-fixed")
    series = [("binary MELM, Feat-I: fraction alpha of the negatives (new subset every epoch)", "o-",
               pts("binary", "binary")),
              ("standard MELM, Feat-I: fraction alpha of the training positions", "s--", pts("standard", "standard")),
              ("binary MELM, 1 %, the same negatives every epoch", "x",
               [(0.01, fixed["test_ppl"])] if done(fixed) else [])]
    kn = by["kn3"]["test_ppl"] if done(by.get("kn3")) else None
    return curve_figure(series, kn, f"Subsampled binary vs standard MELM ({label}; cf. Xu et al. fig. 2)")


def against(by: dict) -> str:
    """The closing paragraph: our figures against the paper's, computed from the rows."""
    g = {k: (r["test_ppl"] if done(r) else None) for k, r in by.items()}
    kn, st, bi, f2, sf2 = (g.get(k) for k in ("kn3", "standard", "binary", "binary-feat2", "standard-feat2"))
    b1, s1, fx = g.get("binary-a0.01"), g.get("standard-a0.01"), g.get("binary-a0.01-fixed")
    P = PAPER_TABLE1
    out = ["**Against the paper.** The paper's PTB figures come from another split (sections 00-20, 972K training "
           "tokens, against Mikolov's 887K-word split here) and other trainers (binary: plain SGD, lr 0.1, about 20 "
           "iterations; standard: generalized iterative scaling with an L2 prior tuned on validation), so we compare "
           "each model with the KN3 trained on the same data as it, not the absolute perplexities."]
    if None in (kn, st, bi):
        out.append("The table 1 comparison needs the KN3, standard and binary Feat-I runs, not all finished yet.")
        return " ".join(out)
    d_b, d_s, d_bs = _rel(bi, kn), _rel(st, kn), _rel(bi, st)
    out.append(f"Table 1: the paper has binary Feat-I {P['binary']} and standard {P['standard']} against KN3 "
               f"{P['kn3']} ({_rel(P['binary'], P['kn3']):+.1f} % and {_rel(P['standard'], P['kn3']):+.1f} %); we "
               f"measure {bi:.2f} and {st:.2f} against {kn:.2f} ({d_b:+.1f} % and {d_s:+.1f} %).")
    if abs(d_b) <= 2:
        out.append("The binary MELM matches KN3 as the paper says.")
    else:
        log = [e["valid_ppl"] for e in by["binary"]["epoch_log"]]
        gain = 100 * (1 - log[-1] / log[-2]) if len(log) > 1 else float("nan")
        if gain < 0.3:
            why = (f"training had converged by its own rule (the last epoch gained {gain:.2f} % on validation), so "
                   f"what differs from the paper is the recipe: without regularisation or a count cut-off the "
                   f"classifiers of rare (history, word) pairs over-fit, and our step sizes (AdaGrad, lr 1) and "
                   f"stopping rule are not the paper's")
        else:
            why = f"the last epoch still gained {gain:.2f} % on validation: a longer budget would help"
        out.append(f"We do not reproduce \"the binary MELM is able to match both standard MELM and the Kneser-Ney "
                   f"model\": ours is {d_b:+.1f} % from KN3 and {d_bs:+.1f} % from the standard MELM (paper: "
                   f"{_rel(P['binary'], P['standard']):+.1f} %). We attribute the gap to training rather than to "
                   f"the model: {why}.")
        l2 = best_l2(by)
        if l2:
            tried = ", ".join(f"{by[k]['l2']:g}: valid {by[k]['valid_ppl']:.2f}" for k in sorted(
                (k for k in by if k.startswith("binary-l2") and done(by[k])), key=lambda k: by[k]["l2"]))
            out.append(f"An L2 prior, which the paper did not use, narrows the gap: chosen on validation among the "
                       f"strengths tried ({tried}), L2 {by[l2]['l2']:g} gives {g[l2]:.2f} ({_rel(g[l2], kn):+.1f} % from "
                       f"KN3, {_rel(g[l2], st):+.1f} % from the unregularised standard MELM).")
        lrs = [by[k] for k in (f"binary-lr{lr:g}-l2-{x:g}" for lr, x in LR_SWEEP) if done(by.get(k))]
        if lrs:
            out.append("Other AdaGrad learning rates (lr 1 elsewhere): " + "; ".join(
                f"lr {r['lr']:g}, L2 {r['l2']:g}: valid {r['valid_ppl']:.2f}, test {r['test_ppl']:.2f}"
                for r in sorted(lrs, key=lambda r: (r["l2"], r["lr"]))) + ".")
        sl2 = g.get("standard-l2-0.1")
        best_std = min(x for x in (st, sl2) if x is not None)
        if _rel(best_std, kn) > 2:
            out.append(f"The exact-likelihood (standard) MELM with the same features is itself {_rel(st, kn):+.1f} % "
                       f"from KN3" + (f" ({_rel(sl2, kn):+.1f} % with L2 0.1)" if sl2 is not None else "")
                       + ": on this split, n-gram features alone do not reach KN3 within 2 % with our trainer, whatever "
                       "the output layer, so most of the remaining gap is MaxEnt's (with our trainer), not binarisation's.")
        elif sl2 is not None:
            out.append(f"The standard MELM regularised alike (L2 0.1) reaches {sl2:.2f} ({_rel(sl2, kn):+.1f} % from KN3), "
                       f"so with the same trainer (lr 1) binarisation itself costs {_rel(g[l2], sl2):+.1f} % (best "
                       f"regularised binary at lr 1 against regularised standard), where the paper's two models are "
                       f"within 0.3 % of each other"
                       + (f"; the best binary run on validation (learning rates swept, which the standard MELM's were "
                          f"not) is {_rel(g[bb], sl2):+.1f} % from it." if (bb := best_binary(by)) and bb != l2 else "."))
    ab, ast = g.get("avg-run-binary"), g.get("avg-run-standard")
    if ab is not None and ast is not None:
        out.append(f"With averaged weights (`run`) for both, the binary Feat-I MELM reaches {ab:.2f} "
                   f"({_rel(ab, kn):+.1f} % from KN3) and the standard one {ast:.2f} ({_rel(ast, kn):+.1f} %): "
                   f"averaging helps both, and binarisation still costs {_rel(ab, ast):+.1f} % under the same "
                   f"trainer.")
    if f2 is not None:
        d2 = _rel(f2, kn)
        if d2 <= -5:
            verdict = ": the same direction and about the same size."
        elif d2 < 0:
            verdict = (": the same direction, a smaller gain (the skip and trigger features are our own choice of "
                       "selection and window; the paper gives only the total, 1.9M features).")
        else:
            verdict = ": no gain, which contradicts the paper's table 1."
        out.append(f"Feat-II: the paper's binary model is {_rel(P['binary-feat2'], P['kn3']):+.1f} % from KN3, "
                   f"ours {d2:+.1f} % ({f2:.2f})" + (f", our standard Feat-II MELM {sf2:.2f} "
                                                    f"({_rel(sf2, kn):+.1f} %; paper {P['standard-feat2']})"
                                                    if sf2 is not None else "") + verdict)
        sweep = sorted([(TRIGGER_MIN_LIFT, by["binary-feat2"])]
                       + [(lift, by[f"binary-feat2-lift{lift:g}"]) for lift in TRIGGER_LIFT_SWEEP
                          if done(by.get(f"binary-feat2-lift{lift:g}"))], key=lambda p: p[0])
        if len(sweep) > 1:
            best = min(sweep, key=lambda p: p[1]["valid_ppl"])[0]
            out.append("Trigger pairs must make their word more than `--trigger-min-lift` times likelier than usual "
                       "(then the 200k with the highest mutual information are kept): binary Feat-II at lift > "
                       + ", ".join(f"{lift:g}: valid {r['valid_ppl']:.2f}, test {r['test_ppl']:.2f} "
                                   f"({r['feature_counts']['total']:,} features)" for lift, r in sweep)
                       + f"; validation picks {best:g}" + (" (the default)." if best == TRIGGER_MIN_LIFT else ".")
                       + " At lift 1 every positively correlated pair qualifies and mutual information ranks first "
                       "the weak associations of frequent words.")
    if b1 is not None and s1 is not None:
        db1, ds1 = _rel(b1, bi), _rel(s1, st)
        out.append(f"Fig. 2: the standard MELM trained on 1 % of the positions is {ds1:+.0f} % worse than on all of "
                   f"them ({s1:.1f}), which agrees with the paper's \"suffers drastically\"; the binary MELM with 1 % "
                   f"of the negatives is {db1:+.1f} % from its 100 % ({b1:.2f}).")
        if db1 <= 2:
            out.append("That is the paper's claim: aggressive subsampling of the negatives barely hurts.")
        elif db1 <= 5:
            out.append("That is close to the paper's \"does not appear to be hurt by aggressive subsampling, even when "
                       "99 % of the negative examples are discarded\", but not flat: a small, measurable loss, next "
                       "to the standard MELM's collapse.")
        else:
            out.append("This contradicts \"does not appear to be hurt by aggressive subsampling, even when 99 % of "
                       "the negative examples are discarded\": the loss is small next to the standard MELM's but "
                       "clearly not nil.")
        if fx is not None:
            out.append(f"Keeping the same 1 % of negatives every epoch gives {fx:.2f} ({_rel(fx, bi):+.1f} % from "
                       f"the binary 100 %, {'worse' if fx > b1 else 'no worse'} than new ones every epoch): a "
                       f"(history, word) pair whose history occurs fewer than about 1/alpha times then never sees a "
                       f"negative, so its weight is only pushed up, which the log-alpha shift of the bias (an average "
                       f"correction) cannot undo; new negatives every epoch reach them over the epochs.")
        tb1, tb = by["binary-a0.01"]["wall_s"], by["binary"]["wall_s"]
        e1, eb = epoch_seconds(by["binary-a0.01"]), epoch_seconds(by["binary"])
        per_epoch = f" ({e1 / eb:.2f}x per epoch)" if e1 and eb else ""
        out.append(f"Cost: the paper's \"1 % of the computational cost\" counts O(alpha V T) classifier updates "
                   f"against a dense O(V T) epoch. Our 1 % run took {tb1 / tb:.2f}x the wall time of the binary 100 % "
                   f"run{per_epoch} and {tb1 / by['standard']['wall_s']:.2f}x the standard MELM's: with the "
                   "Wu-Khudanpur decomposition (our sparse normaliser, for both models) an epoch already costs "
                   "O(active (feature, word) pairs), not O(V), and subsampling negatives only skips their updates, "
                   "not the pass that gathers the scores, so the saving is far from 100x here.")
    return " ".join(out)


def sharding(by: dict) -> tuple[str, dict | None]:
    """The 2-rank speed-up paragraph and its figures, from the two speed runs."""
    one, two = by.get("speed-1"), by.get("speed-2")
    if not (done(one) and done(two)):
        return "The two sharding runs have not finished.", None
    e1, e2 = epoch_seconds(one), epoch_seconds(two)
    same = one["weights_checksum"] == two["weights_checksum"] and one["test_ppl"] == two["test_ppl"]
    fig = {"wall_s": [one["wall_s"], two["wall_s"]], "epoch_s": [e1, e2], "speedup_wall": one["wall_s"] / two["wall_s"],
           "speedup_epoch": e1 / e2 if e1 and e2 else None, "identical": same,
           "loadavg": [one.get("loadavg"), two.get("loadavg")]}
    load = " and ".join(_f(x, ".1f", "?") for x in fig["loadavg"])
    text = (f"The binary Feat-I MELM at 5 % of the negatives for {one['epochs']} epoch(s), vocabulary split over 1 and "
            f"over 2 local ranks (`--ranks`, torch.distributed with gloo; each rank owns the classifiers of its "
            f"words and builds its own features; validation sums the ranks' partial normalisers):\n\n"
            + report.table(["ranks", "train wall s (start-up and features included)", "s per epoch", "test ppl"],
                           [[str(r["ranks"]), _f(r["wall_s"], ".1f"), _f(e, ".1f", "-"), _f(r["test_ppl"])]
                            for r, e in ((one, e1), (two, e2))])
            + f"\n\nSpeed-up of 2 ranks over 1: {fig['speedup_wall']:.2f}x in wall time, "
            + (f"{fig['speedup_epoch']:.2f}x per epoch" if fig["speedup_epoch"] else "per epoch not measured")
            + f"; the two models are {'bit-identical' if same else 'NOT identical'} (negatives drawn by a hash of "
            f"(seed, position, word), so no rank's draw depends on the split). 1-minute load average when each run "
            f"started: {load} (on this 2-core machine a load near 0 means the two ranks had a core each).")
    return text, fig


def averaging(by: dict) -> str:
    """The averaged-weights section: each run beside its last-iterate twin, and what it changed."""
    rows, pairs, notes = [], [], []
    for k in dict.fromkeys(k for how in AVERAGE_HOW for k in AVERAGED[how]):
        last = by.get(k)
        variants = ([("none (last iterate)", k)] + [(how, f"avg-{how}-{k}") for how in AVERAGE_HOW if k in AVERAGED[how]]
                    + ([("run, stop at 0.1 %", f"avg-run-{k}-gain0.1")] if k in LONGER else []))
        for how, key in variants:
            r = by.get(key)
            if not done(r):
                rows.append([k if last is None else last["name"], how, "not run", "", "", ""])
                continue
            d = _rel(r["test_ppl"], last["test_ppl"]) if key != k and done(last) else None
            if d is not None:
                pairs.append(d)
            rows.append([last["name"] if last else k, how, _f(r["valid_ppl"]), _f(r["test_ppl"]), _f(d, "+.2f", "-"),
                         str(r.get("epochs_run", "-"))])
            if d is not None and d > 0:
                log = [e["valid_ppl"] for e in r["epoch_log"]]
                gains = ", ".join(f"{100 * (1 - b / a):.2f} %" for a, b in zip(log[-3:-1], log[-2:]))
                why = (f"it reached the {r['epochs']}-epoch cap" if r.get("epochs_run", 0) >= r.get("epochs", 1e9) else
                       f"the last below the {100 * r.get('min_gain', 0.003):.1f} % of the stopping rule, so it stopped")
                notes.append(f"{last['name']}, averaging {how}: worse than the last iterate ({d:+.2f} %); its last two "
                             f"epochs gained {gains} on validation; {why} while still improving.")
    if not rows:
        return "No averaged run has finished."
    text = ("The paper's binary MELM is trained by plain SGD and kept as the last iterate. Averaging the weights "
            "over the iterates (Polyak-Ruppert; Xu 2011 for sparse linear models) smooths out the noise that "
            "per-position updates leave in the weights, at one multiply-add per update. Two rules "
            "(`--average`): `run`, the mean over every training position from epoch 2 on (the first epoch moves "
            "far from the unigram start); `auto`, the mean since the last epoch end at which the last iterate "
            "scored better on validation than the average (the average restarts there, so it drops the early, "
            "far-off iterates that `run` keeps). The learning-rate rule and the model kept use the averaged "
            "weights; an average gains slowly, so rows \"stop at 0.1 %\" halve the rate and stop at gains below "
            "0.1 % instead of 0.3 %. Same runs as above, same seed:\n\n"
            + report.table(["run", "averaging", "valid ppl", "test ppl", "test vs last iterate (%)", "epochs"], rows))
    if pairs:
        text += (f"\n\nAveraging changes the test perplexity by {min(pairs):+.2f} % to {max(pairs):+.2f} % over the "
                 f"{len(pairs)} pairs finished (negative: better). " + " ".join(notes))
    return text


def best_l2(by: dict) -> str | None:
    """The id of the finished L2-regularised binary Feat-I run with the lowest validation perplexity."""
    ids = [k for k, r in by.items() if k.startswith("binary-l2") and done(r)]
    return min(ids, key=lambda k: by[k]["valid_ppl"]) if ids else None


def best_binary(by: dict) -> str | None:
    """The id of the finished binary Feat-I run on all negatives (any L2, averaged or not) with the best
    validation perplexity."""
    ids = [k for k, r in by.items() if is_binary_feat1(r)]
    return min(ids, key=lambda k: by[k]["valid_ppl"]) if ids else None


def is_binary_feat1(r: dict | None) -> bool:
    """A finished binary Feat-I run on all the negatives (not a sharding speed run)."""
    return (done(r) and r.get("objective") == "binary" and r.get("features") == "feat-i" and r.get("alpha") == 1.0
            and not r.get("speed"))


def targets(by: dict) -> list[str]:
    """The MaxEnt LM's acceptance targets (the project's goals beyond the paper), each with the measured figure and met / NOT met (computed)."""
    g = {k: (r["test_ppl"] if done(r) else None) for k, r in by.items()}
    kn, out = g.get("kn3"), []
    if kn is None:
        return ["- (the KN3 reference has not finished)"]

    def line(what, ppl, ref, ok):
        d = _rel(ppl, ref)
        return f"- {what}: {d:+.2f} % ({ppl:.2f} vs {ref:.2f}): {'met' if ok(d) else 'NOT met'}"

    if g.get("binary") is not None:
        out.append(line(f"{by['binary']['name']} (no regularisation, as the paper) within 2 % of KN3", g["binary"], kn,
                        lambda d: abs(d) <= 2))
    l2 = best_l2(by)
    if l2:
        out.append(line(f"{by[l2]['name']} (the L2 with the best validation ppl) within 2 % of KN3", g[l2], kn,
                        lambda d: abs(d) <= 2))
    best = best_binary(by)
    if best and best not in ("binary", l2):
        out.append(line(f"{by[best]['name']} (the binary Feat-I run with the best validation ppl) within 2 % of KN3",
                        g[best], kn, lambda d: abs(d) <= 2))
        rivals = sorted((r for k, r in by.items() if k != best and is_binary_feat1(r)), key=lambda r: r["valid_ppl"])
        if rivals:
            r = rivals[0]
            out.append(f"  (picked on validation among {len(rivals) + 1} binary Feat-I runs on all negatives; the "
                       f"runner-up, {r['name']}, is {_rel(r['valid_ppl'], by[best]['valid_ppl']):+.2f} % on validation "
                       f"and {_rel(r['test_ppl'], kn):+.2f} % from KN3 on test: too small a margin to call the two different; "
                       f"one seed each)")
    for k in ("binary-feat2", "binary-feat2-l2"):
        if g.get(k) is not None:
            out.append(line(f"{by[k]['name']} at least 5 % below KN3", g[k], kn, lambda d: d <= -5))
    if g.get("binary-a0.01") is not None and g.get("binary") is not None:
        out.append(line("binary MELM at 1 % of the negatives within 2 % of its own 100 %", g["binary-a0.01"],
                        g["binary"], lambda d: d <= 2))
    full = f"binary-l2-{L2_PICKED:g}"
    for low, high, what in (("binary-a0.01-l2", full, f"the same with L2 {L2_PICKED:g} for both"),
                            ("avg-run-binary-a0.01", "avg-run-binary", "the same with averaged weights (run) for both"),
                            ("avg-auto-binary-a0.01", "avg-auto-binary", "the same with averaged weights (auto) for both"),
                            ("avg-run-binary-a0.01-gain0.1", "avg-run-binary-gain0.1",
                             "the same with averaged weights (run, stop at 0.1 %) for both")):
        if g.get(low) is not None and g.get(high) is not None:
            out.append(line(what, g[low], g[high], lambda d: d <= 2))
    return out or ["- (no run has finished)"]


def trained_by(r: dict) -> str:
    """Where a row of the page comes from: this command, the run cache, or an earlier page (``--only``)."""
    if r.get("carried"):
        return f"earlier page (commit {r['carried']})"
    return "earlier (run cache)" if r.get("reused") else "this command"


def write(out_dir: str, meta: dict, label: str, quick: bool, specs: list[dict], rows: dict) -> dict:
    """The page, its JSON and the plot from the runs finished so far."""
    s = settings(quick)
    by = {sp["id"]: rows[sp["id"]] for sp in specs if sp["id"] in rows}
    runs = [rows.get(sp["id"], {**sp, "status": "not run"}) for sp in specs]
    t2, curve = curve_rows(by, s["alphas"])
    shard_text, shard = sharding(by)
    data = {"setup": {"data": label, "quick": quick, **s}, "paper_table1": PAPER_TABLE1, "runs": runs,
            "curve": curve, "sharding": shard, "headline": headline(by)}
    run_lines = []
    for r in runs:
        if done(r):
            run_lines.append([r["name"], _f(r["valid_ppl"]), _f(r["test_ppl"]), r.get("epochs_run", "-"),
                              _f(r["wall_s"], ".0f"), _f(epoch_seconds(r), ".1f", "-"), _f(r.get("loadavg"), ".1f", "-"),
                              _f(r["peak_rss_mb"], ".0f"), trained_by(r)])
        else:
            run_lines.append([r["name"], r.get("error", "not run"), "", "", "", "", "", "", ""])
    body = f"""Xu et al. 2011 (Xu, Gunawardana & Khudanpur, *Efficient subsampling for training complex language models*),
table 1 and fig. 2, on {label}{" (--quick: a few epochs and a subset of the runs; not the figures)" if quick else ""}.
Exact perplexity: every word and `</s>` is a prediction; the binary models are renormalised over the
vocabulary (eq. 8). Each run trains in its own process, one at a time; wall time is training (building
the features included), peak memory the process's maximum resident set. Timings were taken on a shared
2-core machine while other jobs ran, so they are upper bounds. Module: `benchmarks.xu_melm`
(runs: `benchmarks.melm_runs`; `python -m benchmarks maxent` is another name for it).

Training (all MaxEnt runs): SGD over shuffled positions with AdaGrad step sizes, lr {s['lr']:g}, halved when
the validation perplexity gains less than 0.3 % and stopped at the next such epoch or at {s['epochs']} epochs
(Feat-II: {s['feat2_epochs']}), best epoch kept; no regularisation except in the rows named "L2". Feat-I = unigram, bigram, trigram (no
cut-off); Feat-II adds skip-1 bigrams, skip-1 trigrams and 200k trigger pairs (a word 3..20 tokens back,
by average mutual information). Binary models at alpha < 1 draw new negatives every epoch unless the
name says otherwise, and are calibrated by + log alpha on the biases.

## Table 1: binary vs standard MELM, all data

{table1(by)}

## Fig. 2: subsampling

Binary: all positives, a fraction alpha of the negatives. Standard: a fixed random fraction alpha of the
training positions (features from those only). Train time relative to the standard MELM on all data.

{t2}

![subsampling curve]({NAME}.png)

## Averaged weights

{averaging(by)}

## Sharded training

{shard_text}

## Targets

{chr(10).join(targets(by))}

## Every run

"Load at start": the machine's 1-minute load average when the run began (recorded since the sharding runs; "-"
before), a guide to how much other work shared its 2 cores. "Trained by": this command, or an earlier run of it with the same spec whose result was kept in the run
cache (`~/.cache/sampledlm/bench/{NAME}`, see `benchmarks.report.work_dir`) and reused, or the page of an
earlier commit (kept by `--only`, which trains just the runs it names).

{report.table(["run", "valid ppl", "test ppl", "epochs", "train wall s", "s/epoch", "load at start", "peak MB",
                "trained by"], run_lines)}

{against(by)}
"""
    fig = figure(by, s["alphas"], label)
    report.write_page(out_dir, NAME, "Binary vs standard maximum-entropy LMs (Xu et al. 2011, table 1 and fig. 2)", meta,
                      data, body, figure=fig)
    return data
