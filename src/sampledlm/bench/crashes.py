"""``crashes``: every writing command killed with SIGKILL at many moments, in the manner of SQLite's crash tests.

For each writer (``vocab``, ``ngram train``, ``train`` of a feed-forward, a recurrent and a binary-objective
model with mid-epoch checkpoints, ``maxent train``) the command is first run to completion in a fresh
directory: that gives its wall time T and the reference result (the output file's bytes for ``vocab`` and
``ngram train``; validation and test perplexity for the models). Then, for i = 0..N-1, a fresh run is killed
with SIGKILL at (i + 1/2) T / N seconds after it started (N = 20; ``--quick``: 3 per writer, the two file
writers), and
the bench checks what a user would find and do:

- the output: absent, or complete and loadable (the reference bytes, a model that evaluates, or a run
  directory ``--resume`` continues); anything else is **torn**;
- recovery: ``train --resume DIR`` (or, when the run stopped before its first checkpoint, the same command),
  ``maxent train`` and the writers of one file run again; the final numbers must equal the reference's
  (**differs** otherwise) and a model must be there (**not recovered** otherwise);
- no temporary file of ours survives the recovery run (a killed writer's ``.NAME.HOST.PID.*.tmp`` is swept by
  the next write of the same file).

A kill that lands after the command finished is counted as "missed" (the command ran faster that time).
The commands and the classification reuse :mod:`.faults` (kill points at chosen moments) and
:mod:`.faults_engine` (running commands, fixtures, final numbers).
"""

from __future__ import annotations

import concurrent.futures as futures
import hashlib
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass

from .faults import _step, inspect_killed, jobs, now_side, recover
from .faults_engine import (CORPUS, NEURAL_COMMON, Ctx, Fixtures, Side, _last_line, final_numbers, is_temp,
                            snapshot, write_corpus)
from .report import new_figure, stamp, table, write_page

NAME = "crashes"
KILLS_PER_WRITER = 20


@dataclass(frozen=True)
class Writer:
    """A writing command: ``kind`` is ``file`` (one output file: compared byte for byte), or the family a
    model directory is evaluated as (``neural``, ``maxent``; ``ngram`` for an ARPA file)."""

    name: str
    kind: str
    argv: tuple[str, ...]
    out: str


WRITERS = [
    Writer("vocab", "file", ("vocab", "big.txt", "-o", "vocab.txt"), "vocab.txt"),
    Writer("ngram train", "ngram", ("ngram", "train", "--train", "big.txt", "--order", "5", "-o", "k5.arpa"),
           "k5.arpa"),
    Writer("train ffnn", "neural", ("train", "--train", "tiny.txt", "--valid", "va.txt", "-o", "ffnn", "--model",
                                    "ffnn", "--order", "3", "-d", "16", "--hidden", "32", "-b", "32", "--epochs", "2",
                                    "--checkpoint-every", "20", *NEURAL_COMMON), "ffnn"),
    Writer("train gru", "neural", ("train", "--train", "tiny.txt", "--valid", "va.txt", "-o", "gru", "--model", "gru",
                                   "-d", "16", "--hidden", "16", "-b", "8", "--bptt", "20", "--epochs", "2",
                                   "--checkpoint-every", "10", *NEURAL_COMMON), "gru"),
    Writer("train binary", "neural", ("train", "--train", "tiny.txt", "--valid", "va.txt", "-o", "binary", "--model",
                                      "ffnn", "--order", "3", "-d", "16", "--hidden", "32", "-b", "32", "--epochs", "2",
                                      "--objective", "binary", "--neg-rate", "0.5", "--checkpoint-every", "20",
                                      *NEURAL_COMMON), "binary"),
    Writer("maxent train", "maxent", ("maxent", "train", "--train", "tiny.txt", "--valid", "va.txt", "-o", "melm",
                                      "--epochs", "2"), "melm"),
]
QUICK_WRITERS = ("vocab", "ngram train")  # the fast ones: the neural kill points are in `bench faults --quick`


@dataclass
class Kill:
    writer: str
    at: float  # seconds after the start
    killed: str  # "killed" or "missed"
    state: str  # what was left: no output / loadable / resumable / TORN ...
    recovery: str
    final: str
    same: bool | None
    temps_after: str  # temporary files left after the recovery run

    def verdict(self) -> str:
        if self.state.startswith("TORN"):
            return "torn"
        if self.temps_after != "none":
            return "temp left"
        if self.same is None:
            return "not recovered"
        return "same" if self.same else "differs"


