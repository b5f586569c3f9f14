"""Issue 56, deliverable 3: the neural rows at V = 485k on the CPU, every row under one fixed budget of CPU seconds
on one thread (the protocol of Chen, Grangier & Auli 2016: output layers compared at equal training time).

    nice -n 19 env OMP_NUM_THREADS=1 python -m benchmarks.large_vocab neural --data /work/data/wiki \\
        --work /work/data/wiki-runs [--budget 7200] [--rows nce,is]

Each row trains with the toolkit's own command line (``python -m sampledlm train``), one process at a time, in
``WORK/neural/<row>/run``; its log is ``WORK/neural/<row>/train.log``. Running the step again skips the rows
recorded in ``benchmarks/notes/large-vocab.jsonl`` (key ``neural/<row>``), resumes a stopped one from its last
checkpoint (``--resume``; a checkpoint about every :data:`CHECKPOINT_CPU_S` CPU seconds), and starts the next.
SIGTERM to the step is passed on to the training, which writes a checkpoint and stops; nothing is recorded for that row
(nor when the training alone gets the signal).

How a row spends its budget (decided here, the same for every row):

- ``sampledlm train`` validates only at the end of an epoch (or of a partial one that a budget ended), and one
  pass over the 165.5M training tokens takes 3-90 CPU-hours depending on the output layer. So each row trains
  :data:`EPOCHS` epochs over the first N tokens of the training text (whole lines), N sized from the row's
  measured words per CPU second (the speed rows at V = 485k, else a short pilot run) so that the epochs fill the
  budget: ``N = speed x (budget - EPOCHS x estimated validation cost) x SAFETY / EPOCHS``. A faster output layer
  thus sees more of the corpus in the same CPU time; the rate follows the GRU's default cosine decay over the
  EPOCHS epochs; ``--max-time BUDGET --time-clock cpu`` stops a run that is slower than planned at the step that
  passes the budget (the partial epoch validated; before 2026-12-01, at the end of that epoch). The budget
  clock is the trainer's (training loop and validation, the process's CPU seconds); what runs before the first
  step (reading the data, class/hsm's word clustering) is outside it and reported beside it. The speed comes from the speed rows (a few hundred steps), which ran 20-30 % slower than a
  long run does; so each row's first stretch (to its first checkpoint, about 5 CPU-minutes) is measured, and a row
  more than 10 % off its plan starts again with epochs sized from that measurement (:func:`calibrate`; the
  discarded start is recorded in the row's plan).
- Validation: a fixed subset of valid.txt, its lines taken at an even stride (every k-th line, in order),
  about :data:`VALID_TOKENS` tokens (exact evaluation over 485k words costs about 7 CPU ms a token, so
  all 280k validation tokens would take over half an hour per epoch). The same subset for every row.
- Test: exact perplexity over the **whole** test text (222,487 tokens + 4,845 ``</s>``, the text KN5's 128.66
  counts), once per finished row, one thread, its time recorded (about 25 CPU-minutes for a row normalised
  over all of V). Decision: the whole text, so that every row is compared with KN5 on the same predictions.
- Learning rates: chosen per row by a race over the first epoch (:mod:`.large_vocab_race`): the objective's
  default rate as PTB's lr grid chose it, half of it, and lower while the lowest is the best; the best validation
  after epoch 1 goes on.
- The softmax is not trained: a short pilot run measures its words per CPU second at V = 485k, and the page
  projects what the budget would buy (labelled projected).
- The Transformer takes the output of the best finished GRU row (lowest test perplexity) at its turn.
- One pass instead of EPOCHS (:data:`PASS_ROWS`, run when named: ``--rows css-is-1p``): the same budget, speed,
  steps, cosine and rate as its row, over EPOCHS times its text read once, validated EPOCHS times within the epoch
  (``--valid-every``). 4 passes over a 27M-token prefix leave out the words of the other 138M; this row measures
  what that costs. ``css-is-1p-bf16``: the same under ``--precision bf16`` (:data:`PRECISION_ROWS`), its text sized
  by its row's speed times bf16's speed-up measured by alternated pilots; ``css-is-1p-bf16-b64`` and
  ``css-is-1p-bf16-d0``: that row with one setting changed, 64 BPTT rows a step or dropout 0 (:data:`VARIANT_ROWS`),
  its text sized by that row's planned speed times the setting's measured speed-up.
- Memory: a row whose speed run at V = 485k was killed for memory or peaked above the cap (:data:`MEMORY_CAP_MB`)
  is skipped with the reason recorded; every training process is watched and killed at the cap (recorded so).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

from . import large_vocab_race as race
from . import large_vocab_kn5_text as kn5_text
from . import large_vocab_record as record
from . import lmruns
from .large_vocab_record import append_row, read_rows, v_full

ROWS = ("nce", "is", "blackout", "css-is", "class", "hsm", "adaptive", "transformer", "softmax")
BUDGET_CPU_S = 7200.0  # 2 CPU-hours a row, one thread
EPOCHS = 4
VALID_TOKENS = 10_000
EVAL_CPU_S_PER_TOKEN = 0.007  # exact evaluation normalised over V = 485k (eval-speed/full: ~41.7 CPU s, 5,132 tokens)
SAFETY = 0.95  # the share of the planned budget the epochs are sized for (speeds vary on a shared machine)
#: the quick run's share: its 2,000-token pilots and 20-second budget are at the mercy of the machine's load, and
#: a smoke test must finish its epochs whatever the load (the CPU seconds a step vary by a third or more when the
#: other core of a hyperthreaded pair is busy)
QUICK_SAFETY = 0.5
MEMORY_CAP_MB = 14_000  # a training process above this is killed (the machine has 24 GiB, shared)
CHECKPOINT_CPU_S = 300.0  # a checkpoint about every 5 CPU-minutes of training (the steps: from the planned speed)
BATCH_PREDICTIONS = {"gru": 32 * 35, "transformer": 32 * 64}  # default batches: rows x BPTT (GRU) or window
#: rows whose output's training code changed after they were planned: a recorded plan or race candidate of an earlier
#: revision (records without one are revision 1) is set aside, and the row is planned and raced again from its new
#: speed rows. hsm 2 (2026-12-02): wide nodes scored pair by pair, 1.9x its words per CPU second at V = 485k, so the
#: plan sized for the old speed would leave about 40 % of the budget unspent.
REVISIONS = {"hsm": 2}
CALIBRATION_TOLERANCE = 0.10  # re-plan a row whose first stretch runs this much faster or slower than planned
PILOT_TOKENS = {"softmax": 20_000, "transformer": 100_000}
THREADS = 1
#: rows on two threads (the same budget of CPU seconds, both threads' counted), beside faster-rnnlm's 2-thread runs
#: (deliverable 4); run only when named (``--rows nce-2t``), after the one-thread rows
THREAD_ROWS = ("nce-2t", "hsm-2t")
#: rows that read their text once: the same budget and speed as their row, over EPOCHS times the text in one epoch,
#: validated EPOCHS times within it (``--valid-every``), at the rate their one-pass-over-a-prefix row's race chose.
#: The question they answer: do 4 passes over a prefix waste the budget on a corpus this large, where a prefix of
#: 27M tokens leaves many of the vocabulary's rare words unseen? Run only when named (``--rows css-is-1p``)
PASS_ROWS = ("css-is-1p", "css-is-1p-bf16", "css-is-1p-bf16-b64", "css-is-1p-bf16-d0")
#: rows trained under a lower-precision autocast (``--precision``): the one-pass row again, its text sized by its
#: row's calibrated speed times the speed-up its precision measured on this machine (fp32 and bf16 pilots, alternated,
#: :func:`pilot_ratio`), so that it reads what the budget buys at that speed; validation and test stay float32
#: and exact. The question: what the trainer's bf16 path (1.58x on PTB at equal test perplexity, 98.44 against
#: 98.39, benchmarks/notes/cpu-step-2026-11-27.md) buys within the budget at V = 485k
PRECISION_ROWS = {"css-is-1p-bf16": "bf16", "css-is-1p-bf16-b64": "bf16", "css-is-1p-bf16-d0": "bf16"}
PRECISION_PILOT_TOKENS = 300_000  # each of the 4 alternated pilots: about 20-35 CPU s at V = 485k
#: rows that change one setting of a finished one-pass row, their parent: ``row: (parent, flag, the parent's value,
#: the row's value, the pilots' label)``. The parent's flags (its precision, its objective's sample count as its run
#: resolved it, its rate) with the one setting changed, the text sized by the speed the parent planned on times the
#: speed-up of pilots alternating the parent's value with the row's (:func:`pilot_ratio`): planned the way its parent
#: was, so that a budget stop ends both the same way (the parent's speed over its run, 17,879 against 21,562 planned
#: beside a CI run, would plan a shorter text than the parent's and leave budget unspent on a quieter machine).
#: css-is-1p-bf16-b64: 64 BPTT rows a step instead of 32 (in 300k-token pilots under bf16 at V = 485k, 2026-12-02, a
#: step's fixed costs, the row-sparse Adam over the step's rows and the small recurrent products, spread over twice
#: the positions: 1.2-1.5x the words per CPU second), so the budget reads more of the corpus in half the steps.
#: css-is-1p-bf16-d0: dropout 0 instead of the GRU's default 0.25 (the parent's run config): the default was chosen on
#: PTB, where 8 epochs over 0.93M words overfit; a row that reads 141M tokens once sees no text twice, so dropout can
#: only slow its learning. The question of both: is the setting a default that V = 485k and a 165M-token corpus
#: should change (issue 56: "defaults tuned on PTB must earn their place")?
VARIANT_ROWS = {"css-is-1p-bf16-b64": ("css-is-1p-bf16", "--batch-size", "32", "64", "b"),
                "css-is-1p-bf16-d0": ("css-is-1p-bf16", "--dropout", "0.25", "0", "d")}
#: the quick run's neural step (the smoke test): two trained rows, the projection, KN5 + the best, in seconds
QUICK = {"budget": 20.0, "epochs": 2, "rows_wanted": ("nce", "transformer", "softmax"), "valid_tokens": 500,
         "quick": True, "lr_halvings": 1}


class Stopped(Exception):
    """The step, or its training alone, was asked to stop (SIGTERM/SIGINT); the training wrote its checkpoint."""


STOP_EXIT_CODES = (130, 143, -2, -15)  # a training's exit on SIGINT/SIGTERM (after its checkpoint), or the signal's


# --- a training process, watched ------------------------------------------------------------------------------
_current: dict = {"proc": None, "stop": False}


def _on_signal(signum, frame):
    _current["stop"] = True
    p = _current["proc"]
    if p is not None and p.poll() is None:
        p.send_signal(signal.SIGTERM)  # the trainer checkpoints and stops


def install_signal_handlers() -> None:
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, _on_signal)


def _rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def run_watched(argv: list[str], log: str, cap_mb: float = MEMORY_CAP_MB, stdout: str | None = None,
                poll=None) -> dict:
    """Run ``argv`` (stderr, and stdout unless ``stdout`` names a file, appended to ``log``), killing it when its
    resident memory passes ``cap_mb``; ``poll()`` is called every few seconds while it runs, and when it returns
    True the process gets SIGTERM (a training checkpoints and stops). Returns rc, wall_s, cpu_s (user + system,
    from wait4), peak_mb (wait4's maximum RSS) and ``killed_for_memory``."""
    os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
    killed = {"mb": None}
    with open(log, "a", encoding="utf-8") as lf:
        lf.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  {' '.join(argv)}\n")
        lf.flush()
        out = open(stdout, "w", encoding="utf-8") if stdout else lf
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=out, stderr=lf)
        _current["proc"] = p

        def watch():
            asked = False
            while p.returncode is None:
                mb = _rss_mb(p.pid)
                if mb is not None and mb > cap_mb:
                    killed["mb"] = mb
                    p.kill()
                    return
                if poll is not None and not asked:
                    try:
                        asked = bool(poll())
                    except Exception:  # noqa: BLE001 - a half-written checkpoint read too early: try again
                        asked = False
                    if asked:
                        p.send_signal(signal.SIGTERM)
                time.sleep(2.0)

        threading.Thread(target=watch, daemon=True).start()
        if _current["stop"]:
            p.send_signal(signal.SIGTERM)
        while True:
            try:
                _, status, ru = os.wait4(p.pid, 0)
                break
            except InterruptedError:
                continue
        p.returncode = os.waitstatus_to_exitcode(status)
        _current["proc"] = None
        if stdout:
            out.close()
    res = {"rc": p.returncode, "wall_s": round(time.perf_counter() - t0, 1),
           "cpu_s": round(ru.ru_utime + ru.ru_stime, 1), "peak_mb": round(ru.ru_maxrss / 1024, 1),
           "killed_for_memory": killed["mb"] is not None, "argv": argv,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if killed["mb"] is not None:
        res["killed_at_mb"] = round(killed["mb"], 1)
    return res


# --- data --------------------------------------------------------------------------------------------------------
def count_predictions(path: str) -> int:
    """Tokens plus one ``</s>`` per line: the predictions of one pass."""
    n = lines = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            n += len(line.split())
            lines += 1
    return n + lines


def prefix_file(src: str, dst: str, tokens: int) -> None:
    """The first whole lines of ``src`` holding at least ``tokens`` tokens (kept once written)."""
    if os.path.exists(dst):
        return
    record.prefix_file(src, dst, tokens)


def strided_file(src: str, dst: str, tokens: int) -> None:
    """Every k-th line of ``src`` (k chosen so that about ``tokens`` tokens are kept), in order: a fixed,
    deterministic subset spread over all its articles."""
    if os.path.exists(dst):
        return
    with open(src, encoding="utf-8") as f:
        lines = f.readlines()
    total = sum(len(line.split()) for line in lines)
    k = max(1, math.floor(total / max(tokens, 1)))
    with open(dst + f".tmp{os.getpid()}", "w", encoding="utf-8") as g:
        g.writelines(lines[::k])
    os.replace(dst + f".tmp{os.getpid()}", dst)


def vocab_file(data: str, dst: str, unk_count: int) -> str:
    return record.vocab_file(data, "", dst, unk_count)


# --- plans ---------------------------------------------------------------------------------------------------------
def row_model(row: str) -> str:
    return "transformer" if row == "transformer" else "gru"


def row_threads(row: str) -> int:
    return 2 if row.endswith("-2t") else THREADS


def row_objective(row: str) -> str:
    """The objective a GRU row trains (``nce-2t``, ``css-is-1p``: ``nce``, ``css-is``); the Transformer's is chosen
    in :func:`make_plan`."""
    return row.removesuffix("-b64").removesuffix("-d0").removesuffix("-bf16").removesuffix("-2t").removesuffix("-1p")


def row_epochs(row: str, epochs: int) -> int:
    """The epochs a row trains: ``epochs``, or one for a row that reads its text once (:data:`PASS_ROWS`)."""
    return 1 if row in PASS_ROWS else epochs


def batch_predictions(model: str, row: str | None = None) -> int:
    """Predictions a step: the model's default batch, or the rows x BPTT of a row that sets its own batch."""
    v = VARIANT_ROWS.get(row)
    return int(v[3]) * 35 if v and v[1] == "--batch-size" else BATCH_PREDICTIONS[model]


def batches_of(predictions: int, model: str, row: str | None = None) -> int:
    """About the optimiser steps of one epoch of ``predictions`` (the row's batch's predictions a step)."""
    return max(1, math.ceil(predictions / batch_predictions(model, row)))


def base_options(model: str, objective: str, vocab: str, threads: int = THREADS) -> list[str]:
    # the GRU rows were defined at dropout 0.25, which a run reading its text once no longer gets by default
    # (since 2026-12-02); a variant's own --dropout, later on the line, overrides it
    return ["--vocab", vocab, "--model", model, "--objective", objective, "--device", "cpu", "--threads",
            str(threads), *(["--dropout", "0.25"] if model == "gru" else [])]


def best_gru_row(rows: dict) -> str | None:
    """The objective of the finished GRU row of lowest test perplexity (the Transformer's output)."""
    got = [(r["test"]["ppl"], r["objective"]) for k, r in rows.items()
           if k.startswith("neural/") and r.get("rc") == 0 and r.get("model") == "gru" and r.get("test")
           and r.get("row") not in THREAD_ROWS]
    return min(got)[1] if got else None


def skip_reason(row: str, rows: dict, cap_mb: float) -> str | None:
    """Why ``row`` is not trained at V = 485k (from its speed row), or None."""
    if row in ("transformer", "softmax"):
        return None
    sp = rows.get(f"speed/{row}/full")
    if not sp:
        return None
    peak = sp.get("process", {}).get("peak_mb")
    if sp.get("rc") == -9:
        return (f"its speed run at V = 485k (the same training, {sp.get('tokens', 0):,} tokens) was killed by the "
                f"kernel for memory at a peak RSS of {peak:,.0f} MB (speed/{row}/full): above the {cap_mb:,.0f} MB "
                "this shared 24 GiB machine can give a row; see the findings")
    if peak and peak > cap_mb:
        return f"its speed run at V = 485k peaked at {peak:,.0f} MB, above the {cap_mb:,.0f} MB cap"
    return None


def measured_speed(row: str, objective: str, rows: dict, notes: str, work: str, files: dict, pilot_tokens: int,
                   cap_mb: float) -> tuple[float | None, str, dict | None]:
    """``(words per CPU second of the training loop, where it comes from, the pilot's row or None)``."""
    if row in VARIANT_ROWS:  # the speed its parent planned on, times its setting's measured speed-up
        first, flag, _, value, _ = VARIANT_ROWS[row]
        got = pilot_ratio(row, objective, rows, notes, work, files, cap_mb, variant_sides(row, rows))
        if not got.get("ratio"):
            return None, f"neural-pilot/{row}", got
        what = f"batch {value}" if flag == "--batch-size" else f"{flag.removeprefix('--')} {value}"
        return (rows[f"neural/{first}"]["plan"]["words_per_cpu_s_planned"] * got["ratio"],
                f"neural/{first} (its plan) x {got['ratio']:.3f} ({what} pilots)", got)
    parent = rows.get(f"neural/{objective}", {}).get("plan", {}).get("calibration", {})
    if row in PRECISION_ROWS and parent.get("words_per_cpu_s"):  # its row's long-run speed, times its precision's
        low = PRECISION_ROWS[row]
        got = pilot_ratio(row, objective, rows, notes, work, files, cap_mb, [("fp32", "fp32", ()), (low, low, ())])
        if not got.get("ratio"):
            return None, f"neural-pilot/{row}", got
        return (parent["words_per_cpu_s"] * got["ratio"],
                f"neural/{objective} (its calibration) x {got['ratio']:.3f} ({PRECISION_ROWS[row]} pilots)", got)
    if row in PASS_ROWS and parent.get("words_per_cpu_s"):  # its row's own long-run speed: the same steps planned
        return parent["words_per_cpu_s"], f"neural/{objective} (its calibration)", None
    # the speed rows ran on one thread: a two-thread row measures its own speed with a pilot
    sp = rows.get(f"speed/{objective}/full") if row_model(row) == "gru" and row_threads(row) == THREADS else None
    if sp and sp.get("rc") == 0 and sp.get("words_per_cpu_s"):
        return sp["words_per_cpu_s"], f"speed/{objective}/full", None
    key = f"neural-pilot/{row}"
    got = rows.get(key)
    if not (got and got.get("objective") == objective and got.get("tokens") == pilot_tokens):
        got = pilot(row, objective, work, files, pilot_tokens, cap_mb)
        rows[key] = append_row({"key": key, **got}, notes)
    return (got.get("words_per_cpu_s"), key, got)


def variant_sides(row: str, rows: dict) -> list[tuple[str, str, tuple[str, ...]]]:
    """The two sides of a variant row's pilots (:data:`VARIANT_ROWS`): its parent's flags with the parent's value
    of the setting, then with the row's; the second side's flags are the ones the row trains with."""
    first, flag, theirs, ours, tag = VARIANT_ROWS[row]
    opts = rows[f"neural/{first}"].get("objective_options", {})
    same = (*(["--samples", str(opts["samples"])] if "samples" in opts else []),)
    low = PRECISION_ROWS.get(row, "fp32")
    return [(f"{tag}{theirs}", low, (*same, flag, theirs)), (f"{tag}{ours}", low, (*same, flag, ours))]


def pilot_ratio(row: str, objective: str, rows: dict, notes: str, work: str, files: dict, cap_mb: float,
                sides: list[tuple[str, str, tuple[str, ...]]]) -> dict:
    """The row's setting against its reference in words per CPU second: pilots of its objective over the same
    :data:`PRECISION_PILOT_TOKENS`, ``sides`` (``(label, precision, extra flags)``: the reference, then the row's)
    alternated twice (a shared machine's load drifts); the ratio of the two sides' summed speeds. Recorded as
    ``neural-pilot/<row>`` (each run's label under ``precision``, as the bf16 rows' first record has it) and taken
    from there."""
    key = f"neural-pilot/{row}"
    got = rows.get(key)
    if got and got.get("tokens") == PRECISION_PILOT_TOKENS and got.get("ratio"):
        return got
    runs = []
    for _ in range(2):
        for label, precision, extra in sides:
            r = pilot(row, objective, work, files, PRECISION_PILOT_TOKENS, cap_mb, precision, extra)
            runs.append({"precision": label, **({"flags": " ".join(extra)} if extra else {}),
                         **{k: r.get(k) for k in ("rc", "words_per_cpu_s", "train_cpu_s")}})
            if r["rc"] != 0:
                rows[key] = append_row({"key": key, "row": row, "objective": objective, "tokens":
                                        PRECISION_PILOT_TOKENS, "runs": runs, "process": r["process"]}, notes)
                return rows[key]
    speed = {label: sum(r["words_per_cpu_s"] for r in runs if r["precision"] == label) for label, _, _ in sides}
    rows[key] = append_row({"key": key, "row": row, "objective": objective, "tokens": PRECISION_PILOT_TOKENS,
                            "runs": runs, "ratio": speed[sides[1][0]] / speed[sides[0][0]]}, notes)
    return rows[key]


def pilot(row: str, objective: str, work: str, files: dict, tokens: int, cap_mb: float,
          precision: str | None = None, extra: tuple[str, ...] = ()) -> dict:
    """A short run (one pass over the first ``tokens`` training tokens, a one-line validation text) that measures
    the row's words per CPU second at the full vocabulary (under ``--precision`` when given, ``extra`` flags
    added)."""
    import shutil

    d = os.path.join(work, "neural", row)
    os.makedirs(d, exist_ok=True)
    train = os.path.join(work, "neural", "data", f"pilot-{tokens}.txt")
    prefix_file(files["train"], train, tokens)
    tiny = os.path.join(work, "neural", "data", "valid-one-line.txt")
    if not os.path.exists(tiny):
        with open(files["valid"], encoding="utf-8") as f, open(tiny, "w", encoding="utf-8") as g:
            g.write(next(f))
    rd = os.path.join(d, "pilot")
    shutil.rmtree(rd, ignore_errors=True)
    argv = lmruns_cmd("train", "--train", train, "--valid", tiny,
                      *base_options(row_model(row), objective, files["vocab"], row_threads(row)), "--epochs", "1",
                      *(["--precision", precision] if precision else []), *extra, "-o", rd)
    r = run_watched(argv, os.path.join(d, "pilot.log"), cap_mb)
    n = count_predictions(train)
    out = {"row": row, "model": row_model(row), "objective": objective, "tokens": tokens, "predictions": n,
           "process": {k: v for k, v in r.items() if k != "argv"}, "command": " ".join(argv), "rc": r["rc"]}
    if r["rc"] == 0:
        m = lmruns.epochs(rd)[0]
        out.update(train_cpu_s=m["cpu_s"], steps=m["step"], words_per_cpu_s=n / m["cpu_s"],
                   step_cpu_s=m["cpu_s"] / max(m["step"], 1))
    shutil.rmtree(rd, ignore_errors=True)  # GBs of weights and optimiser state
    return out


def lmruns_cmd(*args: str) -> list[str]:
    return lmruns.command(*args)


def checkpoint_steps(speed: float, model: str = "gru", row: str | None = None) -> int:
    """Steps between checkpoints: about :data:`CHECKPOINT_CPU_S` CPU seconds of training at ``speed`` (at least
    100 steps); the first one also calibrates the plan (:func:`calibrate`)."""
    return max(100, int(round(CHECKPOINT_CPU_S * speed / batch_predictions(model, row), -2)))


def write_plan(d: str, plan: dict) -> None:
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "plan.json")
    with open(path + f".tmp{os.getpid()}", "w", encoding="utf-8") as f:
        json.dump(plan, f, indent=1)
    os.replace(path + f".tmp{os.getpid()}", path)


