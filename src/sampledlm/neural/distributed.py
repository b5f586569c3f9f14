"""Data-parallel training over processes: ``torchrun --nproc-per-node N -m sampledlm train ...``.

Each of the W ranks holds a full copy of the model and reads its own share of every global batch:
rows ``[r B / W, (r + 1) B / W)`` of it (:meth:`Ranks.shard`). For a recurrent model a batch's rows
are contiguous stretches of the token stream, so rank r reads its own shard of the stream; for a
feed-forward model they are its slice of the epoch's shuffled positions. Each rank draws its
negatives from its own random stream (seeded by seed, epoch and rank).

After the backward pass the gradients are summed over the ranks and divided by the number of
predictions in the whole global batch (:meth:`Ranks.reduce_gradients`), so a step with W ranks
applies exactly the gradient of the mean loss over the global batch, the step a single process
would take with batch B (up to the order of float additions). Dense gradients travel in one flat
all-reduce (one bucket, as ``DistributedDataParallel`` would send them); row-sparse gradients (the
sampled output layer, sparse embeddings) are all-gathered as (rows, values) and summed, so a step
costs O(rows touched) on the wire, not O(V). We reduce after ``backward`` instead of wrapping the
model in ``torch.nn.parallel.DistributedDataParallel`` because a step here is not one module's
forward (the model computes contexts, the objective scores them, a recurrent state is carried
between steps) and because DDP's sparse-gradient support depends on the backend; the arithmetic is
the same.

Process groups: ``nccl`` when the device is a GPU, ``gloo`` on CPUs (so the same path runs, and is
tested, without a GPU). torchrun sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
``MASTER_PORT``; across machines give it ``--nnodes``, ``--node-rank`` and ``--rdzv-endpoint``.
Rank 0 alone writes the run directory (config, checkpoints, metrics, the model); a checkpoint holds
every rank's random state and carried recurrent state, so ``--resume`` with the same number of ranks
continues with the very numbers of an uninterrupted run.
"""

from __future__ import annotations

import os
import re
import subprocess

import torch
import torch.distributed as dist

from ..errors import UserError


def local_launch(nproc: int, log_dir: str | None = None) -> list[str]:
    """``python -m torch.distributed.run`` and its options for ``nproc`` ranks on this machine: the rendezvous
    store binds a free port on 127.0.0.1 itself (port 0), so no other process can take a port chosen
    beforehand (as one picked with :func:`free_port` and passed as ``--master-port`` can be, on a busy machine).
    ``log_dir``: where torchrun keeps its per-rank folders; without it torchrun makes a ``torchelastic_*`` folder
    in the system's temporary directory on every launch and leaves it there."""
    import sys
    import uuid

    logs = ["--log-dir", log_dir] if log_dir else []
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", "127.0.0.1:0", "--rdzv-id", uuid.uuid4().hex, *logs]