def _digest(path: str) -> str | None:
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return "sha1 " + hashlib.sha1(f.read()).hexdigest()[:12]


class _Run:
    """One writer on one side: a directory with the corpus, the command, and how to read its result."""

    def __init__(self, writer: Writer, side: Side, fx: Fixtures, base: str):
        self.w, self.side, self.fx = writer, side, fx
        self.work, self.cache = os.path.join(base, "work"), os.path.join(base, "cache")
        os.makedirs(self.work)
        for name in CORPUS:
            shutil.copy(os.path.join(fx.root, name), os.path.join(self.work, name))
        self.ctx = Ctx(side, self.work, self.cache, fx)

    def result(self) -> str:
        """The comparable result in this directory: bytes for files, numbers for models ('none': nothing)."""
        out = os.path.join(self.work, self.w.out)
        if self.w.kind == "file":
            return _digest(out) or "none"
        numbers = final_numbers(self.w, self.work, self.side, self.cache)
        if not numbers:
            return "none"
        return f"{numbers['valid']}, {numbers['test']}" + (f", {_digest(out)}" if self.w.kind == "ngram" else "")

    def inspect(self) -> str:
        if self.w.kind != "file":
            return inspect_killed(self.w, self.ctx)
        temps = [p for p in snapshot(self.work) if is_temp(p)]
        left = f"; temporary files: {', '.join(sorted(temps)[:2])}" if temps else ""
        return ("no output" if not os.path.exists(os.path.join(self.work, self.w.out)) else "complete file") + left

    def recover(self) -> str:
        if self.w.kind in ("neural", "maxent"):
            return recover(self.w, self.ctx, list(self.w.argv))
        if os.path.exists(os.path.join(self.work, self.w.out)):  # complete (or torn: the comparison says which)
            return "output present: nothing to redo"
        return f"same command: {_step(self.ctx.run(list(self.w.argv), timeout=600))}"


def reference(writer: Writer, side: Side, fx: Fixtures, scratch: str) -> tuple[float, str]:
    """(wall seconds, result) of an uninterrupted run."""
    base = tempfile.mkdtemp(prefix=f"ref-{writer.out}-", dir=scratch)
    try:
        run = _Run(writer, side, fx, base)
        r = run.ctx.run(list(writer.argv), timeout=600)
        if r.rc != 0:
            raise RuntimeError(f"{' '.join(writer.argv)} failed: {_last_line(r.stderr)}")
        return r.seconds, run.result()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def kill_once(writer: Writer, at: float, ref: str, side: Side, fx: Fixtures, scratch: str) -> Kill:
    base = tempfile.mkdtemp(prefix=f"kill-{writer.out}-", dir=scratch)
    try:
        run = _Run(writer, side, fx, base)
        t0 = time.perf_counter()
        r = run.ctx.run(list(writer.argv), watch=lambda: signal.SIGKILL if time.perf_counter() - t0 >= at else None,
                        poll=0.005, timeout=600)
        killed = "killed" if r.sent else "missed"
        state = run.inspect()
        recovery = run.recover()
        final = run.result()
        temps = sorted(p for p in snapshot(run.work) if is_temp(p))
        same = None if final == "none" else final == ref
        return Kill(writer.name, round(at, 2), killed, state, recovery, final, same, ", ".join(temps) or "none")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    """Kill every writer at :data:`KILLS_PER_WRITER` moments (``quick``: 3, two writers); write the page."""
    meta = stamp()
    t_start = time.time()
    writers = [w for w in WRITERS if w.name in QUICK_WRITERS] if quick else WRITERS
    n = 3 if quick else KILLS_PER_WRITER
    with tempfile.TemporaryDirectory(prefix="sampledlm-crashes-") as scratch:
        corpus = os.path.join(scratch, "corpus")
        write_corpus(corpus)
        side = now_side()
        os.makedirs(os.path.join(scratch, "fx"))
        fx = Fixtures(side, os.path.join(scratch, "fx"), corpus)
        refs = {}
        for w in writers:
            refs[w.name] = reference(w, side, fx, scratch)
            print(f"crashes: {w.name}: uninterrupted {refs[w.name][0]:.1f} s, {refs[w.name][1]}", file=sys.stderr,
                  flush=True)
        kills: list[Kill] = []
        with futures.ThreadPoolExecutor(max_workers=jobs()) as pool:
            todo = [pool.submit(kill_once, w, (i + 0.5) * refs[w.name][0] / n, refs[w.name][1], side, fx, scratch)
                    for w in writers for i in range(n)]
            for f in futures.as_completed(todo):
                k = f.result()
                kills.append(k)
                print(f"crashes: {k.writer} at {k.at:.2f} s: {k.killed}, {k.state[:60]} -> {k.verdict()}",
                      file=sys.stderr, flush=True)
    kills.sort(key=lambda k: ([w.name for w in writers].index(k.writer), k.at))
    data = collect(writers, refs, kills, side, quick, time.time() - t_start)
    write_page(out_dir, NAME, "Crash tests: every writer killed at many moments", meta, data, render(data),
               figure=figure(data))
    return data


