"""Issue 56, deliverable 4: faster-rnnlm under the neural rows' budget at V = 485k, for test perplexity at equal CPU time.

    nice -n 19 python -m benchmarks.large_vocab_frnn_budget [--runs nce-1,hs-1] [--budget 7200]

The same protocol as our rows (:mod:`.large_vocab_neural`), decided here so that the two tools are trained alike:

- Text: the first N tokens (whole lines) of the corpus's train.txt, ``<unk>`` already in it; N sized from faster-rnnlm's
  measured words per CPU second on the same corpus (the speed rows of ``benchmarks/notes/faster-rnnlm-wiki.jsonl``,
  its own objective and thread count) so that :data:`EPOCHS` epochs fill the budget:
  ``N = speed x (budget - EPOCHS x validation cost) x SAFETY / EPOCHS``, as for ours.
- Vocabulary: ours (every training word seen >= 3 times), written as faster-rnnlm's model vocabulary with the whole
  corpus's counts (the speed rows' ``frnn-vocab-corpus.txt``: its Huffman tree for ``hs`` and its unigram noise
  for ``nce``).
- Model and schedule: faster-rnnlm's GRU-256 as in the speed rows (``-hidden 256 -hidden-type gru -alpha 0.01 -bptt
  32 -bptt-skip 8 -seed 0``, ``-nce 20`` for NCE), with its own learning-rate schedule (constant, then halved each
  epoch once validation gains less than its ``-stop`` ratio) and early stopping. It validates exactly, word by word
  over all V outputs (a matrix-vector product a word, reading the whole 485k x 256 output table each time): over
  our rows' 10,956-prediction subset one validation took more than 6 CPU-minutes (2026-11-29), five of them half
  the budget. So it gets a smaller subset taken the same way (every k-th line of valid.txt, about
  :data:`VALID_TOKENS` tokens), about a minute a validation, near what ours cost (about 77 s).
- Budget: the run is stopped at the end of the epoch that passes the budget in process CPU seconds (the rule of our
  ``--max-time`` when these runs were planned; ours now stops at the step), or after :data:`EPOCHS` epochs,
  whichever comes first, or when it stops by itself. It is stopped
  once the next epoch has begun, since faster-rnnlm saves its weights after printing an epoch's validation, so that
  the saved model is the last epoch's (or the last one it kept: it rejects an epoch whose validation got much worse).
- Test: ``rnnlm -rnnlm MODEL -test SUBSET -nce-accurate-test 1`` (exact normalisation over V, one thread), its
  entropy in bits per prediction (words and ``</s>``) as perplexity ``2^H``. Its word-by-word evaluation costs about
  a CPU-minute per 1,000 predictions at this V (so 3.4 CPU-hours for the whole test text), so both tools are scored
  on a subset of the test text taken as the validation subsets are (every k-th line, about :data:`TEST_TOKENS`
  tokens): faster-rnnlm's model, and our recorded row with the same kind of output (``sampledlm eval``, one thread).

Each run's row goes to ``benchmarks/notes/large-vocab.jsonl`` under ``frnn-budget/<objective>-<threads>``; a run
stopped part-way (SIGTERM, the session's end) starts again from the beginning (faster-rnnlm cannot resume
mid-run), its discarded CPU recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

from . import large_vocab_faster_rnnlm as frnn
from .large_vocab_record import NOTES, append_row, read_rows

EPOCHS = 4
SAFETY = 0.95
BUDGET_CPU_S = 7200.0
VALID_TOKENS = 1_000
TEST_TOKENS = 20_000
VALID_COST_S = 60.0  # faster-rnnlm's exact validation over VALID_TOKENS at V = 485k, about
FLAGS = ["-hidden", "256", "-hidden-type", "gru", "-alpha", "0.01", "-bptt", "32", "-bptt-skip", "8", "-seed", "0"]
_VALID = re.compile(r"valid:\s+(\S+)")
_PROGRESS = re.compile(r"Epoch\s+(\d+)\s+lr:")


def epochs_done(log_text: str) -> list[float]:
    """The validation entropies (bits) of the finished epochs in a faster-rnnlm log (the initial one left out)."""
    found = [float(x) if re.match(r"^[-+]?[\d.]+(e[-+]?\d+)?$", x) else math.nan for x in _VALID.findall(log_text)]
    return found[1:]


def epoch_running(log_text: str) -> int:
    """The epoch whose training progress the log shows last (0: none yet)."""
    got = _PROGRESS.findall(log_text)
    return int(got[-1]) if got else 0


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a running process, all its threads (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def should_stop(log_text: str, cpu_at_ends: list[float], budget: float, epochs: int) -> bool:
    """The budget rule (our ``--max-time``'s): the last finished epoch ended at or past the budget (``cpu_at_ends``:
    the process's CPU seconds when each epoch's end was seen), or the epochs are done; and the next epoch has begun,
    so that the finished one's weights are saved."""
    done = epochs_done(log_text)
    if not done or not cpu_at_ends:
        return False
    past = cpu_at_ends[-1] >= budget or len(done) >= epochs
    return past and epoch_running(log_text) > len(done)


