"""The demo's step for the Python API on words: the models of the earlier steps, opened with sampledlm.load."""

from __future__ import annotations

import os
import time


from ..api import load
from .common import DemoData, Result, say


def api_step(data: DemoData) -> list[Result]:
    """Open the KN3 model (and its mixture with the feed-forward model) on words: a sentence's score, the
    test text's perplexity (each sentence on its own, as ``sampledlm score`` counts), the next words."""
    arpa = data.extra.get("kn3_arpa")
    if not arpa:
        return []
    t0 = time.perf_counter()
    say("\n== the Python API on words (import sampledlm; sampledlm.load) ==")
    with open(data.test, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    paths = [arpa]
    ffnn_dir = os.path.join(data.directory, "ffnn3-softmax")
    if os.path.isdir(ffnn_dir):
        paths = [ffnn_dir, arpa]
    for p in ([arpa], paths) if len(paths) > 1 else ([arpa],):
        lm = load(p if len(p) > 1 else p[0], valid=data.valid if len(p) > 1 else None)
        name = " + ".join(os.path.basename(x) for x in p)
        top = ", ".join(f"{w} {v:.2f}" for w, v in lm.next_logprobs("the", top_k=3).items())
        say(f"{name}: perplexity of the test text, sentence by sentence {lm.perplexity(lines):.2f}; "
                   f"log10 P({lines[0][:30]!r}...) {lm.log10_prob(lines[0]):.2f}; after 'the': {top}")
    _decoder_line(lm, name, lines[0])
    say(f"({time.perf_counter() - t0:.1f} s)")
    return []


def _decoder_line(lm, name: str, sentence: str) -> None:
    """A decoder's use: the sentence word by word through a carried state (Model.advance), its sum against the
    whole sentence's ln P, and three continuations of one state scored in one call."""
    state, total = lm.begin_sentence(), 0.0
    words = lm.words(sentence)
    for word in words + ["</s>"]:
        logp, state = lm.advance(state, word)
        total += logp
    after = lm.advance(lm.begin_sentence(), words[0])[1]
    branches = list(lm.next_logprobs(words[:1], top_k=3))
    logps, _ = lm.advance_many([after] * len(branches), branches)
    shown = ", ".join(f"{w} {v:.2f}" for w, v in zip(branches, logps.tolist()))
    say(f"{name}, word by word (begin_sentence, advance): ln P {total:.4f} against the whole sentence's "
        f"{lm.logprob(sentence):.4f}; three branches after {words[0]!r} in one call: {shown}")
