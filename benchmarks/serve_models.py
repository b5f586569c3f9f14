"""The models the ``serve`` bench serves: KN5 on the training text, and a GRU.

KN5 is trained with ``sampledlm ngram train --order 5`` (kept beside the other experiments' n-grams).
The GRU is the ``neural`` page's finished run (:data:`.neural_lms.RUNS` ``gru``) when the run cache holds
it; otherwise one of the same shape (d 200, hidden 256, projection 200, tied; so a query costs the same)
is trained for one epoch on the first ``SMALL_SENTENCES`` training sentences, over the vocabulary of
the whole training file. The page says which. ``--quick``: the built-in corpus and tiny models.
"""

from __future__ import annotations

import os

from . import lmruns
from .asr import GRU_QUICK, ngram_arpa
from .neural_lms import RUNS

SMALL_SENTENCES = 8000
SMALL_GRU = ("--model gru -d 200 --hidden 256 --proj 200 --tie --dropout 0.25 --objective softmax --optimizer adam "
             "--lr 0.002 --batch-size 32 --bptt 35 --clip 1.0 --epochs 1 --seed 1 --threads 1")


def kn5(s: lmruns.Setting) -> str:
    return ngram_arpa(s.work, s.files, 5)


def gru(s: lmruns.Setting) -> tuple[str, str]:
    """``(run directory, what it is, in words)``: reused, or trained as the module docstring says."""
    if s.quick:
        title, opts = GRU_QUICK
        return lmruns.train(s.work, s.files, lmruns.Run("gru", tuple(opts.split()))), title
    title, opts = RUNS["gru"]
    rd = lmruns.run_dir(s.work, s.files, lmruns.Run("gru", tuple(opts.split())))
    if lmruns.finished(rd):
        return rd, f"{title}: the neural page's finished run ({os.path.basename(rd)}), reused"
    sub = os.path.join(s.work, "serve-data")
    os.makedirs(sub, exist_ok=True)
    vocab = os.path.join(sub, "vocab.txt")
    if not os.path.exists(vocab):
        lmruns.cli("vocab", s.files["train"], "-o", vocab)
    train = os.path.join(sub, f"train-first-{SMALL_SENTENCES}.txt")
    if not os.path.exists(train):
        from sampledlm.data.textio import atomic_write

        with open(s.files["train"], encoding="utf-8") as f, atomic_write(train) as out:
            kept = 0
            for line in f:
                if line.split():
                    out.write(line)
                    kept += 1
                    if kept == SMALL_SENTENCES:
                        break
    files = {**s.files, "train": train}
    rd = lmruns.train(s.work, files, lmruns.Run("serve-gru", tuple(SMALL_GRU.split()) + ("--vocab", vocab)))
    return rd, (f"GRU hidden 256, projection 200, tied embeddings, softmax (the neural page's shape), trained here "
                f"for 1 epoch on the first {SMALL_SENTENCES:,} training sentences over the full training vocabulary "
                "(no finished run of the neural page in the cache); its perplexity does not matter here, its cost "
                "per query is the page GRU's")
