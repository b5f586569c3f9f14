"""The results table of the README and of the results index (docs/results/index.md): method, test
perplexity, relative training cost, generated from the experiments' committed JSON pages, never typed by hand.

Every experiment that trains a language model puts a list ``headline`` in its JSON ``data``:
``{"method", "test_ppl", "relative_cost" (None for n-grams), "note"}``. Pages written with
``--quick`` are left out (smoke tests, not figures). The README gets the short table (method, figures, page);
the results index adds each row's note and the date of its page. Neither names a commit: each page's stamp
says which commit wrote it.

    python -m benchmarks.headline            # rewrite both tables from docs/results
    python -m benchmarks.headline --check    # exit 1 if either is not up to date
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import EXPERIMENTS
from .report import table

START, END = "<!-- headline:start -->", "<!-- headline:end -->"


def collect(results_dir: str) -> list[dict]:
    """The headline rows of every full-setting experiment page in ``results_dir``, in registry order."""
    rows = []
    for name in EXPERIMENTS:
        path = os.path.join(results_dir, f"{name}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            page = json.load(f)
        data = page.get("data")
        if not isinstance(data, dict) or "headline" not in data:  # a page without headline rows
            continue
        if data.get("setup", {}).get("quick") or "--quick" in page["meta"]["command"]:
            continue
        for h in data["headline"]:
            rows.append({**h, "experiment": name, "date": page["meta"]["date"][:10], "commit": page["meta"]["commit"]})
    return rows


def _cost(r: dict) -> str:
    c = r["relative_cost"]
    return "n/a" if c is None else f"{c:.2f}" if c >= 0.01 else f"{c:.1g}"  # 0.002, not 0.00


def render(rows: list[dict], link_prefix: str = "docs/results/", long: bool = False) -> str:
    """The markdown table: method, test ppl, cost, page (``long``: the note and the page's date too). Links are
    ``{link_prefix}NAME.md``: ``docs/results/`` from the README, nothing from the results index beside the pages."""
    body = []
    for r in rows:
        page = f"[{r['experiment']}]({link_prefix}{r['experiment']}.md)"
        body.append([r["method"], f"{r['test_ppl']:.1f}", _cost(r)]
                    + ([r.get("note", ""), f"{page} ({r['date']})"] if long else [page]))
    cost = "training cost per token (vs the exact model of the same page)" if long else "cost"
    return table(["method", "test ppl", cost] + (["note", "page"] if long else ["page"]), body)


def replace_block(text: str, block: str, path: str = "README.md") -> str:
    if START not in text or END not in text:
        raise SystemExit(f"{path}: markers {START} / {END} not found")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the results tables of the README and the results index "
                                             "from docs/results/*.json.")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--index", default=None, help="the results index [default: RESULTS/index.md]")
    ap.add_argument("--results", default=os.path.join("docs", "results"))
    ap.add_argument("--check", action="store_true", help="only check that both tables are up to date")
    args = ap.parse_args(argv)
    rows = collect(args.results)
    targets = [(args.readme, render(rows)),
               (args.index or os.path.join(args.results, "index.md"), render(rows, link_prefix="", long=True))]
    stale = []
    for path, block in targets:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = replace_block(text, block, path)
        if new == text:
            continue
        stale.append(path)
        if not args.check:
            from sampledlm.data.textio import atomic_write

            with atomic_write(path) as f:
                f.write(new)
    if args.check and stale:
        print(f"{', '.join(stale)}: results table is stale; run python -m benchmarks.headline", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
