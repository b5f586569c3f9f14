"""``faults``: the fault campaign (bad inputs, faults and kills a new user would try) re-run as a table:
each case, what happened before, what happens now.

Every case (:mod:`.faults_cases`: bad input files, tampered models, nonsense flags, full disks,
read-only directories, Ctrl-C, two writers, ...) runs ``python -m sampledlm ...`` in a subprocess,
in a fresh temporary directory, with a timeout, and is classified from what can be observed only:
the exit status, stderr, stdout, and the files of the directory before and after.

Categories (worst first; a case gets the worst that applies):

- ``segfault``: killed by a signal the case did not send (rc < 0), or rc 139;
- ``lost file``: a file the user had is changed or gone;
- ``wrong result``: exit 0 but the number (or the written file) differs from a reference computed
  another way (the same text from a file, a sentence scored alone, an independent ARPA back-off
  scorer, the uncompressed file, ...), or nonsense was accepted and produced a number or a model;
- ``traceback``: a Python traceback on stderr;
- ``hang``: still running at the case's timeout;
- ``leftover``: temporary files (hidden ``.*.tmp``) or a half-written output left behind;
- ``other defect``: exit 0 and no number wrong, but the case's documented intent is not met (file
  modes, a help text, a message that does not say what to do);
- ``unclear error``: exit != 0 without a traceback, but the message is long or does not name the
  problem (the file, the flag);
- ``clean error``: exit != 0, a short message on stderr naming the problem, no traceback;
- ``ok``: the right numbers or the intended output;
- ``n/a``: the old code has no such command or option (click's "No such command/option").

Kill points (:data:`KILLS`): ``sampledlm train`` (a tiny FFNN, a tiny GRU, a binary-objective FFNN),
``sampledlm maxent train`` and ``sampledlm ngram train`` are killed with SIGKILL at several moments
(found by polling the output directory), the directory left behind is inspected (loadable, or clearly
resumable, never torn), then the run is recovered (neural: ``--resume``, or the same command when the
run stopped before its first checkpoint; maxent and n-gram: the same command again) and its final
validation and test numbers are compared with an uninterrupted run of the same command and seed.

The "before" column runs the same cases against an older commit, checked out with ``git worktree``
into a temporary directory (removed afterwards) and run with ``PYTHONPATH=<worktree>/src``; where the
old command line differed (``maxent train TRAIN VALID -o M``, ``eval RUN --weight W``) a case carries
the old form. ``SAMPLEDLM_FAULTS_BEFORE`` chooses the commit: unset = ``762f3e9`` (the main the
campaign was run on; for ``--quick``: no before column), ``none`` = skip it. It is skipped, with a
note on the page, outside a git checkout or when the commit is unknown.

Disk full: standard output sent to ``/dev/full`` (ENOSPC), and ``prlimit --fsize`` (EFBIG, the same
write-error path) for files; a tiny tmpfs (real ENOSPC) and a read-only tmpfs are mounted only when
this process may mount (root); otherwise a read-only directory is ``chmod 555`` (not for root, whom
permissions do not stop) or the case is skipped with a note. Every command runs under ``prlimit
--as`` (8 GiB), so an absurd model size fails to allocate instead of swapping.

Other settings: ``SAMPLEDLM_FAULTS_JOBS`` (commands run at a time; default CPUs + 1, at most 4) and
``SAMPLEDLM_FAULTS_ONLY`` (comma-separated id prefixes of cases and kill points: run just those, for
work on the bench itself). The code: this module (classification, kill points, the page),
:mod:`.faults_engine` (running commands, files, fixtures, shared checks), :mod:`.faults_cases` (the cases).
"""

from __future__ import annotations

import concurrent.futures as futures
import contextlib
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

from .faults_engine import (CATEGORIES, CORPUS, FIXTURE_PATHS, MUST_BE_ZERO, NO_SUCH, Ctx, Fixtures, FixtureError,
                            Result, Side, _first_error, _fmt, _kill_group, _last_line, _listing, _lines, child_env,
                            final_numbers, fixture_commands, has_config, have_prlimit, is_temp, matches,
                            mid_epoch_checkpoint, run_command, snapshot, write_corpus)
