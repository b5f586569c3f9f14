"""``fuzz``: every reader of outside files, and the commands that read them, fed damaged and random inputs.

**Readers** (:mod:`.fuzz_readers`): for each format, ``N`` cases (``--quick``: 15). Case ``c`` draws from
``random.Random(c)`` a valid input and then: the input as written (1 case in 10: it must read back to what was
written), or 1-3 mutations of it (:mod:`.mutate`: truncation, lost/repeated/swapped/inserted lines, bad numbers,
huge counts, invalid UTF-8, NUL bytes; 8 in 10), or random bytes in place of one of its files (1 in 10). Each
case ends as one of

- ``ok``: read, and the result passes the format's invariants (finite scores, nodes in range, distributions that
  sum to one, ...); for corpora the result must equal what the reading rules give for any valid UTF-8, and a
  damaged model directory that loads must give the numbers of the one written (a checksum guards the weights);
- ``clean error``: a ``UserError`` whose message starts with the input's path (the line too, where it has lines);
- ``unclear error``: a ``UserError`` that does not name the input;
- ``traceback``: any other exception (the bug a fuzzer looks for);
- ``wrong``: read, but the result breaks an invariant or differs from the oracle;
- ``hang``: more than ``TIMEOUT`` seconds (SIGALRM);
- ``memory``: the case raised the process's peak memory by more than ``MEMORY_JUMP`` bytes;
- ``partial file``: a file appeared beside the input (readers write nothing).

**Commands**: ``vocab``, ``ngram train``, ``ngram eval``, ``score`` and ``rescore`` (n-best and lattices), each run
in process (as ``sampledlm ...`` would, through :func:`sampledlm.cli.main`) on a mutated input, ``M`` cases each
(``--quick``: 5): exit 0, or exit 1 with exactly one line ``sampledlm: error: <input path>...`` (anything else is
``unclear``, an exception a ``traceback``); after an error no output file and no temporary file of ours remain
(``partial file``).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import resource
import shutil
import signal
import tempfile
import time
import traceback
from collections import Counter

from sampledlm.errors import UserError
from .fuzz_readers import ORACLES, READERS, Reader
from .mutate import mutate, random_ops
from benchmarks.report import new_figure, stamp, table, write_page

NAME = "fuzz"
CASES = 1000
COMMAND_CASES = 100
TIMEOUT = 20
MEMORY_JUMP = 512 << 20
OUTCOMES = ["ok", "clean error", "unclear error", "traceback", "wrong", "hang", "memory", "partial file"]
DEFECTS = ["unclear error", "traceback", "wrong", "hang", "memory", "partial file"]


class Hang(BaseException):
    """Raised by the alarm; a BaseException so that no reader's ``except Exception`` swallows it."""


def _alarm(signum, frame):
    raise Hang()


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _listing(d: str) -> set[str]:
    return {os.path.relpath(os.path.join(r, n), d) for r, _, ns in os.walk(d) for n in ns}


def _damage(path: str, victims: list[str], rng: random.Random, kind: str) -> str:
    """Apply ``kind`` ('mutate' or 'bytes') to one of ``victims``; return a description of the damage."""
    victim = rng.choice(victims)
    with open(victim, "rb") as f:
        data = f.read()
    if kind == "bytes":
        new, what = rng.randbytes(rng.randint(0, 400)), "random bytes"
    else:
        ops = random_ops(rng)
        new, what = mutate(data, ops), ", ".join(op.kind for op in ops)
    if new == data:  # the mutation changed nothing (a line swapped with an equal one...)
        return "as written"
    with open(victim, "wb") as f:
        f.write(new)
    return f"{os.path.relpath(victim, os.path.dirname(path))}: {what}"


