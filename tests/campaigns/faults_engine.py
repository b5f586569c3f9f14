"""The machinery of ``python -m benchmarks faults`` (:mod:`.faults`): running a command of one version of the
code in a subprocess, the files of a directory before and after, the fixtures (a small corpus and one trained
model of each family, built by each version's own command line), and the checks the cases share."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

MUST_BE_ZERO = ("traceback", "segfault", "lost file", "wrong result")
#: Worst first: a case that shows several of these gets the first.
CATEGORIES = ("segfault", "lost file", "wrong result", "traceback", "hang", "leftover", "other defect",
              "unclear error", "clean error", "ok", "n/a", "skipped")
NO_SUCH = "no such command"  # a Case.old value: the old code has no command for this case
MEMORY_LIMIT = 8 << 30  # address space of every command (an absurd size fails to allocate, never swaps)

# --- the two versions of the code ---------------------------------------------------------------
@dataclass(frozen=True)
class Side:
    """One version of the code: ``now`` (this package) or ``before`` (a git worktree of an older commit)."""

    name: str
    src: str  # the directory put first on PYTHONPATH (holds the sampledlm package)
    rev: str  # the commit, for the page

    @property
    def old(self) -> bool:
        return self.name == "before"



def child_env(side: Side, cache: str, extra: dict | None = None) -> dict:
    """The environment of every command: this side's code first on the path, a private cache, one
    thread per library (a busy machine; the same for both sides)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAMPLEDLM_")}
    env.update({"PYTHONPATH": side.src, "SAMPLEDLM_CACHE": cache, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                "NUMBA_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "100", "LC_ALL": "C.UTF-8"})
    env.pop("MPLBACKEND", None)
    env.update(extra or {})
    return env



# --- running one command ------------------------------------------------------------------------
@dataclass
class Result:
    """What one command did: exit status, output, wall time; ``sent`` is the signal the bench sent it."""

    argv: list[str]
    rc: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    sent: int | None = None
    note: str = ""

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stderr

    @property
    def crashed(self) -> bool:
        """Killed by a signal nobody sent (a segmentation fault, an abort), or the shell's 139."""
        if self.rc is None:
            return False
        return self.rc == 139 or (self.rc < 0 and -self.rc != self.sent and not self.timed_out)

    def lines(self) -> list[str]:
        return [ln for ln in self.stderr.splitlines() if ln.strip()]


def have_prlimit() -> bool:
    return shutil.which("prlimit") is not None


class Running:
    """A started command: :meth:`wait` for it (polling ``watch``) and get its :class:`Result`."""

    def __init__(self, argv: list[str], proc: subprocess.Popen, logs: str, stdout_to: str | None, files: list):
        self.argv, self.proc, self.logs, self.stdout_to, self.files = argv, proc, logs, stdout_to, files
        self.t0 = time.perf_counter()

    def wait(self, timeout: float = 120, watch: Callable[[], int | None] | None = None, poll: float = 0.02) -> Result:
        sent, timed_out = None, False
        deadline = self.t0 + timeout
        while self.proc.poll() is None:
            if time.perf_counter() > deadline:
                timed_out = True
                _kill_group(self.proc, signal.SIGKILL)
                break
            if watch is not None and sent is None:
                sig = watch()
                if sig is not None:
                    sent = sig
                    _signal(self.proc, sig)
            time.sleep(poll)
        rc = self.proc.wait()
        _kill_group(self.proc, signal.SIGKILL)  # anything the command left running
        seconds = time.perf_counter() - self.t0
        for f in self.files:
            f.close()
        stdout = "" if self.stdout_to else _read_text(os.path.join(self.logs, "stdout"))
        stderr = _read_text(os.path.join(self.logs, "stderr"))
        shutil.rmtree(self.logs, ignore_errors=True)
        return Result(self.argv, rc, stdout, stderr, seconds, timed_out, sent)


#: A launcher that gives the command Ctrl-C back: a process started in the background of a shell without job
#: control inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler (the Ctrl-C cases
#: would measure nothing). SIG_DFL survives exec; the command's Python then installs its own handler.
DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execvp(sys.argv[1], sys.argv[1:])")


def start_command(side: Side, argv: list[str], cwd: str, cache: str, *, python: bool = False, stdin: str | None = None,
                  stdout_to: str | None = None, env: dict | None = None, fsize: int | None = None,
                  umask: int | None = None) -> Running:
    """Start ``python -m sampledlm ARGV`` (``python=True``: ``python ARGV``) of ``side`` in ``cwd``.

    ``stdin``: a file fed on standard input; ``stdout_to``: where standard output goes (e.g.
    ``/dev/full``); ``fsize``: the largest file the command may write (prlimit); ``umask``: its umask.
    Every command runs under prlimit's address-space limit (:data:`MEMORY_LIMIT`) when prlimit exists.
    """
    cmd = [sys.executable, *(argv if python else ["-m", "sampledlm", *argv])]
    if have_prlimit():
        cmd = ["prlimit", f"--as={MEMORY_LIMIT}", *([f"--fsize={fsize}"] if fsize is not None else []), *cmd]
    if umask is not None:
        cmd = ["sh", "-c", f'umask {umask:03o} && exec "$@"', "sh", *cmd]
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # started in the background: Ctrl-C must reach the command
        cmd = [sys.executable, "-c", DEFAULT_SIGINT, *cmd]
    os.makedirs(cache, exist_ok=True)
    logs = tempfile.mkdtemp(prefix="log-", dir=cache)
    files = [open(stdout_to or os.path.join(logs, "stdout"), "wb"), open(os.path.join(logs, "stderr"), "wb")]
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=files[0],
                                stderr=files[1], env=child_env(side, cache, env), start_new_session=True)
    except BaseException:
        for f in files:
            f.close()
        raise
    if stdin:  # a pipe, as `cat FILE | sampledlm ...` gives (a file would be seekable, and could be read twice)
        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
    return Running(list(argv), proc, logs, stdout_to, files)


def _feed(pipe, path: str) -> None:
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 16), b""):
                pipe.write(chunk)
    except (BrokenPipeError, OSError):
        pass
    finally:
        with contextlib.suppress(OSError):
            pipe.close()


