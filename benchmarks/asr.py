"""``asr``: a simulated recogniser over the test text, its lattices and 100-best lists rescored by every model.

The task (reproducible, no external data): :class:`sampledlm.use.channel.Channel` (seed 1) builds each
sentence's acoustic lattice -- a slot per reference word holding it and three words of similar
spelling, sometimes a deletion or an inserted short word, with noisy acoustic scores. The first pass
expands it with the KN3 trigram (exact) and decodes it with an LM weight and word penalty tuned on
development sentences (the first ones of the validation file, through the same channel); its 100 best
paths are the n-best lists.

Each model (KN5, the feed-forward trigram, the GRU, and interpolations of neural models with KN5 by
EM weights on the validation file) then rescores (a) the 100-best lists, replacing the KN3 score (its
LM weight and word penalty tuned on the development lists), (b) the same lists keeping the KN3 score
as a feature with its own weight (``lm_weight * b``, b tuned too), and (c) the first-pass lattices
with the same three features, exactly for n-gram and feed-forward models and merging histories that
share their last k = 2 words for models with a recurrent component. The lattice weights are tuned
on the development lattices: each is searched once at (b)'s weights with its expanded links' scores
recorded (:func:`sampledlm.use.lattice.rescore_all` ``record=True``), and a grid of Viterbi searches
over the records (:func:`sampledlm.use.lattice.tune_lattices`) picks the weights; the test lattices
are then searched with them. Also reported: the lattice search with the KN3 score replaced (tuned the
same way), the evidence on why (c) keeps the KN3 score. Reported: oracle, first-pass and rescored WER.

Speed and agreement on the test file: ``sampledlm score`` of the GRU with bunching (64 sentences)
and one sentence at a time (one process, same run), KN5 scoring against KenLM's Python module, and
score totals against ``eval``.

``--quick``: the built-in corpus, small models, 12 sentences and 20-best lists (a smoke test).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import click

from . import lmruns
from .neural_lms import QUICK_RUNS, RUNS
from .report import new_figure, table, write_page

NAME = "asr"
SEED = 1
FIRST_PASS_GRID = [i / 10 for i in range(10)]  # b: the share of the LM weight kept on the first-pass (KN3) score
GRU_QUICK = ("GRU d=16 h=32 (--quick), softmax", "--model gru -d 16 --hidden 32 --proj 0 --no-tie --objective softmax "
             "--optimizer adam --lr 0.005 --batch-size 16 --bptt 20 --epochs 2 --seed 1 --threads 1")


def sentences(path: str, count: int) -> list[list[str]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.split():
                out.append(line.split())
                if len(out) == count:
                    break
    return out


def ngram_arpa(work: str, files: dict, order: int) -> str:
    import hashlib

    key = hashlib.sha1(os.path.abspath(files["train"]).encode()).hexdigest()[:8]
    path = os.path.join(work, f"kn{order}-{key}.arpa")
    if not os.path.exists(path):
        lmruns.cli("ngram", "train", "--train", files["train"], "--order", str(order), "-o", path)
    return path


def speed(files: dict, gru_dir: str, kn5: str) -> dict:
    """Scoring speed and agreement on the test file (each timed command in its own process)."""
    out = {}
    for bunch in (64, 1):
        t = time.perf_counter()
        r = lmruns.cli("score", gru_dir, files["test"], "--bunch", str(bunch), "--threads", "1", "--jsonl")
        out[f"gru_bunch{bunch}_s"] = round(time.perf_counter() - t, 2)
        rows = [json.loads(x) for x in r.splitlines()]
        out[f"gru_bunch{bunch}_ppl"] = math.exp(-sum(x["ln"] for x in rows) / sum(x["predictions"] for x in rows))
    out["gru_bunching_speedup"] = out["gru_bunch1_s"] / out["gru_bunch64_s"]
    out["gru_score_ppl"] = out["gru_bunch64_ppl"]
    out["gru_eval_ppl"] = _stderr_json("eval", gru_dir, "--test", files["test"], "--per-sentence", "--json",
                                       "--threads", "1")["ppl"]
    r = subprocess.run([sys.executable, "-m", __name__, "--ngram-speed", kn5, files["test"]], capture_output=True,
                       text=True)
    if r.returncode == 0:
        out.update(json.loads(r.stdout.strip().splitlines()[-1]))
    else:
        out["ngram_speed_error"] = r.stderr.strip()[-300:]
    return out


def _stderr_json(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "sampledlm", *args], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr[-500:])
    return json.loads(p.stderr.strip().splitlines()[-1])


NGRAM_REPEATS = 7


def ngram_speed(arpa: str, test: str, repeats: int = NGRAM_REPEATS) -> dict:
    """Score ``test`` with our ArpaLM (library ``score_file``: per-word log10 probabilities and n-gram orders)
    and with KenLM's ``full_scores`` (the same), alternating the two in one loop, best of ``repeats`` each
    (both warmed up first: parsed, compiled, cached); max |diff| of the log10 probabilities, orders equal."""
    from sampledlm.loader import load_model
    from sampledlm.use.score import score_file

    lm = load_model(arpa)
    scores = list(score_file(lm, test, with_orders=True))  # parse and cache the ARPA file, compile the kernels
    try:
        import kenlm
    except ImportError:
        kenlm = None
    model = kenlm.Model(arpa) if kenlm else None
    lines = [" ".join(s.words) for s in scores]
    full = [list(model.full_scores(x)) for x in lines] if model else None
    ours, theirs = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        scores = list(score_file(lm, test, with_orders=True))
        ours.append(time.perf_counter() - t)
        if model:
            t = time.perf_counter()
            full = [list(model.full_scores(x)) for x in lines]
            theirs.append(time.perf_counter() - t)
    res = {"ngram_ours_s": round(min(ours), 4), "ngram_repeats": repeats}
    if not model:
        return res
    diff = max(abs(p - w / math.log(10)) for s, f in zip(scores, full) for (p, _, _), w in zip(f, s.token_lp.tolist()))
    orders = all(int(o) == n for s, f in zip(scores, full) for (_, n, _), o in zip(f, s.orders.tolist()))
    res.update({"ngram_kenlm_s": round(min(theirs), 4), "ngram_vs_kenlm": min(ours) / min(theirs),
                "ngram_max_abs_log10_diff": diff, "ngram_orders_equal": orders,
                "ngram_ours_all_s": [round(x, 4) for x in ours], "ngram_kenlm_all_s": [round(x, 4) for x in theirs]})
    return res


def other_domain(path: str, vocab_words, count: int, skip: int = 0) -> list[list[str]]:
    """Sentences of a raw Gutenberg text made PTB-like: lowercased, punctuation dropped, tokens with a digit
    as ``N``, words outside the PTB vocabulary as ``<unk>`` (as Mikolov's PTB preprocessing); sentences of
    3 to 40 words, ``count`` of them after the first ``skip``."""
    from sampledlm.data.tokenizer import TextOptions, iter_sentences

    known = set(vocab_words)
    out: list[list[str]] = []
    seen = 0
    for sent in iter_sentences(path, TextOptions(tokenizer="raw", lowercase=True, gutenberg=True)):
        words = ["N" if any(c.isdigit() for c in w) else w for w in sent if any(c.isalnum() for c in w)]
        if not 3 <= len(words) <= 40:
            continue
        seen += 1
        if seen <= skip:
            continue
        out.append([w if w in known else "<unk>" for w in words])
        if len(out) == count:
            break
    return out


def task(name: str, dev_refs: list, test_refs: list, models: dict, kn3, n_best: int) -> dict:
    """One simulated recogniser's test set: lattices and n-best lists from the channel and KN3, then every
    model's n-best and lattice rescoring (module docstring)."""
    from sampledlm.use.channel import Channel
    from sampledlm.use.lattice import expand, rescore_all, rescore_nbest, tune_lattices
    from sampledlm.use.nbest import Grid, add_lm_scores, evaluate, tune
    from sampledlm.use.wer import Errors, align

    import numpy as np

    channel = Channel(kn3.vocab.words, seed=SEED)
    t0 = time.perf_counter()
    acoustic = {"dev": [channel.lattice(f"dev{i}", r) for i, r in enumerate(dev_refs)],
                "test": [channel.lattice(f"test{i}", r) for i, r in enumerate(test_refs)]}
    first = {k: [expand(lat, kn3) for lat in lats] for k, lats in acoustic.items()}
    for k in first:
        for lat, a in zip(first[k], acoustic[k]):
            lat.ref = a.ref
    click.echo(f"  {name}: lattices built and expanded with KN3 ({time.perf_counter() - t0:.0f} s)", err=True)
    w_first = tune([rescore_nbest(lat, n_best) for lat in first["dev"]])
    lists = {k: [rescore_nbest(lat, n_best, w_first) for lat in lats] for k, lats in first.items()}
    fp = evaluate(lists["test"], w_first)
    build_s = time.perf_counter() - t0
    click.echo(f"  {name}: first pass, {n_best}-best lists ({build_s:.0f} s)", err=True)
    rows = [{"model": "KN3 (first pass)", "nbest_wer": fp.first_pass.wer, "lattice_wer": fp.first_pass.wer,
             "nbest_fp_wer": fp.first_pass.wer, "weights": w_first.__dict__}]
    keep = Grid(first_pass_weight=FIRST_PASS_GRID)
    for label, lm in models.items():
        t = time.perf_counter()
        add_lm_scores(lm, lists["dev"])
        add_lm_scores(lm, lists["test"])
        w = tune(lists["dev"])  # the first-pass LM score replaced
        wb = tune(lists["dev"], grid=keep)  # kept as a feature with its own weight
        nb, nbb = evaluate(lists["test"], w).rescored, evaluate(lists["test"], wb).rescored
        t_nbest = time.perf_counter() - t
        k = 2 if "GRU" in label else None
        row = {"model": label, "nbest_wer": nb.wer, "weights": w.__dict__, "nbest_fp_wer": nbb.wer,
               "nbest_fp_weights": wb.__dict__, "nbest_s": round(t_nbest, 1), "k": k,
               "nbest_dev_errors": evaluate(lists["dev"], w).rescored.errors,
               "nbest_fp_dev_errors": evaluate(lists["dev"], wb).rescored.errors}
        # lattices: the development lattices searched once (at the n-best weights), every expanded link's
        # scores recorded; the weights tuned on those records (no further model calls), then the test search
        t = time.perf_counter()
        _, dev_exp = rescore_all(first["dev"], lm, wb, k=k, record=True)
        wl, dev_err = tune_lattices(dev_exp, grid=keep)
        wl0, dev_err0 = tune_lattices(dev_exp)
        t_tune = time.perf_counter() - t
        t = time.perf_counter()
        hyps, test_exp = rescore_all(first["test"], lm, wl, k=k, record=True)
        lat_err, lat_err0 = Errors(), Errors()
        for lat, hyp, e in zip(first["test"], hyps, test_exp):
            lat_err = lat_err + align(lat.ref, hyp.words)
            lat_err0 = lat_err0 + align(lat.ref, e.best_words(wl0))
        # search errors: the n-best list holds lattice paths, so an exact search under the lattice weights finds
        # a path scoring at least its best hypothesis; k-word history merging may not
        row["search_errors"] = _search_errors(lists["test"], hyps, wl)
        row["lattice_s"] = round(time.perf_counter() - t, 1)
        if k is not None and label == "GRU":  # the approximation's effect: one more word of history kept
            t3 = time.perf_counter()
            hyps3 = rescore_all(first["test"], lm, wl, k=k + 1)
            err3 = Errors()
            for lat, hyp in zip(first["test"], hyps3):
                err3 = err3 + align(lat.ref, hyp.words)
            row["wider"] = {"k": k + 1, "lattice_wer": err3.wer, "search_errors": _search_errors(lists["test"], hyps3, wl),
                            "s": round(time.perf_counter() - t3, 1)}
        row.update({"lattice_wer": lat_err.wer, "lattice_weights": wl.__dict__, "lattice_dev_errors": dev_err,
                    "lattice_replaced_wer": lat_err0.wer, "lattice_replaced_weights": wl0.__dict__,
                    "lattice_replaced_dev_errors": dev_err0, "lattice_tune_s": round(t_tune, 1)})
        rows.append(row)
        click.echo(f"  {name} {label}: n-best {t_nbest:.0f} s, lattice tuning {t_tune:.0f} s, test lattices "
                   f"{row['lattice_s']:.0f} s (WER n-best {100 * nb.wer:.2f} / {100 * nbb.wer:.2f}, lattice "
                   f"{100 * lat_err.wer:.2f})", err=True)
    links = [len(lat.links) for lat in first["test"]]
    return {"name": name, "test_sentences": len(test_refs), "dev_sentences": len(dev_refs),
            "oov_rate": sum(w == "<unk>" for r in test_refs for w in r) / max(1, sum(len(r) for r in test_refs)),
            "first_pass_lattice_links_mean": float(np.mean(links)), "build_s": round(build_s, 1),
            "channel": {"sub_competitors": 3, "dele": channel.dele, "ins": channel.ins, "gap": channel.gap},
            "oracle_wer_100best": fp.oracle.wer, "first_pass_wer": fp.first_pass.wer,
            "reference_words": fp.first_pass.ref_words, "rows": rows}


def _search_errors(lists, hyps, w) -> int:
    """Utterances whose n-best list's best hypothesis scores higher under ``w`` than the lattice search's path
    (both with the rescoring LM's exact whole-sentence score): a path the search lost by merging histories."""
    from sampledlm.use.nbest import features

    import numpy as np

    n = 0
    for nb, h in zip(lists, hyps):
        mine = float(w.score(np.array([h.am, h.lm_new, h.lm, len(h.words)], dtype=np.float64)))
        n += bool(w.score(features(nb)).max() > mine + 1e-6 * max(1.0, abs(mine)))
    return n


WAR_AND_PEACE = ("gutenberg", "war-and-peace.txt")


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    from sampledlm.data.corpus import load_ids
    from sampledlm.lm import Mixture
    from sampledlm.loader import load_model
    from .report import shared_data

    s = lmruns.setting(quick, data_dir, with_kn3=True)
    n_test, n_dev, n_best = (12, 12, 20) if quick else (300, 200, 100)
    runs = {"ffnn3": QUICK_RUNS["ffnn3"] if quick else RUNS["ffnn3"], "gru": GRU_QUICK if quick else RUNS["gru"]}
    dirs = {name: lmruns.train(s.work, s.files, lmruns.Run(name, tuple(opts.split()))) for name, (_, opts) in runs.items()}
    kn5_path = ngram_arpa(s.work, s.files, 5)
    kn3 = load_model(s.arpa)
    valid = load_ids(s.files["valid"], kn3.vocab, cache=False)
    base = {"KN5": load_model(kn5_path), "FFNN": load_model(dirs["ffnn3"]), "GRU": load_model(dirs["gru"])}
    models = dict(base)
    for combo in (("FFNN", "KN5"), ("GRU", "KN5"), ("GRU", "FFNN", "KN5")):
        mix = Mixture([base[c] for c in combo])
        mix.fit_weights(valid)
        models[" + ".join(combo)] = mix
    tasks = [task(s.label.split(" ")[0], sentences(s.files["valid"], n_dev), sentences(s.files["test"], n_test),
                  models, kn3, n_best)]
    wp = os.path.join(shared_data(), *WAR_AND_PEACE) if data_dir is None and not quick else None
    if wp and os.path.exists(wp):  # another domain: the PTB models (and mixture weights) on Tolstoy's text
        words = kn3.vocab.words
        tasks.append(task("War and Peace", other_domain(wp, words, n_dev), other_domain(wp, words, n_test, n_dev),
                          models, kn3, n_best))
    main = tasks[0]
    data = {"setup": {**s.describe([]), "test_sentences": n_test, "dev_sentences": n_dev, "n_best": n_best,
                      "seed": SEED, "channel": main["channel"],
                      "first_pass_lattice_links_mean": main["first_pass_lattice_links_mean"],
                      "build_s": main["build_s"]},
            "oracle_wer_100best": main["oracle_wer_100best"], "first_pass_wer": main["first_pass_wer"],
            "reference_words": main["reference_words"], "rows": main["rows"], "tasks": tasks,
            "speed": speed(s.files, dirs["gru"], kn5_path)}
    write_page(out_dir, NAME, "Rescoring a simulated recogniser's lattices and n-best lists", s.meta, data,
               markdown(data), figure=plot(main["rows"]))
    return data


def markdown(d: dict) -> str:
    su, sp = d["setup"], d["speed"]
    out = [f"Data: {su['data']}; {su['test_sentences']} test sentences ({d['reference_words']:,} reference words), "
           f"weights tuned on {su['dev_sentences']} validation sentences; channel seed {su['seed']}, "
           f"{su['n_best']}-best lists; first-pass lattices hold {su['first_pass_lattice_links_mean']:.0f} links on "
           "average (the acoustic lattice expanded with KN3).", "",
           f"Oracle WER of the {su['n_best']}-best lists: **{100 * d['oracle_wer_100best']:.2f} %**; first pass (KN3): "
           f"**{100 * d['first_pass_wer']:.2f} %**.", ""]
    n = su["n_best"]
    out += ["Three rescorings per model, each with its weights tuned on the development set (never on test): "
            f"**{n}-best, LM replaced** (`am + lm_weight * lm_new + word_penalty * words`, the KN3 score dropped); "
            f"**{n}-best, first pass kept** and **lattice** (`am + lm_weight * ((1 - b) * lm_new + b * lm_KN3) + "
            "word_penalty * words`: the first pass's KN3 score on the lattice links stays a feature with weight "
            "`lm_weight * b`). The lattice weights are tuned on the development *lattices*: each is searched once "
            "(at the n-best weights) recording every expanded link's acoustic, new-LM and KN3 scores, then a grid "
            "of Viterbi searches over those records (41 LM weights x 41 word penalties x 10 values of b) picks the "
            "fewest errors, with no further model calls; the test lattices are then searched with those weights.", ""]
    body = []
    for r in d["rows"]:
        if "lattice_weights" not in r:
            w = r["weights"]
            body.append([r["model"], f"{100 * r['nbest_wer']:.2f}", f"{100 * r['nbest_fp_wer']:.2f}",
                         f"{100 * r['lattice_wer']:.2f}", "", "exact", "", _w(w), _w(w), _w(w)])
            continue
        body.append([r["model"], f"{100 * r['nbest_wer']:.2f}", f"{100 * r['nbest_fp_wer']:.2f}",
                     f"**{100 * r['lattice_wer']:.2f}**", _delta(r, d["reference_words"]),
                     "exact" if r.get("k") is None else f"k = {r['k']}", str(r.get("search_errors", "")),
                     _w(r["weights"]), _w(r["nbest_fp_weights"]), _w(r["lattice_weights"])])
    out.append(table(["model", f"{n}-best WER %, LM replaced", f"{n}-best WER %, first pass kept",
                      "lattice WER %, first pass kept", "lattice - n-best (errors: replaced, kept)", "lattice search",
                      "search errors", "weights: n-best replaced", "n-best kept", "lattice"], body))
    out += ["", "Weights are `lm_weight / word_penalty / b`. Search errors: test utterances where the "
            f"{n}-best list's best hypothesis under the lattice weights (whole-sentence scores) outscores the path "
            "the lattice search found; the list's paths are lattice paths, so an exact search has none.", ""]
    out += _wider(d["rows"], n, su["test_sentences"])
    out += _why(d["rows"], n)
    for t in d.get("tasks", [])[1:]:
        out += ["", f"## Another domain: {t['name']}", "",
                f"The same models, trained on {su['data']} (mixture weights from its validation text), on "
                f"{t['test_sentences']} sentences of {t['name']} ({t['reference_words']:,} reference words; weights "
                f"tuned on the {t['dev_sentences']} sentences before them), made PTB-like: lowercased, punctuation "
                "dropped, numbers as N, words outside the PTB vocabulary as <unk> "
                f"({100 * t['oov_rate']:.1f} % of the words). Same channel; oracle WER of the {su['n_best']}-best "
                f"lists {100 * t['oracle_wer_100best']:.2f} %, first pass (KN3) {100 * t['first_pass_wer']:.2f} %.", "",
                table(["model", f"{su['n_best']}-best WER %, LM replaced", f"{su['n_best']}-best WER %, first pass kept",
                       "lattice WER %, first pass kept", "lattice - n-best (errors: replaced, kept)", "search errors",
                       "vs first pass (n-best, replaced)", "lattice weights"],
                      [[r["model"], f"{100 * r['nbest_wer']:.2f}", f"{100 * r.get('nbest_fp_wer', r['nbest_wer']):.2f}",
                        f"{100 * r['lattice_wer']:.2f}", _delta(r, t["reference_words"]), str(r.get("search_errors", "")),
                        f"{100 * (r['nbest_wer'] / t['first_pass_wer'] - 1):+.1f} %",
                        _w(r.get("lattice_weights", r["weights"]))] for r in t["rows"]])]
        out += [""] + _wider(t["rows"], su["n_best"], t["test_sentences"])
        alone = {r["model"]: r["nbest_wer"] for r in t["rows"]}
        mixes = [r for r in t["rows"] if "+" in r["model"]]
        if mixes and "GRU" in alone:
            m = min(mixes, key=lambda r: r["nbest_wer"])
            out += ["", f"What interpolation buys here: the GRU alone {100 * alone['GRU']:.2f} %, the best mixture "
                    f"({m['model']}) {100 * m['nbest_wer']:.2f} %, KN5 alone {100 * alone.get('KN5', float('nan')):.2f} %."]
    out += ["", "## Scoring speed and agreement", "",
            f"- `sampledlm score` of the test file with the GRU: {sp['gru_bunch64_s']} s with bunches of 64 "
            f"sentences, {sp['gru_bunch1_s']} s one sentence at a time: **{sp['gru_bunching_speedup']:.1f}x** "
            "(1 thread, each in its own process, including start-up and loading).",
            f"- Totals: score's perplexity {sp['gru_score_ppl']:.4f}, `eval --per-sentence` {sp['gru_eval_ppl']:.4f}."]
    if "ngram_kenlm_s" in sp:
        out.append(f"- KN5 per-word scoring of the test file: ours {sp['ngram_ours_s']} s, KenLM's Python module "
                   f"(`full_scores`) {sp['ngram_kenlm_s']} s (best of {sp.get('ngram_repeats', 3)} each, alternating): "
                   f"**{sp['ngram_vs_kenlm']:.2f}x** KenLM's time; largest "
                   f"|log10 p| difference {sp['ngram_max_abs_log10_diff']:.1e}, n-gram orders equal: "
                   f"{sp['ngram_orders_equal']}.")
    best = min((r for r in d["rows"][1:] if "+" in r["model"]), key=lambda r: r["nbest_wer"])
    rescored = [r for t in d.get("tasks", [d]) for r in t["rows"] if "lattice_weights" in r]
    lat_ok = all(r["lattice_wer"] <= r["nbest_wer"] + 1e-12 for r in rescored)
    lat_ok_fp = all(r["lattice_wer"] <= r["nbest_fp_wer"] + 1e-12 for r in rescored)
    worse = [f"{r['model']}{' (' + t['name'] + ')' if len(d.get('tasks', [])) > 1 else ''}: "
             f"{100 * r['lattice_wer']:.2f} vs {100 * r['nbest_fp_wer']:.2f} %, "
             f"{round((r['lattice_wer'] - r['nbest_fp_wer']) * t['reference_words']):+d} errors of "
             f"{t['reference_words']:,} words; development errors: lattice {r['lattice_dev_errors']}, n-best "
             f"{r['nbest_fp_dev_errors']}"
             for t in d.get("tasks", [d]) for r in t["rows"] if "lattice_weights" in r
             and r["lattice_wer"] > r["nbest_fp_wer"] + 1e-12]
    out += ["", "## Against the issue's targets", "",
            f"- Best neural mixture ({best['model']}) vs the first pass: {100 * best['nbest_wer']:.2f} % vs "
            f"{100 * d['first_pass_wer']:.2f} % ({'lower' if best['nbest_wer'] < d['first_pass_wer'] else 'NOT lower'}).",
            f"- Lattice rescoring at least as good as {su['n_best']}-best rescoring for every model (both tasks): "
            f"{lat_ok} against the n-best lists with the LM replaced; {lat_ok_fp} against the n-best lists with the "
            "same features (first pass kept)" + (f" (worse for {'; '.join(worse)})." if worse else "."),
            f"- GRU bunching at least 10x: {sp['gru_bunching_speedup'] >= 10} ({sp['gru_bunching_speedup']:.1f}x).",
            ]
    if "ngram_vs_kenlm" in sp:
        out.append(f"- n-gram scoring within 2x of KenLM's module: {sp['ngram_vs_kenlm'] <= 2} ({sp['ngram_vs_kenlm']:.2f}x).")
    return "\n".join(out) + "\n"


def _delta(r: dict, words: int) -> str:
    """The lattice's test errors minus the n-best lists' (LM replaced, first pass kept)."""
    if "lattice_weights" not in r:
        return ""
    err = lambda wer: round(wer * words)  # noqa: E731
    return f"{err(r['lattice_wer']) - err(r['nbest_wer']):+d}, {err(r['lattice_wer']) - err(r['nbest_fp_wer']):+d}"


def _wider(rows: list[dict], n: int, utterances: int) -> list[str]:
    """The recurrent approximation's effect: the GRU's test lattices searched again with k + 1 at the same weights."""
    out = []
    for r in rows:
        x = r.get("wider")
        if x:
            out += [f"The {r['model']}'s lattice search merges histories that share their last k = {r['k']} words. "
                    f"With k = {x['k']} (same weights, {x['s']:.0f} s instead of {r['lattice_s']:.0f} s) its test WER "
                    f"is {100 * x['lattice_wer']:.2f} % (k = {r['k']}: {100 * r['lattice_wer']:.2f} %; the {r['model']}'s "
                    f"{n}-best lists with the first pass kept: {100 * r['nbest_fp_wer']:.2f} %) and it makes search "
                    f"errors on {x['search_errors']} of {utterances} utterances (k = {r['k']}: {r['search_errors']}).", ""]
    return out


def _w(w: dict) -> str:
    return f"{w['lm_weight']:.2f} / {w['word_penalty']:.1f} / {w.get('first_pass_weight', 0.0):.1f}"


def _why(rows: list[dict], n: int) -> list[str]:
    """The evidence on why lattice search needs the first pass's score: the lattice searched with the LM
    replaced, its weights tuned on the development lattices (dev errors, test WER) against the n-best lists."""
    rs = [r for r in rows if "lattice_replaced_wer" in r]
    if not rs:
        return []
    body = [[r["model"], str(r["nbest_dev_errors"]), str(r["lattice_replaced_dev_errors"]),
             f"{100 * r['nbest_wer']:.2f}", f"{100 * r['lattice_replaced_wer']:.2f}",
             _w(r["lattice_replaced_weights"]), str(r["nbest_fp_dev_errors"]), str(r["lattice_dev_errors"])]
            for r in rs]
    dev_worse = sum(r["lattice_replaced_dev_errors"] > r["nbest_dev_errors"] for r in rs)
    test_worse = sum(r["lattice_replaced_wer"] > r["nbest_wer"] for r in rs)
    kept_ok = sum(r["lattice_wer"] <= r["nbest_fp_wer"] for r in rs)
    kept_dev_ok = sum(r["lattice_dev_errors"] <= r["nbest_fp_dev_errors"] for r in rs)
    return ["Why the first pass's score is kept. With the KN3 score *replaced*, the lattice search, even with its "
            f"weights tuned on the development lattices, makes more development errors than {n}-best rescoring for "
            f"{dev_worse} of {len(rs)} models and has a higher test WER for {test_worse} of them (below). A {n}-best "
            "list only holds paths the first pass (KN3 + acoustic) ranked high, an implicit vote of the KN3 model; "
            "the lattice search sees every path and, with the new LM alone, may pick paths the KN3 model ruled out. "
            "Keeping the KN3 score as a weighted feature gives the search that vote explicitly: then the lattice "
            f"makes at most the n-best lists' development errors (same features) for {kept_dev_ok} of {len(rs)} "
            f"models, and its test WER is at most theirs for {kept_ok} of {len(rs)}. Test WER of the replaced "
            "lattice search below: the best paths of the recorded test expansion under the replaced weights (exact "
            "for n-gram and feed-forward models; for k = 2 the histories are those the kept-weights search kept).",
            "",
            table(["model", f"dev errors {n}-best, replaced", "dev errors lattice, replaced",
                   f"test WER % {n}-best, replaced", "test WER % lattice, replaced", "lattice weights (replaced)",
                   f"dev errors {n}-best, kept", "dev errors lattice, kept"], body), ""]


def plot(rows: list[dict]):
    fig, ax = new_figure(figsize=(8, 4.5))
    names = [r["model"] for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.27 for i in x], [100 * r["nbest_wer"] for r in rows], 0.27, label="100-best, LM replaced")
    ax.bar([i for i in x], [100 * r.get("nbest_fp_wer", r["nbest_wer"]) for r in rows], 0.27,
           label="100-best, first pass kept")
    ax.bar([i + 0.27 for i in x], [100 * r["lattice_wer"] for r in rows], 0.27, label="lattice, first pass kept")
    ax.set_xticks(list(x))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("WER %")
    ax.legend()
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--ngram-speed":
        print(json.dumps(ngram_speed(sys.argv[2], sys.argv[3])))