def run_reader_case(reader: Reader, case: int, scratch: str) -> tuple[str, str]:
    """One case of ``reader`` (module docstring); returns (outcome, detail)."""
    rng = random.Random(case)
    d = tempfile.mkdtemp(dir=scratch)
    try:
        path, reference = reader.make(d, rng)
        roll = rng.random()
        kind = "as written" if roll < 0.1 else "bytes" if roll < 0.2 else "mutate"
        damage = kind if kind == "as written" else _damage(path, reader.victims(path), rng, kind)
        kind = "as written" if damage == "as written" else kind
        before, peak = _listing(d), _peak_rss()
        signal.alarm(TIMEOUT)
        try:
            result = reader.read(path)
            signal.alarm(0)
        except Hang:
            return "hang", damage
        except UserError as e:
            signal.alarm(0)
            if kind == "as written":
                return "wrong", f"{damage}: refused its own file: {e}"
            return ("clean error" if str(e).startswith(path) else "unclear error"), f"{damage}: {e}"
        except Exception as e:  # noqa: BLE001 -- the defect being counted
            signal.alarm(0)
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return "traceback", f"{damage}: {type(e).__name__}: {e} ({os.path.basename(tb.filename)}:{tb.lineno})"
        finally:
            signal.alarm(0)
        if _peak_rss() - peak > MEMORY_JUMP:
            return "memory", damage
        if _listing(d) != before:
            return "partial file", f"{damage}: {sorted(_listing(d) - before)}"
        try:
            if (kind == "as written" or reader.strict) and not reader.same(result, reference):
                return "wrong", f"{damage}: read, but does not give what was written"
            oracle = ORACLES.get(reader.name)
            if oracle is not None:
                want = oracle(path)
                if want is None or want != result:
                    return "wrong", f"{damage}: read {str(result)[:80]}, the reading rules give {str(want)[:80]}"
            problem = reader.check(result)
        except UserError as e:  # refused when used (e.g. an n-gram model that gives a probability above 1)
            if kind == "as written" or not str(e).startswith(path):
                return ("wrong" if kind == "as written" else "unclear error"), f"{damage}: when used: {e}"
            return "clean error", f"{damage}: when used: {e}"
        except Exception as e:  # noqa: BLE001 -- a result that breaks what comes next is a defect too
            return "traceback", f"{damage}: using the result: {type(e).__name__}: {e}"
        return ("wrong", f"{damage}: {problem}") if problem else ("ok", damage)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- commands ------------------------------------------------------------------------------------------------
def _corpus_text(rng: random.Random, n: int) -> str:
    return "".join(" ".join(f"w{rng.randrange(15)}" for _ in range(rng.randint(1, 9))) + "\n" for _ in range(n))


class CommandFixtures:
    """A valid corpus, ARPA model, n-best list and lattice directory, made once; cases damage copies."""

    def __init__(self, d: str):
        from sampledlm.cli import main
        from .fuzz_readers import _make_lattice, _make_nbest

        rng = random.Random(7)
        self.dir = d
        for name, n in (("train", 200), ("test", 20)):
            with open(os.path.join(d, f"{name}.txt"), "w") as f:
                f.write(_corpus_text(rng, n))
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            try:
                main(["ngram", "train", "--train", f"{d}/train.txt", "--order", "3", "-o", f"{d}/k3.arpa"])
            except SystemExit as e:
                assert not e.code, "training the fuzz campaign's n-gram failed"
        _make_nbest("jsonl")(d, rng)
        os.makedirs(f"{d}/lats")
        for i in range(3):
            sub = tempfile.mkdtemp(dir=d)
            p, _ = _make_lattice(sub, rng)
            os.replace(p, f"{d}/lats/u{i}.slf")
            os.rmdir(sub)