def run_launch(argv: list[str], env: dict[str, str] | None = None, grace_s: float | None = 30.0,
               stderr=subprocess.PIPE):
    """Run a child process (a launcher: :func:`local_launch` and its script; or a training) to its end and return
    its ``subprocess.CompletedProcess`` (stdout captured as text; stderr too unless ``stderr`` says otherwise, as
    ``subprocess.Popen`` reads it: a file, or None for this process's own).
    If this process is stopped while it waits (SIGTERM raised as an error, Ctrl-C), the child gets SIGTERM (torchrun
    passes it on to its ranks, a training writes its checkpoint) and ``grace_s`` seconds to end before SIGKILL
    (None: as long as it takes). ``subprocess.run`` would SIGKILL it at once: ranks whose launcher dies that way go
    on training in the background, and a training loses what it did since its last checkpoint."""
    import signal

    with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True) as p:
        try:
            out, err = p.communicate()
        except BaseException:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            try:
                p.communicate(timeout=grace_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
            raise
    return subprocess.CompletedProcess(argv, p.returncode, out, err)


#: A line a rank's own failure prints (our error line, a Python exception's last line), as opposed to torchrun's
#: summary of which rank failed.
_RANK_ERROR = re.compile(r"^(\[rank\d+\]:\s*)?(sampledlm: |[A-Za-z_.]*(Error|Exception)\b.*:)")


def launch_error(stderr: str, lines: int = 12) -> str:
    """What a failed torchrun printed that says why: the ranks' own error lines (our ``sampledlm:`` message, an
    exception's last line), then its last ``lines`` lines without the rules of ``=`` and ``-`` that frame its
    summary (which names the failed rank and its exit code, not the cause)."""
    kept = [ln for ln in stderr.strip().splitlines() if ln.strip().strip("=-")]
    summary = kept[-lines:]
    causes = [ln for ln in kept[:-lines] if _RANK_ERROR.match(ln.strip())]
    out = ([f"a rank said: {ln.strip()}" for ln in dict.fromkeys(causes[-3:])] if causes else []) + summary
    return "\n".join(out) or "torchrun failed without a message"


def free_port(host: str = "127.0.0.1") -> int:
    """A free TCP port on ``host``: the rendezvous of a local ``torchrun --master-port``."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def world_size_from_env() -> int:
    """The number of ranks torchrun started (1 without torchrun); a ``WORLD_SIZE`` that is no whole number >= 1
    is refused (it was read as 1: a job meant for several ranks trained alone, with no word)."""
    raw = os.environ.get("WORLD_SIZE", "1")
    try:
        world = int(raw)
    except ValueError:
        world = 0
    if world < 1:
        raise UserError(f"WORLD_SIZE={raw!r} in the environment: torchrun sets it to the number of ranks (a whole "
                        "number >= 1); unset it to train in one process")
    return world


def rank_from_env(world: int) -> int:
    """This process's rank (``RANK``) among ``world``, and the rendezvous torchrun describes, checked before
    ``init_process_group`` (which fails with a traceback, or waits without a word, on a half-set environment)."""
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise UserError(f"WORLD_SIZE={world} in the environment but not {', '.join(missing)}: several ranks are "
                        "started by torchrun (torchrun --nproc-per-node N -m sampledlm ...), which sets them all; "
                        "unset WORLD_SIZE to train in one process")
    raw = os.environ["RANK"]
    if not raw.isdigit() or int(raw) >= world:
        raise UserError(f"RANK={raw!r} in the environment: it should be a whole number below WORLD_SIZE={world}")
    return int(raw)


#: how long the ranks of a job wait for each other to arrive (torch's own default for a process group)
JOIN_TIMEOUT_S = 1800
#: how often a waiting rank looks again (the wait returns to Python between looks, so Ctrl-C and SIGTERM stop it)
JOIN_POLL_S = 0.5


def join_group(backend: str, world: int) -> int:
    """Join the process group of ``world`` ranks the environment describes; returns this rank. Rank 0 says where
    it waits first, so that a rank that never comes shows as a wait, not a hang; the wait (:func:`meet_ranks`)
    is bounded and a signal stops it."""
    rank = rank_from_env(world)
    host, port = os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"MASTER_PORT={port!r} in the environment: it should be a TCP port (1-65535)")
    if rank == 0:
        import sys

        print(f"[rank 0/{world}] waiting for {world} ranks at {host}:{port} (up to {JOIN_TIMEOUT_S // 60} min; "
              "Ctrl-C stops the wait)", file=sys.stderr, flush=True)
    store = meet_ranks(host, int(port), rank, world)
    dist.init_process_group(backend=backend, store=store, rank=rank, world_size=world)
    return rank


def meet_ranks(host: str, port: int, rank: int, world: int, timeout_s: float = JOIN_TIMEOUT_S):
    """The rendezvous store of a job, once all ``world`` ranks have reached it (what ``init_process_group``'s
    ``env://`` does, but in steps that return to Python, so that Ctrl-C, SIGTERM and SIGHUP stop a wait for a rank
    that never comes: torch's own wait sits in C++ for 30 minutes and no signal handler runs).

    Rank 0 hosts the store (torchrun's agent hosts it when ``TORCHELASTIC_USE_AGENT_STORE`` says so); the other
    ranks look for it with a plain socket until it answers (a refused ``TCPStore`` connection prints a C++ stack
    trace), then each adds one to a counter and waits until it reads ``world``."""
    import time
    from datetime import timedelta

    deadline = time.monotonic() + timeout_s
    hosts = rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    if not hosts:
        _wait_for_listener(host, port, deadline, timeout_s)
    try:
        store = dist.TCPStore(host, port, world, is_master=hosts, timeout=timedelta(seconds=timeout_s),
                              wait_for_workers=False, multi_tenant=True)
    except RuntimeError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"rank {rank} cannot {'listen on' if hosts else 'reach the job at'} {host}:{port} "
                        f"(MASTER_ADDR, MASTER_PORT): {first}") from None
    key = "sampledlm/joined/" + os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")  # a restarted job counts anew
    store.add(key, 1)
    while (here := store.add(key, 0)) < world:
        if time.monotonic() > deadline:
            raise UserError(f"{here} of the job's {world} ranks reached {host}:{port} within {timeout_s / 60:g} min; "
                            "start every rank (torchrun --nproc-per-node N on each node), or unset WORLD_SIZE to "
                            "train in one process")
        time.sleep(JOIN_POLL_S)
    return store


def _wait_for_listener(host: str, port: int, deadline: float, timeout_s: float) -> None:
    """Return once something listens on ``host:port`` (rank 0's store), looking every :data:`JOIN_POLL_S`."""
    import socket
    import time

    while True:
        try:
            with socket.create_connection((host, port), timeout=max(JOIN_POLL_S, 0.1)):
                return
        except OSError as e:
            if isinstance(e, socket.gaierror):
                raise UserError(f"MASTER_ADDR={host!r} in the environment: no such host ({e.strerror})") from None
            if time.monotonic() > deadline:
                raise UserError(f"nothing answered at {host}:{port} (MASTER_ADDR, MASTER_PORT) within "
                                f"{timeout_s / 60:g} min: rank 0 of the job never started") from None
        time.sleep(JOIN_POLL_S)


class Ranks:
    """The ranks of one training run. ``Ranks.single()`` is the one-process case (every method a no-op)."""

    def __init__(self, rank: int = 0, world: int = 1):
        self.rank, self.world = rank, world

    @classmethod
    def single(cls) -> "Ranks":
        return cls(0, 1)

    @classmethod
    def from_env(cls, device: torch.device) -> "Ranks":
        """Join the process group torchrun describes (or a single rank without torchrun)."""
        world = world_size_from_env()
        if world <= 1:
            return cls.single()
        if not dist.is_available():
            raise UserError("this torch build has no torch.distributed: run without torchrun")
        if not dist.is_initialized():
            join_group("nccl" if device.type == "cuda" else "gloo", world)
        return cls(dist.get_rank(), dist.get_world_size())

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    # --- data ---
    def bounds(self, n: int) -> tuple[int, int]:
        """This rank's rows ``[lo, hi)`` of a global batch of ``n`` rows (``numpy.array_split``'s rule)."""
        q, r = divmod(n, self.world)
        lo = self.rank * q + min(self.rank, r)
        return lo, lo + q + (1 if self.rank < r else 0)

    def shard(self, batch):
        """This rank's rows of every tensor of a batch (all share their first dimension)."""
        if not self.active:
            return batch
        n = next(t for t in batch if torch.is_tensor(t)).shape[0]
        lo, hi = self.bounds(n)
        return tuple(t[lo:hi] if torch.is_tensor(t) else t for t in batch)

    # --- gradients ---
    def reduce_gradients(self, params: list[torch.nn.Parameter], sparse_ids: set[int], count: int,
                         loss_sum: float) -> tuple[int, float]:
        """Sum the gradients of ``loss_sum`` (this rank's summed loss over its ``count`` predictions) over
        the ranks and divide by the global count: the gradient of the global mean loss. Returns the global
        ``(count, loss_sum)``. ``params`` is the same list on every rank; ``sparse_ids`` the ids of those
        that take row-sparse gradients. A parameter this rank's loss did not reach gets a zero gradient, so
        that every rank sends the same tensors."""
        if not self.active:
            return count, loss_sum
        for p in params:
            if p.grad is None:
                p.grad = (torch.sparse_coo_tensor(torch.zeros((1, 0), dtype=torch.int64, device=p.device),
                                                  p.new_zeros((0,) + tuple(p.shape[1:])), p.shape)
                          if id(p) in sparse_ids else torch.zeros_like(p))
        dense = [p for p in params if not p.grad.is_sparse]
        sparse = [p for p in params if p.grad.is_sparse]
        device = dense[0].grad.device if dense else (sparse[0].grad.device if sparse else torch.device("cpu"))
        flat = torch.cat([p.grad.reshape(-1).float() for p in dense]
                         + [torch.tensor([float(count), float(loss_sum)], device=device)])
        dist.all_reduce(flat)
        total, total_loss = int(round(float(flat[-2]))), float(flat[-1])
        scale = 1.0 / max(total, 1)
        offset = 0
        for p in dense:
            k = p.grad.numel()
            p.grad.copy_(flat[offset:offset + k].view_as(p.grad).to(p.grad.dtype)).mul_(scale)
            offset += k
        for p in sparse:
            p.grad = self._sum_sparse(p.grad.coalesce()) * scale
        return total, total_loss

    def _sum_sparse(self, g: torch.Tensor) -> torch.Tensor:
        """The sum over ranks of a row-sparse gradient: every rank's (rows, values), gathered and coalesced."""
        idx, val = g.indices(), g.values()
        counts = [torch.zeros(1, dtype=torch.int64, device=idx.device) for _ in range(self.world)]
        dist.all_gather(counts, torch.tensor([idx.shape[1]], dtype=torch.int64, device=idx.device))
        sizes = torch.cat(counts)
        most = int(sizes.max())
        pad_idx = idx.new_zeros((idx.shape[0], most))
        pad_val = val.new_zeros((most,) + tuple(val.shape[1:]))
        pad_idx[:, :idx.shape[1]] = idx
        pad_val[:idx.shape[1]] = val
        all_idx = [torch.empty_like(pad_idx) for _ in range(self.world)]
        all_val = [torch.empty_like(pad_val) for _ in range(self.world)]
        dist.all_gather(all_idx, pad_idx)
        dist.all_gather(all_val, pad_val)
        keep = [int(s) for s in sizes.tolist()]
        idx = torch.cat([t[:, :k] for t, k in zip(all_idx, keep)], dim=1)
        val = torch.cat([t[:k] for t, k in zip(all_val, keep)], dim=0)
        return torch.sparse_coo_tensor(idx, val, g.shape).coalesce()

    # --- keeping the ranks in step ---
    def broadcast_module(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers on every rank (the same start everywhere)."""
        if self.active:
            for t in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(t.data, src=0)

    def broadcast_float(self, value: float) -> float:
        """Rank 0's number on every rank (so that decisions made from it agree)."""
        if not self.active:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def on_main(self, step):
        """``step()`` on rank 0 alone (checking or writing the run directory), its outcome told to every rank:
        returns its result on rank 0 (None elsewhere); where it raised, rank 0 raises that and every other rank a
        :class:`UserError` with its message that rank 0 alone prints. Without the word, another rank went on to its
        next collective and died with gloo's traceback when rank 0 left."""
        result, error = None, None
        if self.is_main:
            try:
                result = step()
            except BaseException as e:  # noqa: BLE001 - told to the other ranks, then raised
                error = e
        if self.active:
            box = [None if error is None else (str(error) or type(error).__name__)]
            dist.broadcast_object_list(box, src=0)
            if not self.is_main and box[0] is not None:
                raise UserError(box[0], every_rank=True)
        if error is not None:
            raise error
        return result

    def any(self, flag: bool, device: torch.device) -> bool:
        """True on every rank when ``flag`` is True on at least one (one small all-reduce)."""
        if not self.active:
            return flag
        box = torch.tensor([1.0 if flag else 0.0], device=device)
        dist.all_reduce(box, op=dist.ReduceOp.MAX)
        return bool(box.item())

    def gather(self, obj) -> list | None:
        """Every rank's ``obj`` on rank 0 (a list by rank), None on the others."""
        if not self.active:
            return [obj]
        out = [None] * self.world if self.is_main else None
        dist.gather_object(obj, out, dst=0)
        return out

    def scatter(self, objs: list | None):
        """Rank r receives ``objs[r]`` from rank 0."""
        if not self.active:
            return objs[0]
        box = [None]
        dist.scatter_object_list(box, objs if self.is_main else None, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def close(self, together: bool = True) -> None:
        """Leave the process group: ``together`` (after a finished run), no rank tears its connections down
        before every rank has finished its last collective; after an error, at once (the other ranks may never
        get there; torchrun stops them).

        A rank that closes while another still waits on it makes gloo abort that one ("terminate called
        without an active exception"), and a gloo barrier does not prevent it: a rank leaves the barrier as
        soon as it has heard from the others, possibly before they have heard from it (pytorch/gloo#155). So
        the ranks meet in the rendezvous store instead, which involves no gloo connection: each says it is
        done and waits for the others' word; then every rank other than 0 says it has read that, and rank 0,
        which may host the store, waits for those words before leaving."""
        if not (self.active and dist.is_initialized()):
            return
        if together:
            self._meet_in_store()
        dist.destroy_process_group()

    LEAVE_TIMEOUT_S = 300  # a rank that never arrives (killed) fails the others' close after this long

    def _meet_in_store(self) -> None:
        from datetime import timedelta

        from torch.distributed import distributed_c10d

        store = getattr(distributed_c10d, "_get_default_store", lambda: None)()
        if store is None:  # a torch without the accessor: the barrier, which is right nearly always
            dist.barrier()
            return
        wait = timedelta(seconds=self.LEAVE_TIMEOUT_S)
        store.set(f"sampledlm/done/{self.rank}", "1")
        store.wait([f"sampledlm/done/{r}" for r in range(self.world)], wait)
        if self.is_main:
            store.wait([f"sampledlm/read/{r}" for r in range(1, self.world)], wait)
        else:
            store.set(f"sampledlm/read/{self.rank}", "1")