def speed_of(objective: str, threads: int, speed_rows: str) -> float:
    """faster-rnnlm's latest measured words per CPU second at V = 485k, this objective and thread count."""
    rows = [json.loads(line) for line in open(speed_rows) if line.strip()]
    got = [r for r in rows if r.get("tool") == "faster-rnnlm" and r.get("objective") == objective
           and r.get("threads") == threads and r.get("rc") == 0 and r.get("words_per_cpu_s")]
    if not got:
        raise SystemExit(f"{speed_rows}: no faster-rnnlm {objective} row at {threads} thread(s) to size the run from")
    return float(got[-1]["words_per_cpu_s"])


class Stopped(Exception):
    """SIGTERM or SIGINT reached this process (the session's end): faster-rnnlm was stopped, its CPU is in ``cpu_s``."""

    def __init__(self, cpu_s: float = 0.0):
        super().__init__(cpu_s)
        self.cpu_s = cpu_s


def _on_signal(signum, frame):
    raise Stopped()


def train_watched(cmd: list[str], log: str, threads: int, budget: float, epochs: int) -> dict:
    """Run faster-rnnlm's training, stopped by :func:`should_stop` (checked every 2 s); rc, CPU and peak (wait4),
    wall, and whether the budget stopped it. A :class:`Stopped` (the signal handler of :func:`main`) stops
    faster-rnnlm too, and is raised again with the CPU it had spent."""
    import threading

    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    t0 = time.time()
    state = {"stopped": False, "done": False}
    ends: list[float] = []  # CPU seconds when each epoch's end was seen
    with open(log, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)

        def watch():
            while not state["done"]:
                time.sleep(2.0)
                try:
                    with open(log, errors="replace") as f:
                        text = f.read()
                    cpu = process_cpu_s(p.pid)
                except (OSError, IndexError, ValueError):
                    continue
                while len(ends) < len(epochs_done(text)):
                    ends.append(cpu)
                if not state["stopped"] and should_stop(text, ends, budget, epochs):
                    state["stopped"] = True
                    p.send_signal(signal.SIGTERM)

        threading.Thread(target=watch, daemon=True).start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        except Stopped:
            state["done"] = True
            p.terminate()
            _, _, ru = os.wait4(p.pid, 0)
            raise Stopped(round(ru.ru_utime + ru.ru_stime, 1)) from None
        state["done"] = True
        p.returncode = os.waitstatus_to_exitcode(status)
    return {"rc": p.returncode, "stopped_by_budget": state["stopped"], "cpu_at_epoch_ends": [round(c, 1) for c in ends],
            "process_cpu_s": round(ru.ru_utime + ru.ru_stime, 1), "process_wall_s": round(time.time() - t0, 1),
            "peak_mb": round(ru.ru_maxrss / 1024, 1)}


