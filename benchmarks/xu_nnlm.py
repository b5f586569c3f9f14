"""``xu-nnlm``: Xu et al. 2011 tables 4-7: standard vs binary feed-forward NNLM under subsampling.

The feed-forward trigram NNLM of Xu et al. 2011 §3.2 (d = 50, h = 200, tanh) trained on PTB:

- standard NNLM (softmax) on all the data, and on a random alpha = 20/10/5 % of the training
  positions, the same share every epoch (``fixed``, tables 4-5) or a fresh one (``variable``, 6-7);
- binary NNLM (V one-vs-all classifiers, Xu et al. 2011 eq. 5-7) on all the positives with alpha of the
  negatives, fixed or variable subsets, log-alpha calibrated and renormalised for evaluation;

each alone and linearly interpolated with our KN3 (weight by EM on validation). Training uses
Adam with the lr-halving schedule of §3.1 (the settings of ``docs/results/neural.md``, whose softmax
run reached 154.4); the cost column is the median training tokens/s relative to the full softmax's.
"""

from __future__ import annotations

from . import lmruns
from .lmruns import Run
from .report import native_bf16, new_figure, table, write_page

NAME = "xu-nnlm"
RATES = (0.2, 0.1, 0.05)
SUBSETS = ("fixed", "variable")
#: Xu et al. 2011 tables 4-7 (their PTB split): {(model, subset): {rate: (ppl, ppl interpolated with KN3)}}
PAPER = {
    ("standard", "fixed"): {1.0: (154.3, 132.7), 0.2: (239.8, 145.6), 0.1: (297.0, 148.6), 0.05: (360.3, 150.7)},
    ("binary", "fixed"): {0.2: (152.7, 132.1), 0.1: (160.0, 134.2), 0.05: (176.2, 138.0)},
    ("standard", "variable"): {1.0: (154.3, 132.7), 0.2: (157.7, 133.9), 0.1: (172.2, 138.1), 0.05: (186.5, 141.2)},
    ("binary", "variable"): {0.2: (151.7, 132.2), 0.1: (150.1, 131.7), 0.05: (152.1, 132.2)},
}
PAPER_KN3 = 153.0

MODEL = ("--model", "ffnn", "--order", "3", "-d", "50", "--hidden", "200", "--dropout", "0.2")
TRAIN = ("--optimizer", "adam", "--lr", "0.002", "--batch-size", "256", "--epochs", "12", "--max-halvings", "3",
         "--min-improvement", "0.003", *(("--bf16",) if native_bf16() else ()), "--seed", "1", "--threads", "1")
QUICK_MODEL = ("--model", "ffnn", "--order", "3", "-d", "16", "--hidden", "32")
QUICK_TRAIN = ("--optimizer", "adam", "--lr", "0.005", "--batch-size", "128", "--epochs", "2", "--seed", "1",
               "--threads", "1")


def plan(quick: bool) -> list[Run]:
    """The runs, most telling first, so that a cut-off experiment still has the main comparison."""
    model, train = (QUICK_MODEL, QUICK_TRAIN) if quick else (MODEL, TRAIN)
    rates = (0.1,) if quick else RATES

    def binary(rate, subset):  # fixed subsets changed from per target word to per example
        return Run(f"binary-{rate:g}-{subset}",
                   (*model, "--objective", "binary", "--neg-rate", f"{rate:g}", "--neg-subset", subset, *train),
                   version="per-example" if subset == "fixed" else "")

    def standard(rate, subset):
        return Run(f"standard-{rate:g}-{subset}", (*model, "--objective", "softmax", *train, "--data-fraction",
                                                    f"{rate:g}", "--data-subset", subset))

    runs = [Run("softmax", (*model, "--objective", "softmax", *train)), binary(rates[-1], "variable")]
    if quick:  # a smoke test: one comparison
        return runs + [standard(rates[-1], "variable")]
    runs += [standard(r, s) for s in SUBSETS for r in rates]  # cheap: a share of the data per epoch
    runs += [binary(r, "variable") for r in rates[:-1]]
    # last: the fixed subsets (tables 4-5) matter less than the variable ones (6-7), which the paper recommends
    runs += [binary(r, "fixed") for r in rates[::-1]]
    return runs


