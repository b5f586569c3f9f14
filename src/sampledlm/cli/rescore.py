"""``sampledlm rescore``: n-best lists rescored with any model or mixture; weights tuned for WER."""

from __future__ import annotations

import json

import click

from .common import CONTEXT, force_option

FORMATS = click.Choice(["auto", "srilm", "kaldi", "jsonl"])


@click.command("rescore", context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@click.argument("nbest", metavar="NBEST")
@click.option("--mix", "others", multiple=True, metavar="MODEL2",
              help="Another model (any family) to interpolate with; repeat for more.")
@click.option("--weights", default=None, metavar="W1,W2,...|auto",
              help="Interpolation weights, MODEL's first, or 'auto': EM on --interp-valid [auto].")
@click.option("--interp-valid", default=None, help="Held-out text for --weights auto [default: MODEL's validation file].")
@click.option("--format", "fmt", type=FORMATS, default="auto", show_default=True,
              help="NBEST's format: srilm (a directory of n-best files, a list of them, or one), kaldi (a "
                   "directory with text, ac_cost, lm_cost), jsonl.")
@click.option("--refs", default=None, help="References ('utt w1 w2 ...' per line) for NBEST: report WER.")
@click.option("--am-scale", type=float, default=1.0, show_default=True, help="Weight of the acoustic score.")
@click.option("--lm-weight", type=float, default=1.0, show_default=True, help="Weight of the LM score (ln).")
@click.option("--word-penalty", type=float, default=0.0, show_default=True, help="Added per word.")
@click.option("--first-pass-weight", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Keep this share of the first-pass LM score (0: replace it with MODEL's).")
@click.option("--tune-on", default=None, metavar="DEV",
              help="Development n-best lists: choose --lm-weight and --word-penalty there for the lowest WER.")
@click.option("--tune-refs", default=None, help="References of --tune-on (not needed when DEV is JSONL with refs).")
@click.option("--tune-first-pass", is_flag=True, help="With --tune-on: also tune --first-pass-weight (0 to 0.9).")
@click.option("--one-best", default=None, metavar="FILE", help="Write each utterance's best hypothesis ('utt words').")
@click.option("-o", "--output", default=None, metavar="PATH", help="Write the rescored lists, best first "
                                                                   "(NBEST's format unless --output-format).")
@click.option("--output-format", type=FORMATS, default="auto", show_default=True, help="auto: NBEST's format.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="Torch CPU threads.")
@force_option("--one-best and -o")
def rescore(model, nbest, others, weights, interp_valid, fmt, refs, am_scale, lm_weight, word_penalty,
            first_pass_weight, tune_on, tune_refs, tune_first_pass, one_best, output, output_format, as_json, threads,
            force):
    """Rescore n-best lists with MODEL (any family, or a mixture) and write the new 1-best.

    \b
    Each hypothesis gets score = am_scale*am + lm_weight*lm + word_penalty*words, where lm is
    MODEL's ln P(words </s>) (with --first-pass-weight b: (1-b)*MODEL's + b*the first pass's).
    Scores are natural logs inside; SRILM files hold log10 scores, Kaldi files costs (-ln).
    With --tune-on the LM weight and word penalty minimise WER on development lists first.
    Example:
      sampledlm rescore gru dev.jsonl --refs dev.ref --lm-weight 10
      sampledlm rescore gru test-nbest/ --mix kn5.arpa --weights 0.6 --tune-on dev.jsonl --refs test.ref \\
          --one-best test.hyp -o test-rescored/
    """
    import os

    from ..errors import UserError
    from ..data.textio import atomic_write
    from ..use.mixing import open_models
    from ..use.nbest import (Grid, Weights, add_lm_scores, detect_format, evaluate, read_nbest, read_refs, rerank,
                             tune, write_nbest)
    from .common import refuse_existing

    if threads:
        import torch

        torch.set_num_threads(threads)
    if tune_refs and not tune_on:
        raise UserError("--tune-refs needs --tune-on DEV")
    for path in (one_best, output):
        if path:
            refuse_existing(path, force)
            if os.path.isdir(path) and os.listdir(path) and not force:
                raise UserError(f"{path}: already exists; give --force to replace it, or choose another -o")
    lists = read_nbest(nbest, fmt)
    if refs:
        read_refs(refs, lists)
    dev = None
    if tune_on:
        dev = read_nbest(tune_on, "auto")
        if tune_refs:
            read_refs(tune_refs, dev)
        elif any(nb.ref is None for nb in dev):
            raise UserError(f"{tune_on}: tuning needs references: give --tune-refs or a JSONL file with 'ref'")
    lm = open_models([model, *others], weights, interp_valid)
    add_lm_scores(lm, lists)
    w = Weights(am_scale, lm_weight, word_penalty, first_pass_weight)
    summary = {"model": model, "mix": list(others), "nbest": nbest, "utterances": len(lists),
               "hypotheses": sum(len(nb.hyps) for nb in lists)}
    if dev is not None:
        add_lm_scores(lm, dev)
        grid = Grid(first_pass_weight=[i / 10 for i in range(10)] if tune_first_pass else [first_pass_weight])
        w = tune(dev, am_scale, grid)
        summary["tuned_on"] = tune_on
        summary["dev"] = evaluate(dev, w).to_dict()
    summary["weights"] = {k: float(v) for k, v in w.__dict__.items()}
    ranked = [rerank(nb, w) for nb in lists]
    if refs:
        summary.update({k: v for k, v in evaluate(lists, w).to_dict().items() if k.endswith("wer") or k == "reference_words"})
    if one_best:
        with atomic_write(one_best) as f:
            for nb in ranked:
                f.write(f"{nb.id} {' '.join(nb.hyps[0].words)}".rstrip() + "\n")
    if output:
        write_nbest(output, ranked, detect_format(nbest) if output_format == "auto" and fmt == "auto" else
                    (fmt if output_format == "auto" else output_format))
    if as_json:
        click.echo(json.dumps(summary))
        return
    msg = (f"{nbest}: {summary['utterances']} utterances, {summary['hypotheses']} hypotheses; weights: am "
           f"{w.am_scale:g}, lm {w.lm_weight:.4g}, word penalty {w.word_penalty:.4g}, first pass {w.first_pass_weight:g}"
           + (f" (tuned on {tune_on}: WER {100 * summary['dev']['rescored_wer']:.2f}%)" if dev is not None else ""))
    click.echo(msg)
    if refs:
        click.echo(f"WER: first pass {100 * summary['first_pass_wer']:.2f}%, rescored {100 * summary['rescored_wer']:.2f}%, "
                   f"oracle {100 * summary['oracle_wer']:.2f}% ({summary['reference_words']} reference words)")
