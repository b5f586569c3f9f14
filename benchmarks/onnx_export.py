"""``onnx``: a GRU exported with ``sampledlm export --format onnx``, run by ONNX Runtime against PyTorch.

A GRU of the PTB pages' shape (d = 200, 256 units, tied, the full vocabulary of the training file) is trained for
one epoch on the first 5,000 training sentences (``--quick``: a tiny GRU on the built-in corpus): its weights only
need to be a trained model's, not a good one's. Then:

- agreement: every test sentence scored from a zero state by ONNX Runtime alone (``words``/``h`` in,
  ``logprobs`` out) against ``sampledlm score --jsonl --per-word``: the largest difference of ln P over all
  predictions;
- speed: the test sentences one at a time (a decoder's batch of one), by the same exported computation in PyTorch
  (``torch.no_grad``) and in ONNX Runtime, both on one thread, the two sides alternated for ``ROUNDS`` rounds;
  tokens/s counts words + ``</s>``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np

from . import lmruns
from .report import lm_data, new_figure, stamp, table, work_dir, write_page

NAME = "onnx"
ROUNDS = 3
TARGET_AGREEMENT = 1e-4


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(lmruns.command(*args), check=True, capture_output=True, text=True)


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    import onnxruntime as ort
    import torch

    from sampledlm.neural.onnx_export import graph_of
    from sampledlm.neural.rundir import load_run

    meta = stamp()
    work = work_dir(NAME, quick)
    files, label = lm_data(data_dir, quick, os.path.join(work, "data"))
    lines = open(files["train"], encoding="utf-8").read().splitlines(True)
    part = os.path.join(work, "train-part.txt")
    with open(part, "w", encoding="utf-8") as f:
        f.writelines(lines[:500 if quick else 5000])
    vocab, run_dir, onnx_path = (os.path.join(work, n) for n in ("vocab.txt", "gru", "gru.onnx"))
    shape = ["-d", "16", "--hidden", "32"] if quick else []
    if not os.path.exists(os.path.join(run_dir, "model.safetensors")):
        _cli("vocab", files["train"], "-o", vocab, "--force")
        _cli("train", "--train", part, "--valid", files["valid"], "--vocab", vocab, "--model", "gru", *shape,
             "--epochs", "1", "--threads", "1", "--device", "cpu", "-o", run_dir)
    _cli("export", run_dir, "--format", "onnx", "-o", onnx_path, "--force")
    test = [s.split() for s in open(files["test"], encoding="utf-8").read().splitlines() if s.strip()]
    if quick:
        test = test[:100]
    ref_out = _cli("score", run_dir, files["test"], "--jsonl", "--per-word", "--device", "cpu").stdout
    ref = [[w["ln"] for w in json.loads(line)["per_word"]] for line in ref_out.splitlines()][:len(test)]

    torch.set_num_threads(1)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
    m = sess.get_modelmeta().custom_metadata_map
    ids = {w: i for i, w in enumerate(m["vocab"].split("\n"))}
    eos, unk = int(m["eos_id"]), int(m["unk_id"])
    layers, _, hidden = sess.get_inputs()[1].shape
    seqs = [np.array([[eos] + [ids.get(w, unk) for w in s]], dtype=np.int64) for s in test]
    targets = [np.array([ids.get(w, unk) for w in s] + [eos]) for s in test]
    h0 = np.zeros((layers, 1, hidden), np.float32)

    model, objective, _, config = load_run(run_dir)
    graph = graph_of(model.cpu().eval(), objective.cpu().eval(), config)[0]

    def by_onnx():
        return [sess.run(["logprobs"], {"words": x, "h": h0})[0][0][np.arange(len(y)), y] for x, y in zip(seqs, targets)]

    def by_torch():
        with torch.no_grad():
            return [graph(torch.from_numpy(x), torch.from_numpy(h0))[0][0].numpy()[np.arange(len(y)), y]
                    for x, y in zip(seqs, targets)]

    got = by_onnx()
    worst = max(float(np.abs(g - np.array(r)).max()) for g, r in zip(got, ref))
    worst_torch = max(float(np.abs(g - t).max()) for g, t in zip(got, by_torch()))
    tokens = sum(len(y) for y in targets)
    times = {"onnxruntime": [], "pytorch": []}
    for _ in range(ROUNDS):
        for side, fn in (("pytorch", by_torch), ("onnxruntime", by_onnx)):
            t0 = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    speed = {k: tokens / v for k, v in best.items()}
    data = {"setup": {"data": label, "sentences": len(test), "predictions": tokens, "vocabulary": len(ids),
                      "model": config["model"], "rounds": ROUNDS, "quick": quick, "threads": 1,
                      "onnxruntime": ort.__version__, "torch": torch.__version__},
            "agreement": {"max_abs_ln_p_vs_score": worst, "max_abs_ln_p_vs_torch_graph": worst_torch},
            "seconds": times, "tokens_per_s": speed, "ratio_onnx_over_torch": speed["onnxruntime"] / speed["pytorch"]}
    body = "\n".join([
        f"Data: {label}; {len(test):,} test sentences, {tokens:,} predictions (words + `</s>`), vocabulary "
        f"{len(ids):,}. Model: GRU {config['model']['embed_dim']}-d, {config['model']['hidden']} units, trained one "
        "epoch on part of the training text (its weights only need to be a trained model's).", "",
        "## Agreement", "",
        f"Largest |ln P(ONNX Runtime) - ln P(`sampledlm score`)| over all predictions: **{worst:.2e}** "
        f"(target < {TARGET_AGREEMENT:g}: {'met' if worst < TARGET_AGREEMENT else 'NOT met'}); against the same "
        f"computation in PyTorch: {worst_torch:.2e}.", "",
        "## Speed, one thread, one sentence at a time", "",
        table(["runtime", "best seconds", "tokens/s"],
              [[k, f"{best[k]:.2f}", f"{speed[k]:,.0f}"] for k in ("pytorch", "onnxruntime")]), "",
        f"ONNX Runtime / PyTorch: **{data['ratio_onnx_over_torch']:.2f}x** (best of {ROUNDS} alternated rounds; "
        f"onnxruntime {ort.__version__}, torch {torch.__version__}).", "",
        f"![tokens/s]({NAME}.png)",
    ])
    fig, ax = new_figure(figsize=(6, 2.6))
    ax.barh(["PyTorch", "ONNX Runtime"], [speed["pytorch"], speed["onnxruntime"]], color=["C0", "C1"])
    ax.set_xlabel("tokens/s, one thread, batch of one sentence")
    fig.tight_layout()
    write_page(out_dir, NAME, "ONNX export: agreement and speed against PyTorch", meta, data, body, figure=fig)
    return data
