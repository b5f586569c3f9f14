"""``crashes``: every writing command killed with SIGKILL at many moments, in the manner of SQLite's crash tests.

For each writer (``vocab``, ``ngram train`` in memory and bounded (``--memory``, spilling sorted runs to
``--temp-dir``), ``ngram build-binary``, ``train`` of a feed-forward, a recurrent and a binary-objective
model with mid-epoch checkpoints, ``maxent train``, ``embed train``) the command is first run to completion
in a fresh directory: that gives its wall time T and the reference result (the output file's bytes for
``vocab`` and ``ngram train``; validation and test perplexity for the models; the bytes of every array and
the test perplexity of a binary n-gram directory; the vectors of an embedding directory, which
``embed train --threads 1 --seed S`` makes bit for bit the same every run). Then, for i = 0..N-1, a fresh
run is killed with SIGKILL at (i + 1/2) T / N seconds after it started (N = 20). The writers that write
their output at the end (:data:`LATE_WRITERS`: a short write after a long computation, which evenly spread
kills would mostly miss -- and the kills run several at a time, slower than the T measured alone) are also
killed M = 10 times during that write: M/2 times at (j + 1/2) W / (M/2) seconds after the output's first file
(or its temporary file) appeared, W being how long the uninterrupted run took from there to its end, and M/2
times at W / 4, W / 16, ..., W / 4^(M/2) (a write of milliseconds followed by the command's exit). ``--quick``:
:data:`QUICK_KILLS` of each, :data:`QUICK_WRITERS` only. After each kill the bench checks what a user would
find and do:

- the output: absent, or complete and loadable (the reference bytes, a model that evaluates, or a run
  directory ``--resume`` continues); anything else is **torn**. A model directory is complete when its
  ``config.json`` (written last) is there: then every file must load (an embedding directory: the
  directory, ``vectors.bin`` and ``vectors.txt``, all three the same vectors; a binary n-gram directory:
  its checksums and an evaluation), else it is torn;
- recovery: ``train --resume DIR`` (or, when the run stopped before its first checkpoint, the same command),
  ``maxent train`` and the writers of one file run again; ``ngram build-binary`` and ``embed train`` run
  again too when the killed run left no ``config.json`` -- without ``--force``: what a killed run left must
  not stand in the way of the same command (when it did finish, there is nothing to redo). The final
  numbers must equal the reference's (**differs** otherwise); a model must be there and the recovery must not
  end refused -- neither resumable nor redone, as a run whose checkpoint pointer names half a checkpoint
  was (**not recovered** otherwise);
- no temporary file of ours survives the recovery run (a killed writer's ``.NAME.HOST.PID.*.tmp`` is swept by
  the next write of the same file; a killed bounded ``ngram train``'s spill directory under ``--temp-dir`` by
  the next bounded run).

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
from .faults_engine import (CORPUS, NEURAL_COMMON, Ctx, Fixtures, Side, _first_error, _last_line, final_numbers,
                            is_temp, last_json, ppl_of, run_command, snapshot, write_corpus)
from benchmarks.report import new_figure, stamp, table, write_page

NAME = "crashes"
KILLS_PER_WRITER = 20
WRITE_KILLS = 10  # more, spread over the final write of the writers that write at the end (:data:`LATE_WRITERS`)
QUICK_KILLS = (2, 2)  # --quick: kill points over the run, and over the final write
ENV_ONLY = "SAMPLEDLM_CRASHES_ONLY"  # comma-separated writer names: run just those (working on the bench)


@dataclass(frozen=True)
class Writer:
    """A writing command: ``kind`` is ``file`` (one output file: compared byte for byte), or the family a
    model directory is evaluated as (``neural``, ``maxent``; ``ngram`` for an ARPA file; ``ngram-dir`` for a
    binary n-gram directory; ``embed`` for an embedding directory).

    ``setup``: commands run once (in the fixtures' directory) to make the writer's inputs, ``inputs``: the
    files they make, copied beside the corpus; ``spill``: a directory made empty beside the corpus, handed to
    the command as its ``--temp-dir`` (it must be empty again after the recovery run)."""

    name: str
    kind: str
    argv: tuple[str, ...]
    out: str
    setup: tuple[tuple[str, ...], ...] = ()
    inputs: tuple[str, ...] = ()
    spill: str | None = None


WRITERS = [
    Writer("vocab", "file", ("vocab", "big.txt", "-o", "vocab.txt"), "vocab.txt"),
    Writer("ngram train", "ngram", ("ngram", "train", "--train", "big.txt", "--order", "5", "-o", "k5.arpa"),
           "k5.arpa"),
    Writer("ngram train --memory", "ngram", ("ngram", "train", "--train", "big.txt", "--order", "5", "--memory", "400M",
                                             "--temp-dir", "spill", "-o", "m5.arpa"), "m5.arpa", spill="spill"),
    Writer("ngram build-binary", "ngram-dir", ("ngram", "build-binary", "k5.arpa", "-o", "k5.bin"), "k5.bin",
           setup=(("ngram", "train", "--train", "big.txt", "--order", "5", "-o", "k5.arpa"),), inputs=("k5.arpa",)),
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
    # 300 dimensions and every word (min count 1): a 14 MB vectors.txt, so that kills land while the files are written
    Writer("embed train", "embed", ("embed", "train", "big.txt", "-o", "vec", "--dim", "300", "--epochs", "1",
                                    "--min-count", "1", "--threads", "1", "--seed", "1"), "vec"),
]
#: The fast ones (the neural kill points are in `bench faults --quick`; embed train, a few seconds a run, would add
#: half a minute: its kills between files are in its own tests).
QUICK_WRITERS = ("vocab", "ngram train", "ngram build-binary")
#: Writers that write their output at the end (a short moment of a long run): killed in that write too.
LATE_WRITERS = ("file", "ngram", "ngram-dir", "embed", "maxent")


@dataclass
class Kill:
    writer: str
    at: float  # seconds after the start (``phase`` "run") or after the write began ("write")
    killed: str  # "killed" or "missed"
    state: str  # what was left: no output / loadable / resumable / TORN ...
    recovery: str
    final: str
    same: bool | None
    temps_after: str  # temporary files left after the recovery run
    phase: str = "run"
    stuck: bool = False  # the user's last recovery step was refused (not because the killed run had finished)

    def verdict(self) -> str:
        if self.state.startswith("TORN"):
            return "torn"
        if self.temps_after != "none":
            return "temp left"
        if self.same is None or self.stuck:
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
        for name in (*CORPUS, *writer.inputs):
            shutil.copy(os.path.join(fx.root, name), os.path.join(self.work, name))
        if writer.spill:
            os.makedirs(os.path.join(self.work, writer.spill))
        self.ctx = Ctx(side, self.work, self.cache, fx)

    @property
    def out(self) -> str:
        return os.path.join(self.work, self.w.out)

    def writing(self) -> bool:
        """The command has begun to write its output: a file of the output directory (its lock aside), or the
        output file or its temporary ``.NAME.*`` beside it."""
        if self.w.kind in ("embed", "ngram-dir", "maxent"):
            try:
                return any(n != ".lock" for n in os.listdir(self.out))
            except OSError:
                return False
        prefix = "." + os.path.basename(self.w.out) + "."
        return os.path.exists(self.out) or any(n.startswith(prefix) for n in os.listdir(os.path.dirname(self.out)))

    def complete(self) -> bool:
        """The output is there: the file, or a model directory's config.json (written last)."""
        if self.w.kind in ("embed", "ngram-dir"):
            return os.path.isfile(os.path.join(self.out, "config.json"))
        return os.path.exists(self.out)

    def result(self) -> str:
        """The comparable result in this directory: bytes for files, numbers for models ('none': nothing)."""
        if self.w.kind == "file":
            return _digest(self.out) or "none"
        if self.w.kind == "embed":
            return _embed_check(self.out)[1] or "none"
        if self.w.kind == "ngram-dir":
            return self._ngram_dir_check()[1] or "none"
        numbers = final_numbers(self.w, self.work, self.side, self.cache)
        if not numbers:
            return "none"
        return f"{numbers['valid']}, {numbers['test']}" + (f", {_digest(self.out)}" if self.w.kind == "ngram" else "")

    def temporaries(self) -> list[str]:
        """Our temporary files in the directory, and whatever is in the writer's --temp-dir."""
        spill = self.w.spill
        temps = [p for p in snapshot(self.work) if is_temp(p) and not (spill and p.startswith(spill + "/"))]
        if self.w.spill:
            temps += [os.path.join(self.w.spill, n) for n in sorted(os.listdir(os.path.join(self.work, self.w.spill)))]
        return sorted(temps)

    def inspect(self) -> str:
        temps = self.temporaries()
        left = f"; temporary files: {', '.join(temps[:2])}" if temps else ""
        if self.w.kind in ("neural", "maxent", "ngram"):
            return inspect_killed(self.w, self.ctx) + (left if self.w.spill else "")
        if not os.path.exists(self.out):
            return "no output" + left
        if self.w.kind == "file":
            return "complete file" + left
        if not self.complete():
            held = sorted(n for n in os.listdir(self.out) if n != ".lock")
            if not held:
                return "no model (an empty directory: its lock only)" + left
            return (f"no model (no config.json; holds {len(held)} files: {', '.join(held[:3])}"
                    f"{', ...' if len(held) > 3 else ''})" + left)
        state = (_embed_check(self.out) if self.w.kind == "embed" else self._ngram_dir_check())[0]
        return state + left

    def _ngram_dir_check(self) -> tuple[str, str | None]:
        """(state, result) of a binary n-gram directory: its checksums verified, evaluated on te.txt."""
        if not self.complete():
            return "no model", None
        for argv in (["ngram", "build-binary", "--verify", self.w.out],
                     ["ngram", "eval", self.w.out, "--test", "te.txt", "--json"]):
            r = self.ctx.run(argv)
            if r.rc != 0:
                return f"TORN: {argv[1]} {'refused' if not r.traceback else 'crashed'}: {_first_error(r)[:100]}", None
        try:
            ppl = ppl_of(last_json(r.stdout))
        except (ValueError, KeyError) as e:
            return f"TORN: no perplexity ({e})", None
        return "loadable", f"{_dir_digest(self.out)}, test {ppl:.2f}"

    def recover(self) -> tuple[str, bool]:
        """(what the user's recovery did, whether it ended refused: the run can be neither resumed nor redone)."""
        before = len(self.ctx.results)
        if self.w.kind in ("neural", "maxent"):
            steps = recover(self.w, self.ctx, list(self.w.argv))
        elif self.complete():  # complete (or torn: the comparison says which)
            steps = "output present: nothing to redo"
        else:
            steps = f"same command: {_step(self.ctx.run(list(self.w.argv), timeout=600))}"
        last = self.ctx.results[-1] if len(self.ctx.results) > before else None
        finished = last is not None and ("already finished" in last.stderr  # a neural run: nothing to resume
                                         or self.w.kind == "maxent" and "already holds" in last.stderr)
        return steps, last is not None and last.rc != 0 and not finished


def _dir_digest(path: str) -> str:
    """sha1 of a directory's files (names and bytes; not its lock, nor its provenance and model card, which record
    the date and time of the write and so differ between two runs of one command)."""
    h = hashlib.sha1()
    for name in sorted(os.listdir(path)):
        if name in (".lock", "provenance.json", "README.md") or not os.path.isfile(os.path.join(path, name)):
            continue
        h.update(name.encode() + b"\0")
        with open(os.path.join(path, name), "rb") as f:
            h.update(f.read())
    return "sha1 " + h.hexdigest()[:12]


def _embed_check(out: str) -> tuple[str, str | None]:
    """(state, result) of an embedding directory: the directory, vectors.bin and vectors.txt must all load and
    hold the same words and vectors (result: their sha1). Read here, by this package's own readers."""
    import numpy as np

    from sampledlm.embed.formats import load_vectors
    from sampledlm.errors import UserError

    if not os.path.isfile(os.path.join(out, "config.json")):
        return "no model", None
    digests = {}
    for name in ("directory", "vectors.bin", "vectors.txt"):
        try:
            wv = load_vectors(out if name == "directory" else os.path.join(out, name))
        except (UserError, OSError) as e:
            return f"TORN: {name} does not load: {str(e)[:100]}", None
        except Exception as e:  # noqa: BLE001 -- a reader that crashes on what the writer left is torn too
            return f"TORN: {name}: {type(e).__name__}: {str(e)[:80]}", None
        h = hashlib.sha1("\n".join(wv.words).encode())
        h.update(np.ascontiguousarray(wv.vectors, dtype="<f4").tobytes())
        digests[name] = h.hexdigest()[:12]
    if len(set(digests.values())) != 1:
        return "TORN: the three files hold different vectors (" + ", ".join(f"{k} {v}" for k, v in digests.items()) \
            + ")", None
    return "loadable", f"vectors sha1 {digests['directory']}"


def prepare(writer: Writer, side: Side, fx: Fixtures) -> None:
    """Make the writer's inputs once, in the fixtures' directory."""
    if all(os.path.exists(os.path.join(fx.root, n)) for n in writer.inputs):
        return
    for argv in writer.setup:
        r = run_command(side, list(argv), fx.root, fx.cache, timeout=600)
        if r.rc != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {_last_line(r.stderr)}")


def reference(writer: Writer, side: Side, fx: Fixtures, scratch: str) -> tuple[float, float | None, str]:
    """(wall seconds, seconds from the first write of the output to the end (None: not measured), result) of an
    uninterrupted run."""
    base = tempfile.mkdtemp(prefix=f"ref-{writer.out}-", dir=scratch)
    try:
        run = _Run(writer, side, fx, base)
        t0, began = time.perf_counter(), []

        def watch():
            if writer.kind in LATE_WRITERS and not began and run.writing():
                began.append(time.perf_counter() - t0)

        r = run.ctx.run(list(writer.argv), watch=watch, poll=0.005, timeout=600)
        if r.rc != 0:
            raise RuntimeError(f"{' '.join(writer.argv)} failed: {_last_line(r.stderr)}")
        return r.seconds, (max(r.seconds - began[0], 0.01) if began else None), run.result()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def kill_once(writer: Writer, phase: str, at: float, ref: str, side: Side, fx: Fixtures, scratch: str) -> Kill:
    """Run ``writer`` and kill it ``at`` seconds after it started (``phase`` "run") or after it began to write its
    output ("write"); then inspect, recover and compare."""
    base = tempfile.mkdtemp(prefix=f"kill-{writer.out}-", dir=scratch)
    try:
        run = _Run(writer, side, fx, base)
        t0, began = time.perf_counter(), []

        def watch():
            now = time.perf_counter()
            if phase == "run":
                return signal.SIGKILL if now - t0 >= at else None
            if not began:
                if run.writing():
                    began.append(now)
                return None
            return signal.SIGKILL if now - began[0] >= at else None

        r = run.ctx.run(list(writer.argv), watch=watch, poll=0.005, timeout=600)
        killed = "killed" if r.sent else "missed"
        state = run.inspect()
        recovery, stuck = run.recover()
        final = run.result()
        temps = run.temporaries()
        same = None if final == "none" else final == ref
        return Kill(writer.name, round(at, 3), killed, state, recovery, final, same, ", ".join(temps) or "none", phase,
                    stuck)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def schedule(writer: Writer, seconds: float, write_seconds: float | None, quick: bool) -> list[tuple[str, float]]:
    """The kill points of ``writer``: (phase, seconds), spread evenly over the run; and over its final write W,
    half evenly, half at W / 4, W / 16, W / 64, ... (a write of a few milliseconds at the start of a W that
    includes the command's exit -- maxent's -- is hit too)."""
    n, m = QUICK_KILLS if quick else (KILLS_PER_WRITER, WRITE_KILLS)
    points = [("run", (i + 0.5) * seconds / n) for i in range(n)]
    if write_seconds is not None:
        even = (m + 1) // 2
        points += [("write", (j + 0.5) * write_seconds / even) for j in range(even)]
        points += [("write", write_seconds / 4 ** k) for k in range(1, m - even + 1)]
    return points


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    """Kill every writer at :data:`KILLS_PER_WRITER` moments and the late writers :data:`WRITE_KILLS` more times
    (``quick``: :data:`QUICK_KILLS`, :data:`QUICK_WRITERS`); write the page."""
    meta = stamp()
    t_start = time.time()
    writers = [w for w in WRITERS if w.name in QUICK_WRITERS] if quick else WRITERS
    only = [x.strip() for x in os.environ.get(ENV_ONLY, "").split(",") if x.strip()]
    if only:
        writers = [w for w in WRITERS if w.name in only]
    with tempfile.TemporaryDirectory(prefix="sampledlm-crashes-") as scratch:
        corpus = os.path.join(scratch, "corpus")
        write_corpus(corpus)
        side = now_side()
        os.makedirs(os.path.join(scratch, "fx"))
        fx = Fixtures(side, os.path.join(scratch, "fx"), corpus)
        refs = {}
        for w in writers:
            prepare(w, side, fx)
            refs[w.name] = reference(w, side, fx, scratch)
            seconds, write_seconds, result = refs[w.name]
            print(f"crashes: {w.name}: uninterrupted {seconds:.1f} s"
                  + (f" (writing its output: the last {write_seconds:.2f} s)" if write_seconds else "")
                  + f", {result}", file=sys.stderr, flush=True)
        kills: list[Kill] = []
        with futures.ThreadPoolExecutor(max_workers=jobs()) as pool:
            todo = [pool.submit(kill_once, w, phase, at, refs[w.name][2], side, fx, scratch)
                    for w in writers for phase, at in schedule(w, refs[w.name][0], refs[w.name][1], quick)]
            for f in futures.as_completed(todo):
                k = f.result()
                kills.append(k)
                print(f"crashes: {k.writer} at {_when(k.phase, k.at)}: {k.killed}, {k.state[:60]} -> {k.verdict()}",
                      file=sys.stderr, flush=True)
    kills.sort(key=lambda k: ([w.name for w in writers].index(k.writer), k.phase != "run", k.at))
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
        seconds_w, write_w, ref = refs[w.name]
        rows.append({"writer": w.name, "command": "sampledlm " + " ".join(w.argv),
                     "uninterrupted_s": round(seconds_w, 2), "write_s": None if write_w is None else round(write_w, 3), "reference": ref,
                     "setup": ["sampledlm " + " ".join(a) for a in w.setup], "tried": len(ks),
                     "killed": sum(k.killed == "killed" for k in ks),
                     "in_write": sum(k.killed == "killed" and k.phase == "write" for k in ks),
                     **{x: v[x] for x in VERDICTS}, "states": dict(states)})
    n, m = QUICK_KILLS if quick else (KILLS_PER_WRITER, WRITE_KILLS)
    return {"setup": {"quick": quick, "kills_per_writer": n, "write_kills": m, "late_writers": list(LATE_WRITERS),
                      "now": side.rev, "jobs": jobs(), "wall_seconds": round(seconds, 1)},
            "writers": rows, "kills": [asdict(k) | {"verdict": k.verdict()} for k in kills],
            "totals": {x: sum(r[x] for r in rows) for x in ("tried", "killed", "in_write", *VERDICTS)}}


def _state_class(state: str) -> str:
    for prefix in ("TORN", "no output", "loadable", "complete file", "not loadable yet", "run directory without",
                   "no model"):
        if state.startswith(prefix):
            return prefix
    return state[:40]


def _when(phase: str, at: float) -> str:
    return f"{at:.2f} s" if phase == "run" else f"write + {at:.3f} s"


def render(data: dict) -> str:
    s, t = data["setup"], data["totals"]
    n, m = s["kills_per_writer"], s.get("write_kills", 0)
    late = [r["writer"] for r in data["writers"] if r.get("write_s") is not None]
    out = [
        f"Each writing command is run once to completion (its time T and reference result), then {n} fresh runs "
        f"are killed with SIGKILL at (i + 1/2) T / {n} s (i = 0, 1, ...)"
        + (f"; the commands that write their output at the end ({', '.join(late)}) are also killed {m} times "
           f"during that write: {(m + 1) // 2} times at (j + 1/2) W / {(m + 1) // 2} s after the output's first "
           "file (or its temporary file) appeared, W being how long the uninterrupted run took from there to its "
           f"end, and {m - (m + 1) // 2} times at W / 4, W / 16, ... (W / 4^k: a write of milliseconds before "
           "the command's exit is hit too)" if late and m else "")
        + ". After each kill: what is left must be nothing, or complete and loadable (never torn); "
        "the user's recovery (`train --resume DIR`, or the same command again, without `--force`) must reach the "
        "reference numbers (or bytes) and not end refused (not recovered otherwise), and no temporary file may "
        "survive it. The kills run several at a time "
        "while T was measured alone, so a killed run is slower than T and the last kill points of a run can land "
        "before its write; the kills during the write do not depend on that. `embed train` with one thread and a "
        "seed writes the same vectors bit for bit on every run: its reference is their digest, the same from the "
        "directory, vectors.bin and vectors.txt. Method and definitions: `tests/campaigns/crashes.py`.", "",
        f"- commit {s['now']}; {s['jobs']} commands at a time; wall time {s['wall_seconds']:.0f} s", "",
        f"**Totals**: {t['tried']} kill points ({t['killed']} landed while the command ran, {t.get('in_write', 0)} "
        f"of them while it wrote its output), torn outputs {t['torn']}, recoveries that differ {t['differs']}, not "
        f"recovered {t['not recovered']}, temporary files left {t['temp left']}, same as the uninterrupted run "
        f"{t['same']}.", "",
        table(["writer", "T (s)", "W (s)", "tried", "killed", "in the write", "same", "differs", "torn", "temp left",
               "not recovered", "what the kill left"],
              [[r["writer"], f"{r['uninterrupted_s']:.1f}", "-" if r.get("write_s") is None else f"{r['write_s']:.2f}",
                r["tried"], r["killed"], r.get("in_write", 0), r["same"], r["differs"], r["torn"], r["temp left"],
                r["not recovered"], ", ".join(f"{k} {v}" for k, v in sorted(r["states"].items()))]
               for r in data["writers"]]),
        "", "Commands:", "",
    ]
    out += [f"- {r['writer']}: `{r['command']}`"
            + (f" (input made once by `{'`, `'.join(r['setup'])}`)" if r.get("setup") else "")
            + f" (reference: {r['reference']})" for r in data["writers"]]
    out += ["", "## Every kill", "",
            table(["writer", "at", "kill", "left", "recovery", "final", "verdict"],
                  [[k["writer"], _when(k.get("phase", "run"), k["at"]), k["killed"], k["state"][:90].replace("|", "/"),
                    k["recovery"][:90].replace("|", "/"), k["final"][:60], f"**{k['verdict']}**"]
                   for k in data["kills"]])]
    return "\n".join(out) + "\n"


def figure(data: dict):
    fig, ax = new_figure(figsize=(8, 0.35 * len(data["writers"]) + 1.8))
    names = [r["writer"] for r in data["writers"]]
    bottom = [0] * len(names)
    for verdict, colour in zip(VERDICTS, ("tab:green", "tab:red", "black", "tab:orange", "tab:purple")):
        vals = [r[verdict] for r in data["writers"]]
        ax.barh(names, vals, left=bottom, color=colour, label=verdict)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.invert_yaxis()  # the page's order, top down
    ax.set_xlabel("kill points")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title("SIGKILL over the run and during the final write: outcome after recovery", fontsize=10)
    fig.tight_layout()
    return fig
