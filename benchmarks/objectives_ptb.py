"""``objectives-ptb``: quality of every output objective on PTB.

Trains the feed-forward trigram NNLM of Xu et al. 2011 §3.2 (d = 50, h = 200, tanh, dropout 0.2)
with each of the nine objectives, with the settings of ``python -m benchmarks xu-nnlm`` (Adam lr 0.002,
batch 256, lr halving on validation, at most 12 epochs), and reports the exact test perplexity
alone and interpolated with KN3 (weight by EM on validation) and the training time to the best
validation epoch. Targets: binary (alpha = 5 %, variable subsets) within 3 % of the full softmax;
CSS-IS and BlackOut with S = 250 within 5 %.

The runs go through :mod:`.lmruns` (shared with ``xu-nnlm`` and ``nce-samples``: same options,
same directory), reused when finished and resumed when not. ``--quick``: softmax, binary and
CSS-IS only, the small model of ``xu-nnlm --quick`` on the built-in corpus. The page is
``objectives_ptb.md`` (``python -m benchmarks objectives_ptb`` is another name for it).
"""

from __future__ import annotations

from . import lmruns
from .report import new_figure, write_page
from .xu_nnlm import MODEL, QUICK_MODEL, QUICK_TRAIN, TRAIN

NAME = "objectives-ptb"
PAGE = "objectives_ptb"
ALL = ["softmax", "binary", "is", "css-is", "css-bernoulli", "nce", "neg", "blackout", "ranking"]
QUICK = ["softmax", "binary", "css-is"]
TARGET = {"binary": 0.03, "css-is": 0.05, "blackout": 0.05}
#: extra rows: name -> (objective, options appended to the shared ones; a later option wins)
VARIANTS = {"css-is-lr0.001": ("css-is", ("--lr", "0.001"))}


def objective_options(obj: str) -> tuple[str, ...]:
    """alpha = 5 % variable for binary, S = 250 for the sampled objectives."""
    if obj == "softmax":
        return ("--objective", "softmax")
    if obj == "binary":
        return ("--objective", "binary", "--neg-rate", "0.05", "--neg-subset", "variable")
    return ("--objective", obj, "--samples", "250")


def labels(quick: bool = False) -> list[tuple[str, str]]:
    """(row label, objective) in the order of :func:`plan`."""
    if quick:
        return [(o, o) for o in QUICK]
    return [(o, o) for o in ALL] + [(name, o) for name, (o, _) in VARIANTS.items()]


def plan(quick: bool = False) -> list[lmruns.Run]:
    """The same run names and options as xu-nnlm's (softmax, binary-0.05-variable), so they are
    shared; then the :data:`VARIANTS`."""
    model, train = (QUICK_MODEL, QUICK_TRAIN) if quick else (MODEL, TRAIN)
    names = {"binary": "binary-0.05-variable"}
    runs = [lmruns.Run(names.get(o, o if o == "softmax" else f"{o}-s250"), (*model, *objective_options(o), *train))
            for o in (QUICK if quick else ALL)]
    if not quick:
        runs += [lmruns.Run(f"{name}-s250", (*model, *objective_options(o), *train, *extra))
                 for name, (o, extra) in VARIANTS.items()]
    return runs