from benchmarks.report import REPO_DIR, new_figure, stamp, table, write_page

NAME = "faults"
DEFAULT_BEFORE = "762f3e9"
ENV_BEFORE = "SAMPLEDLM_FAULTS_BEFORE"
ENV_ONLY = "SAMPLEDLM_FAULTS_ONLY"  # comma-separated case or kill-point id prefixes: run just those


def repo_root() -> str:
    return REPO_DIR


def _git(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", repo_root(), *args], capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def before_side(rev: str | None, scratch: str):
    """The older commit as a :class:`Side` (None with a reason when it cannot be had); the worktree
    is removed on exit."""
    if rev is None:
        yield None, "not run (set SAMPLEDLM_FAULTS_BEFORE=REV to compare with an older commit)"
        return
    try:
        full = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        full = ""
    if not full:
        yield None, f"not run: {rev} is not a commit of a git checkout here"
        return
    path = os.path.join(scratch, "before-worktree")
    r = _git("worktree", "add", "--detach", path, full)
    if r.returncode != 0:
        yield None, f"not run: git worktree add failed ({r.stderr.strip()[:200]})"
        return
    try:
        side = Side("before", os.path.join(path, "src"), full[:7])
        where = subprocess.run([sys.executable, "-c", "import sampledlm; print(sampledlm.__file__)"],
                               env=child_env(side, scratch), cwd=scratch, capture_output=True, text=True, timeout=120)
        if not where.stdout.strip().startswith(os.path.realpath(path)) and not where.stdout.strip().startswith(path):
            yield None, f"not run: PYTHONPATH={side.src} does not import the old code ({where.stdout.strip()})"
            return
        yield side, f"commit {full[:7]}, run from a git worktree with PYTHONPATH={os.path.join('WORKTREE', 'src')}"
    finally:
        _git("worktree", "remove", "--force", path)
        shutil.rmtree(path, ignore_errors=True)
        _git("worktree", "prune")


def now_side() -> Side:
    """This package's code (the working tree: '+dirty' when it differs from its commit)."""
    commit = stamp_commit()
    try:
        if commit != "unknown" and _git("status", "--porcelain", "--untracked-files=no").stdout.strip():
            commit += "+dirty"
    except (OSError, subprocess.TimeoutExpired):
        pass
    return Side("now", os.path.join(REPO_DIR, "src"), commit)


def stamp_commit() -> str:
    try:
        c = _git("rev-parse", "--short", "HEAD").stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        c = ""
    return c or "unknown"


# --- one case on one side ---------------------------------------------------------------------------
@dataclass
class Outcome:
    category: str
    note: str
    seconds: float
    command: str = ""


def run_case(case, side: Side, fx: Fixtures, scratch: str) -> Outcome:
    """Run ``case`` on ``side`` in a fresh directory and classify what happened."""
    argv = case.argv(side)
    if argv is None:
        return Outcome("n/a", NO_SUCH, 0.0)
    if case.skip_reason():
        return Outcome("skipped", case.skip_reason(), 0.0)
    base = tempfile.mkdtemp(prefix=f"{case.id}-{side.name}-", dir=scratch)
    work, cache = os.path.join(base, "work"), os.path.join(base, "cache")
    os.makedirs(work)
    ctx = Ctx(side, work, cache, fx)
    t0 = time.perf_counter()
    try:
        for name in CORPUS:
            shutil.copy(os.path.join(fx.root, name), os.path.join(work, name))
        for need in case.needs:
            fx.copy_into(need, work)
        with case.environment(ctx) as extra:
            if case.setup is not None:
                case.setup(ctx)
            before = snapshot(work)
            ctx.result = run_command(side, argv, work, cache, python=case.python,
                                     stdin=ctx.path(case.stdin) if case.stdin else None, stdout_to=case.stdout_to,
                                     env={**case.env, **extra.get("env", {})}, fsize=case.fsize, umask=case.umask,
                                     timeout=case.timeout, watch=case.watcher(ctx))
            ctx.results.append(ctx.result)
            category, note = classify(case, ctx, before)
    except FixtureError as e:
        category, note = "skipped", str(e)
    finally:
        if ctx.bg is not None and ctx.bg.proc.poll() is None:
            _kill_group(ctx.bg.proc, signal.SIGKILL)
        _make_removable(base)
        shutil.rmtree(base, ignore_errors=True)
    return Outcome(category, note, time.perf_counter() - t0, " ".join(argv))


def _make_removable(path: str) -> None:
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(dirpath, d), 0o755)


