"""The demo's Transformer step: a one-block causal Transformer decoder with adaptive input embeddings tied
with the adaptive softmax (Baevski & Auli 2019), one epoch, evaluated exactly over a sliding window."""

from __future__ import annotations

import dataclasses
import os
import time

import torch

from ..data.tokenizer import TextOptions
from ..lm import perplexity_of
from ..neural.lm import stream_logprobs
from ..neural.registry import complete_spec, model_spec
from ..neural.rundir import make_config
from ..neural.trainer import TrainOptions, new_run
from .common import DemoData, Result


def transformer_step(data: DemoData) -> list[Result]:
    """Train ``--model transformer -d 32 --layers 1 --heads 2 --adaptive-input --objective adaptive`` for one epoch."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: one thread is as fast, and far faster on a busy machine
    try:
        t0 = time.perf_counter()
        opts = TrainOptions(optimizer="adam", lr=3e-3, batch_size=32, bptt=32, clip=1.0, epochs=1, seed=data.seed)
        spec = complete_spec(model_spec("transformer", embed_dim=32, layers=1, heads=2, dropout=0.1,
                                        adaptive_input=True), dataclasses.asdict(opts))
        files = {"train": data.train, "valid": data.valid, "text_options": TextOptions().to_dict()}
        config = make_config(spec, "adaptive", {}, dataclasses.asdict(opts), files, data.vocab)
        trainer = new_run(os.path.join(data.directory, "transformer"), config, data.vocab)
        trainer.train()
        lp = {k: stream_logprobs(trainer.model, trainer.objective, data.ids[k]) for k in ("valid", "test")}
        return [Result("Transformer d=32 1 block (adaptive in+out)", perplexity_of(lp["valid"]),
                       perplexity_of(lp["test"]), time.perf_counter() - t0, "1 epoch, Adam, window 32, stride 16")]
    finally:
        torch.set_num_threads(threads)