def setting(quick: bool) -> str:
    if quick:
        return ("a small feed-forward trigram NNLM (d = 16, h = 32; the --quick smoke-test setting), Adam (lr 0.005, "
                "batch 128), 2 epochs")
    return ("the feed-forward trigram NNLM of Xu et al. §3.2 (d = 50, h = 200, tanh, dropout 0.2), Adam (lr 0.002, "
            "batch 256) with the lr-halving schedule of Xu et al. §3.1 (halve when the validation perplexity gains "
            "less than 0.3 %, stop after 3 halvings, at most 12 epochs), "
            + ("new runs with a bf16 forward pass" if "--bf16" in TRAIN else "fp32 (this CPU has no bf16 instructions)")
            + ", 1 thread; a row carried from an earlier page keeps the precision of its options (the rows of "
            "the last re-run of the fixed subsets trained in fp32)")


def cell(rows: dict, name: str, key: str) -> str:
    r = rows.get(name)
    return f"{r[key]:.1f}{'*' if r.get('partial') else ''}" if r and r.get(key) is not None else "not run"


def paper_tables(rows: dict) -> str:
    out = []
    for subset, (t1, t2) in (("fixed", (4, 5)), ("variable", (6, 7))):
        for key, tab, what in (("test_ppl", t1, "alone"), ("test_ppl_interp", t2, "interpolated with KN3")):
            body = []
            for model in ("standard", "binary"):
                paper = PAPER[(model, subset)]
                cells = []
                for rate in (1.0, *RATES):
                    name = "softmax" if rate == 1.0 else f"{model}-{rate:g}-{subset}"
                    if model == "binary" and rate == 1.0:
                        cells.append("-")
                        continue
                    p = paper.get(rate)
                    cells.append(f"{cell(rows, name, key)} ({p[0 if key == 'test_ppl' else 1]:.1f})" if p else
                                 cell(rows, name, key))
                body.append([f"{model} NNLM", *cells])
            out.append(f"**Table {tab}: {subset} random subsets, test perplexity {what}** — ours (paper)\n\n"
                       + table(["model", "100 %", "20 %", "10 %", "5 %"], body))
    return "\n\n".join(out)


def detail(rows: dict, soft: dict | None) -> str:
    body = []
    for r in rows.values():
        cost = f"{lmruns.relative_cost(r, soft):.2f}" if soft else "?"
        body.append([lmruns.label(r), f"{r['epochs']} ({r['best_epoch']})", f"{r['valid_ppl']:.1f}", f"{r['test_ppl']:.2f}",
                     f"{r['test_ppl_interp']:.2f} (w={r['interp_weight']:.2f})", f"{r['train_s_to_best']:.0f} s",
                     f"{r['tokens_per_s']:.0f} / {r['tokens_per_s_max']:.0f}", cost])
    return table(["run", "epochs (best)", "valid ppl", "test ppl", "+ KN3 (neural weight)", "train time to best",
                  "tokens/s (median / fastest epoch)", "cost per token vs softmax"], body)


def capped(rows: dict) -> str:
    """Which finished runs were still improving when the epoch cap stopped them (computed)."""
    def cap(r):
        opts = r["options"].split()
        return int(opts[opts.index("--epochs") + 1])

    hit = [r["name"] for r in rows.values() if not r.get("partial") and r["best_epoch"] == r["epochs"] >= cap(r)]
    if not hit:
        return "Every finished run stopped by the lr-halving rule, before the epoch cap."
    return (f"Stopped by the epoch cap with their best epoch last (still improving): {', '.join(hit)}. A standard run "
            "at alpha has then seen the data only (cap x alpha) times, so its figure is an upper bound.")