def make_plan(row: str, rows: dict, notes: str, work: str, files: dict, budget: float, epochs: int,
              cap_mb: float, quick: bool, speed_given: tuple[float, str] | None = None) -> dict:
    """The row's plan, written to ``WORK/neural/<row>/plan.json`` when it starts and read from there afterwards
    (so a resumed row trains what it started with). ``speed_given``: ``(words per CPU second, where it comes
    from)`` in place of the speed rows and pilots (a calibrated plan)."""
    d = os.path.join(work, "neural", row)
    path = os.path.join(d, "plan.json")
    passes, epochs = epochs, row_epochs(row, epochs)  # a one-pass row: its text is ``passes`` prefixes long
    if os.path.exists(path) and speed_given is None:
        with open(path, encoding="utf-8") as f:
            plan = json.load(f)
        if plan["budget"] != budget or plan["epochs"] != epochs:
            raise SystemExit(f"{path}: this row was started with --budget {plan['budget']:g} and {plan['epochs']} "
                             f"epochs, not {budget:g} and {epochs}; resume it with those, or move {d} away")
        return plan
    rec = rows.get(f"neural-plan/{row}")
    if rec and rec.get("revision", 1) != revision(row):
        rec = None
    if (speed_given is None and rec and not quick and rec["budget"] == budget and rec["epochs"] == epochs
            and os.path.exists(files["train"])):
        # the row's calibrated plan from another machine (the work directory went with it): the same epochs
        plan = make_plan(row, rows, notes, work, files, budget, passes, cap_mb, quick,
                         speed_given=(rec["words_per_cpu_s_planned"], rec["speed_source"]))
        if plan.get("epoch_predictions") == rec["epoch_predictions"]:
            plan.update(calibration=rec["calibration"], plan_recorded=rec["date"])
            write_plan(d, plan)
            return plan
        print(f"[neural] {row}: its recorded plan ({rec['epoch_predictions']:,} predictions an epoch) does not match "
              f"this corpus ({plan.get('epoch_predictions')}); planned afresh", file=sys.stderr, flush=True)
        os.remove(path)
    objective = row_objective(row)
    if row == "transformer":
        objective = best_gru_row(rows)
        if objective is None:
            return {"wait": "the Transformer takes the output of the best finished GRU row; none has finished"}
    if row in VARIANT_ROWS and f"neural/{VARIANT_ROWS[row][0]}" not in rows:
        return {"wait": f"it changes one setting of {VARIANT_ROWS[row][0]}, which has not finished"}
    model = row_model(row)
    pilot_tokens = PILOT_TOKENS.get(row, 100_000) if not quick else 2_000
    if speed_given:
        speed, source = speed_given
    else:
        speed, source, _ = measured_speed(row, objective, rows, notes, work, files, pilot_tokens, cap_mb)
    if speed is None:
        pr = rows.get(source, {}).get("process", {}) or {}
        why = (f"killed at {pr['killed_at_mb']:,.0f} MB resident (the cap)" if pr.get("killed_for_memory")
               else f"exit status {pr.get('rc')}")
        return {"failed": f"its pilot run ({source}) failed: {why}"}
    plan = {"row": row, "revision": revision(row), "model": model, "objective": objective, "budget": budget,
            "epochs": epochs,
            "words_per_cpu_s_planned": speed, "speed_source": source, "valid": files["valid_sub"],
            "valid_predictions": count_predictions(files["valid_sub"])}
    if row == "softmax":
        plan["projected"] = True
    else:
        valid_cost = passes * plan["valid_predictions"] * EVAL_CPU_S_PER_TOKEN  # one validation a pass either way
        tokens = int(speed * max(budget - valid_cost, budget / 2) * (QUICK_SAFETY if quick else SAFETY) / epochs)
        tokens = max(tokens, 1000)
        train = os.path.join(work, "neural", "data", f"train-{tokens}.txt")
        prefix_file(files["train"], train, tokens)
        plan.update(epoch_tokens_planned=tokens, train=train, epoch_predictions=count_predictions(train),
                    valid_cost_planned_s=round(valid_cost, 1),
                    options=[*base_options(model, objective, files["vocab"], row_threads(row)), "--epochs",
                             str(epochs), "--max-time", f"{budget:g}", "--time-clock", "cpu",
                             *(["--precision", PRECISION_ROWS[row]] if row in PRECISION_ROWS else []),
                             *(variant_sides(row, rows)[1][2] if row in VARIANT_ROWS else ()),
                             "--checkpoint-every", str(checkpoint_steps(speed, model, row))])
        if passes > epochs:  # validated as often as its row: every 1/passes of the epoch
            every = math.ceil(batches_of(plan["epoch_predictions"], model, row) / passes)
            plan.update(valid_every=every, passes=passes)
            plan["options"] += ["--valid-every", str(every)]
        first = VARIANT_ROWS[row][0] if row in VARIANT_ROWS else objective  # the row whose speed it plans on
        parent = rows.get(f"neural/{objective}", {}).get("plan", {}).get("calibration")
        if row in PASS_ROWS and parent and source.startswith(f"neural/{first} "):
            # decision: its row's long-run speed is its plan, kept (the same steps as its row is the point); a
            # first stretch measured while other jobs share the core's caches would shrink the text for good
            # (2026-12-02: 11,789 against 16,242 words per CPU second beside a CI run), and --max-time still ends
            # a run slower than planned
            plan["calibration"] = ({} if row in VARIANT_ROWS else {k: v for k, v in parent.items()
                                                                 if not k.startswith("discarded")}) | {
                "discarded": False, "inherited_from": f"neural/{first}"}
            if row in PRECISION_ROWS:  # its row's speed times its pilots' ratio: that is the speed it plans on
                plan["calibration"]["words_per_cpu_s"] = speed
        if row_threads(row) != THREADS or row in PASS_ROWS:
            # decision: a two-thread row trains at the rate its one-thread row's race chose (threads change the
            # order of the sums, not the optimisation), or its objective's default before that row is recorded;
            # a race of its own would cost two CPU-hours more a row. A one-pass row likewise: the same steps and
            # cosine over them as its row, on text it has not seen
            one = rows.get(f"neural/{first}", {})
            if one.get("rc") == 0 and one.get("lr"):
                plan["options"] += ["--lr", f"{one['lr']:g}"]
                plan["lr_from"] = f"neural/{first}"
    write_plan(d, plan)
    return plan


