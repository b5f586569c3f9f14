"""Training and evaluating the neural LM runs of the experiments (xu-nnlm, nce-samples, css-gru).

Each run goes through the command line (``python -m sampledlm train``, then ``eval``) in its own
process, so its wall time is its own and an interrupted experiment loses nothing: a run is
described by its ``sampledlm train`` options and lives in ``<work>/<name>-<key>``, where the key
hashes those options and the data files. A finished run is reused, an unfinished one resumed
(``--resume``), a changed setting gets a new directory; experiments asking for the same run (the
softmax baseline) share it.

    files, label = report.lm_data(data_dir, quick, scratch)
    arpa, kn3_ppl = kn3(work, files)
    row = train_and_evaluate(work, files, Run("softmax", [...options...]), arpa)
"""

from __future__ import annotations

import hashlib
import resource
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import click

from sampledlm.errors import UserError


@dataclass
class Setting:
    """What every LM experiment starts from: the stamp, the run folder, the data and (optionally) KN3."""

    meta: dict
    work: str
    files: dict
    label: str  # the data, in words
    quick: bool
    arpa: str | None = None
    kn3_ppl: float | None = None

    def describe(self, plan: list["Run"]) -> dict:
        """The ``setup`` entry of the experiment's JSON."""
        return {"data": self.label, "files": self.files, "quick": self.quick, "plan": [r.name for r in plan]}


def setting(quick: bool, data_dir: str | None, with_kn3: bool = True) -> Setting:
    """Stamp the page, find the data (:func:`report.lm_data`) and train/evaluate KN3 when asked."""
    from .report import lm_data, stamp, work_dir

    meta = stamp()
    work = work_dir("lm-runs", quick)
    files, label = lm_data(data_dir, quick, os.path.join(work, "data"))
    s = Setting(meta, work, files, label, quick)
    if with_kn3:
        s.arpa, s.kn3_ppl = kn3(work, files)
    return s


@dataclass(frozen=True)
class Run:
    name: str  # label; also the prefix of the run directory
    options: tuple[str, ...]  # `sampledlm train` options besides --train, --valid and -o
    #: bumped when a code change alters what the same options train (e.g. per-example fixed negative
    #: subsets), so that a finished run of the old code is not reused; part of the directory key
    version: str = ""
    #: a second pass: ``(first Run, sampledlm classes flags)``; before this run trains, ``sampledlm classes TRAIN
    #: --from-model FIRST FLAGS`` writes a word-classes file, which ``{classes}`` in ``options`` names
    classes_from: tuple = ()
    #: other runs of exactly the same training (e.g. the lr grid's cell at this run's default rate): the first of
    #: them that is finished is taken instead of training this one
    same_as: tuple = ()


CLASSES = "{classes}"


def rate_run(key: str, flags: tuple[str, ...], lr: str, version: str = "") -> Run:
    """The lr grid's run of the row ``key`` (its ``flags``) at the rate ``lr`` (as the flag writes it)."""
    return Run(f"lr-{key}-{lr}", (*flags, "--lr", lr), version=version)


def defaults(model: str, objective: str, epochs: int | None = None, optimizer: str = "adam") -> tuple[float, str]:
    """``(default rate, the epochs and schedule in words)`` of ``sampledlm train --model MODEL --objective X
    --optimizer OPTIMIZER`` on a short run (``epochs``: given by the row's flags instead of the default; the
    optimiser :data:`PINNED` where the flags name none)."""
    from sampledlm.neural.registry import model_class
    from sampledlm.neural.trainer import TrainOptions
    from sampledlm.objectives.registry import OBJECTIVES as OBJ

    cls = model_class(model)
    t = {**{k: getattr(TrainOptions(), k) for k in ("lr_schedule", "max_halvings", "min_improvement")},
         **cls.train_defaults, **({"epochs": epochs} if epochs else {})}
    lr = t["lr"]
    if getattr(cls, "sequence_model", False):
        lr = OBJ[objective].sequence_defaults.get("lr", lr)
    if cls.short_run_train and optimizer == cls.short_run_train.get("optimizer"):
        lr = cls.short_run_train.get("lr", lr)
    if t["lr_schedule"] == "cosine":
        schedule = f"{t['epochs']} epoch{'s' if t['epochs'] != 1 else ''}, cosine decay"
    else:
        schedule = (f"up to {t['epochs']} epochs, the rate halved when validation gains less than "
                    f"{100 * t['min_improvement']:g} %, stopping after {t['max_halvings']} halvings")
    return float(f"{lr:g}"), schedule