def run_command(side: Side, argv: list[str], cwd: str, cache: str, *, timeout: float = 120,
                watch: Callable[[], int | None] | None = None, poll: float = 0.02, **kw) -> Result:
    """:func:`start_command` and wait: ``watch`` is polled while the command runs and returns a signal
    to send it (then the command is waited for as before); past ``timeout`` it is killed."""
    return start_command(side, argv, cwd, cache, **kw).wait(timeout, watch, poll)


def _signal(proc: subprocess.Popen, sig: int) -> None:
    """SIGINT as a terminal sends it (to the whole process group); any other signal to the process."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


# --- files before and after -----------------------------------------------------------------------
def snapshot(root: str) -> dict[str, str]:
    """``{relative path: sha1}`` of every file under ``root`` (symbolic links and special files skipped)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            h = hashlib.sha1()
            try:
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
            except OSError:
                continue
            out[os.path.relpath(path, root)] = h.hexdigest()
    return out


TEMP_FILE = re.compile(r"(^|/)\.[^/]*\.tmp$|(^|/)\.[^/]*tmp[^/]*$")


def is_temp(rel: str) -> bool:
    """A temporary file of an interrupted write (``.NAME.XXXX.tmp``); ``.lock`` is the run directory's lock."""
    return bool(TEMP_FILE.search(rel)) and not rel.endswith(".lock")


def matches(rel: str, patterns: tuple[str, ...]) -> bool:
    import fnmatch

    return any(fnmatch.fnmatch(rel, p) or rel == p or rel.startswith(p.rstrip("/") + "/") for p in patterns)


# --- a case's context -------------------------------------------------------------------------------
@dataclass
class Ctx:
    """What a case's setup and check see: the side, its directory, the fixtures and the results so far."""

    side: Side
    dir: str
    cache: str
    fx: "Fixtures"
    result: Result | None = None
    results: list[Result] = field(default_factory=list)
    bg: "Running | None" = None  # a process the case started itself (two writers)

    def path(self, *names: str) -> str:
        return os.path.join(self.dir, *names)

    def write(self, name: str, data) -> str:
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        return p

    def read(self, name: str, mode: str = "r"):
        with open(self.path(name), mode) as f:
            return f.read()

    def exists(self, name: str) -> bool:
        return os.path.exists(self.path(name))

    def run(self, argv: list[str], **kw) -> Result:
        """Another command of this case (a setup step or a second step of the check), in its directory."""
        r = run_command(self.side, argv, self.dir, self.cache, **kw)
        self.results.append(r)
        return r