VERDICTS = ("same", "differs", "torn", "temp left", "not recovered")


def collect(writers, refs, kills, side, quick, seconds) -> dict:
    rows = []
    for w in writers:
        ks = [k for k in kills if k.writer == w.name]
        v = Counter(k.verdict() for k in ks)
        states = Counter(_state_class(k.state) for k in ks)
        rows.append({"writer": w.name, "command": "sampledlm " + " ".join(w.argv), "uninterrupted_s": round(
            refs[w.name][0], 2), "reference": refs[w.name][1], "tried": len(ks),
            "killed": sum(k.killed == "killed" for k in ks), **{x: v[x] for x in VERDICTS}, "states": dict(states)})
    return {"setup": {"quick": quick, "kills_per_writer": 3 if quick else KILLS_PER_WRITER, "now": side.rev,
                      "jobs": jobs(), "wall_seconds": round(seconds, 1)},
            "writers": rows, "kills": [asdict(k) | {"verdict": k.verdict()} for k in kills],
            "totals": {x: sum(r[x] for r in rows) for x in ("tried", "killed", *VERDICTS)}}


def _state_class(state: str) -> str:
    for prefix in ("TORN", "no output", "loadable", "complete file", "not loadable yet", "run directory without",
                   "no model"):
        if state.startswith(prefix):
            return prefix
    return state[:40]


def render(data: dict) -> str:
    s, t = data["setup"], data["totals"]
    out = [
        f"Each writing command is run once to completion (its time T and reference result), then "
        f"{s['kills_per_writer']} fresh runs are killed with SIGKILL at (i + 1/2) T / {s['kills_per_writer']} s "
        "(i = 0, 1, ...). After each kill: what is left must be nothing, or complete and loadable (never torn); "
        "the user's recovery (`train --resume DIR`, or the same command again) must reach the reference numbers "
        "(or bytes), and no temporary file may survive it. Method and definitions: `sampledlm.bench.crashes`.", "",
        f"- commit {s['now']}; {s['jobs']} commands at a time; wall time {s['wall_seconds']:.0f} s", "",
        f"**Totals**: {t['tried']} kill points ({t['killed']} landed while the command ran), torn outputs "
        f"{t['torn']}, recoveries that differ {t['differs']}, not recovered {t['not recovered']}, temporary files "
        f"left {t['temp left']}, same as the uninterrupted run {t['same']}.", "",
        table(["writer", "T (s)", "tried", "killed", "same", "differs", "torn", "temp left", "not recovered",
               "what the kill left"],
              [[r["writer"], f"{r['uninterrupted_s']:.1f}", r["tried"], r["killed"], r["same"], r["differs"],
                r["torn"], r["temp left"], r["not recovered"],
                ", ".join(f"{k} {v}" for k, v in sorted(r["states"].items()))] for r in data["writers"]]),
        "", "Commands:", "",
    ]
    out += [f"- {r['writer']}: `{r['command']}` (reference: {r['reference']})" for r in data["writers"]]
    out += ["", "## Every kill", "",
            table(["writer", "at (s)", "kill", "left", "recovery", "final", "verdict"],
                  [[k["writer"], f"{k['at']:.2f}", k["killed"], k["state"][:90].replace("|", "/"),
                    k["recovery"][:90].replace("|", "/"), k["final"][:60], f"**{k['verdict']}**"]
                   for k in data["kills"]])]
    return "\n".join(out) + "\n"


def figure(data: dict):
    fig, ax = new_figure(figsize=(7, 3.5))
    names = [r["writer"] for r in data["writers"]]
    bottom = [0] * len(names)
    for verdict, colour in zip(VERDICTS, ("tab:green", "tab:red", "black", "tab:orange", "tab:purple")):
        vals = [r[verdict] for r in data["writers"]]
        ax.barh(names, vals, left=bottom, color=colour, label=verdict)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xlabel("kill points")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("SIGKILL at evenly spread moments: outcome after recovery")
    fig.tight_layout()
    return fig
