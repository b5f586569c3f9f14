"""The demo's step for ONNX export: the feed-forward model of the earlier step as an ONNX graph, scored by ONNX
Runtime alone and compared with the model's own scores (needs the onnx extra; skipped with a note otherwise)."""

from __future__ import annotations

import os
import time


from .common import DemoData, Result, say


def export_step(data: DemoData) -> list[Result]:
    run_dir = os.path.join(data.directory, "ffnn3-softmax")
    if not os.path.isdir(run_dir):
        return []
    say("\n== ONNX export (sampledlm export RUN --format onnx) ==")
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError:
        say("skipped: pip install 'sampledlm[onnx]' for the exporter and ONNX Runtime")
        return []
    from ..api import load
    from ..neural.onnx_export import export_onnx

    t0 = time.perf_counter()
    path = os.path.join(data.directory, "ffnn3.onnx")
    export_onnx(run_dir, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    meta = sess.get_modelmeta().custom_metadata_map
    ids = {w: i for i, w in enumerate(meta["vocab"].split("\n"))}
    n, bos, eos, unk = int(meta["order"]) - 1, int(meta["bos_id"]), int(meta["eos_id"]), int(meta["unk_id"])
    with open(data.test, encoding="utf-8") as f:
        sentences = [line.split() for line in f if line.strip()][:50]
    lm, worst = load(run_dir, device="cpu"), 0.0
    for s in sentences:
        words = [ids.get(w, unk) for w in s]
        padded = [bos] * n + words
        history = np.array([padded[i:i + n] for i in range(len(words) + 1)], dtype=np.int64)
        lp = sess.run(["logprobs"], {"history": history})[0][np.arange(len(words) + 1), words + [eos]]
        ref = np.array([w.logprob for w in lm.word_scores(s)])
        worst = max(worst, float(np.abs(lp - ref).max()))
    size = os.path.getsize(path) / 2**20
    say(f"{path}: {size:.1f} MiB; ONNX Runtime on {len(sentences)} test sentences: largest |ln P difference| "
               f"from the model's own scores {worst:.1e} ({time.perf_counter() - t0:.1f} s)")
    return []