def classify(case, ctx: Ctx, before: dict[str, str]) -> tuple[str, str]:
    """The worst category that applies (see the module docstring), with what was seen.

    Files are compared right after the case's command: a file the user had must be unchanged, except
    those the case names in ``may_change`` when the command succeeded (a refused command changes
    nothing); new hidden ``.*.tmp`` files are left-overs, and so is any new file of a failed command
    not named in ``may_leave``. Then the case's own check runs (it may run more commands), and every
    command of the case is searched for crashes, tracebacks and time-outs.
    """
    r = ctx.result
    if r.rc is not None and r.rc != 0 and re.search(r"No such (command|option)", r.stderr):
        return "n/a", "no such " + ("option" if "No such option" in r.stderr else "command") + ": " + _first_error(r)
    found: list[tuple[str, str]] = []
    after = {p: h for p, h in snapshot(ctx.dir).items() if not matches(p, case.ignore)}
    lost = [p for p, h in before.items() if after.get(p) != h and not matches(p, case.ignore)
            and not (r.rc == 0 and matches(p, case.may_change))]
    if lost:
        found.append(("lost file", "changed or gone: " + ", ".join(sorted(lost)[:3])))
    temps = sorted(p for p in set(after) - set(before) if is_temp(p))
    if temps and r.sent != signal.SIGKILL:  # kill -9 leaves temporary files by nature: the kill table's business
        found.append(("leftover", "left " + ", ".join(temps[:3])))
    if r.rc not in (0, None) and r.sent is None:
        partial = sorted(p for p in set(after) - set(before)
                         if not is_temp(p) and not p.endswith(".lock") and not matches(p, case.may_leave))
        if partial:
            found.append(("leftover", "the failed command left " + ", ".join(partial[:3])))
    try:
        found.append(case.check(ctx))
    except Exception as e:  # a check that cannot read what the command wrote: say so, as a defect
        found.append(("other defect", f"check failed: {type(e).__name__}: {str(e)[:150]}"))
    for step in ctx.results:
        if step.crashed:
            found.append(("segfault", f"{' '.join(step.argv[:3])}: killed by signal "
                                      f"{-step.rc if step.rc < 0 else 'SIGSEGV (rc 139)'}"))
        if step.traceback:
            found.append(("traceback", f"{' '.join(step.argv[:2])}: {_last_line(step.stderr)}"))
        if step.timed_out:
            found.append(("hang", f"{' '.join(step.argv[:2])}: still running after {step.seconds:.0f} s"))
    found.sort(key=lambda cn: CATEGORIES.index(cn[0]))
    category = found[0][0]
    notes = [n for c, n in found if n and (c == category or c in MUST_BE_ZERO or c == "leftover")]
    return category, "; ".join(dict.fromkeys(notes))[:300]


# --- kill -9 and resume --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trainer:
    """A training command to kill: the fixture made by the same command is the uninterrupted reference."""

    name: str
    fixture: str
    kind: str  # "neural", "maxent" or "ngram"

    def command(self, side: Side) -> list[str]:
        return fixture_commands(side.old)[self.fixture][0]

    @property
    def out(self) -> str:
        return FIXTURE_PATHS[self.fixture]


