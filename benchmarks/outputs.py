"""``outputs``: the structured and self-normalised output layers beside the softmax and the sampled
objectives: training cost per token against V, a decoder's inference cost, and quality on PTB.

(a) Training cost: Zipf(1) words over V = 10k, 100k, 1M and the synthetic step of
    :mod:`.scaling` (64-d input -> tanh H = 256 -> the output layer, batch B = 128, forward +
    backward + SGD), for every objective of ``sampledlm.objectives.OBJECTIVES`` (sampled ones with
    S = 250 shared samples; ``shortlist`` with S = 2,000 words). At each V all objectives, the softmax
    included, are timed in interleaved rounds (one step of each per round, so load from other jobs
    falls on every side alike); the ratio to the softmax is the tokens/s speed-up.
(b) Inference for a decoder (Devlin et al. 2014): one word given one history, for R = 1,024
    requests at once, V = 100k, the same small model (untrained weights: cost does not depend on
    them). The exact softmax log-probability (O(V h) per request) against self-normalised scoring
    (the raw score, O(h)), the exact class, hsm and adaptive log-probabilities beside them.
    Output layer only (the requests' hidden states given), interleaved rounds.
(c) PTB: the feed-forward trigram of ``objectives-ptb`` (Xu et al. 2011 §3.2: d = 50, h = 200,
    dropout 0.2, Adam lr 0.002, batch 256, lr halving, <= 12 epochs) with each objective, through
    :mod:`.lmruns` (runs shared with ``objectives-ptb``): exact test perplexity alone and with
    KN3, tokens/s, time to the best validation epoch. ``--no-train`` reports only the runs already
    finished, marking the others "not run yet".

Targets (the issue's acceptance): class and adaptive >= 10x the softmax's training tokens/s at
V = 100k; hsm's cost per token grows <= 2x from 10k to 1M; self-normalised scoring >= 15x faster
than the exact softmax at V = 100k. ``--quick``: V = 2k and 8k, fewer rounds, and the PTB part on
the built-in corpus with a small model, softmax and shortlist only.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np
import torch

from sampledlm.errors import UserError
from sampledlm.objectives import OBJECTIVES, make_objective, objective_options
from . import lmruns
from .report import new_figure, stamp, table, write_page
from .scaling import IN, Small, interleaved, make_step, zipf_batches, zipf_counts

NAME = "outputs"
H, B, S, SHORTLIST = 256, 128, 250, 2000
REQUESTS = 1024
STRUCTURED = ["class", "hsm", "adaptive", "selfnorm", "shortlist"]
#: PTB targets: relative test-perplexity gap to the softmax (shortlist: with KN3)
PTB_TARGET = {"adaptive": 0.02, "class": 0.03, "hsm": 0.05, "selfnorm": 0.01, "shortlist": 0.05,
              "binary": 0.03, "css-is": 0.05, "blackout": 0.05}


def options(name: str, V: int) -> dict:
    """Each objective's options in the synthetic parts."""
    accepted = objective_options(OBJECTIVES[name])
    if name == "binary":
        return {"neg_rate": min(1.0, S / V)}
    if "samples" in accepted:
        return {"samples": S}
    if name == "shortlist":
        return {"shortlist": min(SHORTLIST, V)}
    return {}


# --- (a) training cost -------------------------------------------------------------------------
def training_cost(sizes: list[int], rounds: dict[int, int]) -> list[dict]:
    """tokens/s of one step per objective at each V, and the speed-up over the softmax at that V."""
    rows = []
    for V in sizes:
        counts, batches = zipf_batches(V)
        models: dict[bool, Small] = {}
        steps = {}
        for name in OBJECTIVES:
            obj = make_objective(name, counts, **options(name, V))
            model = models.setdefault(obj.sparse_output, Small(V, obj.sparse_output))
            obj.bind(model.output)
            obj.prepare(model.output)
            steps[name] = make_step(obj, model, model.output, batches)
        timed = interleaved(steps, rounds[V], warmup=1)
        for name in OBJECTIVES:
            rows.append({"V": V, "objective": name, "options": options(name, V), "sec_per_step": timed[name],
                         "tokens_per_s": B / timed[name], "speedup": timed["softmax"] / timed[name]})
        del steps, models
    return rows


