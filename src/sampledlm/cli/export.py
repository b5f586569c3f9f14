"""``sampledlm export``: a trained neural run as an ONNX graph (see :mod:`sampledlm.neural.onnx_export`)."""

from __future__ import annotations

import os

import click

from ..errors import UserError
from .common import CONTEXT


@click.command("export", context_settings=CONTEXT)
@click.argument("run_dir", metavar="RUN")
@click.option("--format", "fmt", type=click.Choice(["onnx"]), default="onnx", show_default=True,
              help="What to write.")
@click.option("-o", "--output", required=True, help="The file to write (e.g. model.onnx).")
@click.option("--force", is_flag=True, help="Replace the output file if it exists (refused otherwise).")
@click.option("--opset", type=click.IntRange(min=18), default=18, show_default=True,
              help="ONNX opset version (up to the newest the installed torch writes).")
def export(run_dir, fmt, output, force, opset):
    """Export a neural RUN (ffnn, gru, lstm, transformer) as an ONNX graph of exact next-word log
    probabilities, for decoders and services that run ONNX Runtime.

    \b
    The graph is the model and its objective's exact rule, so it gives eval's numbers whatever the
    training objective (short-list runs, which back off to an n-gram, excepted). A recurrent graph
    maps (words [B, T], state) to (log probabilities [B, T, V], new state), starting a sentence
    from a zero state with </s>; a feed-forward one the n-1 previous words [B, n-1] to [B, V],
    padded at a sentence's start with the metadata's 'bos_id'; a Transformer one words
    [B, T] to [B, T, V], T at most its window (metadata 'window'). The vocabulary and the
    conventions are in the file's metadata (docs/using.md shows ONNX Runtime alone reading it).
    Example:
      sampledlm export gru --format onnx -o gru.onnx
    """
    from torch.onnx._constants import ONNX_MAX_OPSET

    from ..data.textio import check_writable
    from ..neural.onnx_export import export_onnx
    from .common import refuse_existing

    if opset > ONNX_MAX_OPSET:
        raise UserError(f"--opset {opset}: the installed torch writes opsets 18 to {ONNX_MAX_OPSET}")
    if os.path.isdir(output):
        raise UserError(f"{output}: is a directory; -o names the ONNX file to write")
    import sys

    if output.endswith((".gz", ".bz2", ".xz")):
        raise UserError(f"{output}: would be written compressed, which ONNX Runtime does not read; give a name "
                        "without the compression suffix")
    if output == "-" and sys.stdout.isatty():
        raise UserError("-o -: an ONNX graph is binary; redirect standard output to a file or a pipe, or give -o FILE")
    check_writable(output)
    refuse_existing(output, force, inputs=[run_dir])
    meta = export_onnx(run_dir, output, opset=opset)
    words = meta["vocab"].count("\n") + 1
    click.echo(f"{meta['kind']} ({meta['objective']}), {words:,} words -> {output}", err=True)
