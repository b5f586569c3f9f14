"""Parallel binary MELM: vocabulary shards trained without communication (Xu, Gunawardana & Khudanpur 2011, sec. 2.2).

Every feature of a binarized MELM belongs to one word's classifier, so the V classifiers can be
trained apart. Rank r of R owns the words ``w % R == r`` (ids are sorted by count, so the shards
are balanced) with their biases and (g, w) features; it walks the same shuffled positions as a
single process would and updates only its own parameters. Negatives are kept by a hash of
(seed, epoch, stream position, word) (:func:`kernels.keep_negative`), so R ranks produce exactly
the model 1 rank produces. The only messages during training are the per-position partial
normalisers of the validation set (one all-reduce of ``2 x N_valid`` floats per epoch), so that
every rank takes the same learning-rate decisions; at the end rank 0 gathers the shards and writes
one model directory.

Processes: ``torch.distributed`` with the gloo backend (CPU). Locally ``R`` ranks are started
with ``torch.multiprocessing`` (:func:`train_sharded`); across machines the same code runs under
``torchrun`` (:func:`run_from_env`), e.g. on each of 2 machines::

    torchrun --nnodes 2 --nproc-per-node 4 --node-rank {0|1} --master-addr HOST0 --master-port 29500 \\
        -m sampledlm maxent train --train train.txt --valid valid.txt -o model --distributed
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import UserError
from .features import FeatureSet, FeatureSpec
from .scorer import MaxEntModel
from .train import TrainConfig, train, train_positions


def word_owner(num_words: int, world: int) -> np.ndarray:
    """The rank owning each word, ``[V]`` int64: round robin over the count-sorted ids."""
    return np.arange(num_words, dtype=np.int64) % world


@dataclass
class ShardJob:
    """Everything a rank needs; each rank builds the (deterministic) feature dictionary itself."""

    train_ids: np.ndarray
    valid_ids: np.ndarray
    counts: np.ndarray
    spec: FeatureSpec
    cfg: TrainConfig
    hash_size: int | None = None
    out_dir: str | None = None
    vocab: object = None
    log: bool | Callable[[str], None] = False  # True: rank 0 prints its epoch lines to stderr; a function: given them
    info: dict = field(default_factory=dict)
    text_options: dict | None = None  # how the text was read (a TextOptions dict), saved with the model
    start: object = None  # a run started from another model: its .finetune.Start
    checkpoint_dir: str | None = None  # the output directory whose .checkpoint/ each epoch's state goes to


def check(job: ShardJob, world: int) -> None:
    if world > len(job.counts):
        raise UserError(f"{world} ranks for a vocabulary of {len(job.counts):,} words: each rank owns a shard of the "
                        "words, so at most one rank a word")
    if world > 1 and job.hash_size:
        raise UserError("--hash-size cannot be combined with several ranks (hashed weights are shared across words)")
    if world > 1 and job.cfg.objective != "binary":
        raise UserError("only the binary MELM trains in vocabulary shards (the softmax couples all words)")


def run_rank(rank: int, world: int, job: ShardJob) -> MaxEntModel | None:
    """Train this rank's shard; rank 0 returns (and saves, with ``job.out_dir``) the merged model."""
    import torch
    import torch.distributed as dist

    check(job, world)
    V = len(job.counts)
    t0 = time.perf_counter()
    at = train_positions(len(job.train_ids), job.cfg)  # a subsampled standard MELM sees only its fraction
    full = FeatureSet.build(job.train_ids, V, job.spec, at=at, hash_size=job.hash_size)
    if job.start is not None:
        full = job.start.features(full)
    owned = word_owner(V, world) == rank
    model = MaxEntModel(full.restrict(owned) if world > 1 else full, job.cfg.objective, job.cfg.alpha)
    model.init_unigram(np.bincount(np.asarray(job.train_ids)[at], minlength=V) if len(at) < len(job.train_ids)
                       else job.counts)
    if job.start is not None:
        job.start.copy_weights(model)

    def reduce(x: np.ndarray) -> np.ndarray:
        if world == 1:
            return x
        t = torch.from_numpy(np.ascontiguousarray(x))
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.numpy()

    log = None
    if callable(job.log) and rank == 0:
        log = (lambda s: job.log(f"[rank {rank}/{world}] {s}"))
    elif job.log and rank == 0:
        log = (lambda s: print(f"[rank {rank}/{world}] {s}", file=sys.stderr, flush=True))
    checkpoint = None
    if job.checkpoint_dir:
        from .checkpoint import Checkpointer

        checkpoint = Checkpointer(job.checkpoint_dir, rank, barrier=lambda: reduce(np.zeros(1)))
    train(model, job.train_ids, job.valid_ids, job.cfg, owned=owned, reduce=reduce, log=log, checkpoint=checkpoint)
    if world > 1:
        sizes = [int(np.count_nonzero(word_owner(V, world)[full.gword] == r)) for r in range(world)]
        theta = torch.zeros(max(sizes), dtype=torch.float64)
        theta[: len(model.theta)] = torch.from_numpy(model.theta)
        u = torch.from_numpy(np.where(owned, model.u, 0.0))
        parts = [torch.zeros_like(theta) for _ in range(world)] if rank == 0 else None
        dist.gather(theta, parts, dst=0)
        dist.all_reduce(u, op=dist.ReduceOp.SUM)
        if rank != 0:
            return None
        owner = word_owner(V, world)[full.gword]
        merged = np.zeros(full.num_pairs)
        for r in range(world):
            merged[owner == r] = parts[r].numpy()[: sizes[r]]
        info = model.info
        model = MaxEntModel(full, job.cfg.objective, job.cfg.alpha, u.numpy().copy(), merged)
        model.info = info
    model.calibrate()
    model.info.update(job.info)
    model.info["ranks"] = world
    model.info["train_seconds"] = time.perf_counter() - t0
    model.text_options = job.text_options
    if job.out_dir:
        model.save(job.out_dir, job.vocab)
    return model


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` ends (``kill -9`` of the command included): a rank left training after its
    parent, which held the directory's lock, went on writing checkpoints and the model beside a resumed run. Linux:
    the kernel sends SIGKILL (``PR_SET_PDEATHSIG``); elsewhere a thread watches the parent's pid."""
    import signal
    import threading

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0:  # 1 = PR_SET_PDEATHSIG
            if os.getppid() != parent:  # the parent ended before the call
                os._exit(1)
            return
    except (OSError, AttributeError):
        pass

    def watch():
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _spawned(rank: int, world: int, port: int, job: ShardJob, parent: int | None = None) -> None:
    import torch
    import torch.distributed as dist

    if parent is not None:
        die_with_parent(parent)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        run_rank(rank, world, job)
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_sharded(job: ShardJob, world: int) -> MaxEntModel | None:
    """Train on ``world`` local ranks (one process each); rank 0 writes ``job.out_dir``.

    Returns the model when ``world`` is 1 (None otherwise: it lives in the rank-0 process). A
    :class:`UserError` in a rank (e.g. training diverged) is raised here as one.
    """
    import torch.multiprocessing as mp

    check(job, world)
    if world == 1:
        return run_rank(0, 1, job)
    _check_spawnable()
    try:
        mp.spawn(_spawned, args=(world, _free_port(), job, os.getpid()), nprocs=world, join=True)
    except mp.ProcessRaisedException as e:
        marker = f"{UserError.__module__}.{UserError.__name__}: "
        lines = [ln for ln in str(e).splitlines() if ln.startswith(marker)]
        if lines:
            raise UserError(lines[-1][len(marker):]) from None
        raise
    return None


def _check_spawnable() -> None:
    """Refuse local ranks when the calling script cannot be read again: each rank is a new Python process that
    re-imports ``__main__`` from its file, and a script given on standard input (``python - < script.py``) has none
    (the ranks died at start and the caller waited for ever)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is not None and not os.path.isfile(path):
        raise UserError(f"several ranks start new Python processes that import the calling script again, and "
                        f"{path} is not a file: run the script from a file, or train with ranks=1")


def run_from_env(job: ShardJob) -> None:
    """Run one rank of a ``torchrun`` job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment)."""
    import torch.distributed as dist

    from ..neural.distributed import join_group, world_size_from_env

    world = world_size_from_env()
    rank = join_group("gloo", world)
    try:
        run_rank(rank, world, job)
    finally:
        dist.destroy_process_group()