# --- (b) inference ------------------------------------------------------------------------------
def inference_cost(V: int, rounds: int) -> list[dict]:
    """Seconds per request of each scoring rule, R requests of one word each, output layer only."""
    torch.manual_seed(0)
    counts = zipf_counts(V)
    q = torch.from_numpy(counts / counts.sum())
    model = Small(V, sparse=False)
    x = torch.randn(REQUESTS, IN)
    y = torch.multinomial(q, REQUESTS, replacement=True)
    objs = {}
    for name in ("softmax", "selfnorm", "class", "hsm", "adaptive"):
        objs[name] = make_objective(name, counts)
        objs[name].bind(model.output)
    with torch.no_grad():
        h = model(x)
    out = model.output
    rules = {
        "softmax (exact log P)": lambda: objs["softmax"].log_prob_targets(out, h, y),
        "selfnorm (raw score, unnormalised)": lambda: objs["selfnorm"].unnormalised_log_prob_targets(out, h, y),
        "class (exact log P)": lambda: objs["class"].log_prob_targets(out, h, y),
        "hsm (exact log P)": lambda: objs["hsm"].log_prob_targets(out, h, y),
        "adaptive (exact log P)": lambda: objs["adaptive"].log_prob_targets(out, h, y),
        "hidden layer (for scale)": lambda: model(x),
    }
    with torch.no_grad():
        timed = interleaved(rules, rounds, warmup=2)
    soft = timed["softmax (exact log P)"]
    return [{"V": V, "rule": k, "us_per_request": 1e6 * t / REQUESTS, "speedup": soft / t} for k, t in timed.items()]


# --- (c) PTB ------------------------------------------------------------------------------------
#: the adaptive softmax's settings this page measured on the GRU (the feed-forward defaults; recurrent models have
#: their own since 2026-11-26, and tied adaptive input bands since 2026-11-27, see the quality-cpu page)
ADAPTIVE_AS_MEASURED = ("--head-coverage", "0.8", "--div-value", "4", "--max-head", "4000", "--no-adaptive-input")


def gru_plan(quick: bool, arpa: str | None, classes: str | None = None) -> list[tuple[str, lmruns.Run]]:
    """(objective, run): the GRU of the ``neural`` page (its softmax run, shared: same name and options)
    and the structured and self-normalised objectives with the same trunk and schedule. None with --quick."""
    if quick:
        return []
    from .neural_lms import RUNS

    opts = RUNS["gru"][1].split()
    at = opts.index("--objective")
    plan = [("softmax", lmruns.Run("gru", tuple(opts)))]
    for o in STRUCTURED:
        if o == "shortlist" and not arpa:
            continue
        extra = ["--shortlist", str(SHORTLIST), "--backoff", arpa] if o == "shortlist" else []
        if o == "hsm":  # the output rows are tree nodes: untied (the default for hsm since 2026-11-24, explicit here)
            extra = ["--no-tie", "--word-classes", "none", "--arity", "2"]  # the binary Huffman tree, as measured
        if o == "class":  # frequency bins and one score per class, as measured (a recurrent model clusters by
            extra = ["--word-classes", "none", "--components", "1"]  # default since 2026-11-26, with 4 scores)
        if o == "adaptive":
            extra = list(ADAPTIVE_AS_MEASURED)
        plan.append((o, lmruns.Run(f"gru-{o}" if o != "shortlist" else f"gru-shortlist-{SHORTLIST}",
                                   tuple(opts[:at] + ["--objective", o, *extra] + opts[at + 2:]))))
    # the adaptive softmax with untied embeddings: tied, the rare words' input embeddings are its narrow tails too
    untied = [("--no-tie" if x == "--tie" else x) for x in opts]
    plan.append(("adaptive", lmruns.Run("gru-adaptive-untied", tuple(untied[:at] + ["--objective", "adaptive",
                                                                              *ADAPTIVE_AS_MEASURED] + untied[at + 2:]))))
    for o in ("class", "hsm") if classes else ():  # the exchange algorithm's classes, as for the feed-forward trunk
        extra = ["--word-classes", classes] + (["--no-tie", "--arity", "2"] if o == "hsm" else ["--components", "1"])
        plan.append((o, lmruns.Run(f"gru-{o}-brown", tuple(opts[:at] + ["--objective", o, *extra] + opts[at + 2:]))))
    return plan


def word_classes(work: str, files: dict, make: bool) -> str | None:
    """The exchange algorithm's 200 classes of the training file (``sampledlm classes``, made once per work
    folder and training file when ``make``); None when absent and not made."""
    path = lmruns.kn3_path(work, files).replace("kn3-", "classes-").replace(".arpa", ".txt")
    if make and not os.path.exists(path):
        lmruns.cli("classes", files["train"], "-o", path)
    return path if os.path.exists(path) else None