def figure(rows: dict, kn3_ppl: float):
    fig, axes = new_figure(1, 2, figsize=(11, 4.2), sharey=False)
    for ax, subset in zip(axes, SUBSETS):
        for model, color in (("standard", "C0"), ("binary", "C3")):
            xs, ys, pxs, pys = [], [], [], []
            for rate in (1.0, *RATES):
                name = "softmax" if rate == 1.0 else f"{model}-{rate:g}-{subset}"
                if name in rows and not (model == "binary" and rate == 1.0):
                    xs.append(100 * rate), ys.append(rows[name]["test_ppl"])
                if rate in PAPER[(model, subset)]:
                    pxs.append(100 * rate), pys.append(PAPER[(model, subset)][rate][0])
            ax.plot(xs, ys, "o-", color=color, label=f"{model} NNLM (ours)")
            ax.plot(pxs, pys, "x--", color=color, alpha=0.5, label=f"{model} NNLM (paper)")
        ax.axhline(kn3_ppl, color="gray", ls=":", label=f"KN3 (ours) {kn3_ppl:.1f}")
        ax.set_xscale("log")
        ax.set_xticks([5, 10, 20, 100], ["5", "10", "20", "100"])
        ax.set_xlabel("subsampling rate alpha (%)")
        ax.set_ylabel("test perplexity")
        ax.set_title(f"{subset} random subsets")
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def against_paper(rows: dict, kn3_ppl: float, old: dict) -> str:
    soft = rows.get("softmax")
    if not soft:
        return "No run has finished yet."
    lines = [f"The paper's standard NNLM reaches 154.3 beside its KN3 153.0 (ratio {154.3 / PAPER_KN3:.3f}); ours "
             f"{soft['test_ppl']:.1f} beside our KN3 {kn3_ppl:.1f} (ratio {soft['test_ppl'] / kn3_ppl:.3f}), and "
             f"{soft['test_ppl_interp']:.1f} interpolated (paper 132.7). Their PTB split and vocabulary differ from "
             "Mikolov's split used here, so compare ratios and trends, not absolute values."]
    for subset in SUBSETS:
        for rate in RATES:
            b, s = rows.get(f"binary-{rate:g}-{subset}"), rows.get(f"standard-{rate:g}-{subset}")
            if not (b and s):
                continue
            p_b, p_s = PAPER[("binary", subset)][rate][0], PAPER[("standard", subset)][rate][0]
            agree = (b["test_ppl"] < s["test_ppl"]) == (p_b < p_s)
            lines.append(
                f"- {subset}, alpha = {100 * rate:g} %: binary {b['test_ppl']:.1f} ({100 * (b['test_ppl'] / soft['test_ppl'] - 1):+.1f} % "
                f"vs our full softmax) against standard on {100 * rate:g} % of the data {s['test_ppl']:.1f} "
                f"({100 * (s['test_ppl'] / soft['test_ppl'] - 1):+.1f} %); paper: {p_b} vs {p_s} "
                f"({100 * (p_b / 154.3 - 1):+.1f} % / {100 * (p_s / 154.3 - 1):+.1f} %). "
                + ("Same ordering as the paper." if agree else "**The ordering contradicts the paper.**"))
    fixed, var = rows.get(f"binary-{RATES[-1]:g}-fixed"), rows.get(f"binary-{RATES[-1]:g}-variable")
    if fixed and var:
        p_f, p_v = PAPER[("binary", "fixed")][RATES[-1]][0], PAPER[("binary", "variable")][RATES[-1]][0]
        lines.append(
            f"\nFixed against variable negatives at alpha = {100 * RATES[-1]:g} %: ours {fixed['test_ppl']:.1f} vs "
            f"{var['test_ppl']:.1f} ({100 * (fixed['test_ppl'] / var['test_ppl'] - 1):+.1f} %), the paper's {p_f} vs {p_v} "
            f"({100 * (p_f / p_v - 1):+.1f} %). "
            + ("These fixed rows come from an earlier page whose fixed subsets were keyed on the target word, not the "
               "example (see below)." if per_target_word(fixed["name"], fixed, old) else
               "Our fixed subsets are per example, as the paper's: example p keeps the base subset shifted by a hash "
               "of its corpus position for the whole run (`sampledlm/objectives/binary.py`)."))
    return "\n".join(lines)


def per_target_word(name: str, row: dict, old: dict) -> bool:
    """Whether a fixed row is still the first version's (subsets per target word): carried from the very
    page its per-word figure was kept from."""
    return bool(row.get("carried")) and old.get(name, {}).get("carried") == row.get("carried")


def superseded_note(old: dict, rows: dict) -> str:
    """Before/after for the fixed rows re-run when the subsets became per example (computed from both pages)."""
    body = []
    for name, o in old.items():
        r = rows.get(name)
        if r and not per_target_word(name, r, old):
            body.append([name, f"{o['test_ppl']:.1f}", f"{r['test_ppl']:.1f}", f"{o['test_ppl_interp']:.1f}",
                         f"{r['test_ppl_interp']:.1f}"])
    if not body:
        return ""
    commits = ", ".join(sorted({o["carried"] for o in old.values()}))
    return ("Fixed subsets per target word (the first version, page at commit " + commits + ": a classifier w was a "
            "negative for all the examples of a target word or for none, so for 1 - alpha of the words it was never "
            "pushed down in their contexts) against per example (now), test perplexity alone and + KN3:\n\n"
            + table(["run", "per word", "per example", "+ KN3 per word", "+ KN3 per example"], body))


