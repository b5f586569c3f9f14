"""Exact evaluation at V = 485k: CPU seconds per 1,000 tokens of the ways to normalise over V, and their error.

    python -m benchmarks.large_vocab normaliser --data /work/data/wiki --work /work/data/wiki-runs

Scores the first test tokens (``test-eval.txt`` of the speed step, about 5,000) with the speed step's NCE model
at the full vocabulary, in one process, three ways, alternated over rounds (best round kept):

- ``one product``: the path below :data:`~sampledlm.objectives.normaliser.BLOCKED_MIN_WORDS` (``[n, V]`` scores,
  64 tokens a call at this V, then the targets' entries): what evaluation did before the blocks;
- ``blocks fp32``: :func:`~sampledlm.objectives.normaliser.log_normalised_targets`, 1,024 histories a call;
- ``blocks bf16``: the same with the sum's products in bfloat16 (``sampledlm eval --sum-precision bf16``).

CPU seconds are the process's (``time.process_time``) with one torch thread, and wall seconds with every core.
The error of each against float64 (the same hidden states, the product and the log-sum-exp in float64) is measured
on the first ``SAMPLE`` tokens. One row ``normaliser/full`` of ``benchmarks/notes/large-vocab.jsonl``; then the
whole test text through ``sampledlm eval`` in float32 and in bfloat16 (:func:`step`).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np
import torch

SAMPLE = 1024  # tokens whose float64 reference is computed
ROUNDS = 2


def _reference(model, ids: np.ndarray, sample: int) -> np.ndarray:
    """float64 ``ln P`` of the first ``sample`` tokens (running text, the model's own state path)."""
    out = np.full(sample, np.nan)
    w = model.output.weight.detach().double()
    b = model.output.bias.detach().double().squeeze(1)
    with torch.no_grad():
        for ctx, targets, positions in model.eval_contexts(ids[:sample]):
            s = ctx.double() @ w.t() + b
            lp = s.gather(1, targets.unsqueeze(1)).squeeze(1) - torch.logsumexp(s, 1)
            out[np.asarray(positions)] = lp.numpy()
    return out


def measure(run_dir: str, test: str, sample: int = SAMPLE, rounds: int = ROUNDS) -> dict:
    from sampledlm.data.corpus import load_ids
    from sampledlm.data.tokenizer import TextOptions
    from sampledlm.neural import rundir
    from sampledlm.neural.lm import stream_logprobs
    from sampledlm.objectives import normaliser

    model, objective, vocab, config = rundir.load_run(run_dir)
    opts = TextOptions(**(config.get("data", {}).get("text_options") or {}))
    ids = load_ids(test, vocab, opts, cache=False)
    ref = _reference(model, ids, min(sample, len(ids)))
    modes = {"one product": ("fp32", 1 << 62), "blocks fp32": ("fp32", None), "blocks bf16": ("bf16", None)}
    found: dict[str, dict] = {m: {} for m in modes}
    threads = torch.get_num_threads()
    for _ in range(rounds):
        for mode, (precision, min_words) in modes.items():
            for n_threads in (1, threads):
                torch.set_num_threads(n_threads)
                saved = normaliser.BLOCKED_MIN_WORDS
                if min_words is not None:
                    normaliser.BLOCKED_MIN_WORDS = min_words
                try:
                    with normaliser.sum_precision(precision):
                        c0, t0 = time.process_time(), time.perf_counter()
                        lp = stream_logprobs(model, objective, ids)
                        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
                finally:
                    normaliser.BLOCKED_MIN_WORDS = saved
                f = found[mode]
                key = "cpu_s_per_1000" if n_threads == 1 else f"wall_s_per_1000_{n_threads}_threads"
                f[key] = min(f.get(key, float("inf")), 1000 * (cpu if n_threads == 1 else wall) / len(ids))
                err = lp[: len(ref)] - ref
                f.update(max_abs_err=float(np.abs(err).max()), mean_err=float(err.mean()),
                         ppl=float(np.exp(-lp.mean())))
    torch.set_num_threads(threads)
    return {"tokens": len(ids), "sample": len(ref), "V": int(model.num_words),
            "hidden": int(model.output.weight.shape[1]), "threads": threads, "rounds": rounds,
            "ppl_float64_sample": float(np.exp(-ref.mean())), "modes": found,
            "projected_cpu_min_250k": {m: f["cpu_s_per_1000"] * 250 / 60 for m, f in found.items()}}


def step(data: str, work: str, rows_path: str) -> None:
    """The row ``normaliser/full`` (:func:`measure`), then ``eval-full/fp32`` and ``eval-full/bf16``: ``sampledlm
    eval`` of the same model over the whole test text on one thread, the process timed (the issue's target: 250k
    tokens in 10 CPU-minutes). Rows recorded with exit status 0 are not measured again."""
    from .large_vocab_record import append_row, read_rows, sampledlm, timed

    sp = os.path.join(work, "speed")
    run_dir, test = os.path.join(sp, "nce-full"), os.path.join(sp, "test-eval.txt")
    if not (os.path.isfile(os.path.join(run_dir, "config.json")) and os.path.isfile(test)):
        raise SystemExit(f"normaliser: needs the speed step's NCE model at the full vocabulary ({run_dir}) and "
                         f"{test}: run the speed step first")
    rows = read_rows(rows_path)
    if rows.get("normaliser/full", {}).get("rc") != 0:
        res = measure(run_dir, test)
        append_row({"key": "normaliser/full", "rc": 0, **res,
                    "command": "python -m benchmarks.large_vocab normaliser --data DATA --work WORK"}, rows_path)
    whole = os.path.join(data, "test.txt")
    for precision in ("fp32", "bf16"):
        key = f"eval-full/{precision}"
        if rows.get(key, {}).get("rc") == 0:
            continue
        argv = sampledlm("eval", run_dir, "--test", whole, "--json", "--device", "cpu", "--threads", "1",
                         "--sum-precision", precision)
        r = timed(argv)
        row = {"key": key, "rc": r["rc"], "precision": precision, "command": " ".join(argv),
               "process": {k: v for k, v in r.items() if k != "stdout"}}
        if r["rc"] == 0:
            j = json.loads(r["stdout"].strip().splitlines()[-1])
            row.update(tokens=j["predictions"], ppl=j["ppl"], seconds_score=j["seconds_score"],
                       seconds_load=j["seconds_load"])
        append_row(row, rows_path)