def ptb_plan(quick: bool, arpa: str | None, classes: str | None = None) -> list[tuple[str, lmruns.Run]]:
    """(objective, run) of the feed-forward trunk: the runs of ``objectives-ptb`` (same names and options,
    so shared), then the structured and self-normalised objectives with the same trunk and schedule;
    with ``classes`` (a word-classes file) also class and hsm over those classes."""
    from . import objectives_ptb as op
    from .xu_nnlm import MODEL, QUICK_MODEL, QUICK_TRAIN, TRAIN

    model, train = (QUICK_MODEL, QUICK_TRAIN) if quick else (MODEL, TRAIN)
    if quick:  # a smoke test of the machinery: the reference and the one needing an n-gram
        old = [("softmax", lmruns.Run("softmax", (*model, "--objective", "softmax", *train)))]
    else:  # objectives-ptb's plan starts with its objectives in order (then variants, left out here)
        old = list(zip(op.ALL, op.plan(False)))
    new = []
    for o in (["shortlist"] if quick else STRUCTURED):
        extra = ("--shortlist", str(SHORTLIST), "--backoff", arpa) if o == "shortlist" and arpa else ()
        if o == "shortlist" and not arpa:
            continue
        new.append((o, lmruns.Run(o if o != "shortlist" else f"shortlist-{SHORTLIST}",
                                  (*model, "--objective", o, *extra, *train))))
    if not quick:  # the class layer as Mikolov et al. 2011 set it: C = sqrt(V) classes of equal unigram mass
        new.append(("class", lmruns.Run("class-c100-mass", (*model, "--objective", "class", "--classes", "100",
                                                             "--binning", "mass", *train))))
        # a stronger self-normalisation penalty: with Devlin et al.'s alpha = 0.1 log Z drifts from 0 on test text
        new.append(("selfnorm", lmruns.Run("selfnorm-a1", (*model, "--objective", "selfnorm", "--selfnorm-alpha", "1",
                                                           *train))))
    if not quick and classes:  # Brown-style classes (exchange algorithm) for the class layer and the tree
        for o in ("class", "hsm"):
            new.append((o, lmruns.Run(f"{o}-brown", (*model, "--objective", o, "--word-classes", classes, *train))))
    return old + new