@dataclass(frozen=True)
class KillPoint:
    """Kill ``trainer`` with SIGKILL once the predicate made by ``trigger()`` holds for its output path
    (polled every 10 ms); ``trigger`` is a factory, so a predicate with a clock starts afresh each run."""

    id: str
    trainer: Trainer
    when: str
    trigger: Callable[[], Callable[[str], bool]]
    quick: bool = False


def epochs_done(n: int) -> Callable[[str], bool]:
    def trigger(out: str) -> bool:
        return _lines(os.path.join(out, "metrics.jsonl")) >= n

    return trigger


def maxent_saving(out: str) -> bool:
    """A weights file (or its temporary file) exists in the output directory: the final save has begun."""
    return any(n.startswith(("model", ".model")) and "safetensors" in n for n in _listing(out))


def arpa_writing(out: str) -> bool:
    """The temporary file of the ARPA output (or the output itself) exists: the write has begun."""
    d, base = os.path.split(out)
    return any(n.startswith("." + base) or n == base for n in _listing(d or "."))


def seconds_after_dir(seconds: float) -> Callable[[], Callable[[str], bool]]:
    """A trigger factory: ``seconds`` after the output directory appeared."""

    def make() -> Callable[[str], bool]:
        seen: dict = {}

        def trigger(out: str) -> bool:
            if not os.path.isdir(out):
                return False
            seen.setdefault("t", time.perf_counter())
            return time.perf_counter() - seen["t"] >= seconds

        return trigger

    return make


def always(pred: Callable[[str], bool]) -> Callable[[], Callable[[str], bool]]:
    return lambda: pred


FFNN, GRU = Trainer("ffnn", "ffnn", "neural"), Trainer("gru", "gru", "neural")
BINARY = Trainer("ffnn-binary", "binary", "neural")
MAXENT, NGRAM = Trainer("maxent", "maxent", "maxent"), Trainer("ngram", "k3", "ngram")
KILLS = [
    KillPoint("ffnn-start", FFNN, "epoch 1, before any checkpoint (config.json just written)", always(has_config)),
    KillPoint("ffnn-midckpt", FFNN, "epoch 1, right after a mid-epoch checkpoint (--checkpoint-every 40)",
              always(mid_epoch_checkpoint)),
    KillPoint("ffnn-final", FFNN, "during the final save (the last epoch's metrics just written)",
              always(epochs_done(2))),
    KillPoint("gru-midckpt", GRU, "epoch 1, right after a mid-epoch checkpoint (the carried state saved)",
              always(mid_epoch_checkpoint)),
    KillPoint("binary-final", BINARY, "during the final save: log-alpha calibration and weights (item 14)",
              always(epochs_done(2))),
    KillPoint("maxent-train", MAXENT, "during training (1 s after the output directory appeared)",
              seconds_after_dir(1.0)),
    KillPoint("maxent-save", MAXENT, "during the final save (the weights file just appeared)", always(maxent_saving)),
    KillPoint("ngram-write", NGRAM, "while the ARPA file is written (its temporary file just appeared)",
              always(arpa_writing), quick=True),
]


@dataclass
class KillOutcome:
    id: str
    trainer: str
    when: str
    killed: str
    state: str
    recovery: str
    reference: str
    final: str
    same: bool | None
    leftovers: str
    seconds: float

    def verdict(self) -> str:
        """``same``, ``DIFFERENT``, ``NOT RECOVERED`` (no model after the recovery), or ``n/a`` (not run)."""
        if self.same is None:
            return "NOT RECOVERED" if self.reference not in ("", "none") and self.final == "none" else "n/a"
        return "same" if self.same else "DIFFERENT"


