"""Chen, Grangier & Auli (2016)'s protocol at a larger vocabulary: output layers compared by the best
validation perplexity each reaches within equal wall-clock budgets.

The vocabulary: PTB (10k words) joined with War and Peace (Project Gutenberg) with every word kept:
the novel lowercased, its punctuation dropped, tokens with a digit as ``N`` (PTB's conventions), and
no ``<unk>`` mapping, so its ~18k other word types join PTB's. Every 20th sentence of the novel goes to
validation, the next one to test, the rest to training; the files are PTB's splits plus these.

Every objective trains the feed-forward trigram of ``objectives_ptb.md`` (same options) on a random
tenth of the training positions per epoch (``--data-fraction 0.1``), so validation comes about every
tenth of the data, and stops at the step that passes the larger budget (``--max-time``; at the end of
the epoch that passed it when the committed page was measured).
The budgets count the training process's CPU seconds (``--time-clock cpu``; one thread), not wall
seconds: this machine is shared with other jobs, and CPU time is what each method was given. The
runs go one after another; the page reads each run's best validation perplexity among the epochs
that ended within each budget (:func:`benchmarks.lmruns.within_budget`).
"""

from __future__ import annotations

import os

from . import lmruns

BUDGETS = (120, 360)
OBJECTIVES = ("softmax", "css-is", "nce", "blackout", "class", "class-brown", "hsm", "adaptive")
WAR_AND_PEACE = ("gutenberg", "war-and-peace.txt")


def novel_sentences(path: str) -> list[list[str]]:
    """The novel's sentences of 3 to 60 words, PTB-like but with every word kept (module docstring)."""
    from sampledlm.data.tokenizer import TextOptions, iter_sentences

    out = []
    for sent in iter_sentences(path, TextOptions(tokenizer="raw", lowercase=True, gutenberg=True)):
        words = ["N" if any(c.isdigit() for c in w) else w for w in sent if any(c.isalnum() for c in w)]
        if 3 <= len(words) <= 60:
            out.append(words)
    return out


def joined_files(work: str, ptb: dict, novel: str) -> dict:
    """PTB's train / valid / test files joined with the novel's splits (written once into ``work``)."""
    from sampledlm.data.textio import atomic_write

    folder = os.path.join(work, "data-ptb-wp")
    files = {k: os.path.join(folder, f"{k}.txt") for k in ("train", "valid", "test")}
    if all(os.path.exists(p) for p in files.values()):
        return files
    os.makedirs(folder, exist_ok=True)
    split: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for i, words in enumerate(novel_sentences(novel)):
        split["valid" if i % 20 == 0 else "test" if i % 20 == 1 else "train"].append(" ".join(words) + "\n")
    for k, path in files.items():
        with open(ptb[k], encoding="utf-8") as f, atomic_write(path) as g:
            g.write(f.read())
            g.write("".join(split[k]))
    return files


def plan(work: str, files: dict) -> list[lmruns.Run]:
    """One run per objective: the feed-forward trunk and options of ``objectives_ptb`` with the time budget."""
    from .objectives_ptb import objective_options
    from .xu_nnlm import MODEL, TRAIN

    train = list(TRAIN)
    at = train.index("--epochs")
    train[at + 1] = "1000"  # the budget stops it
    extra = ("--data-fraction", "0.1", "--max-time", str(max(BUDGETS)), "--time-clock", "cpu")
    runs = []
    for o in OBJECTIVES:
        if o == "class-brown":
            opts = ("--objective", "class", "--word-classes", classes(work, files))
        elif o in ("softmax", "class", "hsm", "adaptive"):
            opts = ("--objective", o)
        else:
            opts = objective_options(o)
        runs.append(lmruns.Run(f"big-{o}", (*MODEL, *opts, *train, *extra)))
    return runs


def classes(work: str, files: dict) -> str:
    """Exchange-algorithm classes of the joined training file (``sampledlm classes``, default C)."""
    path = os.path.join(os.path.dirname(files["train"]), "classes.txt")
    if not os.path.exists(path):
        lmruns.cli("classes", files["train"], "-o", path)
    return path