def carried_ptb_rows(out_dir: str) -> dict[str, dict]:
    """For ``--only``: the PTB rows of the committed pages, by run name, marked ``carried`` with their
    commit: the sampled objectives' runs from ``objectives_ptb.json`` (the same runs), then this page's
    own rows over them."""
    from .objectives_ptb import NAME as OP_NAME

    rows: dict[str, dict] = {}
    for page, part in ((OP_NAME.replace("-", "_"), None), (NAME, "ptb")):
        path = os.path.join(out_dir, page + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            doc = json.load(f)
        commit = doc.get("meta", {}).get("commit", "?")
        data = doc.get("data", {})
        for r in (data.get(part, {}) if part else data).get("rows", []):
            rows[r["name"]] = {**r, "carried": r.get("carried") or commit}
    return rows


TRAIN_SAMPLE = 4000  # training sentences scored for the self-normalisation report


def selfnorm_report(rd: str, files: dict) -> dict | None:
    """``sampledlm eval``'s self-normalisation report (log Z mean, sd, mean |log Z|, the raw scores'
    perplexity) of a self-normalised run on the test file, and (``train_sample``) on the first
    :data:`TRAIN_SAMPLE` training sentences, both scored in evaluation mode; cached in ``rd``."""
    from sampledlm.data.textio import atomic_write

    cache = os.path.join(rd, "bench_selfnorm.json")
    got = None
    model = os.path.join(rd, "model.safetensors")
    by_command = False
    if calibration_shift(rd) is None:  # trained before the trainer calibrated: the same step, by the command
        lmruns.cli("calibrate", rd, "--text", files["valid"], "--threads", "1")
        by_command = True
    if os.path.exists(cache) and os.path.getmtime(cache) >= os.path.getmtime(model):  # else: a newer model
        with open(cache) as f:
            got = json.load(f)
    if not got or "train_sample" not in got:
        sample = os.path.join(rd, "bench_train_sample.txt")
        with open(files["train"], encoding="utf-8") as f, atomic_write(sample) as g:
            g.write("".join(line for _, line in zip(range(TRAIN_SAMPLE), f)))
        report = {}
        for key, path in (("test", files["test"]), ("train_sample", sample)):
            out = lmruns.cli("eval", rd, "--test", path, "--json", "--threads", "1")
            report[key] = json.loads(out.strip().splitlines()[-1]).get("self_normalisation")
        got = {**report["test"], "train_sample": report["train_sample"]}
        with atomic_write(cache) as f:
            json.dump(got, f)
    if by_command:
        got["calibrated_by_command"] = True
        with atomic_write(cache) as f:
            json.dump(got, f)
    return {**got, "calibrated": calibration_shift(rd)}


def calibration_shift(rd: str) -> float | None:
    """The output-bias shift a self-normalised run's model records (``log_z_shift``: the trainer's calibration
    on the validation text, or ``sampledlm calibrate``'s), None when it has none."""
    from safetensors import safe_open

    with safe_open(os.path.join(rd, "model.safetensors"), "pt") as f:
        shift = (f.metadata() or {}).get("log_z_shift")
    return None if shift is None else float(shift)


#: Chen et al. 2016's protocol on the PTB runs: the best validation perplexity each reached within these
#: wall-clock budgets (seconds from the start of training, validation included)
BUDGETS = (300, 900)


within_budget = lmruns.within_budget  # the best validation perplexity within a time budget


def ptb_part(quick: bool, data_dir: str | None, train: bool, only: set[str] | None = None,
             out_dir: str | None = None) -> dict:
    try:
        st = lmruns.setting(quick, data_dir, with_kn3=False)
    except UserError as e:
        return {"skipped": str(e), "rows": [], "plan": []}
    arpa = lmruns.kn3_path(st.work, st.files)
    if train:
        st.arpa, st.kn3_ppl = lmruns.kn3(st.work, st.files)
    elif os.path.exists(arpa):
        st.arpa = arpa
    classes = None if quick else word_classes(st.work, st.files, make=train)
    plan = [("ffnn", o, r) for o, r in ptb_plan(quick, arpa, classes)] + \
        [("gru", o, r) for o, r in gru_plan(quick, arpa, classes)]
    lmruns.check_only(only, [r.name for _, _, r in plan])
    failures: dict = {}
    carried = carried_ptb_rows(out_dir) if only is not None and out_dir else None
    rows = {}
    for trunk in ("ffnn", "gru"):  # the feed-forward rows first: a page with them all comes sooner
        runs = [r for t, _, r in plan if t == trunk]
        rows.update(lmruns.run_all(st.work, st.files, runs, st.arpa, failures=failures, train_new=train,
                                   only=None if only is None else only & {r.name for r in runs}, carried=carried))
    for _, o, r in plan:
        if o == "selfnorm" and r.name in rows and not rows[r.name].get("carried") and not rows[r.name].get("partial"):
            rows[r.name]["self_normalisation"] = selfnorm_report(rows[r.name]["dir"], st.files)
    return {"data": st.label, "kn3_test_ppl": st.kn3_ppl, "failures": failures,
            "plan": [{"trunk": t, "objective": o, "name": r.name, "options": " ".join(r.options)} for t, o, r in plan],
            "rows": [{**rows[r.name], "trunk": t, "objective": o} for t, o, r in plan if r.name in rows]}


# --- the page -----------------------------------------------------------------------------------
def criteria(train_rows: list[dict], infer_rows: list[dict], sizes: list[int], mid: int) -> dict:
    by = {(r["objective"], r["V"]): r for r in train_rows}
    lo, hi = sizes[0], sizes[-1]
    inf = {r["rule"].split(" ")[0]: r for r in infer_rows}
    out = {}
    for name in ("class", "adaptive"):
        s = by[(name, mid)]["speedup"]
        out[f"{name} training speed-up at V = {mid:,} >= 10x"] = {"value": s, "pass": s >= 10}
    g = by[("hsm", hi)]["sec_per_step"] / by[("hsm", lo)]["sec_per_step"]
    out[f"hsm cost growth {lo:,} -> {hi:,} <= 2x"] = {"value": g, "pass": g <= 2}
    s = inf["selfnorm"]["speedup"]
    out[f"selfnorm inference speed-up at V = {infer_rows[0]['V']:,} >= 15x"] = {"value": s, "pass": s >= 15}
    return out


def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True, only: set[str] | None = None) -> dict:
    """``only``: train just these PTB runs; the others come from this machine's cache, else from the
    committed pages (this one and ``objectives_ptb``), marked †."""
    sizes = [2_000, 8_000] if quick else [10_000, 100_000, 1_000_000]
    rounds = {2_000: 3, 8_000: 3} if quick else {10_000: 20, 100_000: 10, 1_000_000: 3}
    mid = sizes[-1] if quick else 100_000
    meta = stamp()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        load0 = os.getloadavg()[0]
        t0 = time.time()
        train_rows = training_cost(sizes, rounds)
        infer_rows = inference_cost(mid, 5 if quick else 30)
        load1 = os.getloadavg()[0]
        synthetic_s = time.time() - t0
    finally:
        torch.set_num_threads(threads)
    ptb = ptb_part(quick, data_dir, train, only, out_dir)
    chen = {"skipped": "--quick and --data run PTB's part only"}
    if not quick and data_dir is None and not ptb.get("skipped"):
        from . import chen_budget
        from .report import shared_data

        st = lmruns.setting(False, None, with_kn3=False)
        chen = chen_budget.run(st.work, st.files, shared_data(), train_new=train and only is None)
    data = {"setup": {"hidden": H, "batch": B, "samples": S, "shortlist": SHORTLIST, "sizes": sizes, "rounds": rounds,
                      "requests": REQUESTS, "inference_V": mid, "quick": quick, "torch_threads": 1,
                      "load_average_start": load0, "load_average_end": load1, "synthetic_seconds": synthetic_s},
            "training": train_rows, "inference": infer_rows,
            "criteria": criteria(train_rows, infer_rows, sizes, mid), "ptb": ptb, "chen": chen}
    write_page(out_dir, NAME, "Output layers: structured, self-normalised, sampled", meta, data,
               markdown(data, meta), figure=plot(data))
    return data


