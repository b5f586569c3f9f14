"""The demo's step for using the models: sentence scores, n-best rescoring of a simulated recogniser's
lists (first pass: acoustic scores alone), and sampled sentences."""

from __future__ import annotations

import os
import time


from ..loader import load_model
from ..lm import Mixture
from ..use.channel import Channel
from ..use.generate import generate
from ..use.nbest import Weights, add_lm_scores, evaluate, tune
from ..use.score import format_sentence, score_sentences
from .common import DemoData, Result, say


def use_step(data: DemoData) -> list[Result]:
    """Score, rescore and generate with the KN3 model (and its mixture with the feed-forward model)."""
    arpa = data.extra.get("kn3_arpa")
    if not arpa:
        return []
    t0 = time.perf_counter()
    kn3 = load_model(arpa)
    models = {"KN3": kn3}
    ffnn_dir = os.path.join(data.directory, "ffnn3-softmax")
    if os.path.isdir(ffnn_dir):
        mix = Mixture([load_model(ffnn_dir), kn3])
        mix.fit_weights(data.ids["valid"])
        models["FFNN + KN3"] = mix
    with open(data.test, encoding="utf-8") as f:
        sentences = [line.split() for line in f if line.split()]
    say("\n== using the models (sampledlm score, rescore, generate) ==")
    shown = next((s for s in sentences if 6 <= len(s) <= 12 and sum(w.isalpha() for w in s) >= len(s) - 1), sentences[0])
    say(format_sentence(score_sentences(kn3, [shown], with_orders=True)[0], per_word=True))
    channel = Channel(data.vocab.words, seed=data.seed)
    lists = [channel.nbest(f"s{i}", s, n=10) for i, s in enumerate(sentences[:200])]
    dev, test = lists[:100], lists[100:]
    for name, lm in models.items():
        add_lm_scores(lm, lists)
        w = tune(dev)
        r = evaluate(test, w)
        first = evaluate(test, Weights(lm_weight=0.0))
        say(f"10-best rescoring of a simulated recogniser, {name} (lm weight {w.lm_weight:.2f} tuned on 100 "
                   f"lists): WER {100 * first.rescored.wer:.1f}% (acoustics alone) -> {100 * r.rescored.wer:.1f}% "
                   f"(oracle {100 * r.oracle.wer:.1f}%)")
    for s in generate(kn3, [], n=2, seed=data.seed, max_words=20, allow_unk=False):
        say(f"sampled from KN3: {' '.join(s)}")
    say(f"({time.perf_counter() - t0:.1f} s)")
    return []
