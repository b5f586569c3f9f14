"""What a training reports: its progress lines off a terminal, a failed step's message, TensorBoard scalars and the
learning-curve plot."""

from __future__ import annotations

import os


from ..errors import UserError
from ..data.textio import atomic_write


def progress_line(st, batches: int, epochs: int, max_steps: int = 0, max_time: float = 0.0, clock: str = "wall") -> str:
    """The training's progress line off a terminal (a log, ``nohup``): the epoch's share, running loss and speed,
    time spent and the time left, of the epoch and of the run (validation not counted; a plateau schedule may stop
    sooner). ``st``: the loop's :class:`~.run_state.TrainState`, ``batches`` per epoch. Where a budget (``max_steps``,
    ``max_time`` seconds on ``clock``) ends the run first, the run's time left is the budget's and names it; where
    it ends within this epoch, the epoch's time left is not shown (the epoch will not reach its end)."""
    from tqdm import tqdm

    per_batch = st.epoch_seconds / max(st.batch, 1)
    epoch_steps = batches - st.batch
    steps_left = (epochs - st.epoch - 1) * batches + epoch_steps
    until = "run"
    if max_steps and max_steps - st.step < steps_left:
        steps_left, until = max(max_steps - st.step, 0), "--max-steps"
    run_left = steps_left * per_batch
    if max_time > 0:
        spent = st.cpu_seconds if clock == "cpu" else st.wall_seconds
        if max_time - spent < run_left:
            run_left, until = max(max_time - spent, 0.0), "--max-time"
    fmt = tqdm.format_interval
    epoch_left = epoch_steps * per_batch
    if run_left < epoch_left:  # the budget comes first: this epoch ends there
        eta = f"ETA {until} {fmt(run_left)}"
    else:
        eta = f"ETA epoch {fmt(epoch_left)}" + (f", {until} {fmt(run_left)}" if run_left > epoch_left + 1 else "")
    return (f"epoch {st.epoch + 1}: {100 * st.batch // batches}%  loss {st.loss_sum / max(st.loss_count, 1):.4f}  "
            f"{st.epoch_tokens / max(st.epoch_seconds, 1e-9):.0f} tok/s  {fmt(st.wall_seconds)} elapsed, {eta}")


def out_of_memory(error: BaseException, trainer) -> UserError | None:
    """The :class:`UserError` for a step of ``trainer`` (a :class:`~.loop.Trainer`) that could not allocate memory
    (``error``: torch's allocator failure, a CUDA out-of-memory error or a MemoryError), None for any other error.
    The step's activations grow with the batch and, for a full output layer, with V."""
    from .rundir import latest_checkpoint

    run_dir, opts = trainer.run_dir, trainer.opts
    batch = f"-b {opts.batch_size}" + (f" x --bptt {opts.bptt}" if getattr(trainer.model, "uses_bptt", True) else "")
    has_checkpoint = latest_checkpoint(run_dir) is not None
    text = str(error)
    if not (isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"
            or (isinstance(error, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text))):
        return None
    first = text.strip().splitlines()[-1][:300] if text.strip() else type(error).__name__
    kept = (f"the last checkpoint in {run_dir} is intact: resume with --resume {run_dir} once memory is free"
            if has_checkpoint else "no checkpoint had been written yet")
    return UserError(f"not enough memory for a training step (batch {batch}): {first}; {kept}, or start a new run "
                     "with a smaller -b, --bptt, --hidden or vocabulary")


def step_scores_bytes(opts, model, objective, train_tokens: int) -> int:
    """A lower bound of the bytes one training step allocates for its output scores: ``8 N V`` where the objective
    scores every word of each prediction (``objective.scores_every_word``: the softmax, self-normalisation), else 0.

    ``N = batch x bptt`` predictions (``batch`` alone for a feed-forward model; at most the training text's
    ``train_tokens``); two float32 ``[N, V]`` arrays live at once, the scores and their log-softmax (the backward
    adds a gradient of the same size), so a run that would fit is never refused on this count."""
    if not getattr(objective, "scores_every_word", False):
        return 0
    rows = min(opts.batch_size * (opts.bptt if getattr(model, "uses_bptt", True) else 1), train_tokens)
    return 8 * rows * model.num_words


def open_tensorboard(directory: str):
    """A TensorBoard ``SummaryWriter`` on ``directory`` (torch's; the ``tensorboard`` package writes the files)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError("--tensorboard needs the tensorboard package: pip install 'sampledlm[tensorboard]' "
                        "(or pip install tensorboard)") from None
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise UserError(f"{directory}: cannot make the TensorBoard directory: {e.strerror}") from None
    return SummaryWriter(log_dir=directory)


def point_label(m: dict) -> str:
    """Where a ``metrics.jsonl`` record was taken: ``epoch 3`` (at its end) or ``epoch 2 at step 1,200 (25%)``
    (within it: ``--valid-every``, or where a budget stopped the run)."""
    if "epoch_fraction" in m:
        return f"epoch {m['epoch']} at step {m['step']:,} ({100 * m['epoch_fraction']:.0f}%)"
    return f"epoch {m['epoch']}"


def best_point(metrics: list[dict]) -> str:
    """The record of lowest validation perplexity, said as ``epoch 2 of 3`` when every record is an epoch's end,
    else as ``epoch 2 at step 1,200 (25%), validation 6 of 9``."""
    if not metrics:
        return "no validation"
    i = min(range(len(metrics)), key=lambda k: metrics[k]["valid_ppl"])
    if all("epoch_fraction" not in m for m in metrics):
        return f"epoch {i + 1} of {len(metrics)}"
    return f"{point_label(metrics[i])}, validation {i + 1} of {len(metrics)}"


def plot_learning_curve(metrics: list[dict], path: str) -> None:
    """Train loss and validation perplexity per validation point, as a PNG (matplotlib, Agg backend); a point within
    an epoch (``epoch_fraction``) at its place in the epoch."""
    from matplotlib.figure import Figure  # a Figure object: never switches the user's matplotlib backend

    ep = [m["epoch"] - 1 + m["epoch_fraction"] if "epoch_fraction" in m else m["epoch"] for m in metrics]
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    ax.plot(ep, [m["valid_ppl"] for m in metrics], "o-", color="C0", label="valid perplexity (exact)")
    if all("train_ppl" in m for m in metrics):
        ax.plot(ep, [m["train_ppl"] for m in metrics], "^:", color="C2", label="train perplexity (exact, prefix)")
    ax.set_xlabel("epoch")
    ax.set_ylabel("valid perplexity", color="C0")
    ax2 = ax.twinx()
    ax2.plot(ep, [m["train_loss"] for m in metrics], "s--", color="C1", label="train loss")
    ax2.set_ylabel("train loss (objective)", color="C1")
    ax.set_title("learning curve")
    lines = ax.get_lines() + ax2.get_lines()
    ax.legend(lines, [ln.get_label() for ln in lines], loc="upper right", fontsize=8)
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=100)