#: command -> (the input it damages, the argv with {IN} for the damaged copy and {OUT} for an output, output name)
COMMANDS = {
    "vocab": ("train.txt", ["vocab", "{IN}", "-o", "{OUT}"], "vocab.txt"),
    "ngram train": ("train.txt", ["ngram", "train", "--train", "{IN}", "--order", "3", "-o", "{OUT}"], "out.arpa"),
    "ngram eval": ("k3.arpa", ["ngram", "eval", "{IN}", "--test", "{FX}/test.txt"], None),
    "score": ("test.txt", ["score", "{FX}/k3.arpa", "{IN}"], None),
    "rescore n-best": ("lists.jsonl", ["rescore", "{FX}/k3.arpa", "{IN}", "--one-best", "{OUT}"], "best.txt"),
    "rescore lattices": ("lats", ["rescore", "{FX}/k3.arpa", "{IN}", "--format", "slf", "--one-best", "{OUT}"],
                         "best.txt"),
}


def _is_ours_temp(name: str) -> bool:
    base = os.path.basename(name)
    return base.startswith(".") and base.endswith(".tmp")


def run_command_case(command: str, fx: CommandFixtures, case: int, scratch: str) -> tuple[str, str]:
    from sampledlm.cli import main

    src, argv, out_name = COMMANDS[command]
    rng = random.Random(10_000 + case)
    d = tempfile.mkdtemp(dir=scratch)
    try:
        inp = os.path.join(d, os.path.basename(src))
        srcp = os.path.join(fx.dir, src)
        (shutil.copytree if os.path.isdir(srcp) else shutil.copy)(srcp, inp)
        victims = [os.path.join(inp, n) for n in sorted(os.listdir(inp))] if os.path.isdir(inp) else [inp]
        damage = _damage(inp, victims, rng, "bytes" if rng.random() < 0.15 else "mutate")
        out = os.path.join(d, out_name) if out_name else None
        args = [a.replace("{IN}", inp).replace("{FX}", fx.dir).replace("{OUT}", out or "") for a in argv]
        before = _listing(d)
        err, sink = io.StringIO(), io.StringIO()
        signal.alarm(TIMEOUT)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(sink):
                main(args)
            code = 0
        except SystemExit as e:
            code = e.code or 0
        except Hang:
            return "hang", damage
        except Exception as e:  # noqa: BLE001 -- the defect being counted
            tb = traceback.extract_tb(e.__traceback__)[-1]
            return "traceback", f"{damage}: {type(e).__name__}: {e} ({os.path.basename(tb.filename)}:{tb.lineno})"
        finally:
            signal.alarm(0)
        new = _listing(d) - before
        if any(_is_ours_temp(n) for n in new):
            return "partial file", f"{damage}: temporary file left: {sorted(new)}"
        if code == 0:
            return "ok", damage
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip() and not ln.startswith("\r")]
        if out and os.path.exists(out):
            return "partial file", f"{damage}: {out_name} written although the command failed"
        message = lines[-1] if lines else ""
        clean = (code == 1 and message.startswith("sampledlm: error: ") and inp in message
                 and sum(ln.startswith("sampledlm: error:") for ln in lines) == 1)
        return ("clean error" if clean else "unclear error"), f"{damage}: exit {code}: {message[:160]}"
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- the campaign and its page -------------------------------------------------------------------------------
def _campaign(names: list[str], run_one, n: int) -> dict:
    out = {}
    for name in names:
        counts, examples, t0 = Counter(), {}, time.perf_counter()
        for c in range(n):
            outcome, detail = run_one(name, c)
            counts[outcome] += 1
            if outcome != "ok" and outcome != "clean error":
                examples.setdefault(outcome, []).append(f"case {c}: {detail}")
            elif outcome == "clean error":
                examples.setdefault(outcome, [])
                if len(examples[outcome]) < 2:
                    examples[outcome].append(f"case {c}: {detail}")
        out[name] = {"cases": n, **{o: counts[o] for o in OUTCOMES},
                     "seconds": round(time.perf_counter() - t0, 1),
                     "examples": {k: v[:5] for k, v in examples.items()}}
        print(f"  {name}: " + ", ".join(f"{o} {counts[o]}" for o in OUTCOMES if counts[o]), flush=True)
    return out


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    n, m = (15, 5) if quick else (CASES, COMMAND_CASES)
    old = signal.signal(signal.SIGALRM, _alarm)
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="sampledlm-fuzz-") as scratch:
            by_name = {r.name: r for r in READERS}
            print(f"readers ({n} cases each):", flush=True)
            readers = _campaign(list(by_name), lambda name, c: run_reader_case(by_name[name], c, scratch), n)
            fx_dir = tempfile.mkdtemp(dir=scratch)
            fx = CommandFixtures(fx_dir)
            print(f"commands ({m} cases each):", flush=True)
            commands = _campaign(list(COMMANDS), lambda name, c: run_command_case(name, fx, c, scratch), m)
    finally:
        signal.signal(signal.SIGALRM, old)
    data = {"quick": quick, "readers": readers, "commands": commands, "what": {r.name: r.what for r in READERS},
            "peak_rss_mb": round(_peak_rss() / 2**20), "seconds": round(time.perf_counter() - t0, 1),
            "load_average": os.getloadavg()[0]}
    write_page(out_dir, NAME, "Fuzzed readers and commands: damaged and random inputs, counted by outcome",
               stamp(), data, render(data), figure=figure(data))
    return data