def plot(data: dict):
    fig, axes = new_figure(1, 2, figsize=(13, 4.5))
    for name in dict.fromkeys(r["objective"] for r in data["training"]):
        pts = [(r["V"], r["speedup"]) for r in data["training"] if r["objective"] == name]
        v, s = zip(*pts)
        style = "-" if name in STRUCTURED or name == "softmax" else ":"
        axes[0].plot(v, s, style, marker="o", label=name, lw=2.5 if name == "softmax" else 1.3)
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("vocabulary size V")
    axes[0].set_ylabel("training tokens/s / softmax's")
    axes[0].axhline(10, color="gray", ls="--", lw=0.8)
    axes[0].grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, ncol=2)
    inf = [r for r in data["inference"]]
    axes[1].barh([r["rule"] for r in inf], [r["us_per_request"] for r in inf], color="C2")
    axes[1].set_xscale("log")
    axes[1].set_xlabel(f"µs per request (V = {data['setup']['inference_V']:,}, {data['setup']['requests']} at once)")
    axes[1].invert_yaxis()
    fig.tight_layout()
    return fig


def training_table(data: dict) -> str:
    sizes = data["setup"]["sizes"]
    by = {(r["objective"], r["V"]): r for r in data["training"]}
    names = list(dict.fromkeys(r["objective"] for r in data["training"]))
    return table(["objective"] + [f"V = {v:,}: tokens/s (x softmax)" for v in sizes]
                 + [f"cost growth {sizes[0]:,} → {sizes[-1]:,}"],
                 [[n] + [f"{by[(n, v)]['tokens_per_s']:,.0f} ({by[(n, v)]['speedup']:.1f}x)" for v in sizes]
                  + [f"{by[(n, sizes[-1])]['sec_per_step'] / by[(n, sizes[0])]['sec_per_step']:.2f}x"] for n in names])


TRUNKS = {"ffnn": "Feed-forward trigram (the trunk and schedule of `objectives_ptb.md`)",
          "gru": "GRU (the trunk and schedule of `neural.md`: hidden 256, projection 200, tied embeddings, 8 epochs)"}


def ptb_text(data: dict, meta: dict) -> str:
    ptb = data["ptb"]
    quick = data["setup"]["quick"]
    cmd = "python -m benchmarks outputs" + (" --quick" if quick else "")
    if ptb.get("skipped"):
        return f"Skipped: {ptb['skipped']}"
    head = (f"Data: {ptb['data']}. Each trunk trained with each objective; exact test perplexity alone and linearly "
            f"interpolated with KN3 (weight by EM on validation); `shortlist-{SHORTLIST}`: Schwenk's short-list of the "
            f"{SHORTLIST:,} most frequent words with KN3 as its back-off (its own figure already contains the "
            "n-gram, so its target compares the + KN3 column). Time to best: wall seconds from the start of training "
            "to the end of the best validation epoch (validation included), with that epoch and the epochs run. "
            "Last column: Chen et al. 2016's protocol, the lowest validation perplexity reached within "
            f"{' and '.join(f'{b} s' for b in BUDGETS)} of training (- when no epoch had ended by then).")
    if not ptb["rows"]:
        head += (f"\n\n**Not run yet** on this page. `{cmd}` trains every run below and fills the table; "
                 f"`{cmd} --no-train` rebuilds the page from the runs finished so far.")
    parts = [head]
    for trunk in dict.fromkeys(p.get("trunk", "ffnn") for p in ptb["plan"]):
        parts.append(trunk_text(ptb, trunk, cmd))
    misses = misses_text(ptb)
    if misses:
        parts.append(misses)
    note = lmruns.status_note([lmruns.Run(p["name"], ()) for p in ptb["plan"]], {r["name"]: r for r in ptb["rows"]},
                              ptb["failures"])
    if any(r.get("carried") for r in ptb["rows"]):
        note += (" They were trained on another run of this machine kind with the same options and seed (the "
                 "sampled objectives' rows of `objectives_ptb.md`); their times were taken at another load.")
    return "\n\n".join(parts + ([note] if note else []))