def _superseded(out_dir: str, only: set[str] | None, carried: dict | None) -> dict:
    """The first (per-target-word) figures of the fixed rows: those the page already kept, plus the rows an
    ``--only`` run replaces that the page had not kept yet. A row kept once stays as it was, so re-running a
    row twice never puts its per-example figure in the "before" column."""
    import json
    import os

    path = os.path.join(out_dir, NAME + ".json")
    kept: dict = {}
    if os.path.exists(path):
        with open(path) as f:
            kept = json.load(f).get("data", {}).get("superseded") or {}
    if only is not None:
        for n in sorted(only):
            if n in carried and n not in kept and not carried[n].get("partial"):
                kept[n] = {k: carried[n][k] for k in ("test_ppl", "test_ppl_interp", "carried")}
    return kept


def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True, only: set[str] | None = None) -> dict:
    carried = lmruns.carried_rows(out_dir, NAME)[0] if only is not None else None
    old = _superseded(out_dir, only, carried)
    st = lmruns.setting(quick, data_dir)
    kn3_ppl, label = st.kn3_ppl, st.label
    runs = plan(quick)
    result: dict = {}
    failures: dict = {}

    def write(rows: dict) -> None:
        soft = rows.get("softmax")
        headline = [{"method": "KN3 (interpolated modified Kneser-Ney)", "test_ppl": kn3_ppl, "relative_cost": None,
                     "note": "sampledlm ngram, order 3"}]
        rate = RATES[-1] if not quick else 0.1
        for name, method in (("softmax", "FFNN trigram, full softmax"),
                             (f"binary-{rate:g}-variable", f"FFNN trigram, binary, {100 * rate:g} % negatives (variable)")):
            if name in rows and soft:
                r = rows[name]
                headline.append({"method": method, "test_ppl": r["test_ppl"],
                                 "relative_cost": lmruns.relative_cost(r, soft),
                                 "note": f"+ KN3 {r['test_ppl_interp']:.1f}; {NAME}"})
        result.clear()
        result.update({"setup": st.describe(runs),
                       "kn3_test_ppl": kn3_ppl, "rows": list(rows.values()), "paper": {
                           f"{m}-{s}": {f"{k:g}": v for k, v in d.items()} for (m, s), d in PAPER.items()},
                       "headline": headline, "superseded": old})
        body = [
            f"Data: {label}. Model: {setting(quick)}. Exact test perplexity (every word and </s>); `+ KN3`: linear interpolation with our interpolated "
            f"modified Kneser-Ney trigram (test ppl {kn3_ppl:.1f}), weight by EM on validation. "
            "Standard NNLM at alpha: trained on alpha of the training positions (`--data-fraction`); binary NNLM "
            "at alpha: all positives, alpha of the negatives (`--neg-rate`), calibrated by log alpha.",
            "", paper_tables(rows), "", f"![test perplexity against alpha]({NAME}.png)", "",
            "All runs (cost: the full softmax's training tokens/s over this run's, each from its fastest epoch, the "
            "least disturbed by other jobs on this shared 2-core CPU; a rough ratio):", "", detail(rows, soft), "",
            "Cost of the binary runs: a batch scores the union of its G = 8 negative subsets (`--neg-groups`, "
            "which keeps the negatives of different examples independent enough to train well), about "
            + ", ".join(f"{100 * (1 - (1 - r) ** 8):.0f} % of V at alpha = {100 * r:g} %" for r in RATES)
            + ", so the saving per token is smaller than alpha alone suggests; `--neg-groups 1` scores alpha V "
            "columns but trains worse (see `sampledlm/objectives/binary.py`). With fixed subsets every example has "
            "its own subset, and a batch of 256 examples covers all of V: we score every word densely and mask each "
            "row, so a fixed-subset step costs about a full-softmax step (the paper's saving assumes per-example "
            "sparse updates). The standard runs at alpha cost the same per token as the full "
            "softmax but see alpha of the tokens per epoch.", "", capped(rows), "",
            lmruns.status_note(runs, rows, failures),
            "", "## Against the paper", "", against_paper(rows, kn3_ppl, old), "", superseded_note(old, rows),
        ]
        write_page(out_dir, NAME, "Xu et al. tables 4-7: standard vs binary NNLM under subsampling", st.meta, result,
                   "\n".join(body), figure=figure(rows, kn3_ppl))

    rows = lmruns.run_all(st.work, st.files, runs, st.arpa, after_each=write, failures=failures, train_new=train,
                          only=only, carried=carried)
    write(rows)
    return result