def _rows(section: dict, what: dict | None = None) -> list[list]:
    rows = []
    for name, r in section.items():
        defects = sum(r[o] for o in DEFECTS)
        rows.append([name] + ([what.get(name, "")] if what else []) + [r["cases"], r["ok"], r["clean error"]]
                    + [r[o] for o in DEFECTS] + [defects])
    total = [sum(r[o] for r in section.values()) for o in ["cases", "ok", "clean error"] + DEFECTS]
    rows.append(["**all**"] + ([""] if what else []) + total + [sum(total[3:])])
    return rows


def render(data: dict) -> str:
    head = ["cases", "read, valid", "clean error"] + DEFECTS + ["defects"]
    lines = [__doc__.split("\n\n", 1)[1].strip().replace("``", "`"), ""]
    if data["quick"]:
        lines += ["**A quick run (a smoke test): too few cases to say anything.**", ""]
    lines += ["## Readers", "", table(["reader", "format"] + head, _rows(data["readers"], data["what"])), "",
              "## Commands", "", table(["command"] + head, _rows(data["commands"])), "",
              f"Peak memory of the whole campaign: {data['peak_rss_mb']} MB; {data['seconds']} s; "
              f"load average {data['load_average']:.1f}.", "", "## Examples", ""]
    for section in ("readers", "commands"):
        for name, r in data[section].items():
            for outcome, ex in r["examples"].items():
                for e in ex:
                    lines.append(f"- {name}, {outcome}: {e}")
    lines += ["", "Each case is reproducible: reader cases draw everything from `random.Random(case)`, command "
              "cases from `random.Random(10000 + case)` (src/sampledlm/bench/fuzz.py). The property-based tests "
              "(tests/*/test_*fuzz.py) attack the same readers with hypothesis in CI."]
    return "\n".join(lines) + "\n"


def figure(data: dict):
    """Share of cases by outcome, a bar per reader and per command."""
    fig, ax = new_figure(figsize=(8, 5))
    rows = [(f"{n} (reader)", r) for n, r in data["readers"].items()] + \
           [(f"{n} (command)", r) for n, r in data["commands"].items()]
    names, left = [n for n, _ in rows], [0.0] * len(rows)
    colours = ["tab:green", "tab:blue", "tab:olive", "tab:red", "black", "tab:purple", "tab:brown", "tab:orange"]
    for outcome, colour in zip(OUTCOMES, colours):
        vals = [r[outcome] / r["cases"] for _, r in rows]
        if any(vals):
            ax.barh(names, vals, left=left, color=colour, label=outcome)
        left = [a + b for a, b in zip(left, vals)]
    ax.invert_yaxis()
    ax.set_xlabel("share of cases")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Damaged inputs: how each reader and command ended")
    fig.tight_layout()
    return fig