def run_one(objective: str, threads: int, a, binary: str, commit: str) -> dict:
    from .large_vocab_neural import count_predictions, prefix_file

    work = os.path.join(a.work, f"budget-{objective}-{threads}")
    os.makedirs(work, exist_ok=True)
    speed = speed_of(objective, threads, a.speed_rows)
    tokens = int(speed * (a.budget - a.epochs * VALID_COST_S) * SAFETY / a.epochs)
    train = os.path.join(a.data_work, f"train-{tokens}.txt")
    prefix_file(os.path.join(a.data, "train.txt"), train, tokens)
    model = os.path.join(work, "model")
    for f in os.listdir(work):  # a stopped run starts again (faster-rnnlm cannot resume within a run)
        os.remove(os.path.join(work, f))
    with open(a.vocab_counts, encoding="utf-8") as src, open(model, "w", encoding="utf-8") as dst:
        dst.write(src.read())
    cmd = [binary, "-rnnlm", model, "-train", train, "-valid", a.valid, "-threads", str(threads), *FLAGS]
    cmd += ["-nce", "20"] if objective == "nce" else []
    log = os.path.join(work, "train.log")
    try:
        tr = train_watched(cmd, log, threads, a.budget, a.epochs)
    except Stopped as e:
        with open(log, errors="replace") as f:
            done = len(epochs_done(f.read()))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
        append_row({"key": f"frnn-budget-discarded/{objective}-{threads}/{stamp}", "objective": objective,
                    "threads": threads, "discarded_process_cpu_s": e.cpu_s, "epochs_finished": done, "epoch_tokens": tokens,
                    "why": "stopped by a signal before its budget was spent (faster-rnnlm cannot resume)"}, a.notes)
        raise
    with open(log, errors="replace") as f:
        text = f.read()
    valid = epochs_done(text)
    row = {"key": f"frnn-budget/{objective}-{threads}", "tool": "faster-rnnlm", "objective": objective,
           "threads": threads, "budget": a.budget, "epochs_planned": a.epochs, "words_per_cpu_s_planned": speed,
           "epoch_tokens": tokens, "epoch_predictions": count_predictions(train), "train": train,
           "valid": a.valid, "command": " ".join(cmd), "faster_rnnlm_commit": commit, **tr,
           "epochs": len(valid), "valid_entropy_bits": valid,
           "valid_ppl": [round(2 ** h, 2) if math.isfinite(h) else None for h in valid]}
    if not (tr["rc"] == 0 or tr["stopped_by_budget"]) or not valid:
        row.update(rc=tr["rc"] or 1, failed=f"training: exit status {tr['rc']}; {len(valid)} epochs finished",
                   log_tail=text.replace("\r", "\n")[-600:])
        return append_row(row, a.notes)
    before = os.times()
    t0 = time.time()
    test = subprocess.run([binary, "-rnnlm", model, "-test", a.test, "-nce-accurate-test", "1", "-threads", "1"],
                          capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    after = os.times()
    ent = re.findall(r"Test entropy\s+(\S+)", test.stderr)
    row.update(test={"ppl": round(2 ** float(ent[-1]), 2) if ent else None, "entropy_bits": float(ent[-1]) if ent else None,
                     "sentences": test.stdout.count("\n"), "wall_s": round(time.time() - t0, 1),
                     "cpu_s": round(after.children_user + after.children_system - before.children_user
                                    - before.children_system, 1), "text": a.test},
               rc=0 if ent else 1)
    if not ent:
        row["failed"] = f"test: {test.stderr.strip()[-300:]}"
    if ent:
        row["ours_on_subset"] = ours_on(a, objective, threads)
    for f in os.listdir(work):  # the weights (about 1 GB at this V); the log and the row stay
        if f.endswith(".nnet"):
            os.remove(os.path.join(work, f))
    return append_row(row, a.notes)


def ours_key(objective: str, threads: int) -> str:
    """Our neural row with the same kind of output on the same number of threads (the neural step's ``-2t`` rows)."""
    return f"neural/{OURS_FOR[objective]}" + ("-2t" if threads == 2 else "")


def ours_on(a, objective: str, threads: int) -> dict | None:
    """Our recorded row with the same kind of output on as many threads, scored exactly on the test subset (None
    before it is recorded): its test perplexity there and the CPU it took (scored on one thread)."""
    ours = read_rows(a.ours_notes).get(ours_key(objective, threads), {})
    if ours.get("rc") != 0 or not ours.get("run_dir"):
        return None
    if not os.path.isdir(ours["run_dir"]):
        return {"failed": f"its model ({ours['run_dir']}) is not on this machine"}
    ev = frnn.eval_ours(ours["run_dir"], a.test)
    if "failed" in ev:
        return ev
    return {"row": ours_key(objective, threads), "run_dir": ours["run_dir"], "ppl": ev["ppl"],
            "predictions": ev["predictions"], "whole_text_ppl": ours["test"]["ppl"], "cpu_s": ev["cpu_s"]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", default="nce-1,hs-1", help="OBJECTIVE-THREADS, comma-separated [default: %(default)s]")
    ap.add_argument("--budget", type=float, default=BUDGET_CPU_S)
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--data", default="/work/data/wiki")
    ap.add_argument("--data-work", default="/work/data/wiki-runs/neural/data")
    ap.add_argument("--valid", default=f"/work/data/wiki-runs/neural/data/valid-{VALID_TOKENS}.txt",
                    help="the validation subset (made from DATA/valid.txt when missing) [default: %(default)s]")
    ap.add_argument("--test", default=f"/work/data/wiki-runs/neural/data/test-{TEST_TOKENS}.txt",
                    help="the test subset (made from DATA/test.txt when missing) [default: %(default)s]")
    ap.add_argument("--vocab-counts", default="/work/data/wiki-runs/faster-rnnlm/frnn-vocab-corpus.txt")
    ap.add_argument("--speed-rows", default=os.path.join(frnn.REPO, "benchmarks", "notes", "faster-rnnlm-wiki.jsonl"))
    ap.add_argument("--work", default="/work/data/wiki-runs/faster-rnnlm")
    ap.add_argument("--src", default="/work/faster-rnnlm-src")
    ap.add_argument("--mirror", default="/work/.mirror/yandex+faster-rnnlm/repo")
    ap.add_argument("--eigen-mirror", default="/work/.mirror/live-clones+eigen/repo")
    ap.add_argument("--notes", default=NOTES)
    ap.add_argument("--ours-notes", default=NOTES, help="where our neural rows are recorded [default: %(default)s]")
    a = ap.parse_args(argv)
    # the handlers go back as they were on the way out: a caller in the same process (a test worker) keeps its own
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        _train_runs(a)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _train_runs(a) -> None:
    """:func:`main`'s runs, each recorded or trained in turn (under :func:`_on_signal`)."""
    from .large_vocab_neural import strided_file

    built: list = []  # faster-rnnlm, built when a run needs training (scoring our row on the subset does not)
    strided_file(os.path.join(a.data, "valid.txt"), a.valid, VALID_TOKENS)
    strided_file(os.path.join(a.data, "test.txt"), a.test, TEST_TOKENS)
    rows = read_rows(a.notes)
    for spec in a.runs.split(","):
        objective, threads = spec.rsplit("-", 1)
        key = f"frnn-budget/{objective}-{threads}"
        if rows.get(key, {}).get("rc") == 0:
            r = rows[key]
            if not (r.get("ours_on_subset") or {}).get("ppl"):  # our row was not recorded then: score it now
                got = ours_on(a, objective, int(threads))
                if got:
                    append_row({**{k: v for k, v in r.items() if k not in ("date", "commit", "machine")},
                                "ours_on_subset": got}, a.notes)
            print(f"[frnn-budget] {key}: recorded", file=sys.stderr)
            continue
        print(f"[frnn-budget] {key}: training", file=sys.stderr, flush=True)
        try:
            built = built or list(frnn.build(a.src, a.mirror, a.eigen_mirror))
            run_one(objective, int(threads), a, *built)
        except Stopped as e:
            print(f"[frnn-budget] {key}: stopped by a signal after {e.cpu_s:,.0f} CPU s of faster-rnnlm (recorded as "
                  "discarded); the next start trains it again from the beginning", file=sys.stderr)
            sys.exit(1)



# --- the page ------------------------------------------------------------------------------------------------------
OURS_FOR = {"nce": "nce", "hs": "hsm"}  # our row with the same kind of output


def budget_rows(rows: dict) -> dict[str, dict]:
    return {k: r for k, r in rows.items() if k.startswith("frnn-budget/")}


def section(rows: dict) -> list[str]:
    """The page's lines on faster-rnnlm under the budget (none before a run is recorded)."""
    got = budget_rows(rows)
    if not got:
        return []
    out = ["", "### faster-rnnlm under the same budget", "",
           "faster-rnnlm's GRU-256 (`-nce 20`, or its binary Huffman tree `hs`) trained the way our rows are: "
           "epochs over a prefix sized from its own measured speed so that 4 fill the budget, stopped at the end of "
           "the epoch that passes it, its own learning-rate schedule, validated (exactly, word by word) on a 1,000-token "
           "subset taken as ours is (on ours, 11k tokens, one validation took it over 6 CPU-minutes); test perplexity "
           "exact over all V (`-nce-accurate-test 1`) on a 20,000-token subset of the test text (every k-th line: its "
           "word-by-word evaluation costs about a CPU-minute per 1,000 predictions here), our row with the same kind "
           "of output scored on the same subset (`benchmarks/large_vocab_frnn_budget.py`). " + frnn.TWICE_EOS,
           "", "| faster-rnnlm | threads | tokens per epoch x epochs | process CPU s | valid ppl (last epoch) | "
           "test ppl (subset) | our row with its output, same subset |", "|---|---|---|---|---|---|---|"]
    best_known = next((r["ours_best_on_subset"] for r in got.values() if r.get("ours_best_on_subset")), None)
    for r in got.values():
        ours_ppl = (r.get("ours_on_subset") or {}).get("ppl")
        ours_text = "-" if ours_ppl is None else f"{ours_ppl:.2f}"
        # our best one-thread row's score there, measured once for any run (a fair stand-in on one thread only:
        # ours trains fewer words per CPU second on two)
        b = (r.get("ours_best_on_subset") or best_known) if r["threads"] == 1 else None
        mine = ours_key(r["objective"], r["threads"])
        why = ("model not on this machine" if rows.get(mine, {}).get("rc") == 0 else "row not trained yet")
        if ours_ppl is None and b:
            ours_text = f"{mine.split('/')[-1]}'s {why}; {b['row'].split('/')[-1]} (the best row) {b['ppl']:.2f}"
        elif ours_ppl is None:
            ours_text = f"{mine.split('/')[-1]}'s {why}"
        valid = next((v for v in reversed(r.get("valid_ppl") or []) if v), None)
        test = (r.get("test") or {}).get("ppl")
        out.append(f"| {r['objective']} | {r['threads']} | {r.get('epoch_tokens', 0):,} x {r.get('epochs', 0)} | "
                   f"{r.get('process_cpu_s') or 0:,.0f} | {'-' if valid is None else f'{valid:.2f}'} | "
                   f"{'failed: ' + r['failed'] if r.get('failed') else f'{test:.2f}'} | "
                   f"{ours_text} |")
    if any(r.get("cpu_estimated") for r in got.values()):
        out += ["", "Process CPU estimated where the run's script lost its own count: "
                + "; ".join(f"{r['objective']}-{r['threads']}: {r['cpu_estimated']}" for r in got.values()
                            if r.get("cpu_estimated")) + " (`benchmarks/notes/frnn-budget-recover.py`)."]
    return out


def target_part(rows: dict) -> str:
    """The equal-CPU half of the faster-rnnlm target."""
    got = {(r["objective"], r["threads"]): r for r in budget_rows(rows).values() if r.get("rc") == 0}
    best_known = next((r["ours_best_on_subset"] for r in budget_rows(rows).values() if r.get("ours_best_on_subset")),
                      None)
    parts = []
    for (obj, threads), r in sorted(got.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        o = (r.get("ours_on_subset") or {}).get("ppl")
        b = (r.get("ours_best_on_subset") or best_known) if threads == 1 else None
        mine = ours_key(obj, threads)
        at = f"{obj} at {threads} thread{'s' if threads > 1 else ''}"
        if not o and b:
            mine_rd = rows.get(mine, {}).get("run_dir")
            why = (" row is not trained yet" if rows.get(mine, {}).get("rc") != 0
                   else " row is not yet scored on the subset (`python -m benchmarks.large_vocab_frnn_budget`)"
                   if mine_rd and os.path.isdir(mine_rd) else "'s model is not on this machine")
            parts.append(f"{at} faster-rnnlm {r['test']['ppl']:.2f} (test subset); our "
                         f"{mine.split('/')[-1]}{why}, and our best row "
                         f"({b['row'].split('/')[-1]}) scores {b['ppl']:.2f} there: "
                         f"{'met' if b['ppl'] < r['test']['ppl'] else '**missed**'} for it")
        elif o:
            t = r["test"]["ppl"]
            parts.append(f"{at} ours {o:.2f} against {t:.2f} (test subset): "
                         f"{'met' if o < t else '**missed**'}")
        else:
            parts.append(f"{at} faster-rnnlm {r['test']['ppl']:.2f}, our {mine.split('/')[-1]} row not yet "
                         "finished")
    return "; ".join(parts) if parts else "not yet run"


if __name__ == "__main__":  # last, so that the page's names above exist when main() reaches them
    main()