# --- fixtures: a small corpus and one trained model of each family, per side, built once -----------
CORPUS = {"tr.txt": ("train", 1500), "va.txt": ("valid", 200), "te.txt": ("test", 200), "tiny.txt": ("train", 300),
          "big.txt": ("train", None)}
NEURAL_COMMON = ["--optimizer", "adam", "--lr", "0.002", "--dropout", "0", "--seed", "1", "--threads", "1"]


def fixture_commands(old: bool) -> dict[str, list[list[str]]]:
    """How each fixture is made (the command lines every version accepts, or the old form)."""
    maxent = (["maxent", "train", "tr.txt", "va.txt", "-o", "melm", "--epochs", "2"] if old else
              ["maxent", "train", "--train", "tr.txt", "--valid", "va.txt", "-o", "melm", "--epochs", "2"])
    return {
        "k3": [["ngram", "train", "--train", "tr.txt", "--order", "3", "-o", "k3.arpa"]],
        "ffnn": [["train", "--train", "tr.txt", "--valid", "va.txt", "-o", "ffnn", "--model", "ffnn", "--order", "3",
                  "-d", "16", "--hidden", "32", "-b", "128", "--epochs", "2", "--checkpoint-every", "40",
                  *NEURAL_COMMON]],
        "gru": [["train", "--train", "tr.txt", "--valid", "va.txt", "-o", "gru", "--model", "gru", "-d", "16",
                 "--hidden", "16", "-b", "16", "--bptt", "20", "--epochs", "2", "--checkpoint-every", "40",
                 *NEURAL_COMMON]],
        "binary": [["train", "--train", "tr.txt", "--valid", "va.txt", "-o", "binary", "--model", "ffnn", "--order",
                    "3", "-d", "16", "--hidden", "32", "-b", "128", "--epochs", "2", "--objective", "binary",
                    "--neg-rate", "0.5", *NEURAL_COMMON]],
        "maxent": [maxent],
    }


#: What each fixture leaves in its directory (copied into a case's directory when the case needs it).
FIXTURE_PATHS = {"k3": "k3.arpa", "ffnn": "ffnn", "gru": "gru", "binary": "binary", "maxent": "melm"}
#: Reference numbers: the evaluation of each fixture on te.txt, run once per side.
REFERENCE_COMMANDS = {
    "k3": (["ngram", "eval", "k3.arpa", "--test", "te.txt", "--json"], None),
    "ffnn": (["eval", "ffnn", "--test", "te.txt", "--json"], None),
    "gru": (["eval", "gru", "--test", "te.txt", "--json"], None),
    "binary": (["eval", "binary", "--test", "te.txt", "--json"], None),
    "maxent": (["maxent", "eval", "melm", "--test", "te.txt", "--json"],
               ["maxent", "eval", "melm", "te.txt", "--json"]),
}


def write_corpus(directory: str) -> None:
    """The built-in corpus (Python's pydoc topics), cut to the sizes of :data:`CORPUS`."""
    from sampledlm.data.builtin import builtin_sentences

    sents = builtin_sentences()
    split = {"train": [], "valid": [], "test": []}
    for i, s in enumerate(sents):
        split["test" if i % 10 == 0 else "valid" if i % 10 == 1 else "train"].append(" ".join(s) + "\n")
    os.makedirs(directory, exist_ok=True)
    for name, (part, n) in CORPUS.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.writelines(split[part][:n])


