"""Stamping and writing an experiment's results page, the one page writer of ``docs/results/``:
every page says where, when, from which commit and with which command.

    meta = stamp()                                   # machine, date, commit, command
    fig, ax = new_figure()                           # a matplotlib Figure (no pyplot, no backend switch)
    write_page(out_dir, "css-estimates", "Title", meta, data, body, figure=fig)

writes ``<out_dir>/<name>.json`` (``{"meta": ..., "data": ...}``), ``<out_dir>/<name>.md`` (the
stamp, then ``body``) and, given a matplotlib figure, ``<out_dir>/<name>.png`` (and one PNG per
entry of ``figures``), each atomically. A page shows every figure it writes: where ``body`` does not
place an image link to a PNG itself, the link goes right below the stamp (:func:`show_figures`).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys

import numpy as np

from sampledlm.errors import UserError
from sampledlm.data.textio import atomic_write

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the checkout: benchmarks/ and src/ inside

#: The command line recorded on the pages; ``python -m benchmarks`` sets it (see :func:`set_command`).
_COMMAND: list[str] | None = None


def set_command(argv: list[str]) -> None:
    """Record ``argv`` (e.g. ``["python", "-m", "benchmarks", "scaling", "--quick"]``) as the command to stamp."""
    global _COMMAND
    _COMMAND = list(argv)


def native_bf16() -> bool:
    """True when the CPU has bfloat16 instructions (AVX512-BF16 or AMX): without them PyTorch emulates
    bf16 matrix products, and a ``--bf16`` feed-forward step measured 10x slower than fp32 (2-core AMD
    EPYC without AVX-512), so the experiments train in fp32 there."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO_DIR, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def stamp() -> dict:
    """Machine, date (UTC), git commit of the package source ('+dirty' when its tree has changes;
    'unknown' outside a checkout), software versions, load average and the command line."""
    import torch

    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    if commit != "unknown" and _git("status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    argv = _COMMAND or [os.path.basename(sys.argv[0]), *sys.argv[1:]]
    return {
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "command": " ".join(shlex.quote(a) for a in argv),
    }


def header(title: str, meta: dict) -> str:
    return (
        f"# {title}\n\n"
        f"- machine: {meta['machine']}\n- date: {meta['date']}\n- commit: {meta['commit']}\n"
        f"- software: Python {meta['python']}, torch {meta['torch']} "
        f"({meta['torch_threads']} thread{'' if meta['torch_threads'] == 1 else 's'}), "
        f"numpy {meta['numpy']}\n"
        f"- command: `{meta['command']}`\n\n"
    )


def show_figures(body: str, title: str, stems: list[str]) -> str:
    """``body`` with an image link ``![title](STEM.png)`` in front for each of ``stems`` that it does not
    link itself, so the page shows every PNG written beside it (the docs site and GitHub render the links)."""
    links = "".join(f"![{title}]({stem}.png)\n\n" for stem in stems if f"]({stem}.png)" not in body)
    return links + body


def write_page(out_dir: str, name: str, title: str, meta: dict, data, body: str, figure=None,
               figures: dict | None = None) -> dict:
    """Write ``<out_dir>/<name>.json``, ``.md``, (given ``figure``) ``<name>.png`` and (given
    ``figures``, ``{stem: Figure}``) ``<stem>.png`` each; returns their paths (key ``png`` for
    ``figure``, the stem for the others). Every file is written atomically."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {"json": os.path.join(out_dir, f"{name}.json"), "md": os.path.join(out_dir, f"{name}.md")}
    pngs = ([("png", name, figure)] if figure is not None else []) + [(k, k, f) for k, f in (figures or {}).items()]
    for key, stem, fig in pngs:
        paths[key] = os.path.join(out_dir, f"{stem}.png")
        with atomic_write(paths[key], "wb") as f:
            fig.savefig(f, format="png", dpi=110)
    with atomic_write(paths["json"]) as f:
        json.dump({"meta": meta, "data": data}, f, indent=2, default=float)
        f.write("\n")
    body = show_figures(body, title, [stem for _, stem, _ in pngs])
    with atomic_write(paths["md"]) as f:
        f.write(header(title, meta) + body.rstrip() + "\n")
    return paths


def new_figure(nrows: int = 1, ncols: int = 1, figsize: tuple[float, float] = (7, 4.5), **subplots):
    """``(fig, axes)``: a :class:`matplotlib.figure.Figure` (drawn off-screen, so no display is needed
    and the user's pyplot backend is never switched) and ``fig.subplots(nrows, ncols, **subplots)``;
    UserError if matplotlib is missing. Save it with :func:`write_page`."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError("the experiments draw plots with matplotlib: pip install matplotlib") from None
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **subplots)


def table(header_row: list[str], rows: list[list]) -> str:
    """A markdown table."""
    out = ["| " + " | ".join(header_row) + " |", "|" + "---|" * len(header_row)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


DATA_NAMES = (("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"), ("train.txt", "valid.txt", "test.txt"))


def data_files(data_dir: str) -> dict[str, str]:
    """``{"train", "valid", "test"}`` paths in ``data_dir`` (``ptb.{train,valid,test}.txt`` or
    ``{train,valid,test}.txt``); UserError naming what is missing."""
    if not os.path.isdir(data_dir):
        raise UserError(f"{data_dir}: --data must be a directory holding train/valid/test text files")
    for names in DATA_NAMES:
        paths = [os.path.join(data_dir, n) for n in names]
        if all(os.path.isfile(p) for p in paths):
            return dict(zip(("train", "valid", "test"), paths))
    raise UserError(f"{data_dir}: expected ptb.train.txt, ptb.valid.txt, ptb.test.txt "
                    "or train.txt, valid.txt, test.txt in it")


def default_ptb() -> str:
    """Where the experiments look for PTB when no --data is given: ``$SAMPLEDLM_PTB``, else
    ``../shared/data/ptb`` beside the repository holding this package (a development checkout)."""
    return os.environ.get("SAMPLEDLM_PTB") or os.path.join(os.path.dirname(REPO_DIR), "shared", "data", "ptb")


def shared_data() -> str:
    """The folder holding the PTB folder (:func:`default_ptb`): ``../shared/data`` in a development checkout,
    where the other corpora (War and Peace, the embedding test sets) live too."""
    return os.path.dirname(default_ptb())


def lm_data(data_dir: str | None, quick: bool, scratch: str) -> tuple[dict[str, str], str]:
    """The train/valid/test files of an experiment that trains a language model, and a label.

    ``--data DIR`` wins. Otherwise ``--quick`` uses the built-in corpus (Python's pydoc topics, about
    55k training words; written into ``scratch``), so a smoke test needs no data, and the full
    setting uses PTB (:func:`default_ptb`); without it the full setting asks for --data.
    """
    if data_dir is not None:
        return data_files(data_dir), data_dir
    if quick:
        from sampledlm.data.builtin import write_builtin_corpus

        os.makedirs(scratch, exist_ok=True)
        return write_builtin_corpus(scratch), "built-in corpus (pydoc topics)"
    ptb = default_ptb()
    if not os.path.isdir(ptb):
        raise UserError(f"PTB not found at {ptb}: give --data DIR (train/valid/test files), set $SAMPLEDLM_PTB, "
                        "or use --quick (built-in corpus)")
    return data_files(ptb), "PTB"


_EMPTIED: set[str] = set()


def work_dir(name: str, quick: bool) -> str:
    """Where an experiment keeps its training runs: ``$SAMPLEDLM_CACHE/bench/<name>`` (default
    ``~/.cache/sampledlm``). Finished runs there are reused, so a full experiment can be stopped and
    started again, or its page rebuilt, without retraining; delete the folder to start afresh.
    ``--quick`` uses ``bench/<name>-quick``, emptied on its first use by a process, so a smoke test
    trains with the code at hand (and quick experiments run in one process share their runs)."""
    import shutil

    from sampledlm.data.corpus import cache_dir

    path = os.path.join(cache_dir(), "bench", name + ("-quick" if quick else ""))
    if quick and path not in _EMPTIED:
        shutil.rmtree(path, ignore_errors=True)
        _EMPTIED.add(path)
    os.makedirs(path, exist_ok=True)
    return path
