"""What a training reports besides its log: TensorBoard scalars and the learning-curve plot."""

from __future__ import annotations

import os


from ..errors import UserError
from ..data.textio import atomic_write


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


def plot_learning_curve(metrics: list[dict], path: str) -> None:
    """Train loss and validation perplexity per epoch, as a PNG (matplotlib, Agg backend)."""
    from matplotlib.figure import Figure  # a Figure object: never switches the user's matplotlib backend

    ep = [m["epoch"] for m in metrics]
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