class Fixtures:
    """The corpus and trained models of one side, built on first use (thread-safe) in ``root``."""

    def __init__(self, side: Side, root: str, corpus: str):
        self.side, self.root, self.corpus = side, root, corpus
        self.cache = os.path.join(root, "cache")
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._built: dict[str, str] = {}
        self._refs: dict = {}
        self.failures: dict[str, str] = {}
        for name in CORPUS:
            shutil.copy(os.path.join(corpus, name), os.path.join(root, name))

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(key, threading.Lock())

    def get(self, name: str) -> str:
        """The path of fixture ``name`` (built by the side's own command line on first use)."""
        with self._key_lock(name):
            if name in self._built:
                return self._built[name]
            if name in self.failures:
                raise FixtureError(name, self.failures[name])
            for argv in fixture_commands(self.side.old)[name]:
                r = run_command(self.side, argv, self.root, self.cache, timeout=600)
                if r.rc != 0:
                    self.failures[name] = f"{' '.join(argv)}: rc {r.rc}: {(r.lines() or [''])[-1][:200]}"
                    raise FixtureError(name, self.failures[name])
            self._built[name] = os.path.join(self.root, FIXTURE_PATHS[name])
            return self._built[name]

    def ref(self, name: str) -> dict:
        """The evaluation of fixture ``name`` on te.txt (the JSON its eval command prints)."""
        self.get(name)
        with self._key_lock("ref:" + name):
            if name not in self._refs:
                new, old = REFERENCE_COMMANDS[name]
                r = run_command(self.side, old if (self.side.old and old) else new, self.root, self.cache)
                try:
                    self._refs[name] = last_json(r.stdout)
                except ValueError:
                    raise FixtureError(name, f"reference evaluation failed: rc {r.rc} {r.stderr[-200:]}") from None
            return self._refs[name]

    def final(self, tr) -> dict | None:
        """The final numbers of the uninterrupted run of ``tr`` (its fixture), computed once."""
        self.get(tr.fixture)
        with self._key_lock("final:" + tr.name):
            if ("final", tr.name) not in self._refs:
                self._refs[("final", tr.name)] = final_numbers(tr, self.root, self.side, self.cache)
            return self._refs[("final", tr.name)]

    def copy_into(self, name: str, dest: str) -> None:
        src = self.get(name)
        target = os.path.join(dest, os.path.basename(src))
        if os.path.isdir(src):
            shutil.copytree(src, target, ignore=shutil.ignore_patterns(".lock"))
        else:
            shutil.copy(src, target)


class FixtureError(Exception):
    def __init__(self, name: str, why: str):
        super().__init__(f"fixture {name}: {why}")


def last_json(text: str) -> dict:
    """The last line of ``text`` that is a JSON object (NaN and Infinity, which are not JSON, refused)."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            def bad(const):
                raise ValueError(f"not JSON: {const}")

            return json.loads(line, parse_constant=bad)
    raise ValueError("no JSON object in the output")


def ppl_of(d: dict) -> float:
    """The perplexity in an evaluation's JSON (of the mixture, when the command interpolated)."""
    for k in ("interpolated_ppl", "perplexity", "ppl"):
        if k in d:
            return float(d[k])
    raise KeyError("no perplexity in " + json.dumps(d)[:200])



def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else ""


def _first_error(r: Result) -> str:
    for ln in r.lines():
        if "rror" in ln:
            return ln.strip()[:200]
    return _last_line(r.stderr)



# --- common checks ---------------------------------------------------------------------------------
def error_category(r: Result, names: tuple[str, ...] = ()) -> tuple[str, str]:
    """rc != 0: a clean error if stderr is short, has no traceback and names one of ``names`` (a file, a flag)."""
    lines = r.lines()
    text = "\n".join(lines)
    msg = _first_error(r)
    if r.traceback:
        return "traceback", _last_line(r.stderr)
    if len(lines) > 6:
        return "unclear error", f"{len(lines)} lines on stderr: {msg}"
    if names and not any(n.lower() in text.lower() for n in names):
        return "unclear error", f"does not name {' or '.join(names)}: {msg}"
    if not lines:
        return "unclear error", f"rc {r.rc} and nothing on stderr"
    return "clean error", msg


def refused(names: tuple[str, ...] = (), accepted: str = "wrong result"):
    """A check: the command must refuse (exit != 0, naming one of ``names``); exit 0 is ``accepted``."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc == 0:
            return accepted, "exit 0: " + (_last_line(r.stdout) or _last_line(r.stderr) or "accepted")
        return error_category(r, names)

    return check


def robust(names: tuple[str, ...] = ()):
    """A check for inputs with no single right answer: any number, or a clean error."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc == 0:
            bad = re.search(r"\b(nan|inf)\b", r.stdout + r.stderr, re.I)
            if bad:
                return "wrong result", f"exit 0 with a non-finite number: {_last_line(r.stdout)}"
            return "ok", _last_line(r.stdout) or _last_line(r.stderr)
        return error_category(r, names)

    return check