def classes_file(work: str, files: dict, run: Run) -> str:
    """The word-classes file of a second-pass run (:attr:`Run.classes_from`): beside its first run's directory."""
    first, flags = run.classes_from
    return run_dir(work, files, first) + f".classes{''.join(flags).replace('-', '')}.txt"


def make_classes_file(work: str, files: dict, run: Run) -> str:
    """Write a second-pass run's classes file from its finished first run (kept when it exists; its CPU seconds go
    to ``FILE.json``); returns the path."""
    path = classes_file(work, files, run)
    if os.path.exists(path):
        return path
    first, flags = run.classes_from
    rd = run_dir(work, files, first)
    if not finished(rd):
        raise UserError(f"{run.name}: its first pass {first.name} has not finished")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cli("classes", files["train"], "--from-model", rd, *flags, "-o", path)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    with open(path + ".json", "w") as f:
        json.dump({"cpu_s": cpu, "first": first.name, "flags": list(flags)}, f)
    return path


#: the optimiser every benchmark's flags were written against: a run whose flags name none trained under Adam, the
#: recurrent models' default until 2026-12-04, when a GRU run of under 20,000 planned steps moved to AdamW
#: (sampledlm.neural.settings.SHORT_RUN_STEPS); named on the command line, not in a run's options, so that the
#: records' flags and the run directories keep meaning what they trained
PINNED = ("--optimizer", "adam")


def pinned(args) -> list[str]:
    """The arguments of a ``sampledlm`` command, with :data:`PINNED` added to a ``train`` that names no optimiser
    (a resume keeps its own)."""
    args = list(args)
    if args[:1] == ["train"] and "--resume" not in args and "--optimizer" not in args:
        return [*args, *PINNED]
    return args


def command(*args: str) -> list[str]:
    """``python -m sampledlm ARGS`` (:func:`pinned`)."""
    return [sys.executable, "-m", "sampledlm", *pinned(args)]


def cli(*args: str, log: str | None = None) -> str:
    """Run ``python -m sampledlm ARGS`` (:func:`command`) and return its stdout; its stderr (progress, epoch lines)
    is appended to ``log`` as it comes (``tail -f`` it), or captured. UserError on failure."""
    cmd = command(*args)
    if log is None:
        p = _run_to_end(cmd, stderr=subprocess.PIPE)
        err = p.stderr
    else:
        with open(log, "a") as f:
            start = f.tell()
            p = _run_to_end(cmd, stderr=f)
        with open(log) as f:
            f.seek(start)
            err = f.read()
    if p.returncode:
        raise UserError(f"`sampledlm {' '.join(args)}` failed: {err.strip()[-600:]}")
    return p.stdout


def _run_to_end(cmd: list[str], stderr) -> subprocess.CompletedProcess:
    """``cmd`` run to its end, stdout captured. Stopped meanwhile (^C, or SIGTERM, which the command line raises as
    an interrupt), the child is asked to stop too (SIGTERM: a training writes its checkpoint) and waited for, where
    ``subprocess.run`` would kill it outright and lose the training since its last checkpoint."""
    from sampledlm.neural.distributed import run_launch

    return run_launch(cmd, grace_s=None, stderr=stderr)


