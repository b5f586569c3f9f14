"""The demo's step for domain adaptation: the feed-forward model of the earlier step trained further on new text with
``sampledlm train --init-from RUN``, scored before and after on held-out text of the same kind."""

from __future__ import annotations

import os
import shutil
import time


from .common import DemoData, Result, note, say


def adapt_step(data: DemoData) -> list[Result]:
    """Fine-tune ``ffnn3-softmax`` for 2 epochs on the test text's first half (most of it to train, the rest to
    validate) and compare both models on its second half."""
    source = os.path.join(data.directory, "ffnn3-softmax")
    if not os.path.isdir(source):
        return []
    say("\n== Domain adaptation (sampledlm train --init-from RUN) ==")
    from ..api import load
    from ..api_train import train_lm

    t0 = time.perf_counter()
    with open(data.test, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    half = len(lines) // 2
    files = {name: os.path.join(data.directory, f"adapt-{name}.txt") for name in ("train", "valid", "heldout")}
    parts = {"train": lines[: half * 4 // 5], "valid": lines[half * 4 // 5: half], "heldout": lines[half:]}
    for name, path in files.items():
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(parts[name])
    out = os.path.join(data.directory, "ffnn3-adapted")
    shutil.rmtree(out, ignore_errors=True)  # a demo directory run again
    train_lm(files["train"], files["valid"], out, init_from=source, epochs=2, lr=0.001, log=note)
    heldout = [line.rstrip("\n") for line in parts["heldout"]]
    before, after = load(source).perplexity(heldout), load(out).perplexity(heldout)
    valid = load(out).perplexity([line.rstrip("\n") for line in parts["valid"]])
    say(f"held-out half of the test text: {before:.2f} before, {after:.2f} after 2 epochs on the first half")
    return [Result("FFNN trigram fine-tuned (--init-from)", valid, after, time.perf_counter() - t0,
                   f"valid/test: the test text's halves; {before:.2f} before")]