def run_kill(point: KillPoint, side: Side, fx: Fixtures, scratch: str) -> KillOutcome:
    """Kill ``point.trainer`` at ``point``, inspect the directory, recover, compare with the uninterrupted run."""
    base = tempfile.mkdtemp(prefix=f"kill-{point.id}-{side.name}-", dir=scratch)
    work, cache = os.path.join(base, "work"), os.path.join(base, "cache")
    os.makedirs(work)
    ctx = Ctx(side, work, cache, fx)
    t0 = time.perf_counter()
    tr = point.trainer
    try:
        ref = fx.final(tr)
        for name in CORPUS:
            shutil.copy(os.path.join(fx.root, name), os.path.join(work, name))
        argv = tr.command(side)
        out = ctx.path(tr.out)
        trigger = point.trigger()
        r = ctx.run(argv, watch=lambda: signal.SIGKILL if trigger(out) else None, poll=0.01, timeout=600)
        killed = f"SIGKILL after {r.seconds:.1f} s" if r.sent else f"missed: the command ended first (rc {r.rc})"
        if r.crashed or r.traceback:
            killed += "; " + ("CRASHED" if r.crashed else "TRACEBACK: " + _last_line(r.stderr))
        state = inspect_killed(tr, ctx)
        recovery = recover(tr, ctx, argv)
        final = final_numbers(tr, work, side, cache)
        same = None if not (ref and final) else (ref == final)
        temps = sorted(p for p in snapshot(work) if is_temp(p))
        return KillOutcome(point.id, tr.name, point.when, killed, state, recovery, _fmt(ref), _fmt(final), same,
                           ", ".join(temps) or "none", time.perf_counter() - t0)
    except FixtureError as e:
        return KillOutcome(point.id, tr.name, point.when, "not run", str(e), "", "", "", None, "",
                           time.perf_counter() - t0)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def inspect_killed(tr: Trainer, ctx: Ctx) -> str:
    """What the killed command left: a loadable model, a resumable run, nothing, or something torn."""
    out = ctx.path(tr.out)
    temps = [p for p in snapshot(ctx.dir) if is_temp(p)]
    left = f"; temporary files: {', '.join(sorted(temps)[:2])}" if temps else ""
    if not os.path.exists(out):
        return "no output" + left
    if tr.kind == "ngram":
        e = ctx.run(["ngram", "eval", tr.out, "--test", "te.txt", "--json"])
    elif tr.kind == "maxent":
        if not has_config(out):
            files = sorted(n for n in _listing(out) if n != ".lock")
            return f"no model (no config.json; holds {', '.join(files) or 'nothing'})" + left
        e = ctx.run(["maxent", "eval", tr.out, "te.txt", "--json"])
    else:
        if not has_config(out):
            return "run directory without config.json" + left
        e = ctx.run(["eval", tr.out, "--test", "te.txt", "--json"])
    if e.rc == 0:
        return "loadable" + left
    if e.traceback or e.crashed:
        return "TORN: " + _last_line(e.stderr) + left
    return "not loadable yet: " + _first_error(e)[:120] + left


def recover(tr: Trainer, ctx: Ctx, argv: list[str]) -> str:
    """What a user does next: ``--resume`` (neural), else (or when it says to) the same command again; a maxent
    training stopped with its epochs' state goes on with ``--resume`` when the same command says so."""
    steps = []
    if tr.kind == "neural":
        r = ctx.run(["train", "--resume", tr.out], timeout=600)
        steps.append(f"--resume: {_step(r)}")
        if r.rc == 0 or "already finished" in r.stderr:
            return "; ".join(steps)
    r = ctx.run(argv, timeout=600)
    steps.append(f"same command: {_step(r)}")
    if r.rc != 0 and tr.kind == "maxent" and "already holds" in r.stderr:
        steps.append("(the killed run had saved its model)")
    elif r.rc != 0 and tr.kind == "maxent" and "--resume" in r.stderr:  # it says how to go on: its epochs' state
        r = ctx.run(["maxent", "train", "--resume", tr.out], timeout=600)
        steps.append(f"--resume: {_step(r)}")
    elif r.rc != 0 and tr.kind == "maxent":
        r = ctx.run(argv + ["--force"], timeout=600)
        steps.append(f"with --force: {_step(r)}")
    return "; ".join(steps)