def vocabulary_size(files: dict) -> int:
    from sampledlm.data.corpus import count_words

    return len(count_words(files["train"]).counts) + 1  # every word kept, and </s>


def run(work: str, ptb: dict, data_root: str, train_new: bool) -> dict:
    """Train (or reuse) every run and return the rows for the page; skipped without the novel."""
    from .lmruns import within_budget

    novel = os.path.join(data_root, *WAR_AND_PEACE)
    if not os.path.exists(novel):
        return {"skipped": f"{novel} not found"}
    files = joined_files(work, ptb, novel)
    runs = plan(work, files) if train_new or os.path.exists(os.path.join(os.path.dirname(files["train"]),
                                                                           "classes.txt")) else []
    rows = lmruns.run_all(work, files, runs, None, train_new=train_new)
    out = []
    for r in runs:
        row = rows.get(r.name)
        if row is None:
            continue
        out.append({"name": r.name[len("big-"):], "options": row["options"], "partial": row.get("partial", False),
                    "epochs": row["epochs"], "tokens_per_s": row["tokens_per_s"], "test_ppl": row["test_ppl"],
                    "budget_ppl": {str(b): within_budget(row, b, "cpu_s") for b in BUDGETS},
                    "curve": row["curve"]})
    return {"vocabulary": vocabulary_size(files), "files": files, "budgets": list(BUDGETS), "rows": out,
            "train_tokens": sum(len(line.split()) + 1 for line in open(files["train"], encoding="utf-8"))}


def markdown(d: dict) -> str:
    """The page's section: one row per objective and the ranking within each budget."""
    from .report import table

    if d.get("skipped"):
        return f"Skipped: {d['skipped']}."
    head = (f"PTB joined with War and Peace, every word kept: V = {d['vocabulary']:,} words ({d['train_tokens']:,} "
            "training tokens, `</s>` included; module `benchmarks.chen_budget`). The feed-forward trigram of "
            "part (c) with each objective, trained on a random tenth of the positions per epoch (`--data-fraction "
            "0.1`) so that validation comes often, until its CPU time passes the larger budget (`--max-time "
            f"{max(d['budgets'])} --time-clock cpu`; one thread). Budgets count the training process's CPU seconds, "
            "validation included: the machine ran other jobs beside these runs, and CPU time is what each method "
            "was given. Valid ppl: the best validation perplexity among the epochs that ended within the budget "
            "(- when none had); test ppl: the final model's exact test perplexity.")
    if not d["rows"]:
        return head + "\n\n**Not run yet**: `python -m benchmarks outputs` trains these runs."
    rows = []
    for r in d["rows"]:
        rows.append([r["name"] + (" *" if r.get("partial") else ""), f"{r['tokens_per_s']:,.0f}", str(r["epochs"]),
                     *[f"{v:.1f}" if (v := r["budget_ppl"][str(b)]) else "-" for b in d["budgets"]],
                     f"{r['test_ppl']:.1f}"])
    body = table(["objective", "tokens/s", "epochs (tenths of the data)",
                  *[f"valid ppl within {b} CPU-s" for b in d["budgets"]], "test ppl"], rows)
    lines = []
    for b in d["budgets"]:
        got = sorted(((r["budget_ppl"][str(b)], r["name"]) for r in d["rows"] if r["budget_ppl"][str(b)]))
        if got:
            rest = ", ".join(f"{n} ({v:.1f})" for v, n in got[1:4])
            lines.append(f"- within {b} CPU-s: **{got[0][1]}** ({got[0][0]:.1f})" + (f", then {rest}" if rest else ""))
    partial = [r["name"] for r in d["rows"] if r.get("partial")]
    note = f"\n\nUnfinished when the page was written (best epoch so far, marked *): {', '.join(partial)}." \
        if partial else ""
    return "\n\n".join([head, body, "\n".join(lines)]) + note