def misses_text(ptb: dict) -> str:
    """The feed-forward rows that miss their targets, and the reading of why (figures from the rows)."""
    rows = {r["name"]: r for r in ptb["rows"] if r.get("trunk", "ffnn") == "ffnn"}
    soft = rows.get("softmax")
    if not soft:
        return ""

    def gap(name):
        return f"{100 * (rows[name]['test_ppl'] / soft['test_ppl'] - 1):+.1f} %" if name in rows else "not run"

    out = []
    if "class" in rows or "hsm" in rows:
        out.append(
            f"Reading the misses. `class` ({gap('class')}) and `hsm` ({gap('hsm')}) factor p(w|h) through groupings "
            "chosen by frequency alone: a class, or a node of the Huffman tree, holds words that share nothing but "
            "their counts, so the first decisions (which class; each left or right turn) are ones no context "
            "predicts well, and every word's probability pays for them. Mnih & Hinton (2009) found trees built "
            "from word usage far better than frequency-based ones, and Goodman (2001) and Mikolov et al. (2011) "
            "report class-based outputs giving up some perplexity for their speed. Mikolov et al.'s own setting "
            f"(`class-c100-mass`: 100 classes of equal unigram mass) gives {gap('class-c100-mass')}: fewer, larger "
            "classes leave more of the choice to the exact within-class softmax."
            + (f" Classes from word usage (the exchange algorithm's 200 classes of the training text, "
               f"`sampledlm classes`) give `class-brown` {gap('class-brown')} and a tree whose top splits whole "
               f"classes `hsm-brown` {gap('hsm-brown')}." if "class-brown" in rows or "hsm-brown" in rows else "")
            + (" The tree still trails the softmax, on training text too (last training loss "
               f"{last_loss(rows['hsm-brown'])} nats per token against the softmax's {last_loss(soft)}): each of a "
               "word's ~log2 V binary decisions is one logistic classifier of h shared by every word below its node, "
               "and a mistake at any node costs the word's probability; Mnih & Hinton (2009) closed the gap only "
               "with trees grown from learnt word vectors and several paths per word." if "hsm-brown" in rows else ""))
    gru = gru_misses(ptb)
    if gru:
        out.append(gru)
    for name in ("selfnorm", "selfnorm-a1"):
        sn = rows.get(name, {}).get("self_normalisation")
        if sn and abs(sn["log_z_mean"]) > 0.1 and not sn.get("calibrated"):
            out.append(
                f"`{name}` keeps the softmax's perplexity ({gap(name)}) but its log Z on test text averages "
                f"{sn['log_z_mean']:+.3f} (target |mean| <= 0.1, sd {sn['log_z_sd']:.3f})"
                + (f"; on the first {TRAIN_SAMPLE:,} training sentences, scored the same way, it averages "
                   f"{sn['train_sample']['log_z_mean']:+.3f}, so the offset is not the test text's: the penalty acts on "
                   "the log Z of training batches, which pass through dropout, while evaluation runs without "
                   "dropout, which changes every hidden activation and so the log-sum-exp of the scores (a larger "
                   "alpha trades a little perplexity for a tighter log Z)." if sn.get("train_sample") else "."))
    return "\n\n".join(out)


def last_loss(row: dict) -> str:
    """The training loss of a run's last epoch (mean -log P of the training batches, dropout on), formatted."""
    curve = [c for c in row.get("curve", []) if c.get("train_loss") is not None]
    return f"{curve[-1]['train_loss']:.2f}" if curve else "?"


def gru_misses(ptb: dict) -> str:
    """The reading of the GRU rows against the softmax GRU (figures from the rows)."""
    g = {r["name"]: r for r in ptb["rows"] if r.get("trunk") == "gru"}
    soft = g.get("gru")
    if not soft or len(g) < 2:
        return ""

    def gap(name, key="test_ppl"):
        if name not in g or g[name].get(key) is None or soft.get(key) is None:
            return "not run"
        return f"{100 * (g[name][key] / soft[key] - 1):+.1f} %" + (" (unfinished)" if g[name].get("partial") else "")

    out = ["On the GRU the structured layers lose more than on the feed-forward trunk. Every GRU run stops at the "
           f"softmax's 8 epochs, and the softmax GRU's best epoch is its last ({soft['best_epoch']} of "
           f"{soft['epochs']}), so these are comparisons at a fixed schedule, not at convergence."]
    if "gru-shortlist-2000" in g:
        kn3 = ptb.get("kn3_test_ppl")
        out.append(f"Schwenk's short-list ({gap('gru-shortlist-2000')} alone, {gap('gru-shortlist-2000', 'test_ppl_interp')}"
                   " with KN3) gives the words outside its 2,000 KN3's probabilities instead of the network's: that "
                   f"costs the GRU (test perplexity {soft['test_ppl']:.1f}"
                   + (f" against KN3's {kn3:.1f}" if kn3 else "") + ") far more than the feed-forward trigram, which "
                   "is about as good as KN3 to begin with.")
    if "gru-adaptive" in g:
        untied = g.get("gru-adaptive-untied")
        helps = untied is not None and untied["test_ppl"] < g["gru-adaptive"]["test_ppl"]
        out.append(f"The adaptive softmax ({gap('gru-adaptive')}) shares its tail clusters' narrow projections with "
                   "the input embeddings when the model is tied, as this trunk is, so the rare words' inputs are "
                   f"narrow too; untied (`gru-adaptive-untied`) it gives {gap('gru-adaptive-untied')}"
                   + (", so the tying accounts for part of the gap." if helps else
                      ", so the tying is not the cause; the likelier one, not tested here, is the tails' own width "
                      "(a quarter and a sixteenth of h, `--div-value 4`), narrower than what the GRU's state needs to "
                      "tell rare words apart." if untied is not None else "."))
    if "gru-hsm" in g:
        out.append(f"The tree (`gru-hsm`, untied: its output rows are the tree's nodes) gives {gap('gru-hsm')} and "
                   f"underfits: last training loss {last_loss(g['gru-hsm'])} nats per token against the softmax "
                   f"GRU's {last_loss(soft)}.")
    if "gru-class" in g:
        out.append(f"The class layer gives {gap('gru-class')} with frequency bins and {gap('gru-class-brown')} with "
                   "the exchange algorithm's classes, which brought the feed-forward trunk to the softmax's figure.")
    return " ".join(out)