def _step(r: Result) -> str:
    if r.rc == 0:
        return "ok"
    if r.traceback:
        return "TRACEBACK " + _last_line(r.stderr)[:100]
    return f"refused ({_first_error(r)[:140]})"


# --- the experiment -------------------------------------------------------------------------------------
def before_rev(quick: bool) -> str | None:
    value = os.environ.get(ENV_BEFORE)
    if value is None:
        return None if quick else DEFAULT_BEFORE
    return None if value.strip().lower() in ("", "none", "no", "0") else value.strip()


def jobs() -> int:
    """Commands run at a time: ``$SAMPLEDLM_FAULTS_JOBS``, else CPUs + 1 (at most 4)."""
    try:
        return max(1, int(os.environ["SAMPLEDLM_FAULTS_JOBS"]))
    except (KeyError, ValueError):
        return max(1, min(4, (os.cpu_count() or 1) + 1))


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    """Run every case (``quick``: one per category, one kill point) now and before; write the page."""
    from .faults_cases import CASES

    meta = stamp()
    t0 = time.time()
    cases = [c for c in CASES if c.quick] if quick else [c for c in CASES]
    kills = [k for k in KILLS if k.quick] if quick else list(KILLS)
    only = [x.strip() for x in os.environ.get(ENV_ONLY, "").split(",") if x.strip()]
    if only:  # a subset, for working on the bench itself
        cases = [c for c in CASES if any(c.id.startswith(o) for o in only)]
        kills = [k for k in KILLS if any(k.id.startswith(o) for o in only)]
    with tempfile.TemporaryDirectory(prefix="sampledlm-faults-") as scratch:
        corpus = os.path.join(scratch, "corpus")
        write_corpus(corpus)
        with before_side(before_rev(quick), scratch) as (old, before_note):
            sides = [now_side()] + ([old] if old else [])
            fxs = {}
            for s in sides:
                os.makedirs(os.path.join(scratch, f"fx-{s.name}"))
                fxs[s.name] = Fixtures(s, os.path.join(scratch, f"fx-{s.name}"), corpus)
            results, kill_results = _run_all(cases, kills, sides, fxs, scratch)
    data = collect(cases, kills, results, kill_results, sides, before_note, quick, time.time() - t0)
    body = render(data)
    fig = summary_figure(data)
    write_page(out_dir, NAME, "Fault campaign: before and now", meta, data, body, figure=fig)
    return data


def _run_all(cases, kills, sides, fxs, scratch):
    """Kill points first (the longest), then the cases, on a few worker threads."""
    results: dict[tuple[str, str], Outcome] = {}
    kill_results: dict[tuple[str, str], KillOutcome] = {}
    with futures.ThreadPoolExecutor(max_workers=jobs()) as pool:
        todo = {}
        for s in sides:
            for k in kills:
                todo[pool.submit(run_kill, k, s, fxs[s.name], scratch)] = ("kill", k.id, s.name)
        for c in cases:
            for s in sides:
                todo[pool.submit(run_case, c, s, fxs[s.name], scratch)] = ("case", c.id, s.name)
        for f in futures.as_completed(todo):
            kind, cid, side = todo[f]
            try:
                res = f.result()
            except Exception as e:  # a bug of the bench itself: shown in the row, never hidden
                res = Outcome("skipped", f"bench error: {type(e).__name__}: {e}"[:300], 0.0) if kind == "case" else \
                    KillOutcome(cid, "", "", "bench error", f"{type(e).__name__}: {e}"[:300], "", "", "", None, "", 0.0)
            (results if kind == "case" else kill_results)[(cid, side)] = res
            print(f"faults: {kind} {cid} [{side}]: {res.category if kind == 'case' else res.verdict()}",
                  file=sys.stderr, flush=True)
    return results, kill_results