def run_dir(work: str, files: dict, run: Run) -> str:
    parts = [list(run.options), os.path.abspath(files["train"]), os.path.abspath(files["valid"])]
    key = json.dumps(parts + [run.version] if run.version else parts)
    return os.path.join(work, f"{run.name}-{hashlib.sha1(key.encode()).hexdigest()[:8]}")


def trained_lr(rd: str) -> float | None:
    """The learning rate the run in ``rd`` trains at (its config.json), or None before the run exists (or when its
    config cannot be read)."""
    try:
        with open(os.path.join(rd, "config.json"), encoding="utf-8") as f:
            return float(json.load(f)["train"]["lr"])
    except (OSError, KeyError, TypeError, ValueError):
        return None


def finished(rd: str) -> bool:
    """True when ``rd`` holds a completed (finalised) run."""
    path = os.path.join(rd, "model.safetensors")
    if not os.path.exists(path):
        return False
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        return (f.metadata() or {}).get("finalized") == "true"


def reused_dir(work: str, files: dict, run: Run) -> str | None:
    """The finished directory of ``run`` or, failing that, of the first of :attr:`Run.same_as` that is finished."""
    for alt in (run_dir(work, files, run), *(run_dir(work, files, r) for r in run.same_as)):
        if finished(alt):
            return alt
    return None


def train(work: str, files: dict, run: Run) -> str:
    """Train ``run`` to completion (or reuse/resume it); returns its directory."""
    rd = run_dir(work, files, run)
    alt = reused_dir(work, files, run)
    if alt is not None:
        click.echo(f"  {run.name}: finished run reused ({alt})", err=True)
        return alt
    options = run.options
    if run.classes_from:
        path = make_classes_file(work, files, run)
        options = tuple(path if o == CLASSES else o for o in options)
    # a run killed before its first checkpoint has config.json but nothing to resume: the same command starts it again
    where = ["--resume", rd] if os.path.exists(os.path.join(rd, "checkpoint.json")) else \
        ["--train", files["train"], "--valid", files["valid"], *options, "-o", rd]
    click.echo(f"  {run.name}: training ({'resumed' if where[0] == '--resume' else 'new'}, log {rd}.log)", err=True)
    cli("train", *where, log=rd + ".log")
    return rd


