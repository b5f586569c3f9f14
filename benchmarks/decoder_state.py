"""``decoder-state``: a GRU scored word by word through ``Model.advance``, the time per word from word 10 to 1,000.

A decoder that extends hypotheses one word at a time asks for ``ln P(word | history)`` at every step. Re-running
the history at each step costs O(t) at word t (the whole sentence O(n^2)); carrying the network's state
(:mod:`sampledlm.states`) costs one step of the network per word. This page measures both on a GRU of the PTB
pages' shape (d = 200, 256 units, tied, the training file's whole vocabulary; trained one epoch on 5,000 training
sentences, its weights only need to be a trained model's; ``--quick``: a tiny GRU on the built-in corpus):

- ``advance``: one "sentence" of ``WORDS`` test tokens, advanced word by word from ``begin_sentence()``; the time
  of every step;
- ``history``: at the same positions, one call of ``logprobs_after([history], [[word]])`` with the whole history
  (what ``next_logprobs`` and the server's ``/next`` did per query before);

both on one thread, the two sides alternated for ``ROUNDS`` rounds, the best of the rounds kept per position.
The numbers agree: the page gives the largest |ln P| difference between the two over the measured positions.
"""

from __future__ import annotations

import os
import subprocess
import time

import numpy as np

from . import lmruns
from .report import lm_data, new_figure, stamp, table, work_dir, write_page

NAME = "decoder-state"
ROUNDS = 3
WORDS = 1000
WINDOWS = (10, 30, 100, 300, 600, 990)  # positions: each the start of a window of SPAN words
SPAN = 10


def _cli(*args: str) -> None:
    subprocess.run(lmruns.command(*args), check=True, capture_output=True, text=True)


def _trained_gru(files: dict, work: str, quick: bool) -> str:
    lines = open(files["train"], encoding="utf-8").read().splitlines(True)
    part = os.path.join(work, "train-part.txt")
    with open(part, "w", encoding="utf-8") as f:
        f.writelines(lines[:500 if quick else 5000])
    vocab, run_dir = os.path.join(work, "vocab.txt"), os.path.join(work, "gru")
    if not os.path.exists(os.path.join(run_dir, "model.safetensors")):
        _cli("vocab", files["train"], "-o", vocab, "--force")
        shape = ["-d", "16", "--hidden", "32"] if quick else []
        _cli("train", "--train", part, "--valid", files["valid"], "--vocab", vocab, "--model", "gru", *shape,
             "--epochs", "1", "--threads", "1", "--device", "cpu", "-o", run_dir)
    return run_dir


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    import torch

    import sampledlm

    meta = stamp()
    work = work_dir(NAME, quick)
    files, label = lm_data(data_dir, quick, os.path.join(work, "data"))
    run_dir = _trained_gru(files, work, quick)
    torch.set_num_threads(1)
    lm = sampledlm.load(run_dir, device="cpu")
    words_n = 200 if quick else WORDS
    windows = [p for p in WINDOWS if p + SPAN <= words_n]
    tokens = [w for line in open(files["test"], encoding="utf-8") for w in lm.words(line)][:words_n]
    ids = [lm.vocab.index.get(w, 1) for w in tokens]
    step = np.full((ROUNDS, words_n), np.inf)
    again = {p: np.full((ROUNDS, SPAN), np.inf) for p in windows}
    lp_state = np.zeros(words_n)
    lp_history = {}
    for r in range(ROUNDS):
        state = lm.begin_sentence()
        for t, w in enumerate(tokens):
            t0 = time.perf_counter()
            lp, state = lm.advance(state, w)
            step[r, t] = time.perf_counter() - t0
            lp_state[t] = lp
        for p in windows:
            for j in range(SPAN):
                t = p + j
                t0 = time.perf_counter()
                got = lm.lm.logprobs_after([ids[:t]], [[ids[t]]])[0][0]
                again[p][r, j] = time.perf_counter() - t0
                lp_history[t] = float(got)
    best_step = step.min(axis=0)
    rows, data_rows = [], []
    for p in windows:
        adv = float(best_step[p : p + SPAN].mean())
        his = float(again[p].min(axis=0).mean())
        rows.append([f"{p}-{p + SPAN - 1}", f"{adv * 1e3:.3f}", f"{his * 1e3:.3f}", f"{his / adv:.1f}x"])
        data_rows.append({"words": [p, p + SPAN - 1], "advance_ms": adv * 1e3, "history_ms": his * 1e3})
    first, last = data_rows[0], data_rows[-1]
    flat = last["advance_ms"] / first["advance_ms"]
    worst = max(abs(lp_state[t] - v) for t, v in lp_history.items())
    data = {"setup": {"data": label, "words": words_n, "rounds": ROUNDS, "threads": 1, "quick": quick,
                      "model": lm.lm.config.get("model"), "vocabulary": len(lm.vocab), "torch": torch.__version__},
            "rows": data_rows, "advance_last_over_first": flat, "max_abs_ln_p_difference": worst}
    body = "\n".join([
        f"Data: {label}; the first {words_n:,} test tokens read as one sentence, vocabulary {len(lm.vocab):,}. "
        f"Model: GRU, {data['setup']['model'].get('embed_dim')}-d, {data['setup']['model'].get('hidden')} units, "
        "trained one epoch on part of the training text. One thread; best of "
        f"{ROUNDS} alternated rounds per position.", "",
        table(["words", "advance (ms/word)", "whole history (ms/word)", "history / advance"], rows), "",
        f"Time per word through `advance` at words {last['words'][0]}-{last['words'][1]} against words "
        f"{first['words'][0]}-{first['words'][1]}: **{flat:.2f}x** "
        + ("(flat within 1.5x: O(1) per word)" if flat <= 1.5 else "(NOT flat within 1.5x: see the rows)")
        + f"; re-reading the history grows with it ({last['history_ms'] / first['history_ms']:.1f}x over the same "
        f"span). Largest |ln P| difference between the two at the measured positions: {worst:.1e}.",
        "", f"![time per word]({NAME}.png)",
    ])
    fig, ax = new_figure(figsize=(6.5, 3.6))
    xs = [d["words"][0] for d in data_rows]
    ax.plot(xs, [d["advance_ms"] for d in data_rows], "o-", label="advance (state carried)")
    ax.plot(xs, [d["history_ms"] for d in data_rows], "s-", label="whole history each word")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("word position in the sentence")
    ax.set_ylabel("ms per word, one thread")
    ax.legend()
    fig.tight_layout()
    write_page(out_dir, NAME, "Decoder state: time per word, carried state against re-read history", meta, data,
               body, figure=fig)
    return data