def trunk_text(ptb: dict, trunk: str, cmd: str) -> str:
    """One trunk's table, its self-normalisation report and its equal-budget comparison."""
    plan = [p for p in ptb["plan"] if p.get("trunk", "ffnn") == trunk]
    mine = [r for r in ptb["rows"] if r.get("trunk", "ffnn") == trunk]
    rows = {r["name"]: r for r in mine}
    soft = next((r for r in mine if r["objective"] == "softmax"), None)
    out = []
    for p in plan:
        r = rows.get(p["name"])
        if r is None:
            why = ptb["failures"].get(p["name"], f"not run yet (`{cmd}` trains it)")
            out.append([p["name"], why, "", "", "", "", "", ""])
            continue
        interp = r.get("test_ppl_interp")
        tgt, verdict = PTB_TARGET.get(p["objective"]), ""
        if soft and tgt is not None:
            got = interp if p["objective"] == "shortlist" else r["test_ppl"]
            ref = soft.get("test_ppl_interp") if p["objective"] == "shortlist" else soft["test_ppl"]
            if got is not None and ref is not None:
                ok = got <= ref * (1 + tgt)
                verdict = f"within {100 * tgt:.0f} %"
                sn = r.get("self_normalisation")
                if p["objective"] == "selfnorm" and sn:
                    ok = ok and abs(sn["log_z_mean"]) <= 0.1
                    verdict += " and \\|mean log Z\\| <= 0.1"
                verdict += ": " + ("yes" if ok else "**no**")
        out.append([lmruns.label(r), f"{r['test_ppl']:.1f}", "" if interp is None else f"{interp:.1f}",
                    f"{r['tokens_per_s']:,.0f}", f"{r['train_s_to_best']:.0f} s ({r['best_epoch']} of {r['epochs']})",
                    f"{100 * (r['test_ppl'] / soft['test_ppl'] - 1):+.1f} %" if soft else "", verdict,
                    " ".join(f"{within_budget(r, b):.1f}" if within_budget(r, b) else "-" for b in BUDGETS)])
    body = f"### {TRUNKS.get(trunk, trunk)}\n\n" + table(
        ["run", "test ppl", "test ppl + KN3", "tokens/s", "time to best", "vs softmax", "target",
         f"valid ppl within {' / '.join(f'{b} s' for b in BUDGETS)}"], out)
    for sn_row in (r for r in mine if r["objective"] == "selfnorm" and r.get("self_normalisation")):
        sn = sn_row["self_normalisation"]
        shift = sn.get("calibrated")
        body += (f"\n\nSelf-normalisation on the test file (`sampledlm eval` of `{sn_row['name']}`): log Z mean "
                 f"{sn['log_z_mean']:+.3f}, sd {sn['log_z_sd']:.3f}, mean |log Z| {sn['log_z_abs_mean']:.3f}; the raw "
                 f"scores taken as log P (the unnormalised mode a decoder uses) give perplexity "
                 f"{sn['unnormalised_ppl']:.1f}, against the exact {sn_row['test_ppl']:.1f}. "
                 + (f"Its output biases were shifted by {shift:+.3f} after training, minus the mean log Z of the "
                    "validation text (exact probabilities unchanged): "
                    + ("trained before the trainer did this, the run was calibrated by `sampledlm calibrate RUN --text "
                       "ptb.valid.txt`, the same step." if sn.get("calibrated_by_command") else
                       "the trainer's calibration.") if shift is not None else
                    "Its biases are as training left them (no calibration)."))
    budget = budget_text({"rows": mine})
    if budget:
        body += "\n\n" + budget
    return body


def budget_text(ptb: dict) -> str:
    """Which objective reached the lowest validation perplexity within each budget (Chen et al. 2016)."""
    lines = []
    for b in BUDGETS:
        got = [(within_budget(r, b), r) for r in ptb["rows"]]
        got = sorted(((v, r) for v, r in got if v is not None), key=lambda t: t[0])
        if got:
            v, r = got[0]
            rest = ", ".join(f"{lmruns.label(x)} ({y:.1f})" for y, x in got[1:4])
            lines.append(f"- within {b} s: **{lmruns.label(r)}** ({v:.1f})" + (f", then {rest}" if rest else ""))
    if not lines:
        return ""
    return ("Equal wall-clock budgets (Chen et al. 2016 compare output layers this way), best validation perplexity "
            "first; the runs shared the machine two at a time, so a budget is only roughly the same for each:\n\n"
            + "\n".join(lines))


