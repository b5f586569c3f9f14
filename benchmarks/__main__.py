"""``python -m benchmarks``: run one reproduction or benchmark experiment and write its results page.

Full-setting runs write ``docs/results/`` by default; ``--quick`` (a smoke test) never does unless
``--out`` says so: without ``--out`` it writes into a fresh temporary directory and prints where."""

from __future__ import annotations

import inspect
import os
import tempfile
import time

import click

from sampledlm.cli import main
from sampledlm.cli.common import CONTEXT
from sampledlm.errors import UserError

DEFAULT_OUT = os.path.join("docs", "results")


def _list_text() -> str:
    from . import ALIASES, EXPERIMENTS

    width = max(len(n) for n in [*EXPERIMENTS, *ALIASES])
    lines = [f"  {n:<{width}}  {e.summary}" for n, e in EXPERIMENTS.items()]
    return "\n".join(lines + [f"  {a:<{width}}  another name for {n}" for a, n in ALIASES.items()])


def _synthetic_note() -> str:
    from . import EXPERIMENTS

    names = [n for n, e in EXPERIMENTS.items() if not e.trains_lm]
    return f"Synthetic, ignore it: {', '.join(names)}." if names else ""


@click.command(name="benchmarks", context_settings=CONTEXT)
@click.argument("experiment", required=False, metavar="EXPERIMENT")
@click.option("--quick", is_flag=True, help="Smaller setting that finishes in seconds (a smoke test, not the figures); "
              "without --out it writes into a fresh temporary directory, never docs/results.")
@click.option("--data", "data_dir", default=None, metavar="DIR",
              help="Directory with ptb.{train,valid,test}.txt or {train,valid,test}.txt: the corpus of "
                   "experiments that train a language model. " + _synthetic_note())
@click.option("--out", "out_dir", default=None, metavar="DIR",
              help=f"Where to write EXPERIMENT.md, .json and .png [default: {DEFAULT_OUT} for a full-setting run, "
                   "a new temporary directory with --quick].")
@click.option("--no-train", is_flag=True,
              help="Rebuild the page from the runs already finished (in ~/.cache/sampledlm/bench); train nothing.")
@click.option("--only", "only", default=None, metavar="RUN,...",
              help="Train only these runs of the experiment (names as in its table); the other rows are kept from "
                   "the page already in OUT (marked †, with the commit they come from). For re-running the rows a "
                   "code change affects; with --no-train, the page shows these runs as far as they got.")
@click.option("--list", "list_only", is_flag=True, help="List the experiments and exit.")
def bench(experiment, quick, data_dir, out_dir, no_train, only, list_only):
    """Reproduce a paper's experiment: write OUT/EXPERIMENT.md, .json and .png.

    \b
    Each page is stamped with machine, date, git commit and this command, and compares
    its figures with the paper's or the targets. The experiments (python -m benchmarks --list):

    {list}

    \b
    Example:
      python -m benchmarks css-estimates --quick         # a smoke test, into a temporary directory
      python -m benchmarks css-softmax-regression        # full setting, writes docs/results/
      python -m benchmarks xu-nnlm --data mycorpus/      # your train.txt, valid.txt, test.txt
    """
    import benchmarks as experiments
    from benchmarks import report

    if list_only:
        click.echo(_list_text())
        return
    if experiment is None:
        raise UserError(f"name an experiment ({', '.join(experiments.EXPERIMENTS)}) or use --list")
    exp = experiments.get(experiment)
    experiment = experiments.resolve(experiment)  # an alias runs (and stamps) the experiment it names
    if no_train and quick:
        raise UserError("--no-train rebuilds a page from full-setting runs; --quick always trains afresh")
    if data_dir is not None:
        report.data_files(data_dir)
        if not exp.trains_lm:
            click.echo(f"sampledlm: note: {experiment} is synthetic and trains no language model; --data is ignored",
                       err=True)
    argv = ["python", "-m", "benchmarks", experiment] + (["--quick"] if quick else []) + (["--no-train"] if no_train else [])
    argv += (["--data", data_dir] if data_dir else []) + (["--out", out_dir] if out_dir is not None else [])
    argv += ["--only", only] if only else []
    if only is not None and quick:
        raise UserError("--only re-trains some runs of a full-setting page; it does not go with --quick")
    if out_dir is None:
        if quick:  # a smoke test never writes over the committed pages
            out_dir = tempfile.mkdtemp(prefix=f"sampledlm-bench-{experiment}-")
            click.echo(f"{experiment} --quick: writing into {out_dir}", err=True)
        else:
            out_dir = DEFAULT_OUT
    report.set_command(argv)
    t0 = time.time()
    names = None if only is None else {n.strip() for n in only.split(",") if n.strip()}
    experiments.run(experiment, quick=quick, data_dir=data_dir, out_dir=out_dir, train=not no_train, only=names)
    page = os.path.join(out_dir, exp.page_name(experiment))
    click.echo(f"{experiment}: wrote {page}.md/.json/.png in {time.time() - t0:.0f} s", err=True)


bench.help = inspect.cleandoc(bench.help).replace("{list}", "\b\n" + _list_text())


if __name__ == "__main__":
    main(command=bench, prog_name="python -m benchmarks")
