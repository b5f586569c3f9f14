"""The README's headline table (method, test perplexity, relative training cost), generated from
the experiments' committed JSON pages, never typed by hand.

Every experiment that trains a language model puts a list ``headline`` in its JSON ``data``:
``{"method", "test_ppl", "relative_cost" (None for n-grams), "note"}``. Pages written with
``--quick`` are left out (smoke tests, not figures).

    python -m benchmarks.headline            # rewrite README.md's table from docs/results
    python -m benchmarks.headline --check    # exit 1 if README.md is not up to date
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


def render(rows: list[dict]) -> str:
    body = []
    for r in rows:
        cost = "n/a" if r["relative_cost"] is None else f"{r['relative_cost']:.2f}"
        body.append([r["method"], f"{r['test_ppl']:.1f}", cost, r.get("note", ""),
                     f"[{r['experiment']}](docs/results/{r['experiment']}.md) ({r['date']}, {r['commit']})"])
    return table(["method", "test ppl", "training cost per token (vs the exact model of the same page)", "note",
                  "page"], body)


def replace_block(text: str, block: str, path: str = "README.md") -> str:
    if START not in text or END not in text:
        raise SystemExit(f"{path}: markers {START} / {END} not found")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Regenerate the README headline table from docs/results/*.json.")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--results", default=os.path.join("docs", "results"))
    ap.add_argument("--check", action="store_true", help="only check that the README is up to date")
    args = ap.parse_args(argv)
    with open(args.readme) as f:
        text = f.read()
    new = replace_block(text, render(collect(args.results)), args.readme)
    if args.check:
        if new != text:
            print(f"{args.readme}: headline table is stale; run python -m benchmarks.headline",
                  file=sys.stderr)
            return 1
        return 0
    if new != text:
        from sampledlm.data.textio import atomic_write

        with atomic_write(args.readme) as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
