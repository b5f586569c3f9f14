"""``sampledlm calibrate``: centre a self-normalised model's log Z on held-out text."""

from __future__ import annotations

import click

from .common import CONTEXT, THREADS


@click.command(context_settings=CONTEXT)
@click.argument("model_dir", metavar="MODEL_DIR")
@click.option("--text", "text_path", required=True,
              help="Held-out text whose mean log Z becomes 0: the validation text, or text of the domain a decoder "
                   "will score.")
@click.option("--threads", type=THREADS, default=None, help="Torch CPU threads [torch's default: one per core].")
def calibrate(model_dir, text_path, threads):
    """Shift a self-normalised model's output biases so its mean log Z on TEXT is 0.

    \b
    A model trained with --objective selfnorm is meant to be used unnormalised: a decoder takes the
    raw score a_w(h) as log P(w|h). Training already centres log Z on the validation text (unless
    --no-selfnorm-calibrate); this does it again on other text, e.g. the domain the model will
    score. Adding one constant to every output bias leaves every exact probability, and so the
    perplexity, unchanged; only the raw scores move. The model file is rewritten atomically and
    records the total shift (metadata log_z_shift).
    Example:
      sampledlm calibrate run-selfnorm --text dev.txt
    """
    import os

    from ..data.corpus import load_ids
    from ..data.tokenizer import TextOptions
    from ..errors import UserError
    from ..neural import rundir as runs
    from ..neural.lm import calibrate_log_z
    from ..store import load_tensors

    if threads:
        import torch

        torch.set_num_threads(threads)
    import math

    from .. import progress, store

    if not os.path.isdir(model_dir):
        raise store.no_run_directory(model_dir)
    with store.lock_directory(model_dir):  # a training still writing the run (--resume) would overwrite the shift
        path = os.path.join(model_dir, "model.safetensors")
        if os.path.isfile(os.path.join(model_dir, "config.json")) and not os.path.exists(path):
            # before the loader, which would warn that it takes a checkpoint's weights instead (calibrate does not)
            raise UserError(f"{model_dir}: training has not saved a model yet (no model.safetensors)")
        model, objective, vocab, config = runs.load_run(model_dir, note_unfinished=False)
        if not hasattr(objective, "calibrate"):  # before the text is read
            raise UserError(f"{model_dir}: its objective {objective.name!r} has no unnormalised scoring mode to "
                            "calibrate (train with --objective selfnorm)")
        meta = load_tensors(path)[1]
        if meta.get("finalized") != "true":
            raise UserError(f"{model_dir}: training has not finished; it calibrates the final model itself")
        ids = load_ids(text_path, vocab, TextOptions(**config["data"].get("text_options", {})))
        if len(ids) == 0:
            raise UserError(f"{text_path}: no sentences to calibrate on (empty file or blank lines only); the model "
                            "was left as it was")
        with progress.announced(f"log Z over {os.path.basename(text_path)}"):
            shift = calibrate_log_z(model, objective, ids)
        if not math.isfinite(shift):
            raise UserError(f"{text_path}: the mean log Z is not a finite number ({shift}); the model was left as it "
                            "was")
        total = float(meta.get("log_z_shift", 0.0)) + shift
        runs.save_model_files(model_dir, model, objective, finalized=True, meta={**meta, "log_z_shift": f"{total:.9g}"})
    click.echo(f"mean log Z on {text_path} was {-shift:+.4f}: output biases shifted by {shift:+.4f} (total "
               f"{total:+.4f}); exact probabilities unchanged; written {path}", err=True)
