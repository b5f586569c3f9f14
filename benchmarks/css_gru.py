"""``css-gru``: Botev et al. 2017 fig. 3: a GRU LM trained by each sampled objective, exact training
log-likelihood per epoch.

The seed trains a GRU (128 hidden units, 100-d word embeddings, scores ``s_t(c) = w_c^T P h_t``
with the output vectors ``w_c`` the word embeddings and P a projection) on Europarl with S = 250
negatives shared by the mini-batch, drawn from unigram^alpha, alpha in {0.75, 1}, and plots the
exact log-likelihood of the training set per epoch for negative sampling, IS, BlackOut, CSS-IS
("IS correct class") and ranking; BlackOut and CSS-IS come out best.

Here: the same network on PTB (``--model gru -d 100 --hidden 128 --proj 100 --tie``), the same
sampling, the exact softmax beside them, Adam instead of the seed's SGD (a CPU budget), and the
exact log-likelihood per token measured after every epoch on the first 100,000 training tokens
(``--train-eval``; the whole set would cost as much as an epoch of training with the softmax).
"""

from __future__ import annotations

import math

from . import lmruns
from .lmruns import Run
from .report import new_figure, table, write_page

NAME = "css-gru"
ALPHAS = (0.75, 1.0)
METHODS = {"neg": "negative sampling", "is": "IS (large vocab)", "blackout": "BlackOut", "css-is": "CSS-IS (correct class)",
           "ranking": "ranking"}
MODEL = ("--model", "gru", "-d", "100", "--hidden", "128", "--proj", "100", "--tie")
TRAIN = ("--optimizer", "adam", "--lr", "0.002", "--batch-size", "32", "--bptt", "35", "--clip", "1.0", "--epochs", "4",
         "--max-halvings", "2", "--min-improvement", "0.003", "--train-eval", "100000", "--bf16", "--seed", "1",
         "--threads", "1")
QUICK_MODEL = ("--model", "gru", "-d", "16", "--hidden", "24", "--proj", "16", "--tie")
QUICK_TRAIN = ("--optimizer", "adam", "--lr", "0.005", "--batch-size", "16", "--bptt", "20", "--clip", "1.0",
               "--epochs", "2", "--train-eval", "5000", "--seed", "1", "--threads", "1")


def plan(quick: bool) -> list[Run]:
    model, train = (QUICK_MODEL, QUICK_TRAIN) if quick else (MODEL, TRAIN)
    samples = "20" if quick else "250"
    methods = ("css-is", "neg") if quick else ("css-is", "blackout", "is", "neg", "ranking")
    runs = [Run("softmax", (*model, "--objective", "softmax", *train))]
    for alpha in ((0.75,) if quick else ALPHAS):
        runs += [Run(f"{m}-a{alpha:g}", (*model, "--objective", m, "--samples", samples, "--noise-power", f"{alpha:g}",
                                          *(("--no-true-term",) if m == "is" else ()), *train)) for m in methods]
    return runs


def loglik(rec: dict) -> float:
    """Mean exact log-likelihood per training token (nats) from an epoch's training perplexity."""
    return -math.log(rec["train_ppl"])


