"""The demo's data-parallel step: the feed-forward model trained by two processes at once, as
``torchrun --nproc-per-node 2 -m sampledlm train ...`` runs it (gloo ranks on a CPU, one GPU each where
there are GPUs), then evaluated exactly like any run directory."""

from __future__ import annotations

import os
import tempfile
import time

from ..errors import UserError
from ..loader import load_model
from ..neural.distributed import launch_error, local_launch, run_launch
from ..lm import perplexity_of
from .common import DemoData, Result


def parallel_step(data: DemoData) -> list[Result]:
    """Two ranks, css-is, one epoch; each rank reads half of every batch and the gradients are averaged."""
    t0 = time.perf_counter()
    out = os.path.join(data.directory, "ffnn-2ranks")
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    args = ["-m", "sampledlm", "train", "--train", data.train, "--valid", data.valid,
            "--vocab", os.path.join(data.directory, "vocab.txt"), "--objective", "css-is", "--samples", "100",
            "--epochs", "1", "--threads", "1", "--seed", str(data.seed), "-o", out]
    with tempfile.TemporaryDirectory(prefix="sampledlm-torchrun-") as logs:
        p = run_launch([*local_launch(2, log_dir=logs), *args], env=env)
    if p.returncode != 0:
        raise UserError("data-parallel demo step: torchrun failed:\n" + launch_error(p.stderr))
    lm = load_model(out)
    return [Result("FFNN trigram, css-is, 2 ranks (torchrun)", perplexity_of(lm.logprobs(data.ids["valid"])),
                   perplexity_of(lm.logprobs(data.ids["test"])), time.perf_counter() - t0,
                   "1 epoch; gradients averaged over the ranks")]
