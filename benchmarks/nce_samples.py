"""``nce-samples``: Labeau 2014's table (NCE slides) of test perplexity against the number k of NCE noise samples.

The seed (NCE for neural LMs, Brown corpus) trains with k = 5, 10, 25, 100 noise samples from the
unigram distribution, the normaliser fixed to 1, and reports test perplexity beside an SRILM
trigram: 275.1, 263.2, 254.5, 254.6 vs 336.8. We train the feed-forward trigram NNLM of
``xu-nnlm`` (same settings, so its full-softmax run is shared) with ``--objective nce --samples k``
(noise unigram^1, one sample set shared by the mini-batch) and evaluate exactly (the model's
scores renormalised over V), alone and interpolated with our KN3.
"""

from __future__ import annotations

from . import lmruns
from .lmruns import Run
from .report import new_figure, table, write_page
from .xu_nnlm import MODEL, QUICK_MODEL, QUICK_TRAIN, TRAIN, setting

NAME = "nce-samples"
KS = (5, 10, 25, 100)
PAPER = {5: 275.1, 10: 263.2, 25: 254.5, 100: 254.6}
PAPER_TRIGRAM = 336.8


def plan(quick: bool) -> list[Run]:
    model, train = (QUICK_MODEL, QUICK_TRAIN) if quick else (MODEL, TRAIN)
    ks = (5, 25) if quick else KS
    return [Run("softmax", (*model, "--objective", "softmax", *train))] + [
        Run(f"nce-k{k}", (*model, "--objective", "nce", "--samples", str(k), "--noise-power", "1", *train)) for k in ks]


def figure(rows: dict, kn3_ppl: float, label: str = "ours"):
    """Two panels, one per corpus (their perplexities are not comparable): ours on the left, the
    paper's (Brown corpus) on the right, the same k axis."""
    fig, (ax, ax2) = new_figure(1, 2, figsize=(11, 4.2))
    ks = [k for k in KS if f"nce-k{k}" in rows]
    ax.plot(ks, [rows[f"nce-k{k}"]["test_ppl"] for k in ks], "o-", color="C3", label="NCE")
    ax.plot(ks, [rows[f"nce-k{k}"]["test_ppl_interp"] for k in ks], "s-", color="C1", label="NCE + KN3")
    if "softmax" in rows:
        ax.axhline(rows["softmax"]["test_ppl"], color="C0", ls="--", label="full softmax")
    ax.axhline(kn3_ppl, color="gray", ls=":", label="KN3")
    ax.set_title(f"ours ({label})")
    ax2.plot(list(PAPER), list(PAPER.values()), "x--", color="C3", label="NCE")
    ax2.axhline(PAPER_TRIGRAM, color="gray", ls=":", label="SRILM trigram")
    ax2.set_title("the paper (Brown corpus)")
    for a in (ax, ax2):
        a.set_xscale("log")
        a.set_xlim(KS[0] / 1.5, KS[-1] * 1.5)  # also before any NCE run has finished (lines only)
        a.set_xticks(list(KS), [str(k) for k in KS])
        a.set_xlabel("noise samples k")
        a.set_ylabel("test perplexity")
        a.grid(True, alpha=0.3)
        a.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig


def against_paper(rows: dict, kn3_ppl: float, label: str) -> str:
    ks = [k for k in KS if f"nce-k{k}" in rows]
    if not ks:
        return "No NCE run has finished yet."
    ppl = {k: rows[f"nce-k{k}"]["test_ppl"] for k in ks}
    text = [f"The paper (Brown corpus, SRILM trigram {PAPER_TRIGRAM}) finds perplexity falling from k = 5 to 25 "
            f"({100 * (PAPER[25] / PAPER[5] - 1):+.1f} %) and flat from 25 to 100 ({100 * (PAPER[100] / PAPER[25] - 1):+.1f} %), "
            f"all NCE models {100 * (1 - PAPER[5] / PAPER_TRIGRAM):.0f}-{100 * (1 - PAPER[100] / PAPER_TRIGRAM):.0f} % "
            "below the trigram."]
    if 5 in ppl and 25 in ppl:
        text.append(f"Ours ({label}): k = 5 -> 25 changes test perplexity by {100 * (ppl[25] / ppl[5] - 1):+.1f} %"
                    + (f", 25 -> 100 by {100 * (ppl[100] / ppl[25] - 1):+.1f} %" if 100 in ppl else "") + "; "
                    f"against our KN3 ({kn3_ppl:.1f}) the NCE models are "
                    + ", ".join(f"{100 * (p / kn3_ppl - 1):+.1f} % (k = {k})" for k, p in ppl.items()) + ".")
    if "softmax" in rows:
        s = rows["softmax"]["test_ppl"]
        text.append(f"Against the full softmax ({s:.1f}) trained with the same settings: "
                    + ", ".join(f"{100 * (p / s - 1):+.1f} % (k = {k})" for k, p in ppl.items()) + ". "
                    "The seed's models are log-bilinear/SOUL nets on another corpus, and its trigram is far weaker "
                    "than its NNLMs; on PTB a trigram NNLM is no better than KN3 alone, so the comparison that "
                    "transfers is the trend in k and the gap to the exact softmax.")
    return " ".join(text)


def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True) -> dict:
    st = lmruns.setting(quick, data_dir)
    kn3_ppl, label = st.kn3_ppl, st.label
    runs = plan(quick)
    result: dict = {}
    failures: dict = {}

    def write(rows: dict) -> None:
        soft = rows.get("softmax")
        body_rows = [["KN3 (ours)", "", f"{kn3_ppl:.2f}", "", "", "", "", ""]]
        for r in rows.values():
            k = r["name"].removeprefix("nce-k")
            body_rows.append([lmruns.label(r), k if k.isdigit() else "-", f"{r['test_ppl']:.2f}",
                              f"{r['test_ppl_interp']:.2f}", f"{r['epochs']} ({r['best_epoch']})",
                              f"{r['train_s_to_best']:.0f} s", f"{r['tokens_per_s']:.0f} / {r['tokens_per_s_max']:.0f}",
                              f"{PAPER[int(k)]}" if k.isdigit() and int(k) in PAPER else ""])
        headline = []
        best = min((r for r in rows.values() if r["name"].startswith("nce-")), key=lambda r: r["test_ppl"], default=None)
        if best and soft:
            headline.append({"method": f"FFNN trigram, NCE k = {best['name'].removeprefix('nce-k')}",
                             "test_ppl": best["test_ppl"], "relative_cost": lmruns.relative_cost(best, soft),
                             "note": f"+ KN3 {best['test_ppl_interp']:.1f}; {NAME}"})
        result.clear()
        result.update({"setup": st.describe(runs),
                       "kn3_test_ppl": kn3_ppl, "rows": list(rows.values()), "paper": PAPER,
                       "paper_trigram": PAPER_TRIGRAM, "headline": headline})
        body = [
            f"Data: {label}. Model: {setting(quick)}; objective NCE (as in the NCE slides) with k noise samples from the "
            "unigram distribution (power 1), shared by the mini-batch, normaliser fixed to 1; the evaluation "
            "renormalises over V (exact). `+ KN3`: interpolation with our modified Kneser-Ney trigram, weight by EM "
            "on validation.", "",
            table(["run", "k", "test ppl", "+ KN3", "epochs (best)", "train time to best", "tokens/s (median / fastest epoch)",
                   "paper (Brown)"], body_rows), "",
            f"![test perplexity against k]({NAME}.png)", "",
            lmruns.status_note(runs, rows, failures), "",
            "## Against the paper", "", against_paper(rows, kn3_ppl, label),
        ]
        write_page(out_dir, NAME, "NCE: test perplexity against the number of noise samples", st.meta, result,
                   "\n".join(body), figure=figure(rows, kn3_ppl, label))

    write(lmruns.run_all(st.work, st.files, runs, st.arpa, after_each=write, failures=failures, train_new=train))
    return result