def collect(cases, kills, results, kill_results, sides, before_note, quick, seconds) -> dict:
    names = [s.name for s in sides]
    rows = []
    for c in cases:
        row = {"id": c.id, "item": c.item, "what": c.what, "command": c.display(sides[0])}
        for n in names:
            o = results[(c.id, n)]
            row[n] = {"category": o.category, "note": o.note, "seconds": round(o.seconds, 2)}
        rows.append(row)
    counts = {n: {cat: sum(1 for r in rows if r[n]["category"] == cat) for cat in CATEGORIES} for n in names}
    kill_rows = []
    for k in kills:
        row = {"id": k.id, "trainer": k.trainer.name, "when": k.when}
        for n in names:
            row[n] = dataclasses.asdict(kill_results[(k.id, n)])
            row[n]["verdict"] = kill_results[(k.id, n)].verdict()
        kill_rows.append(row)
    return {"setup": {"quick": quick, "cases": len(rows), "kill_points": len(kill_rows), "sides": names,
                      "now": sides[0].rev, "before": before_note, "wall_seconds": round(seconds, 1),
                      "jobs": jobs(), "prlimit": have_prlimit(), "root": os.geteuid() == 0},
            "counts": counts, "kills": kill_rows, "cases": rows,
            "must_be_zero_now": {cat: counts["now"][cat] for cat in MUST_BE_ZERO},
            "kills_same_now": sum(1 for r in kill_rows if r["now"]["verdict"] == "same")}


def _cell(o: dict) -> str:
    note = o["note"].replace("|", "\\|").replace("\n", " ")
    if len(note) > 140:
        note = note[:137] + "..."
    return f"**{o['category']}**" + (f": {note}" if note else "")


def render(data: dict) -> str:
    names = data["setup"]["sides"]
    s = data["setup"]
    out = [
        f"{s['cases']} cases and {s['kill_points']} kill points, each run in a fresh temporary directory "
        "with `python -m sampledlm ...` in a subprocess and classified from its exit status, stderr and files "
        "(categories: `tests/campaigns/faults.py`). Data: the built-in corpus (Python's pydoc topics), 1,500 training, "
        "200 validation and 200 test sentences; tiny models.", "",
        f"- now: commit {s['now']}",
        f"- before: {s['before']} (set `SAMPLEDLM_FAULTS_BEFORE=REV` for another commit, `none` to skip)",
        f"- wall time {s['wall_seconds']:.0f} s, {s['jobs']} commands at a time"
        + ("" if s["prlimit"] else "; prlimit missing: no memory or file-size limits"), "",
        "## Summary", "",
        table(["category", *names[::-1]],
              [[cat, *[data["counts"][n][cat] for n in names[::-1]]] for cat in CATEGORIES]),
        "",
        "Must be 0 now: " + ", ".join(f"{k} {v}" for k, v in data["must_be_zero_now"].items()) + "; "
        f"resume reached the uninterrupted run's numbers at {data['kills_same_now']} of {len(data['kills'])} "
        "kill points.",
        "",
        "Categories, worst first (a case gets the worst that applies): `segfault` (killed by a signal the bench did "
        "not send), `lost file` (a file the user had changed or gone), `wrong result` (exit 0, but the number or "
        "the written file differs from a reference computed another way, or nonsense was accepted), `traceback`, "
        "`hang` (past the case's time limit), `leftover` (a temporary or half-written file left behind), "
        "`other defect` (exit 0 and nothing wrong in the numbers, but the case's intent is not met: file modes, "
        "help texts, messages), `unclear error` (exit != 0 without a traceback, but the message is long or does "
        "not name the file or flag), `clean error` (a short message naming the problem: the intended outcome of "
        "bad input), `ok` (the right numbers or the intended output), `n/a` (the old code has no such command or "
        "option), `skipped` (this machine cannot run the case; the note says why).", "",
        *_still_wrong(data),
        "## Kill -9 and resume", "",
        "Each trainer is killed with SIGKILL at the moment named (found by polling its output directory), the "
        "directory left behind is evaluated (`loadable`, `not loadable yet` with the message, or `TORN`), then "
        "the run is recovered as a user would (neural: `--resume`, or the same command when the run stopped before "
        "its first checkpoint; maxent and n-gram: the same command) and its validation and test perplexity "
        "(as printed, 2 decimals) compared with the uninterrupted run of the same command and seed.", "",
    ]
    krows = []
    for k in data["kills"]:
        for n in names[::-1]:  # before, then now
            o = k[n]
            krows.append([k["id"], n, k["when"], o["killed"], _esc(o["state"]), _esc(o["recovery"]), o["reference"],
                          o["final"], f"**{o['verdict']}**", o["leftovers"]])
    out += [table(["kill point", "code", "when", "kill", "directory after the kill", "recovery", "uninterrupted",
                   "after recovery", "same?", "temporary files at the end"], krows), ""]
    out += ["## Cases", "",
            "One row per case: the issue item it belongs to, what was done (the command as run now, shortened), "
            "and the outcome before and now (category: what was seen).", ""]
    crow = []
    for r in data["cases"]:
        crow.append([r["id"], r["item"], _esc(r["what"]), f"`{_short(r['command'])}`",
                     *[_cell(r[n]) for n in names[::-1]]])
    out.append(table(["case", "item", "what", "command", *names[::-1]], crow))
    tested = cases_table(outcomes={r["id"]: r["now"] for r in data["cases"]})
    if tested:
        out += ["", "## Cases and their regression tests", "",
                "The cases of defects fixed since the campaign found them, each with the test of the suite that "
                "covers the same defect (a pytest node id) and its outcome now (`not run` when this run left it out).",
                "", tested]
    return "\n".join(out)