def epochs(rd: str) -> list[dict]:
    """The run's per-epoch records (metrics.jsonl)."""
    with open(os.path.join(rd, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def evaluate(rd: str, files: dict, arpa: str | None) -> dict:
    """Exact test perplexity of the finished run, alone and (given ``arpa``) interpolated with it,
    the weight tuned by EM on the validation file; cached in ``rd/bench_eval.json``."""
    return evaluate_with_cost(rd, files, arpa)[0]


def evaluate_with_cost(rd: str, files: dict, arpa: str | None) -> tuple[dict, dict | None, bool]:
    """:func:`evaluate`, with what the evaluation cost (``{"cpu_s", "wall_s"}`` of the ``sampledlm eval``
    process, kept in the cache beside the result so that a cached answer still says what it cost; None for a cache
    written before the cost was kept) and whether the answer came from the cache."""
    cache = os.path.join(rd, "bench_eval.json")
    key = [os.path.abspath(files["test"]), arpa and os.path.abspath(arpa)]
    if os.path.exists(cache) and os.path.getmtime(cache) >= os.path.getmtime(os.path.join(rd, "model.safetensors")):
        with open(cache) as f:
            got = json.load(f)
        if got.get("key") == key:
            return got["result"], got.get("cost"), True
    args = ["eval", rd, "--test", files["test"], "--json", "--threads", "1"]
    if arpa:
        args += ["--interpolate", arpa, "--weight", "auto", "--interp-valid", files["valid"]]
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    result = json.loads(cli(*args).strip().splitlines()[-1])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cost = {"cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "wall_s": round(time.perf_counter() - t0, 1)}
    from sampledlm.data.textio import atomic_write

    with atomic_write(cache) as f:
        json.dump({"key": key, "result": result, "cost": cost}, f)
    return result, cost, False


def _plain(ev: dict) -> dict:
    """``sampledlm eval --json`` of a mixture, in one shape: ``ppl`` the model's own, ``interpolated_ppl``
    the mixture's, ``weight`` the model's. (A mixture's JSON lists ``component_ppl`` and ``weights``,
    model first, and its ``ppl`` is the mixture's; older output named the three fields directly.)"""
    if "components" in ev:  # the schema of eval --json since the JSON unification
        return {**ev, "ppl": ev["components"][0]["ppl"], "interpolated_ppl": ev["ppl"], "weight": ev["weights"][0]}
    if "component_ppl" not in ev or "interpolated_ppl" in ev:
        return ev
    return {**ev, "ppl": ev["component_ppl"][0], "interpolated_ppl": ev["ppl"], "weight": ev["weights"][0]}


def summary(rd: str, files: dict, arpa: str | None) -> dict:
    """One table row for a finished run: exact test ppl (alone, + n-gram), epochs, time to the best
    validation epoch, median and fastest-epoch training tokens/s, and the per-epoch curve."""
    recs = epochs(rd)
    best = min(recs, key=lambda m: m["valid_ppl"])
    ev = _plain(evaluate(rd, files, arpa))
    return {
        "epochs": len(recs), "best_epoch": best["epoch"], "valid_ppl": best["valid_ppl"], "test_ppl": ev["ppl"],
        "test_ppl_interp": ev.get("interpolated_ppl"), "interp_weight": ev.get("weight"),
        "train_s_to_best": best["wall_s"], "tokens_per_s": statistics.median(m["tokens_per_s"] for m in recs),
        "tokens_per_s_max": max(m["tokens_per_s"] for m in recs),
        "curve": [{k: m[k] for k in ("epoch", "valid_ppl", "train_loss", "wall_s", "cpu_s", "train_ppl", "lr")
                   if k in m} for m in recs],
    }


def kn3_path(work: str, files: dict) -> str:
    """Where :func:`kn3` keeps the KN trigram of ``files["train"]`` (one per work folder and training file)."""
    key = hashlib.sha1(os.path.abspath(files["train"]).encode()).hexdigest()[:8]
    return os.path.join(work, f"kn3-{key}.arpa")


def kn3(work: str, files: dict) -> tuple[str, float]:
    """An interpolated modified Kneser-Ney trigram on the training file (trained once per work
    folder and training file) and its exact test perplexity."""
    arpa = kn3_path(work, files)
    if not os.path.exists(arpa):
        cli("ngram", "train", "--train", files["train"], "--order", "3", "-o", arpa)
    out = cli("ngram", "eval", arpa, "--test", files["test"], "--json")
    return arpa, float(json.loads(out.strip().splitlines()[-1])["ppl"])


def carried_rows(out_dir: str, page: str) -> tuple[dict[str, dict], str]:
    """The rows of the page already in ``out_dir`` (its JSON) by run name, and the commit they come from."""
    path = os.path.join(out_dir, page + ".json")
    if not os.path.exists(path):
        raise UserError(f"--only keeps the other runs' rows from {path}, which does not exist")
    with open(path) as f:
        doc = json.load(f)
    commit = doc.get("meta", {}).get("commit", "?")
    rows = {r["name"]: {**r, "carried": r.get("carried") or commit} for r in doc.get("data", {}).get("rows", [])}
    return rows, commit


def check_only(only: set[str] | None, names: list[str]) -> None:
    """UserError when ``--only`` names a run the experiment's plan (``names``) does not have."""
    unknown = sorted(set(only or ()) - set(names))
    if unknown:
        raise UserError(f"--only: no run named {', '.join(unknown)} in this experiment's plan ({', '.join(names)})")


def run_all(work: str, files: dict, plan: list[Run], arpa: str | None, after_each=None,
            failures: dict | None = None, train_new: bool = True, only: set[str] | None = None,
            carried: dict[str, dict] | None = None) -> dict[str, dict]:
    """Train and summarise every run of ``plan`` in order; ``after_each(rows)`` (e.g. writing the
    page) is called after each, so a long experiment shows partial results. A run that fails
    (e.g. importance sampling diverging) is recorded in ``failures`` (name -> message) and the
    experiment goes on. ``train_new=False`` trains nothing: finished runs are summarised, and so are
    unfinished ones that have saved a model (their best epoch so far, marked ``partial``).

    ``only``: train just these runs; every other run is taken finished from the cache or else from
    ``carried`` (the rows of the committed page, :func:`carried_rows`; marked ``carried`` with
    their commit), and left out when neither has it. With ``train_new=False`` a run of ``only`` that
    has saved no model here keeps its ``carried`` row too."""
    rows: dict[str, dict] = {}
    check_only(only, [r.name for r in plan])
    for i, run in enumerate(plan, 1):
        rd = reused_dir(work, files, run) or run_dir(work, files, run)
        if only is not None and run.name not in only and not finished(rd):
            if carried and run.name in carried:
                rows[run.name] = carried[run.name]
            continue
        if not train_new and not finished(rd):
            if os.path.exists(os.path.join(rd, "model.safetensors")):
                rows[run.name] = {"name": run.name, "options": " ".join(run.options), "dir": rd, "partial": True,
                                  **summary(rd, files, arpa)}
            elif carried and run.name in carried:  # nothing here to summarise: the committed page's row stays
                rows[run.name] = carried[run.name]
            continue
        click.echo(f"[{i}/{len(plan)}] {run.name}", err=True)
        try:
            rd = train(work, files, run)
        except UserError as e:
            click.echo(f"  {run.name}: failed: {e}", err=True)
            if failures is not None:
                failures[run.name] = str(e).splitlines()[0][-400:]
            continue
        rows[run.name] = {"name": run.name, "options": " ".join(run.options), "dir": rd, **summary(rd, files, arpa)}
        if after_each:
            after_each(rows)
    return rows


def status_note(plan: list[Run], rows: dict, failures: dict) -> str:
    """A line naming the runs of ``plan`` that failed or had not finished when the page was written."""
    out = [f"Run {name} failed: {msg}" for name, msg in failures.items()]
    partial = [f"{name} ({r['epochs']} epochs)" for name, r in rows.items() if r.get("partial")]
    carried = sorted({r["carried"] for r in rows.values() if r.get("carried")})
    if carried:
        out.append("Rows marked † were not re-run for this page: they are carried over from the page written at "
                   f"commit {', '.join(carried)} (`--only` re-trained the others).")
    if partial:
        out.append("Unfinished runs, reported at their best epoch so far (marked * in the tables): "
                   + ", ".join(partial) + ".")
    waiting = [r.name for r in plan if r.name not in rows and r.name not in failures]
    if waiting:
        out.append("Runs not finished when this page was written: " + ", ".join(waiting) + ".")
    return "\n\n".join(out)


def relative_cost(run: dict, reference: dict) -> float:
    """Training time per token of ``run`` relative to ``reference``, from each run's fastest epoch
    (on a shared machine the least disturbed by other jobs; the median is in the tables)."""
    return reference["tokens_per_s_max"] / run["tokens_per_s_max"]


def label(row: dict) -> str:
    """A run's name for tables: ``*`` marks an unfinished run, ``†`` one carried from an earlier page."""
    return row["name"] + ("*" if row.get("partial") else "") + ("†" if row.get("carried") else "")


def within_budget(row: dict, budget: float, clock: str = "wall_s") -> float | None:
    """The lowest validation perplexity of the epochs that ended within ``budget`` seconds of ``clock``
    (``wall_s``, or ``cpu_s``: the training process's CPU seconds)."""
    got = [c["valid_ppl"] for c in row.get("curve", []) if clock in c and c[clock] <= budget]
    return min(got) if got else None