def table(rows: dict, runs: list[lmruns.Run], quick: bool) -> str:
    soft = rows.get("softmax")
    out = ["| objective | options | epochs (best) | valid ppl | test ppl | test ppl + KN3 | train time to best | "
           "tokens/s (median) | vs softmax | target |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (label, obj), run in zip(labels(quick), runs):
        r = rows.get(run.name)
        opts = " ".join(objective_options(obj)[2:] + VARIANTS.get(label, (None, ()))[1])
        if r is None:
            out.append(f"| {label} | {opts} | not run | | | | | | | |")
            continue
        rel = f"{100 * (r['test_ppl'] / soft['test_ppl'] - 1):+.1f} %" if soft else "n/a"
        tgt = TARGET.get(obj)
        verdict = ""
        if tgt is not None and soft:
            verdict = f"within {100 * tgt:.0f} %: " + ("yes" if r["test_ppl"] <= soft["test_ppl"] * (1 + tgt) else "**no**")
        out.append(f"| {lmruns.label(r)} | {opts} | {r['epochs']} ({r['best_epoch']}) | {r['valid_ppl']:.1f} | "
                   f"{r['test_ppl']:.1f} | {r['test_ppl_interp']:.1f} | {r['train_s_to_best']:.0f} s | "
                   f"{r['tokens_per_s']:.0f} | {rel} | {verdict} |")
    return "\n".join(out)


def figure(rows: dict, runs: list[lmruns.Run], quick: bool, kn3: float):
    fig, ax = new_figure(figsize=(8, 4.2))
    done = [(label, rows[run.name]) for (label, _), run in zip(labels(quick), runs) if run.name in rows]
    ax.barh([lb for lb, _ in done], [r["test_ppl"] for _, r in done], color="C0", label="alone")
    ax.barh([lb for lb, _ in done], [r["test_ppl_interp"] for _, r in done], color="C1", height=0.4, label="+ KN3")
    ax.axvline(kn3, color="gray", ls=":", label=f"KN3 {kn3:.1f}")
    ax.set_xscale("log")
    ax.set_xlabel("exact test perplexity (log scale)")
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def run(quick: bool, data_dir: str | None, out_dir: str, train: bool = True, only: set[str] | None = None) -> dict:
    carried = lmruns.carried_rows(out_dir, PAGE)[0] if only is not None else None
    st = lmruns.setting(quick, data_dir)
    runs = plan(quick)
    failures: dict = {}
    result: dict = {}
    model, opts = (QUICK_MODEL, QUICK_TRAIN) if quick else (MODEL, TRAIN)

    def write(rows: dict) -> None:
        result.clear()
        result.update({"setup": st.describe(runs), "rows": list(rows.values()), "failures": failures,
                       "kn3_test_ppl": st.kn3_ppl})
        body = [
            f"Data: {st.label}" + (" (--quick: three objectives, a small model; not the figures)" if quick else "")
            + ". Feed-forward trigram NNLM (Xu et al. 2011 §3.2), trained with each objective: "
            f"`sampledlm train {' '.join(model)} --objective OBJ ... {' '.join(opts)}` (lr halving on validation). "
            "Exact test perplexity over every word and </s>; `+ KN3`: linear interpolation with our interpolated "
            f"modified Kneser-Ney trigram (test ppl {st.kn3_ppl:.1f}), weight by EM on validation. Sampled objectives "
            "draw S = 250 words per step from unigram^0.75, shared by the mini-batch.", "",
            table(rows, runs, quick), "", f"![test perplexity per objective]({PAGE}.png)", "",
            lmruns.status_note(runs, rows, failures), "",
            "Reading the table: `neg` (negative sampling, Mikolov et al. 2013, with its 1/S scale) and `ranking` "
            "(margin ranking, Collobert & Weston 2008) do not train the scores to be log-probabilities. NEG's "
            "converge to log P - log q, so since 2026-11-26 a NEG model is read as softmax(a + log q) "
            "(`NegativeSampling.log_prob`; pages before that read the plain softmax of its scores, which favours rare "
            "words); ranking has no such reading and serves reranking, not perplexity. `is` (standard importance sampling, the true word not summed exactly) "
            "is the unstable estimator Botev et al. 2017 describe: see its best epoch and valid ppl. "
            "`css-is-lr0.001` is CSS-IS with half the shared Adam learning rate.", "",
            "## Against the paper", "",
            "Xu et al. 2011 tables 6-7 (variable subsets, their PTB split): standard NNLM 154.3 (132.7 with KN3), "
            "binary NNLM 5 % 152.1 (132.2); KN trigram 153.0.", "",
            "Times were taken on a shared 2-core machine with other jobs running, so they are inflated and noisy; "
            "see scaling.md for controlled throughput figures.",
        ]
        write_page(out_dir, PAGE, "Sampled output objectives: quality on PTB", st.meta, result, "\n".join(body),
                   figure=figure(rows, runs, quick, st.kn3_ppl))

    write(lmruns.run_all(st.work, st.files, runs, st.arpa, after_each=write, failures=failures, train_new=train,
                        only=only, carried=carried))
    return result