# --- a row -----------------------------------------------------------------------------------------------------
def invocations(d: str) -> list[dict]:
    path = os.path.join(d, "invocations.jsonl")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _note_start(d: str, argv: list[str], run: str = "run") -> None:
    """A line in ``starts.jsonl`` before each process starts: a process stopped with the session (SIGKILL at its
    end) never writes its ``invocations.jsonl`` line, and the page must not read its CPU as none. ``run``: the
    run directory's name (a learning-rate candidate's, :mod:`.large_vocab_race`)."""
    with open(os.path.join(d, "starts.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            "resume": "--resume" in argv, "run": run}) + "\n")


def invocations_of(d: str, rd: str) -> list[dict]:
    """The row's recorded processes that trained run directory ``rd`` (a row's candidates share the record)."""
    return [r for r in invocations(d) if rd in r.get("argv", [])]


def unrecorded_starts(d: str, inv: list[dict], run: str = "run") -> int:
    """Processes of the row's run ``run`` that ended without a record: the starts noted beyond the records, and at
    least one when the first record is a resume (rows begun before starts were noted). ``inv``: that run's."""
    path = os.path.join(d, "starts.jsonl")
    n = 0
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            n = sum(1 for line in f if line.strip() and json.loads(line).get("run", "run") == run)
    first_is_resume = bool(inv) and "--resume" in inv[0].get("argv", [])
    return max(n - len(inv), 1 if first_is_resume else 0)


def _note_invocation(d: str, r: dict) -> None:
    with open(os.path.join(d, "invocations.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(r) + "\n")


def first_stretch(rd: str) -> dict | None:
    """The training speed of the run's latest checkpoint when it is still in its first epoch (no validation yet:
    the CPU seconds are the training loop's alone): steps, predictions, CPU seconds, words per CPU second."""
    from sampledlm.neural import rundir

    ck = rundir.latest_checkpoint(rd) if os.path.isdir(rd) else None
    if ck is None:
        return None
    with open(os.path.join(ck, "trainer_state.json"), encoding="utf-8") as f:
        st = json.load(f)
    if st["epoch"] != 0 or not st["cpu_seconds"]:
        return None
    return {"steps": st["step"], "predictions": st["epoch_tokens"], "cpu_s": round(st["cpu_seconds"], 1),
            "words_per_cpu_s": st["epoch_tokens"] / st["cpu_seconds"]}


def calibrate(plan: dict, work: str, files: dict, rows: dict, notes: str, cap_mb: float, quick: bool) -> dict:
    """Once per row: the speed of its first stretch (up to its first checkpoint, about :data:`CHECKPOINT_CPU_S`
    CPU seconds) against the plan's. Beyond :data:`CALIBRATION_TOLERANCE` the epochs would not fill the budget
    (faster) or the cosine decay would be cut short (slower), so the start is discarded (its CPU seconds are kept
    in the plan) and the row starts again with epochs sized from the measured speed; otherwise it goes on. The
    speed rows and pilots measure a few hundred steps, which on this machine ran 20-30 % slower than a long run
    (NCE: 10.8k words per CPU second against 13.8k over its first 3,000 steps)."""
    import shutil

    d = os.path.join(work, "neural", plan["row"])
    rd = os.path.join(d, "run")
    got = first_stretch(rd)
    if got is None:
        return plan
    ratio = got["words_per_cpu_s"] / plan["words_per_cpu_s_planned"]
    cal = {"planned_words_per_cpu_s": plan["words_per_cpu_s_planned"], **got, "ratio": round(ratio, 3),
           "discarded": abs(ratio - 1) > CALIBRATION_TOLERANCE,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if not cal["discarded"]:
        plan = {**plan, "calibration": cal}
        write_plan(d, plan)
        record_plan(plan, notes, quick)
        return plan
    print(f"[neural] {plan['row']}: {got['words_per_cpu_s']:,.0f} words per CPU second over its first "
          f"{got['steps']} steps, {ratio:.2f}x the plan's: started again with epochs sized from it",
          file=sys.stderr, flush=True)
    shutil.rmtree(rd)
    old = invocations(d)
    cal["discarded_process_cpu_s"] = round(sum(r["cpu_s"] for r in old), 1)
    cal["discarded_process_wall_s"] = round(sum(r["wall_s"] for r in old), 1)
    if os.path.exists(os.path.join(d, "invocations.jsonl")):
        os.replace(os.path.join(d, "invocations.jsonl"), os.path.join(d, "invocations-discarded.jsonl"))
    os.replace(os.path.join(d, "plan.json"), os.path.join(d, "plan-discarded.json"))
    new = make_plan(plan["row"], rows, notes, work, files, plan["budget"], plan.get("passes", plan["epochs"]), cap_mb,
                    quick,
                    speed_given=(got["words_per_cpu_s"], f"its own first {got['steps']} steps ({plan['speed_source']}"
                                                         f" planned {plan['words_per_cpu_s_planned']:,.0f})"))
    new["calibration"] = cal
    write_plan(d, new)
    record_plan(new, notes, quick)
    return new


def revision(row: str) -> int:
    """The revision of the row's training code its plans and race candidates are recorded with (:data:`REVISIONS`)."""
    return REVISIONS.get(row.removesuffix("-2t"), 1)


def record_plan(plan: dict, notes: str, quick: bool) -> None:
    """A calibrated plan in the notes (key ``neural-plan/<row>``), so that the row trains the same epochs on another
    machine (:func:`make_plan` takes it in) and the learning-rate candidates recorded there stay comparable."""
    if quick:
        return
    append_row({"key": f"neural-plan/{plan['row']}", "row": plan["row"], "revision": revision(plan["row"]),
                **{k: plan.get(k) for k in ("budget", "epochs", "words_per_cpu_s_planned", "speed_source",
                                            "epoch_tokens_planned", "epoch_predictions", "calibration")}}, notes)


def train_row(plan: dict, work: str, cap_mb: float, recalibrate=None, cand: dict | None = None,
              first_epoch_only: bool = False) -> dict:
    """Train (start or resume) the row's run until it finishes; returns the last invocation's figures.
    ``recalibrate(plan) -> plan``: called once the run's first checkpoint exists (the training is stopped there
    for it) until the plan records a calibration. ``cand``: the learning-rate candidate (:mod:`.large_vocab_race`;
    None: the default's, ``run``); ``first_epoch_only``: stop once its first epoch is validated, or as soon as its
    running loss shows it diverged (then ``{"rc": 0, "diverged": why}``)."""
    from sampledlm.neural import rundir

    cand = cand or race.candidate(None, True)
    d = os.path.join(work, "neural", plan["row"])
    rd = os.path.join(d, cand["dir"])
    log = os.path.join(d, cand["log"])
    lr_options = ["--lr", f"{cand['lr']:g}"] if cand.get("explicit") else []

    def done() -> bool:
        return lmruns.finished(rd) or (first_epoch_only and race.first_epoch_valid(rd) is not None)

    while not done():
        if first_epoch_only and race.diverged(log):
            return {"rc": 0, "diverged": race.diverged(log), "plan": plan}
        if recalibrate is not None and "calibration" not in plan and first_stretch(rd) is not None:
            plan = recalibrate(plan)
            continue
        if os.path.isdir(rd) and rundir.latest_checkpoint(rd) is not None:
            argv = lmruns_cmd("train", "--resume", rd)
        else:  # new, or stopped before its first checkpoint: the same command starts it again
            argv = lmruns_cmd("train", "--train", plan["train"], "--valid", plan["valid"], *plan["options"],
                              *lr_options, "-o", rd)
        what = f"{plan['row']}{'' if cand['dir'] == 'run' else ' at lr ' + format(cand['lr'], 'g')}"
        print(f"[neural] {what}: {'resuming' if '--resume' in argv else 'starting'}"
              f"{' (its first epoch)' if first_epoch_only else ''} (log {log})", file=sys.stderr, flush=True)
        calibrating = recalibrate is not None and "calibration" not in plan

        def poll():
            if lmruns.finished(rd):  # a short epoch can end the whole run between two polls: nothing to stop
                return False
            return ((calibrating and first_stretch(rd) is not None)
                    or (first_epoch_only and (race.first_epoch_valid(rd) is not None or bool(race.diverged(log)))))
        _note_start(d, argv, cand["dir"])
        r = run_watched(argv, log, cap_mb, poll=poll if (calibrating or first_epoch_only) else None)
        if r["rc"] in (-15, 143) and lmruns.finished(rd):
            r["finished_before_stop"] = True  # the stop reached a run already complete, on its way out
        r["calibration_stop"] = bool(calibrating and r["rc"] in (130, 143) and not _current["stop"])
        stopped_here = bool((calibrating or first_epoch_only) and r["rc"] in (130, -15, 143) and not _current["stop"])
        _note_invocation(d, r)
        if _current["stop"]:
            raise Stopped(plan["row"])
        if r.get("finished_before_stop"):
            continue  # the run is complete: the loop ends
        if r["rc"] in STOP_EXIT_CODES and not stopped_here:
            # the signal reached the training alone (e.g. a kill of its process, not of this step): it wrote its
            # checkpoint and stopped, which is no failure; recorded as one, the row would never be resumed
            raise Stopped(plan["row"])
        if r["rc"] != 0 and not stopped_here:
            return r
    return {"rc": 0, "plan": plan}


def race_and_train(plan: dict, work: str, cap_mb: float, recalibrate, max_halvings: int = race.MAX_HALVINGS,
                   notes: str | None = None) -> dict:
    """The row's learning rate chosen by :mod:`.large_vocab_race` (each candidate's first epoch, the default's
    first: it calibrates the plan), then the winner trained to the end. Returns :func:`train_row`'s result with
    ``cand`` (the winner) and ``race`` (the state), or a failure. ``notes``: where settled candidates are recorded
    and taken in from (a race carried on from another machine)."""
    d = os.path.join(work, "neural", plan["row"])
    state = race.load(d, max_halvings)
    if notes:
        state = race.merge_recorded(state, read_rows(notes), plan["row"], plan)
    while True:
        state = race.extend(state)
        todo = [c for c in state["candidates"] if not race.settled(c)]
        if not todo:
            break
        c = todo[0]
        is_default = c["dir"] == "run"
        r = train_row(plan, work, cap_mb, recalibrate=recalibrate if is_default else None, cand=c,
                      first_epoch_only=True)
        plan = r.get("plan", plan)
        if r["rc"] != 0:
            return r
        rd = os.path.join(d, c["dir"])
        c["process_cpu_s"] = round(sum(x["cpu_s"] for x in invocations_of(d, rd)), 1)
        if r.get("diverged"):
            c["diverged"] = r["diverged"]
        else:
            c["epoch1_valid"] = race.first_epoch_valid(rd)
        if is_default and state["default_lr"] is None:
            state = race.set_default(state, lmruns.trained_lr(rd))
        race.save(d, state)
        if notes:
            append_row(race.as_record(plan["row"], plan, c), notes)
        print(f"[neural] {plan['row']} at lr {c['lr']:g}: "
              f"{c.get('diverged') or 'valid %.2f after epoch 1' % c['epoch1_valid']}", file=sys.stderr, flush=True)
    best = race.choose(state)
    if best is None:
        return {"rc": 1, "failed_why": "every learning-rate candidate diverged in epoch 1", "plan": plan}
    if state["chosen"] != best["lr"]:
        state["chosen"] = best["lr"]
        race.save(d, state)
    r = train_row(plan, work, cap_mb, cand=best)
    return {**r, "cand": best, "race": state}


def test_eval(rd: str, files: dict) -> dict:
    """Exact test perplexity over the whole test text (:func:`lmruns.evaluate`: one thread, cached in the run
    directory), with the process's wall and CPU seconds."""
    ev, cost, cached = lmruns.evaluate_with_cost(rd, {"test": files["test"], "valid": files["valid_sub"]}, None)
    out = {k: ev.get(k) for k in ("ppl", "ppl_excluding_oov", "oov", "predictions", "seconds_load", "seconds_score")}
    out.update(wall_s=(cost or {}).get("wall_s"), cpu_s=(cost or {}).get("cpu_s"), threads=1, text=files["test"],
               cached=cached)
    return out


def record_row(plan: dict, work: str, files: dict, notes: str, cand: dict | None = None,
               race_state: dict | None = None) -> dict:
    """The finished row's record: its run (``cand``'s, the learning-rate race's winner; None: ``run``), its test
    perplexity, its processes' CPU; with ``race_state``, every candidate's epoch-1 validation and the losers' CPU
    (the row's tuning cost, outside its budget)."""
    cand = cand or race.candidate(None, True)
    d = os.path.join(work, "neural", plan["row"])
    rd = os.path.join(d, cand["dir"])
    recs = lmruns.epochs(rd)
    inv = invocations_of(d, rd)
    test = test_eval(rd, files)
    pred = plan["epoch_predictions"]
    curve = [{"epoch": m["epoch"], "step": m["step"], "predictions": round(pred * epochs_done(m)),
              **{k: m[k] for k in ("valid_ppl", "train_loss", "lr", "tokens_per_s", "cpu_s", "wall_s",
                                   "epoch_fraction") if k in m}}
             for m in recs]
    best = min(recs, key=lambda m: m["valid_ppl"])
    train_cpu = recs[-1]["cpu_s"]
    with open(os.path.join(rd, "config.json"), encoding="utf-8") as f:
        options = json.load(f).get("objective", {}).get("options", {})  # the defaults the run started with
    with open(os.path.join(rd, "config.json"), encoding="utf-8") as f:
        lr = float(json.load(f)["train"]["lr"])
    lr_options = ["--lr", f"{cand['lr']:g}"] if cand.get("explicit") else []
    tuning = {}
    if race_state is not None:
        tuning = {"lr_race": race.summary(race_state), "lr_race_max_halvings": race_state["max_halvings"],
                  "tuning_process_cpu_s": round(sum(c.get("process_cpu_s") or 0 for c in race_state["candidates"]
                                                    if c["dir"] != cand["dir"]), 1)}
    row = {"key": f"neural/{plan['row']}", "row": plan["row"], "model": plan["model"],
           "objective": plan["objective"], "objective_options": options, "lr": lr, **tuning,
           "plan": {k: v for k, v in plan.items() if k != "options"},
           "command": " ".join(lmruns_cmd("train", "--train", plan["train"], "--valid", plan["valid"],
                                          *plan["options"], *lr_options, "-o", rd)),
           "invocations": [{k: v for k, v in r.items() if k != "argv"} | {"resume": "--resume" in r["argv"]}
                           for r in inv],
           "curve": curve, "epochs": math.ceil(epochs_done(recs[-1]) - 1e-9), "best_epoch": best["epoch"],
           "best_passes": round(epochs_done(best), 3), "valid_ppl": best["valid_ppl"],
           "valid_ppl_last": recs[-1]["valid_ppl"], "train_cpu_s": train_cpu,
           "process_cpu_s": round(sum(r["cpu_s"] for r in inv), 1),
           "unrecorded_starts": unrecorded_starts(d, inv, cand["dir"]),
           "process_wall_s": round(sum(r["wall_s"] for r in inv), 1),
           "peak_mb": max((r["peak_mb"] for r in inv), default=None),
           "words_per_cpu_s": pred * epochs_done(recs[-1]) / train_cpu if train_cpu else None,
           "test": test, "rc": 0 if test.get("ppl") else 1, "run_dir": rd}
    return append_row(row, notes)


def epochs_done(m: dict) -> float:
    """The passes over the row's text a metrics record stands at (a point within an epoch: its share)."""
    return m["epoch"] - 1 + m.get("epoch_fraction", 1.0)


def record_failure(plan: dict, r: dict, work: str, notes: str) -> dict:
    d = os.path.join(work, "neural", plan["row"])
    tail = ""
    try:
        with open(os.path.join(d, "train.log"), encoding="utf-8", errors="replace") as f:
            tail = f.read()[-600:]
    except OSError:
        pass
    why = (f"killed by the step at {r['killed_at_mb']:,.0f} MB resident (cap {MEMORY_CAP_MB:,} MB)"
           if r.get("killed_for_memory") else r.get("failed_why") or f"exit status {r['rc']}")
    return append_row({"key": f"neural/{plan['row']}", "row": plan["row"], "model": plan.get("model"),
                       "objective": plan.get("objective"), "rc": r["rc"], "failed": why, "log_tail": tail,
                       "invocations": [{k: v for k, v in x.items() if k != "argv"} for x in invocations(d)],
                       "plan": {k: v for k, v in plan.items() if k != "options"}}, notes)


def record_projection(plan: dict, rows: dict, notes: str) -> dict:
    speed = plan["words_per_cpu_s_planned"]
    pilot_row = rows.get(plan["speed_source"], {})
    return append_row({"key": f"neural/{plan['row']}", "row": plan["row"], "model": plan["model"],
                       "objective": plan["objective"], "projected": True, "words_per_cpu_s": speed,
                       "projected_predictions_in_budget": speed * plan["budget"],
                       "step_cpu_s": pilot_row.get("step_cpu_s"), "pilot": plan["speed_source"],
                       "peak_mb": pilot_row.get("process", {}).get("peak_mb"),
                       "plan": plan, "rc": 0}, notes)


def step(data: str, work: str, notes: str, budget: float = BUDGET_CPU_S, epochs: int = EPOCHS,
         rows_wanted: tuple[str, ...] = ROWS, cap_mb: float = MEMORY_CAP_MB, valid_tokens: int = VALID_TOKENS,
         quick: bool = False, after_each=None, lr_halvings: int = race.MAX_HALVINGS) -> None:
    """Every neural row in order (each skipped when recorded), its learning rate raced (:mod:`.large_vocab_race`,
    down to ``default / 2^lr_halvings``); ``after_each()`` after each trained row (the page)."""
    rows = read_rows(notes)
    nd = os.path.join(work, "neural", "data")
    os.makedirs(nd, exist_ok=True)
    stats = rows.get("corpus", {}).get("stats", {}).get("settings", {})
    label = next((k for k in stats if k.startswith("count")), None)
    unk = stats[label]["splits"]["train"]["unk"] if label else 0
    files = {"train": os.path.join(data, "train.txt"), "valid": os.path.join(data, "valid.txt"),
             "test": os.path.join(data, "test.txt"),
             "vocab": vocab_file(data, os.path.join(nd, "vocab-full.txt"), unk),
             "valid_sub": os.path.join(nd, f"valid-{valid_tokens}.txt")}
    strided_file(files["valid"], files["valid_sub"], valid_tokens)
    for row in rows_wanted:
        key = f"neural/{row}"
        if key in rows and (rows[key].get("rc") == 0 or rows[key].get("skipped")):
            continue
        if key in rows and rows[key].get("failed"):
            print(f"[neural] {row}: recorded as failed ({rows[key]['failed']}); delete its line to retry",
                  file=sys.stderr, flush=True)
            continue
        why = skip_reason(row, rows, cap_mb)
        if why:
            rows[key] = append_row({"key": key, "row": row, "model": row_model(row), "objective": row, "rc": None,
                                    "skipped": why}, notes)
            continue
        plan = make_plan(row, rows, notes, work, files, budget, epochs, cap_mb, quick)
        if "wait" in plan:
            print(f"[neural] {row}: not yet: {plan['wait']}", file=sys.stderr, flush=True)
            continue
        if "failed" in plan:
            rows[key] = append_row({"key": key, "row": row, "model": row_model(row), "rc": 1,
                                    "failed": plan["failed"]}, notes)
            continue
        if plan.get("projected"):
            rows[key] = record_projection(plan, rows, notes)
            continue
        if not _race_and_record(row, plan, work, files, rows, notes, cap_mb, quick,
                                0 if row in (*THREAD_ROWS, *PASS_ROWS) else lr_halvings):
            continue
        if after_each:
            after_each()
    # rows recorded before their rates were raced (the protocol came later): the same race, the recorded run as
    # the default's candidate; the row is recorded again either way
    for row in rows_wanted:
        key = f"neural/{row}"
        r = rows.get(key, {})
        if r.get("rc") != 0 or r.get("projected") or "lr_race" in r or row in ("softmax", *THREAD_ROWS, *PASS_ROWS):
            continue
        plan = make_plan(row, rows, notes, work, files, budget, epochs, cap_mb, quick)
        if _race_and_record(row, plan, work, files, rows, notes, cap_mb, quick, lr_halvings) and after_each:
            after_each()
    try:  # KN5 on each row's own text: minutes each
        if kn5_text.step(work, notes, files) and after_each:
            after_each()
    except Exception as e:  # noqa: BLE001 - recorded nowhere: the next start tries again
        print(f"[neural] KN5 on the rows' own text: failed ({str(e)[-400:]})", file=sys.stderr, flush=True)
    # the mixture follows the best finished row, not the last row to finish: a row that takes the lead is mixed
    # again when this step next passes here (interp_step returns at once while the best row is the one mixed)
    try:
        mixed = interp_step(data, work, notes, files)
    except Exception as e:  # noqa: BLE001 - recorded nowhere: the next start tries again
        print(f"[neural] KN5 + the best row: failed ({str(e)[-400:]})", file=sys.stderr, flush=True)
        return
    if mixed and after_each:
        after_each()


def _race_and_record(row: str, plan: dict, work: str, files: dict, rows: dict, notes: str, cap_mb: float,
                     quick: bool, lr_halvings: int) -> bool:
    """The row's race and training (:func:`race_and_train`), then its record (a failure's, or the row's); True
    when a row was recorded as trained."""
    key = f"neural/{row}"
    r = race_and_train(plan, work, cap_mb, lambda p: calibrate(p, work, files, rows, notes, cap_mb, quick),
                       lr_halvings, notes)
    if r["rc"] != 0:
        rows[key] = record_failure(r.get("plan", plan), r, work, notes)
        return False
    try:
        rows[key] = record_row(r["plan"], work, files, notes, cand=r["cand"], race_state=r["race"])
    except Exception as e:  # noqa: BLE001 - e.g. the test evaluation failed: the next start tries it again
        print(f"[neural] {row}: trained, but recording it failed ({str(e)[-400:]}); the next start of the step "
              "evaluates it again", file=sys.stderr, flush=True)
        return False
    return True


# --- KN5 + the best neural row --------------------------------------------------------------------------------
def kn5_for_mixing(data: str, work: str) -> str:
    """Our KN5 binary directory on the training text as the corpus writes it, ``<unk>`` kept (an ordinary word for
    our estimator, as it is for the neural models): its vocabulary is then the neural rows' own, word for word. The
    KN5 rows renamed ``<unk>`` to ``<unk-word>`` for lmplz, which a mixture with the neural models would refuse
    (different words). Built once (about 400 s, 35 GB of spill in WORK/tmp, 3 GB of memory)."""
    out = os.path.join(work, "kn5-ours-all-unk.bin")
    if os.path.exists(os.path.join(out, "config.json")):
        return out
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp, exist_ok=True)
    argv = lmruns_cmd("ngram", "train", "--train", os.path.join(data, "train.txt"), "--order", "5", "--memory", "4G",
                      "--temp-dir", tmp, "--binary", "-o", out, "--force")
    r = run_watched(argv, os.path.join(work, "neural", "kn5-mix.log"))
    if r["rc"] != 0:
        raise RuntimeError(f"KN5 for the mixture failed (rc {r['rc']}); see {work}/neural/kn5-mix.log")
    return out


def interp_step(data: str, work: str, notes: str, files: dict) -> bool:
    """KN5 + the best finished neural row (lowest test perplexity), weights by EM on the validation subset, the
    mixture's exact perplexity over the whole test text (:func:`lmruns.evaluate`); recorded as ``neural-interp``.
    True when a mixture was made (False: no finished row, or the best one is already the one mixed)."""
    rows = read_rows(notes)
    got = [(r["test"]["ppl"], k) for k, r in rows.items()
           if k.startswith("neural/") and r.get("rc") == 0 and r.get("test", {}).get("ppl")
           and r.get("row") not in THREAD_ROWS]  # the target is the best row on one thread
    if not got:
        return False
    _, best = min(got)
    old = rows.get("neural-interp")
    if old and old.get("rc") == 0 and old.get("row") == rows[best]["row"]:
        return False
    kn5 = kn5_for_mixing(data, work)
    rd = rows[best]["run_dir"]
    ev, cost, cached = lmruns.evaluate_with_cost(rd, {"test": files["test"], "valid": files["valid_sub"]}, kn5)
    ev = lmruns._plain(ev)
    append_row({"key": "neural-interp", "row": rows[best]["row"], "kn5": kn5, "valid": files["valid_sub"],
                "test": files["test"], "ppl": ev.get("interpolated_ppl"), "neural_ppl": ev.get("ppl"),
                "weight_neural": ev.get("weight"), "components": ev.get("components"),
                "wall_s": (cost or {}).get("wall_s"), "cpu_s": (cost or {}).get("cpu_s"), "cached": cached,
                "rc": 0 if ev.get("interpolated_ppl") else 1}, notes)
    return True