def cases_table(item: int | None = None, outcomes: dict[str, dict] | None = None) -> str:
    """The cases that name their regression test (those of issue ``item`` when given) as a table: case, defect,
    command, outcome now (``outcomes``: case id to a ``{"category", "note"}`` cell) and test; "" when none."""
    from .faults_cases import CASES

    shown = Side("now", "", "")  # display() shows the command as run now; nothing runs here
    rows = [[c.id, _esc(c.what), f"`{_short(dataclasses.replace(c, old=None).display(shown), 160)}`",
             _cell(outcomes[c.id]) if outcomes and c.id in outcomes else "not run", f"`{c.test}`"]
            for c in CASES if c.test and (item is None or c.item == item)]
    return table(["case", "defect", "command", "outcome now", "regression test"], rows) if rows else ""


def _still_wrong(data: dict) -> list[str]:
    """A list of the cases whose outcome now is neither ``ok`` nor ``clean error`` (nor n/a, skipped)."""
    rows = [r for r in data["cases"] if r["now"]["category"] not in ("ok", "clean error", "n/a", "skipped")]
    kills = [k for k in data["kills"] if k["now"]["verdict"] != "same"]
    if not rows and not kills:
        return ["Now every case is `ok` or a `clean error`, and every kill point resumes to the same numbers.", ""]
    out = ["## Not right now", ""]
    out += [f"- {r['id']} (item {r['item']}), {_esc(r['what'])}: **{r['now']['category']}**: {_esc(r['now']['note'])}"
            for r in rows]
    out += [f"- kill point {k['id']}: **{k['now']['verdict']}**: {_esc(k['now']['recovery'])}" for k in kills]
    return out + [""]


def _esc(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _short(cmd: str, n: int = 90) -> str:
    cmd = cmd.replace("|", "\\|").replace("`", "'")
    return cmd if len(cmd) <= n else cmd[: n - 3] + "..."


def summary_figure(data: dict):
    names = data["setup"]["sides"]
    cats = [c for c in CATEGORIES if any(data["counts"][n][c] for n in names)]
    fig, ax = new_figure(figsize=(8, 3.8))
    width = 0.8 / len(names)
    for i, n in enumerate(names):
        ax.bar([j + i * width for j in range(len(cats))], [data["counts"][n][c] for c in cats], width, label=n)
    ax.set_xticks([j + width * (len(names) - 1) / 2 for j in range(len(cats))])
    ax.set_xticklabels(cats, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("cases")
    ax.set_title("fault campaign: outcome per case")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
