"""Training runs of maximum-entropy LMs and of their KN3 reference, each in a fresh process.

A run is described by a JSON-able *spec*; :func:`run_child` trains it in a new interpreter
(``python -m benchmarks.melm_runs --worker SPEC``) so that its wall time and peak memory
are its own, and returns the measured row (the spec plus its results). Given a cache folder,
finished rows are kept there as ``<key>.json`` (``key`` = hash of the spec), so re-running an
experiment reuses them. Used by ``python -m benchmarks xu-melm`` (alias ``maxent``).

MaxEnt spec (see :class:`sampledlm.maxent.TrainConfig`)::

    {"name": str, "files": {"train", "valid", "test": path}, "vocab": path (optional: built from
     train), "objective": "binary" | "softmax", "alpha": float, "features": "feat-i" | "feat-ii",
     "lr": float, "epochs": int, "min_gain", "l2", "adagrad", "neg_subset": "fixed" | "variable",
     "average": "none" (default) | "epoch" | "run" | "auto", "ranks": int}

KN3 spec: ``{"kind": "kn3", "files": ..., "vocab": path (optional)}``: interpolated modified
Kneser-Ney trigram by ``sampledlm ngram train/eval``.

Row fields added by a run: ``valid_ppl``, ``test_ppl`` (exact, every word and ``</s>``), ``wall_s``
(training, including building the features), ``peak_rss_mb`` (the worker's maximum resident set,
or its children's for KN3), and for MaxEnt ``feature_counts``, ``epochs_run``, ``epoch_log``,
``pairs_per_position``, ``weights_checksum``, ``loadavg`` (the 1-minute load average when training
started); a failed run has ``error`` instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from sampledlm.data.textio import atomic_write


def _peak_rss_mb() -> float:
    """Largest resident set of this process or any child it waited for, in MB (Linux: ru_maxrss in KiB)."""
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def _vocab(spec: dict):
    from sampledlm.data.corpus import build_vocab
    from sampledlm.data.vocab import Vocab

    return Vocab.load(spec["vocab"]) if spec.get("vocab") else build_vocab(spec["files"]["train"])


def maxent_worker(spec: dict) -> dict:
    """Train and evaluate one MaxEnt configuration in this process; returns the measured row."""
    import numpy as np

    from sampledlm.data.corpus import load_ids
    from sampledlm.maxent import FeatureSpec, MaxEntModel, TrainConfig
    from sampledlm.maxent.shard import ShardJob, train_sharded

    vocab = _vocab(spec)
    ids = {k: np.asarray(load_ids(p, vocab)) for k, p in spec["files"].items()}
    load = os.getloadavg()[0]  # how busy the machine was: wall times compare only at similar loads
    t0 = time.perf_counter()
    cfg = TrainConfig(objective=spec["objective"], alpha=spec["alpha"], lr=spec["lr"], epochs=spec["epochs"],
                      min_gain=spec.get("min_gain", 0.003), l2=spec.get("l2", 0.0), seed=1,
                      adagrad=spec.get("adagrad", True), fixed_negatives=spec.get("neg_subset", "fixed") == "fixed",
                      average=spec.get("average", "none"))
    with tempfile.TemporaryDirectory() as tmp:
        job = ShardJob(ids["train"], ids["valid"], vocab.counts, FeatureSpec.parse(spec["features"], **({"trigger_min_lift": spec["trigger_min_lift"]} if "trigger_min_lift" in spec else {})), cfg,
                       out_dir=tmp, vocab=vocab, log=True)
        train_sharded(job, spec.get("ranks", 1))
        wall = time.perf_counter() - t0
        model, _ = MaxEntModel.load(tmp)
    checksum = float(np.abs(model.theta).sum()) + float(np.abs(model.u).sum())
    f = model.features
    ctx = model.context(ids["train"])
    pairs = int((f.gptr[ctx.hfeat.astype(np.int64) + 1] - f.gptr[ctx.hfeat]).sum())
    epochs = model.info["training"]["epochs"]
    return {**spec, "valid_ppl": model.perplexity(ids["valid"]), "test_ppl": model.perplexity(ids["test"]),
            "feature_counts": f.pair_counts(), "epochs_run": len(epochs) - 1, "epoch_log": epochs, "wall_s": wall,
            "pairs_per_position": pairs / len(ids["train"]), "peak_rss_mb": _peak_rss_mb(),
            "weights_checksum": checksum, "loadavg": load}


def _sampledlm(*args: str) -> str:
    """Run ``sampledlm ARGS`` in a child process; its stdout, or RuntimeError with its stderr's tail."""
    r = subprocess.run([sys.executable, "-m", "sampledlm", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"sampledlm {args[0]} {args[1]}: {r.stderr.strip()[-300:]}")
    return r.stdout


def kn3_worker(spec: dict) -> dict:
    """Our KN3 (``sampledlm ngram``, interpolated modified Kneser-Ney, order 3): train, then exact perplexity."""
    files = spec["files"]
    with tempfile.TemporaryDirectory() as tmp:
        arpa = os.path.join(tmp, "kn3.arpa")
        t0 = time.perf_counter()
        _sampledlm("ngram", "train", "--train", files["train"], "--order", "3", "-o", arpa,
                   *(["--vocab", spec["vocab"]] if spec.get("vocab") else []))
        wall = time.perf_counter() - t0
        ppl = {f"{split}_ppl": json.loads(_sampledlm("ngram", "eval", arpa, "--test", files[split], "--json")
                                          .strip().splitlines()[-1])["ppl"] for split in ("valid", "test")}
    return {**spec, **ppl, "wall_s": wall, "peak_rss_mb": _peak_rss_mb()}


def worker(spec: dict) -> dict:
    return kn3_worker(spec) if spec.get("kind") == "kn3" else maxent_worker(spec)


def spec_key(spec: dict) -> str:
    """A file name for a spec's cached row: a hash of its canonical JSON."""
    return hashlib.sha1(json.dumps(spec, sort_keys=True).encode("utf-8")).hexdigest()[:20]


#: Fields a run adds to its spec (the rest of a row is the spec).
RESULT_FIELDS = frozenset({"valid_ppl", "test_ppl", "feature_counts", "epochs_run", "epoch_log", "wall_s",
                           "pairs_per_position", "peak_rss_mb", "weights_checksum", "loadavg", "reused", "error"})


def _stopped_early(row: dict, spec: dict) -> bool:
    """Whether ``row`` is also ``spec``'s result: the same spec but a lower epoch cap that the
    stopping rule never reached (training is deterministic, so a higher cap changes nothing)."""
    old = {k: v for k, v in row.items() if k not in RESULT_FIELDS}
    cap = old.get("epochs")
    return (isinstance(cap, int) and isinstance(spec.get("epochs"), int) and cap < spec["epochs"]
            and old == {**spec, "epochs": cap} and spec.get("min_gain", 0.003) >= 0
            and "test_ppl" in row and row.get("epochs_run", cap) < cap)


def cached(spec: dict, cache: str) -> dict | None:
    """The finished row of ``spec`` in folder ``cache``, or None. A row of the same spec with a lower
    epoch cap counts when its stopping rule ended it before that cap (see :func:`_stopped_early`)."""
    path = os.path.join(cache, spec_key(spec) + ".json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    if not os.path.isdir(cache):
        return None
    for name in sorted(os.listdir(cache)):
        if name.endswith(".json"):
            with open(os.path.join(cache, name), encoding="utf-8") as f:
                row = json.load(f)
            if isinstance(row, dict) and _stopped_early(row, spec):
                return {**row, "epochs": spec["epochs"]}
    return None


def run_child(spec: dict, cache: str | None = None) -> dict:
    """Run :func:`worker` in a fresh interpreter (its stderr, the epoch log, goes to ours); with
    ``cache``, reuse a finished row from there and store a new one."""
    if cache and (row := cached(spec, cache)) is not None:
        return row
    r = subprocess.run([sys.executable, "-m", __name__, "--worker", json.dumps(spec)],
                       stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return {**spec, "error": f"exit status {r.returncode}"}
    row = json.loads(r.stdout.strip().splitlines()[-1])
    if cache:
        with atomic_write(os.path.join(cache, spec_key(spec) + ".json")) as f:
            json.dump(row, f)
    return row


def feat_i(r: dict) -> bool:
    """Whether a row used n-gram features only (the spec name, or in older rows the feature counts)."""
    f = r.get("features")
    return f == "feat-i" or (isinstance(f, dict) and "skip-bigram" not in f)


def curve_figure(series: list[tuple[str, str, list[tuple[float, float]]]], kn3_ppl: float | None, title: str,
                 ylabel: str = "test perplexity"):
    """The subsampling plot (cf. Xu et al. fig. 2): perplexity against alpha in % (log axis).

    ``series``: (label, matplotlib format, [(alpha, perplexity)]); empty series are skipped."""
    from .report import new_figure

    fig, ax = new_figure(figsize=(7, 4.5))
    for label, fmt, pts in series:
        if pts:
            pts = sorted(pts)
            ax.plot([100 * a for a, _ in pts], [p for _, p in pts], fmt, label=label)
    if kn3_ppl:
        ax.axhline(kn3_ppl, color="gray", lw=0.8, ls=":", label="KN3 (ours)")
    ax.set_xscale("log")
    ax.set_xlabel("alpha (% of negatives / of training positions)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if ax.lines:
        ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Run one MaxEnt/KN3 training run (a spec) and print its row as JSON.")
    ap.add_argument("--worker", required=True, metavar="SPEC", help="the run's spec, as JSON")
    args = ap.parse_args(argv)
    print(json.dumps(worker(json.loads(args.worker))))


if __name__ == "__main__":
    main()