def figure(rows: dict):
    fig, axes = new_figure(1, 2, figsize=(11, 4.2), sharey=True)
    values = [loglik(c) for r in rows.values() for c in r["curve"]]
    # a diverged run (IS) would squash the others: the axis spans at most 4 nats below the best value
    floor = max(min(values), max(values) - 4.0) if values else None
    for ax, alpha in zip(axes, ALPHAS):
        for i, (m, label) in enumerate(METHODS.items()):
            r = rows.get(f"{m}-a{alpha:g}")
            if r:
                ll = [loglik(c) for c in r["curve"]]
                below = floor is not None and min(ll) < floor - 0.1
                ax.plot([c["epoch"] for c in r["curve"]], ll, "o-", color=f"C{i + 1}",
                        label=label + (f" (min {min(ll):.3g}, partly below the axis)" if below else ""))
        if "softmax" in rows:
            c = rows["softmax"]["curve"]
            ax.plot([e["epoch"] for e in c], [loglik(e) for e in c], "k--", label="exact softmax")
        ax.set_title(f"noise unigram^{alpha:g}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("exact training log-likelihood per token")
        if floor is not None:
            ax.set_ylim(floor - 0.1, max(values) + 0.1)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def against_paper(rows: dict, failures: dict, label: str) -> str:
    final = {name: loglik(r["curve"][-1]) for name, r in rows.items()}
    if not final:
        return "No run has finished yet."
    text = []
    for alpha in ALPHAS:
        got = sorted(((final[f"{m}-a{alpha:g}"], METHODS[m]) for m in METHODS if f"{m}-a{alpha:g}" in final), reverse=True)
        if got:
            text.append(f"alpha = {alpha:g}, final exact training log-likelihood per token, best first: "
                        + ", ".join(f"{name} {ll:.3f}" for ll, name in got) + ".")
    if "softmax" in final:
        text.append(f"Exact softmax: {final['softmax']:.3f}.")
    best2 = {METHODS["blackout"], METHODS["css-is"]}
    for alpha in ALPHAS:
        got = sorted(((final[f"{m}-a{alpha:g}"], METHODS[m]) for m in METHODS if f"{m}-a{alpha:g}" in final), reverse=True)
        if len(got) == len(METHODS):
            top = {name for _, name in got[:2]}
            text.append(f"The paper finds BlackOut and CSS-IS best; at alpha = {alpha:g} our two best are "
                        f"{' and '.join(sorted(top))}: " + ("**the same pair**." if top == best2 else
                                                             "**a different pair, contradicting the paper**."))
    if failures:
        text.append("Failed runs (see above): " + ", ".join(failures) + ".")
    text.append(f"Differences of setting: {label} instead of Europarl (47k words), Adam instead of SGD, a 100k-token "
                "training prefix for the exact likelihood, and at most 4 epochs.")
    return "\n\n".join(text)


def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True, only: set[str] | None = None) -> dict:
    carried = lmruns.carried_rows(out_dir, NAME)[0] if only is not None else None
    st = lmruns.setting(quick, data_dir, with_kn3=False)
    label = st.label
    runs = plan(quick)
    result: dict = {}
    failures: dict = {}

    def write(rows: dict) -> None:
        soft = rows.get("softmax")
        body_rows = []
        for r in rows.values():
            lls = " ".join(f"{loglik(c):.3f}" for c in r["curve"])
            cost = f"{lmruns.relative_cost(r, soft):.2f}" if soft else "?"
            body_rows.append([lmruns.label(r), lls, f"{r['valid_ppl']:.1f}", f"{r['test_ppl']:.1f}", f"{r['tokens_per_s']:.0f} / {r['tokens_per_s_max']:.0f}",
                              cost])
        headline = []
        for m, label_m in (("css-is", "CSS-IS"), ("blackout", "BlackOut")):
            r = rows.get(f"{m}-a0.75")
            if r and soft:
                headline.append({"method": f"GRU 128, {label_m}, S = 250", "test_ppl": r["test_ppl"],
                                 "relative_cost": lmruns.relative_cost(r, soft), "note": NAME})
        if soft:
            headline.insert(0, {"method": "GRU 128, full softmax", "test_ppl": soft["test_ppl"], "relative_cost": 1.0,
                                "note": NAME})
        result.clear()
        result.update({"setup": st.describe(runs),
                       "rows": list(rows.values()), "failures": failures, "headline": headline})
        body = [
            f"Data: {label}. GRU LM (Botev et al. §6.2): {' '.join((QUICK_MODEL if quick else MODEL)[2:])}, training "
            f"`{' '.join(QUICK_TRAIN if quick else TRAIN)}`; sampled objectives with "
            f"{'20' if quick else '250'} samples shared by the mini-batch from unigram^alpha. The exact training "
            "log-likelihood per token (natural log; higher is better) is measured after every epoch on a "
            "training prefix; valid and test perplexities are exact. A negative-sampling model is read with its own "
            "rule, softmax(a + log q) over all V (its scores converge to log P - log q, so the plain softmax of them "
            "favours rare words); ranking's scores have no such rule and are read as they are.", "",
            f"![exact training log-likelihood per epoch]({NAME}.png)", "",
            table(["run", "train log-lik per epoch", "best valid ppl", "test ppl", "tokens/s (median / fastest epoch)",
                   "cost per token vs softmax"], body_rows), "",
            lmruns.status_note(runs, rows, failures), "",
            "## Against the paper", "", against_paper(rows, failures, label),
        ]
        write_page(out_dir, NAME, "CSS fig. 3: GRU LM, exact training log-likelihood per epoch", st.meta, result,
                   "\n".join(body), figure=figure(rows))

    write(lmruns.run_all(st.work, st.files, runs, None, after_each=write, failures=failures, train_new=train,
                        only=only, carried=carried))
    return result
