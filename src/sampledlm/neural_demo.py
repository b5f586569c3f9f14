"""The demo's neural step: a small feed-forward trigram LM with the exact softmax (and, when the
n-gram step left a KN3 ARPA file, its linear interpolation with it, weight tuned by EM on valid)."""

from __future__ import annotations

import os
import time

import torch

from .demo import DemoData, Result
from .evaluate import em_weight, interpolate, perplexity_of, stream_logprobs
from .models import build_model, model_spec
from .objectives import make_objective
from .train import Trainer, TrainOptions


def ffnn_step(data: DemoData) -> list[Result]:
    """Train a feed-forward trigram (d=32, h=64, softmax, Adam, 2 epochs) on the demo corpus."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: one thread is as fast, and far faster on a busy machine
    try:
        return _ffnn_step(data)
    finally:
        torch.set_num_threads(threads)


def _ffnn_step(data: DemoData) -> list[Result]:
    t0 = time.perf_counter()
    torch.manual_seed(data.seed)
    vocab = data.vocab
    objective = make_objective("softmax", counts=vocab.counts)
    model = build_model(model_spec("ffnn", order=3, embed_dim=32, hidden=[64]), len(vocab))
    run_dir = os.path.join(data.directory, "ffnn3-run")
    os.makedirs(run_dir, exist_ok=True)
    opts = TrainOptions(optimizer="adam", lr=3e-3, batch_size=128, epochs=2, seed=data.seed)
    Trainer(run_dir, model, objective, data.ids["train"], data.ids["valid"], opts).train()
    lp = {k: stream_logprobs(model, objective, data.ids[k]) for k in ("valid", "test")}
    seconds = time.perf_counter() - t0
    results = [Result("FFNN trigram d=32 h=64 (softmax)", perplexity_of(lp["valid"]), perplexity_of(lp["test"]),
                      seconds, "2 epochs, Adam")]
    arpa = data.extra.get("kn3_arpa")
    if arpa:
        from .ngram import read_arpa

        lm = read_arpa(arpa)
        ng = {k: lm.stream_logprobs(data.ids[k], vocab) for k in ("valid", "test")}
        w = em_weight(lp["valid"], ng["valid"])
        results.append(Result("FFNN trigram + KN3 (linear)", perplexity_of(interpolate(lp["valid"], ng["valid"], w)),
                              perplexity_of(interpolate(lp["test"], ng["test"], w)), time.perf_counter() - t0,
                              f"weight {w:.2f} by EM on valid"))
    return results