def same_number(reference: Callable[[Ctx], float], measure: Callable[[Ctx], float], what: str,
                rel: float = 1e-9, names: tuple[str, ...] = ()):
    """A check: exit 0 and ``measure`` equal to ``reference`` (relative ``rel``), or a clean refusal."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r, names)
        try:
            got = measure(ctx)
        except (ValueError, KeyError, IndexError) as e:
            return "wrong result", f"exit 0 but no {what} in the output ({e})"
        want = reference(ctx)
        if not _close(got, want, rel):
            return "wrong result", f"{what} {got:.6g}, reference {want:.6g}"
        return "ok", f"{what} {got:.6g} = reference"

    return check


def same_numbers(fixture: str, rel: float = 1e-9, names: tuple[str, ...] = ()):
    """A check: exit 0 and every number of the command's JSON summary (perplexity, predictions, sentences,
    OOVs; not timings) equal to the fixture's reference evaluation of the plain file, or a clean refusal."""

    def check(ctx: Ctx) -> tuple[str, str]:
        r = ctx.result
        if r.rc != 0:
            return error_category(r, names)
        try:
            got = last_json(r.stdout)
        except ValueError as e:
            return "wrong result", f"exit 0 but no JSON summary ({e})"
        want = ctx.fx.ref(fixture)
        keys = [k for k, v in want.items() if _number(v) and _number(got.get(k)) and not k.startswith("seconds")]
        if not keys:
            return "wrong result", "no number in common with the reference"
        bad = [k for k in keys if not _close(float(got[k]), float(want[k]), rel)]
        if bad:
            return "wrong result", ", ".join(f"{k} {got[k]:.6g} (reference {want[k]:.6g})" for k in bad[:3])
        return "ok", ", ".join(f"{k} {got[k]:.6g}" for k in keys[:4]) + " = reference"

    return check


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _close(a: float, b: float, rel: float) -> bool:
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)



def _listing(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def has_config(out: str) -> bool:
    return os.path.exists(os.path.join(out, "config.json"))


def mid_epoch_checkpoint(out: str) -> bool:
    """A checkpoint written by --checkpoint-every inside epoch 1 (no epoch has ended yet)."""
    return os.path.exists(os.path.join(out, "checkpoint.json")) and _lines(os.path.join(out, "metrics.jsonl")) == 0



def final_numbers(tr, where: str, side: Side, cache: str) -> dict | None:
    """Validation and test perplexity, as printed (2 decimals), of the model in ``where`` (None: none there).

    Validation: the best epoch's (neural: metrics.jsonl; maxent: config.json); test: its evaluation
    command on te.txt; n-gram: the ARPA file's SHA-1 and its test perplexity.
    """
    out = os.path.join(where, tr.out)
    if not os.path.exists(out):
        return None
    try:
        if tr.kind == "ngram":
            r = run_command(side, ["ngram", "eval", tr.out, "--test", "te.txt", "--json"], where, cache)
            with open(out, "rb") as f:
                valid = "file " + hashlib.sha1(f.read()).hexdigest()[:10]
        elif tr.kind == "maxent":
            r = run_command(side, ["maxent", "eval", tr.out, "te.txt", "--json"], where, cache)
            with open(os.path.join(out, "config.json"), encoding="utf-8") as f:
                valid = f"valid {json.load(f)['training']['best_valid_ppl']:.2f}"
        else:
            r = run_command(side, ["eval", tr.out, "--test", "te.txt", "--json"], where, cache)
            with open(os.path.join(out, "metrics.jsonl"), encoding="utf-8") as f:
                valid = f"valid {min(json.loads(ln)['valid_ppl'] for ln in f if ln.strip()):.2f}"
        return {"valid": valid, "test": f"test {ppl_of(last_json(r.stdout)):.2f}"}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _fmt(d: dict | None) -> str:
    return "none" if not d else f"{d['valid']}, {d['test']}"