def chen_markdown(chen: dict) -> str:
    from .chen_budget import markdown as chen_text

    return chen_text(chen)


def markdown(data: dict, meta: dict) -> str:
    st = data["setup"]
    sizes, mid = st["sizes"], st["inference_V"]
    by = {(r["objective"], r["V"]): r for r in data["training"]}
    inf = {r["rule"].split(" ")[0]: r for r in data["inference"]}
    crit = table(["criterion", "measured", "met"],
                 [[k, f"{c['value']:.2f}x", "yes" if c["pass"] else "**no**"] for k, c in data["criteria"].items()])
    cls_hi = by[("class", mid)]
    return f"""Three views of the output layer over a large vocabulary: what a training step costs per token, what a
decoder pays to score one word, and what each objective gives on PTB. Module `benchmarks.outputs`.
Timings on a shared 2-core machine while other jobs ran (1-minute load average {st['load_average_start']:.1f} at the
start, {st['load_average_end']:.1f} at the end of the timed parts): absolute figures are noisy, the ratios (every side
timed in the same interleaved rounds) steadier.

![training speed-up against V; inference cost per request](outputs.png)

## Criteria

{crit}

## (a) Training cost per token against V

Synthetic Zipf(1) words, the step of `scaling.md` (64-d input -> tanh {st['hidden']} -> output layer over V words;
forward + backward + SGD; batch {st['batch']}; 1 torch thread). Sampled objectives draw S = {st['samples']} words
shared by the batch (binary: negative rate S/V); `class`: 2 sqrt(V) frequency bins of equal sqrt-unigram mass; `hsm`: Huffman
tree; `adaptive`: head at 80 % unigram coverage, one tail cluster to 95 %, the rest, div 4; `shortlist`: softmax over
the {st['shortlist']:,} most frequent words (training only: its back-off costs nothing here); `selfnorm`: the
softmax plus the penalty, so it trains at the softmax's cost by design. Median seconds per step over
{', '.join(f"{st['rounds'][v]} rounds at {v:,}" for v in sizes)}, all objectives of one V interleaved.

{training_table(data)}

Reading it: `class` reads, per step, the output rows of every class among the batch's {st['batch']} targets
(one shared product; at V = {mid:,} the step takes {1 / max(cls_hi['speedup'], 1e-9):.2f} of the softmax's time).
What it costs is the share of V that union covers, so the sizes of the rare classes decide: with Mikolov et al.'s
equal-mass bins and C = sqrt(V) the rarest bins hold ~3,750 words each at V = 100k, the union covers about a third of
V and the step ran at 2.6-2.8x the softmax's speed (this page at 492d957); sqrt-mass bins (the RNNLM toolkit's
default) and C = 2 sqrt(V) keep every class under ~320 words and the union near 6 % of V. The per-example
O((C + |class|) h) count holds for one example, not for a batch that shares one product.
`adaptive` scores its head (the words of 80 % of the tokens) and each tail only for its own targets, through projections
4x and 16x narrower; `hsm` pays O(h log V) per token with a gather of sparse rows, whose fixed costs dominate
at small V.

## (b) Inference for a decoder: one word given one history

{st['requests']:,} requests at once, each one history and one word (Zipf-drawn), V = {mid:,}, output layer only
(the requests' hidden states given), median of interleaved rounds.

{table(["rule", "µs per request", "speed-up vs exact softmax"],
       [[r['rule'], f"{r['us_per_request']:.2f}", f"{r['speedup']:.1f}x"] for r in data['inference']])}

Self-normalised scoring reads one output row per request (O(h)), the exact softmax all V of them
(O(V h)): {inf['selfnorm']['speedup']:.0f}x here. Devlin et al. 2014 report about 15x for their decoder, where the
whole network (not only the output layer) is timed; our hidden layer is one small product, given for scale.

## (c) PTB: every objective on the feed-forward trigram

{ptb_text(data, meta)}

## (d) Equal budgets at a larger vocabulary (Chen et al. 2016)

{chen_markdown(data.get("chen") or dict(skipped="not run"))}

## Against the paper

Chen et al. 2016 compare these output layers at 10k, 100k and 800k words under a fixed time budget (here: table
(a) gives the cost side at 10k-1M; part (c) the budget comparison on PTB's 10k words, from the runs' learning
curves; part (d) at the largest vocabulary the data here gives). Devlin et al. 2014 report
self-normalised scoring about 15x faster than normalising over V in their decoder (table (b)). Grave et al. 2017
design the adaptive softmax for GPUs, where a product's cost is not proportional to its size; on one CPU thread
its gain comes only from the tail clusters' narrower projections and the head's S-word product.
"""
