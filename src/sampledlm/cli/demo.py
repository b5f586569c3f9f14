"""``sampledlm demo``: the whole toolkit on a built-in corpus."""

from __future__ import annotations

import click

from .common import CONTEXT, SEED

@click.command(context_settings=CONTEXT)
@click.option("-o", "--output", "out_dir", default=None, help="Directory for the demo's corpus and models [default: a temporary directory]. A directory of an earlier "
                   "demo may be given again: the files that demo wrote are replaced, any others left alone.")
@click.option("--seed", type=SEED, default=1, show_default=True, help="Random seed.")
def demo(out_dir, seed):
    """Run the whole pipeline on a built-in corpus: no download, no data needed.

    \b
    The corpus is the documentation text that ships with every Python installation
    (pydoc_data.topics), tokenised and split into train/valid/test. The demo reports corpus
    statistics, then trains and evaluates the baselines and models the toolkit offers
    (about two minutes on two cores).
    Example:
      sampledlm demo
      sampledlm demo -o demo-run
    """
    from ..demo import run_demo

    run_demo(out_dir, seed=seed)
