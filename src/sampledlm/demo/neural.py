"""The demo's neural step: a small feed-forward trigram LM trained with the exact softmax, with a
sampled objective (CSS-IS, S = 100 words per step instead of all V) and with a structured one (the
adaptive softmax of Grave et al. 2017: frequent words in a head, the rest in cheaper tail clusters),
and the class-based layer over word classes the exchange algorithm found in the demo corpus
(``sampledlm classes``) and over classes of the softmax model's mean contexts, 4 scores per class
(``sampledlm classes --from-model``, ``--components 4``), all evaluated exactly; and,
when the n-gram step left a KN3 ARPA file, the softmax model's linear interpolation with it (weight
tuned by EM on valid)."""

from __future__ import annotations

import os
import time

import torch

import dataclasses

from ..data.tokenizer import TextOptions
from ..lm import em_weight, interpolate, perplexity_of
from ..neural.lm import stream_logprobs
from ..neural.registry import model_spec
from ..neural.rundir import make_config
from ..neural.trainer import TrainOptions, new_run
from .common import DemoData, Result


def ffnn_step(data: DemoData) -> list[Result]:
    """Train a feed-forward trigram (d=32, h=64, softmax, Adam, 2 epochs) on the demo corpus."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: one thread is as fast, and far faster on a busy machine
    try:
        return _ffnn_step(data)
    finally:
        torch.set_num_threads(threads)


OBJECTIVES = [("softmax", {}, "softmax"), ("css-is", {"samples": 100}, "CSS-IS, S=100"),
              ("adaptive", {}, "adaptive softmax")]


def _train(data: DemoData, name: str, options: dict, label: str, run_name: str | None = None,
           budget: dict | None = None):
    """Train one FFNN trigram with objective ``name`` (into ``run_name``, default ``ffnn3-NAME``; ``budget``: training
    options in place of the 2 epochs); returns (log-probs, Result)."""
    t0 = time.perf_counter()
    run_dir = os.path.join(data.directory, run_name or f"ffnn3-{name}")
    # the softmax run also validates within each epoch (--valid-every, about 4 points an epoch): its best model is
    # the best of those points, as on a corpus read once
    every = max(1, len(data.ids["train"]) // (128 * 4)) if name == "softmax" else 0
    opts = TrainOptions(**{"optimizer": "adam", "lr": 3e-3, "batch_size": 128, "epochs": 2, "seed": data.seed,
                           "valid_every": every, **(budget or {})})
    spec = model_spec("ffnn", order=3, embed_dim=32, hidden=[64], dropout=0.0)
    files = {"train": data.train, "valid": data.valid, "text_options": TextOptions().to_dict()}
    config = make_config(spec, name, options, dataclasses.asdict(opts), files, data.vocab)
    trainer = new_run(run_dir, config, data.vocab)  # a complete run directory: 'sampledlm eval' opens it
    trainer.train()
    model, objective = trainer.model, trainer.objective
    lp = {k: stream_logprobs(model, objective, data.ids[k]) for k in ("valid", "test")}
    points = f", best of {len(trainer.state.metrics)} validation points (--valid-every {every})" if every else ""
    how = "2 epochs, Adam" + points
    if budget:
        last = trainer.state.metrics[-1]
        how = (f"Adam, --max-time {opts.max_time:g} --time-clock {opts.time_clock} --lr-schedule {opts.lr_schedule}: "
               f"{last['epoch'] - 1 + last.get('epoch_fraction', 1.0):.1f} epochs, last lr {last['lr']:.1e}")
    result = Result(f"FFNN trigram d=32 h=64 ({label})", perplexity_of(lp["valid"]), perplexity_of(lp["test"]),
                    time.perf_counter() - t0, how)
    return lp, result


def _ffnn_step(data: DemoData) -> list[Result]:
    t0 = time.perf_counter()
    results, logprobs = [], {}
    from ..data.clusters import exchange_classes, write_word_classes

    classes = os.path.join(data.directory, "classes.txt")  # Brown-style classes for the class layer
    c = max(2, round(2 * len(data.vocab) ** 0.5))
    cls = exchange_classes(data.ids["train"], len(data.vocab), c, data.vocab.counts)
    write_word_classes(classes, data.vocab.words, cls, data.vocab.counts)
    objectives = OBJECTIVES + [("class", {"word_classes": classes}, "exchange classes")]  # C = 2 sqrt(V)
    for name, options, label in objectives:
        logprobs[name], result = _train(data, name, options, label)
        results.append(result)
    # a time budget instead of epochs: up to 20 epochs, stopped after 3 CPU seconds, the cosine annealed over them
    _, result = _train(data, "css-is", {"samples": 100}, "CSS-IS, S=100, a 3 CPU-second budget",
                       run_name="ffnn3-css-is-budget",
                       budget={"epochs": 20, "max_time": 3.0, "time_clock": "cpu", "lr_schedule": "cosine-budget"})
    results.append(result)
    # classes from the softmax model's contexts ('sampledlm classes --from-model'), each scored by 4 linear scores
    from ..neural.context_classes import kmeans_classes, mean_contexts
    from ..neural.lm import load_neural

    first = load_neural(os.path.join(data.directory, "ffnn3-softmax"), device="cpu")
    x, counts = mean_contexts(first.model, data.ids["train"])
    ctx_classes = os.path.join(data.directory, "ctx-classes.txt")
    write_word_classes(ctx_classes, data.vocab.words, kmeans_classes(x, counts, c), data.vocab.counts)
    _, result = _train(data, "class", {"word_classes": ctx_classes, "components": 4},
                       "context classes, 4 scores", run_name="ffnn3-class-ctx")
    results.append(result)
    arpa = data.extra.get("kn3_arpa")
    if arpa:
        from ..ngram import read_arpa

        lp = logprobs["softmax"]
        lm = read_arpa(arpa)
        ng = {k: lm.stream_logprobs(data.ids[k], data.vocab) for k in ("valid", "test")}
        w = em_weight(lp["valid"], ng["valid"])
        results.append(Result("FFNN trigram (softmax) + KN3 (linear)",
                              perplexity_of(interpolate(lp["valid"], ng["valid"], w)),
                              perplexity_of(interpolate(lp["test"], ng["test"], w)), time.perf_counter() - t0,
                              f"weight {w:.2f} by EM on valid"))
    return results
