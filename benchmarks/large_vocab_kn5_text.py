"""Issue 56: KN5 on the very text each neural row read, so that the rows' miss against KN5 on the whole corpus can
be split into what the budget let them read and what the model does with it.

A neural row at V = 485k reads 4 epochs over the first N training tokens (N sized so that the epochs fill its
2 CPU-hours: 4.3M for the class layer, 20-27M for the sampled outputs), while the KN5 it is judged against counted
all 165.5M. For each distinct prefix a finished row trained on, this step builds our KN5 on that prefix with the
rows' own vocabulary (``--vocab``: the 485,176 words of count >= 3, ``<unk>`` an ordinary word, as the neural models
treat it) and scores the whole test text exactly with ``sampledlm eval``: the same predictions, the same words.
Each result is recorded as ``kn5-text/<prefix file>``; the model directory (up to a few GB) is deleted after.

Decision: the same estimator and settings as the whole-corpus row (interpolated modified Kneser-Ney, order 5, no
pruning, bounded memory), so that the only difference between this KN5 and that one is the text it counted."""

from __future__ import annotations

import json
import os
import shutil
import sys

from .large_vocab_record import append_row, prefix_file, read_rows, sampledlm, timed

KEY = "kn5-text/"
MEMORY = "3G"


def prefixes(rows: dict) -> dict[str, list[str]]:
    """Prefix file -> the finished neural rows (row names) that trained on it."""
    out: dict[str, list[str]] = {}
    for k, r in rows.items():
        train = (r.get("plan") or {}).get("train")
        if k.startswith("neural/") and r.get("rc") == 0 and not r.get("projected") and train:
            out.setdefault(train, []).append(r["row"])
    return out


def prefix_again(rows: dict, train: str, whole: str) -> str | None:
    """``train`` again where it is gone (a row trained on another machine): the first lines of ``whole`` holding the
    plan's tokens, which is how the row's prefix was cut; None when the text cut so does not have the row's
    predictions (another corpus) or the plan does not say."""
    if os.path.exists(train):
        return train
    plan = next((r["plan"] for r in rows.values() if (r.get("plan") or {}).get("train") == train), {})
    if not plan.get("epoch_tokens_planned") or not os.path.exists(whole):
        return None
    got = prefix_file(whole, train, plan["epoch_tokens_planned"])
    if got != plan.get("epoch_predictions"):
        os.remove(train)
        return None
    return train


def kn5_on(train: str, vocab: str, test: str, work: str) -> dict:
    """Train our KN5 on ``train`` with ``vocab``, score ``test`` with it; the timings of both and the perplexity."""
    model = os.path.join(work, "kn5-text-" + os.path.splitext(os.path.basename(train))[0] + ".bin")
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp, exist_ok=True)
    built = timed(sampledlm("ngram", "train", "--train", train, "--order", "5", "--vocab", vocab, "--memory", MEMORY,
                            "--temp-dir", tmp, "--binary", "-o", model, "--force"))
    out = {"train_run": {k: built[k] for k in ("rc", "wall_s", "cpu_s", "peak_mb")},
           "build": built["stderr"].strip().splitlines()[-1][-400:] if built["stderr"].strip() else ""}
    if built["rc"] != 0:
        shutil.rmtree(model, ignore_errors=True)
        return {**out, "rc": built["rc"], "stderr": built["stderr"][-1000:]}
    scored = timed(sampledlm("eval", model, "--test", test, "--json", "--threads", "1"))
    shutil.rmtree(model, ignore_errors=True)
    out["eval_run"] = {k: scored[k] for k in ("rc", "wall_s", "cpu_s", "peak_mb")}
    if scored["rc"] != 0:
        return {**out, "rc": scored["rc"], "stderr": scored["stderr"][-1000:]}
    ev = json.loads(scored["stdout"].strip().splitlines()[-1])
    return {**out, "rc": 0, "ppl": ev["ppl"], "predictions": ev["predictions"], "oov": ev.get("oov")}


def step(work: str, notes: str, files: dict) -> int:
    """KN5 on each finished row's prefix not yet recorded (the whole training text is the KN5 row's own; a prefix
    gone is cut again from ``files["train"]``); returns how many were recorded."""
    rows = read_rows(notes)
    done = 0
    for train, users in prefixes(rows).items():
        key = KEY + os.path.basename(train)
        if rows.get(key, {}).get("rc") == 0 or prefix_again(rows, train, files.get("train", "")) is None:
            continue
        print(f"[neural] KN5 on {os.path.basename(train)} (the text of {', '.join(users)})", file=sys.stderr,
              flush=True)
        with open(train, encoding="utf-8") as f:
            tokens = sum(len(line.split()) for line in f)
        res = kn5_on(train, files["vocab"], files["test"], work)
        append_row({"key": key, "train": train, "tokens": tokens, "rows": users, "vocab": files["vocab"],
                    "test": files["test"], **res}, notes)
        done += 1
    return done


def same_text(rows: dict) -> dict[str, dict]:
    """Row name -> its prefix's recorded KN5 (finished ones)."""
    out = {}
    for train, users in prefixes(rows).items():
        k = rows.get(KEY + os.path.basename(train))
        if k and k.get("rc") == 0:
            out.update({u: k for u in users})
    return out
