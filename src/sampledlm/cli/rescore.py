"""``sampledlm rescore``: n-best lists or lattices rescored with any model or mixture; weights tuned for WER."""

from __future__ import annotations

import functools
import json
import os

import click

from .common import CONTEXT, FiniteFloat, device_option, force_option, mix_options, say_fitted_weights, THREADS

OOV_WARNING = 0.10  # share of hypothesis words outside the model's vocabulary above which rescore warns

FORMATS = click.Choice(["auto", "srilm", "kaldi", "jsonl", "slf"])
NO_REFERENCE_WORDS = "the references hold no words"
JSONL_NAMES = (".jsonl", ".json", ".jsonl.gz")  # the names NBEST is read as JSONL by (use.nbest.detect_format)


@click.command("rescore", context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@click.argument("nbest", metavar="NBEST")
@mix_options
@click.option("--format", "fmt", type=FORMATS, default="auto", show_default=True,
              help="NBEST's format: srilm (a directory of n-best files, a list of them, or one), kaldi (a "
                   "directory with text, ac_cost, lm_cost), jsonl, slf (HTK lattices: a file or a directory).")
@click.option("--refs", default=None, help="References ('utt w1 w2 ...' per line) for NBEST: report WER.")
@click.option("--am-scale", type=FiniteFloat(), default=1.0, show_default=True, help="Weight of the acoustic score.")
@click.option("--lm-weight", type=FiniteFloat(), default=1.0, show_default=True, help="Weight of the LM score (ln).")
@click.option("--word-penalty", type=FiniteFloat(), default=0.0, show_default=True, help="Added per word.")
@click.option("--first-pass-weight", type=FiniteFloat(0, 1), default=0.0, show_default=True,
              help="Keep this share of the first-pass LM score (0: replace it with MODEL's).")
@click.option("--tune-on", default=None, metavar="DEV",
              help="Development n-best lists or lattices: choose --lm-weight and --word-penalty there for the "
                   "lowest WER. Lattices rescoring lattices: each DEV lattice is searched once (at the given "
                   "weights) with its links' scores recorded, and the weights are tuned by Viterbi searches over "
                   "those records; with --tune-nbest, or for n-best input, on their best paths instead.")
@click.option("--tune-refs", default=None, help="References of --tune-on (not needed when DEV is JSONL with refs).")
@click.option("--tune-first-pass", is_flag=True, help="With --tune-on: also tune --first-pass-weight (0 to 0.9).")
@click.option("--tune-nbest", type=click.IntRange(min=1), default=None,
              help="Lattices given to --tune-on: tune on this many best paths of each (the first pass's order) "
                   "instead of the lattices themselves [100 when NBEST is n-best lists].")
@click.option("--k", "k", type=click.IntRange(min=0), default=None,
              help="Lattices: merge histories sharing their last k words [default: the model's n-1; "
                   "recurrent models need it].")
@click.option("--one-best", default=None, metavar="FILE", help="Write each utterance's best hypothesis ('utt words') to FILE [default: standard output, "
                   "unless -o is given].")
@click.option("-o", "--output", default=None, metavar="PATH",
              help="Write the rescored lists, best first (in --output-format); lattices: the expanded lattices with "
                   "MODEL's scores, a directory of SLF files (exact for n-gram and feed-forward models; a recurrent "
                   "model's: the search's lattice, states merged by their last --k words).")
@click.option("--output-format", type=FORMATS, default="auto", show_default=True,
              help="auto: jsonl when -o's name says so (.jsonl, .json, .jsonl.gz), else NBEST's format.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the summary as one JSON object; it holds the new 1-best (one_best) unless --one-best or -o "
                   "writes it.")
@click.option("--threads", type=THREADS, default=None, help="Torch CPU threads.")
@click.option("--lowercase", is_flag=True, help="Lower-case the hypotheses' words and the references before "
                                                "scoring (a recogniser that writes upper case, a lower-case model).")
@force_option("--one-best and -o")
@device_option
def rescore(model, nbest, others, weights, interp_valid, fmt, refs, am_scale, lm_weight, word_penalty,
            first_pass_weight, tune_on, tune_refs, tune_first_pass, tune_nbest, k, one_best, output, output_format,
            as_json, threads, lowercase, force, device):
    """Rescore n-best lists or lattices with MODEL (any family, or a mixture); write the new 1-best.

    \b
    The new 1-best ('utt words' lines) goes to standard output, the summary (weights; WER when the
    input holds references or --refs gives them) to standard error; with --one-best or -o they are
    written to files and the summary to standard output. With --json the summary is one JSON object
    on standard output, the new 1-best in it ("one_best": [{"id", "words"}]) unless files hold it.
    -o writes NBEST's format, or JSONL when its name ends in .jsonl (a name that says JSONL is refused
    for an --output-format that writes a directory, and for lattices).
    A tuned weight on the edge of its grid is searched further (a warning says how far).
    Each hypothesis gets score = am_scale*am + lm_weight*lm + word_penalty*words, where lm is
    MODEL's ln P(words </s>) (with --first-pass-weight b: (1-b)*MODEL's + b*the first pass's).
    Scores are natural logs inside; SRILM files hold log10 scores, Kaldi files costs (-ln).
    With --tune-on the LM weight and word penalty minimise WER on development lists first (on
    development lattices, when both are lattices: searched once, the weights tuned on the records).
    Lattices (HTK SLF) are searched exactly for n-gram and feed-forward models (each node split by
    its last n-1 words); for recurrent models histories sharing their last --k words are merged.
    Example:
      sampledlm rescore gru dev.jsonl --refs dev.ref --lm-weight 10
      sampledlm rescore gru test-nbest/ --mix kn5.arpa --weights 0.6 --tune-on dev.jsonl --refs test.ref \\
          --one-best test.hyp -o test-rescored/
      sampledlm rescore kn5.arpa lattices/ --tune-on dev-lattices/ --tune-refs dev.ref --one-best test.hyp
      sampledlm rescore gru lattices/ --k 3 --lm-weight 12 --refs test.ref
    """
    from ..data.textio import atomic_write
    from ..use.slf import is_slf
    from ..use.mixing import open_models
    from ..use.nbest import Weights, fold_case

    if threads:
        import torch

        torch.set_num_threads(threads)
    lattices = _check_flags(nbest, fmt, tune_on, tune_refs, tune_first_pass, tune_nbest, k, one_best, output,
                            output_format, force, [nbest, tune_on, refs, tune_refs, model, *others])
    items = _read(nbest, "slf" if lattices else fmt, refs)
    dev_lattices = bool(tune_on) and lattices and is_slf(tune_on) and tune_nbest is None
    dev = _read_dev(tune_on, tune_refs, tune_nbest or 100, lattices=dev_lattices) if tune_on else None
    if lowercase:
        fold_case(items)
        fold_case(dev or [])
    lm = open_models([model, *others], weights, interp_valid, device=device)
    say_fitted_weights(lm, [model, *others])
    summary = {"model": model, "mix": list(others), "input": nbest, "utterances": len(items)}
    _oov_words(items, lm, lowercase, summary)
    w = Weights(am_scale, lm_weight, word_penalty, first_pass_weight)
    if dev is not None:
        w = _tune(dev, dev_lattices, lm, w, k, am_scale, first_pass_weight, tune_first_pass, summary)
        summary["tuned_on"] = tune_on
    summary["weights"] = {key: float(v) for key, v in w.__dict__.items()}
    if lattices:
        best = _rescore_lattices(items, lm, w, k, output, summary)
    else:
        best = _rescore_lists(items, lm, w, output, output_format, fmt, nbest, summary)
    if one_best:
        with atomic_write(one_best) as f:
            for uid, words in best:
                f.write(f"{uid} {' '.join(words)}".rstrip() + "\n")
    _report(best, summary, w, bool(one_best or output), as_json)


def _check_flags(nbest, fmt, tune_on, tune_refs, tune_first_pass, tune_nbest, k, one_best, output, output_format,
                 force, inputs) -> bool:
    """The refusals that come before any file is read (``inputs``: the paths an output must not replace);
    whether NBEST holds lattices."""
    from ..data.writing import no_directory
    from ..errors import UserError
    from ..use.slf import is_slf
    from .common import refuse_existing

    if tune_refs and not tune_on:
        raise UserError("--tune-refs needs --tune-on DEV")
    if tune_first_pass and not tune_on:
        raise UserError("--tune-first-pass tunes on development data: give --tune-on DEV")
    if one_best and output and os.path.abspath(one_best) == os.path.abspath(output):
        raise UserError(f"--one-best and -o name the same file ({output}): give two paths")
    if one_best and one_best != "-" and os.path.isdir(one_best):
        raise UserError(f"--one-best {one_best}: is a directory; --one-best names the file of one-best sentences")
    for path in (one_best, output):
        if path:
            refuse_existing(path, force, inputs)
            if os.path.isdir(path) and os.listdir(path) and not force:
                raise UserError(f"{path}: already exists; give --force to replace it, or choose another -o")
    lattices = fmt == "slf" or (fmt == "auto" and is_slf(nbest))
    for path in (one_best, output):  # before the models load and score: a long run would fail only at its end
        if path and path != "-" and not os.path.isdir(path):
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise no_directory(path, parent)
            if not os.access(parent, os.W_OK):
                raise UserError(f"{path}: cannot write: permission denied")
    if k is not None and not lattices:
        raise UserError(f"--k merges lattice histories: it applies to lattices, and {nbest} holds n-best lists")
    if tune_nbest is not None and not (tune_on and is_slf(tune_on)):
        raise UserError("--tune-nbest takes the best paths of the lattices given to --tune-on: "
                        + (f"{tune_on} holds n-best lists" if tune_on else "give --tune-on DEV"))
    if output and os.path.isdir(output) and (output.endswith(JSONL_NAMES) or output_format == "jsonl"):
        raise UserError(f"-o {output}: is a directory, and JSONL n-best lists are one file: give a file name")
    if output and output.endswith(JSONL_NAMES):
        if lattices:
            raise UserError(f"-o {output}: a JSONL file's name, but rescored lattices are written as a directory "
                            "of SLF files: choose another -o")
        if output_format in ("srilm", "kaldi"):
            raise UserError(f"-o {output}: a JSONL file's name, but --output-format {output_format} writes a "
                            "directory: give --output-format jsonl, or another -o")
    return lattices


def _oov_words(items, lm, lowercase, summary) -> None:
    """The hypothesis words outside the model's vocabulary, counted into ``summary``; a warning above
    :data:`OOV_WARNING` of them."""
    from ..use.nbest import oov_share

    oov, total, folded = oov_share(items, lm, folded=True)
    if total and oov / total > OOV_WARNING:
        hint = "" if lowercase or not folded else \
            f"; {folded:,} of them are in it lower-cased: the recogniser writes another case, try --lowercase"
        click.echo(f"sampledlm: warning: {100 * oov / total:.1f}% of the hypothesis words ({oov:,} of {total:,}) are "
                   f"outside the model's vocabulary and score as <unk>" + hint, err=True)
    summary.update({"oov_words": oov, "hypothesis_words": total})


def _tune(dev, dev_lattices, lm, w, k, am_scale, first_pass_weight, tune_first_pass, summary):
    """The weights tuned on the development lists (or lattices), widening the grid from an edge; the
    development figures go into ``summary``."""
    from ..use.nbest import Grid, add_lm_scores, evaluate, tune

    grid = Grid(first_pass_weight=[i / 10 for i in range(10)] if tune_first_pass else [first_pass_weight])
    if dev_lattices:
        w, summary["dev"] = _widening(lambda g: _tune_lattices(dev, lm, w, _search_k(lm, k, None), g), grid,
                                      summary)
    else:
        add_lm_scores(lm, dev)
        w = _widening(lambda g: tune(dev, am_scale, g), grid, summary)
        summary["dev"] = evaluate(dev, w).to_dict()
    return w


def _report(best, summary, w, to_files: bool, as_json: bool) -> None:
    """The new 1-best on standard output unless ``to_files`` (--one-best or -o wrote it); the summary beside it on
    standard error, or on standard output when the 1-best went to files; with ``as_json``, one JSON object on
    standard output (holding the 1-best unless ``to_files``)."""
    if as_json:
        if not to_files:  # the 1-best is the output: in the one object on standard output
            summary["one_best"] = [{"id": uid, "words": " ".join(words)} for uid, words in best]
        click.echo(json.dumps(summary))
        return
    if not to_files:  # the new 1-best is the output: on standard output, the summary beside it
        for uid, words in best:
            click.echo(f"{uid} {' '.join(words)}".rstrip())
    say = functools.partial(click.echo, err=not to_files)
    tuned = f" (tuned on {summary['tuned_on']}: WER {100 * summary['dev']['rescored_wer']:.2f}%)" \
        if "tuned_on" in summary else ""
    say(f"{summary['input']}: {summary['utterances']} utterance{'' if summary['utterances'] == 1 else 's'}; weights: am {w.am_scale:g}, lm {w.lm_weight:.4g}, "
        f"word penalty {w.word_penalty:.4g}, first pass {w.first_pass_weight:g}" + tuned)
    if "rescored_wer" in summary and not summary["reference_words"]:
        say(f"WER: n/a ({NO_REFERENCE_WORDS})")
    elif "rescored_wer" in summary:  # references given with --refs, or in the JSONL lists themselves
        oracle = f", oracle {100 * summary['oracle_wer']:.2f}%" if "oracle_wer" in summary else ""
        say(f"WER: first pass {100 * summary['first_pass_wer']:.2f}%, rescored {100 * summary['rescored_wer']:.2f}%"
            f"{oracle} ({summary['reference_words']} reference words)")


def _widening(tune_on_grid, grid, summary, most: int = 3):
    """Tune on ``grid``; while the tuned weights sit on an edge of it, say so and tune again on a grid reaching past
    that edge (``most`` times at most). ``tune_on_grid(grid)`` returns the weights (or ``(weights, extra)``)."""
    for attempt in range(most + 1):
        found = tune_on_grid(grid)
        w = found[0] if isinstance(found, tuple) else found
        wider, notes = grid.widened_at(w)
        if wider is None:
            return found
        for note in notes:
            summary.setdefault("grid_widened", []).append(note)
            click.echo(f"sampledlm: warning: {note}" + ("" if attempt < most else "; still on the edge, so the best "
                                                         "weights may lie further out"), err=True)
        if attempt < most:
            grid = wider
    return found


def _read(path, fmt, refs):
    from ..use.slf import read_lattices
    from ..use.nbest import read_nbest, read_refs

    items = read_lattices(path) if fmt == "slf" else read_nbest(path, fmt)
    if refs:
        read_refs(refs, items)
    return items


def _read_dev(path, refs, n, lattices=False):
    """Development n-best lists (from lattices: their ``n`` best paths, or the lattices themselves when
    ``lattices``), each with its reference."""
    from ..errors import UserError
    from ..use.lattice import rescore_nbest
    from ..use.slf import is_slf

    dev = _read(path, "slf" if is_slf(path) else "auto", refs)
    if is_slf(path) and not lattices:
        dev = [rescore_nbest(lat, n) for lat in dev]
    if any(nb.ref is None for nb in dev):
        raise UserError(f"{path}: tuning needs references: give --tune-refs or a JSONL file with 'ref'")
    if not any(nb.ref for nb in dev):
        raise UserError(f"{refs or path}: {NO_REFERENCE_WORDS}, so there is no WER to tune on")
    return dev


def _rescore_lists(lists, lm, w, output, output_format, fmt, path, summary):
    from ..use.nbest import add_lm_scores, detect_format, evaluate, rerank, write_nbest

    add_lm_scores(lm, lists)
    ranked = [rerank(nb, w) for nb in lists]
    summary["hypotheses"] = sum(len(nb.hyps) for nb in lists)
    if lists[0].ref is not None:
        summary.update(_wer({key: v for key, v in evaluate(lists, w).to_dict().items()
                             if key.endswith("wer") or key == "reference_words"}))
    if output:
        out_fmt = output_format if output_format != "auto" else \
            "jsonl" if output.endswith(JSONL_NAMES) else fmt if fmt != "auto" else detect_format(path)
        from ..errors import UserError

        if out_fmt == "slf":
            raise UserError("n-best lists are written as srilm, kaldi or jsonl, not slf")
        if out_fmt == "jsonl":
            if os.path.isdir(output):
                raise UserError(f"-o {output}: is a directory, and JSONL n-best lists are one file: give a file name")
            write_nbest(output, ranked, out_fmt)
        else:
            from ..outputs import replaced_directory

            with replaced_directory(output) as tmp:  # the whole directory replaced: no earlier list stays beside
                write_nbest(tmp, ranked, out_fmt)
    return [(nb.id, nb.hyps[0].words) for nb in ranked]


def _wer(report: dict) -> dict:
    """``report``'s WERs, None (JSON null) where the references hold no words: a WER has no value there."""
    if report["reference_words"]:
        return report
    return {key: None if key.endswith("wer") else v for key, v in report.items()}


def _search_k(lm, k, output):
    """The k of the lattice search: the model's n-1 unless given (recurrent models need it)."""
    from ..errors import UserError

    exact = lm.context_length
    if k is None and exact is None:
        raise UserError("this model looks back over the whole sentence (a recurrent or Transformer model, or maxent trigger "
                        "features): give --k, the number of last "
                        "words by which lattice histories are merged")
    return exact if k is None else k


def _tune_lattices(dev, lm, w, k, grid):
    """Weights tuned on development lattices (one recorded search each at ``w``, then the grid over the
    records) and the development summary."""
    from dataclasses import asdict

    from ..errors import UserError
    from ..use.lattice import rescore_all, tune_lattices

    if any(lat.ref is None for lat in dev):
        raise UserError("tuning on lattices needs references: give --tune-refs")
    _, exps = rescore_all(dev, lm, w, k, record=True)
    best, errors = tune_lattices(exps, w.am_scale, grid)
    words = sum(len(lat.ref) for lat in dev)
    return best, {"rescored_wer": errors / words, "reference_words": words,
                  "utterances": len(dev), "lattices": True, "weights": asdict(best)}


def _rescore_lattices(lats, lm, w, k, output, summary):
    from ..use.lattice import expand, expansion_lattice, first_pass_best, rescore_all
    from ..use.slf import write_slf
    from ..use.wer import Errors, align

    exact = lm.context_length
    k = _search_k(lm, k, output)
    is_exact = exact is not None and k >= exact
    best, first, resc = [], Errors(), Errors()
    hyps, exps = rescore_all(lats, lm, w, k, record=True) if output and not is_exact else \
        (rescore_all(lats, lm, w, k), None)
    for lat, hyp in zip(lats, hyps):
        best.append((lat.id, hyp.words))
        if lat.ref is not None:
            first = first + align(lat.ref, first_pass_best(lat, w).words)
            resc = resc + align(lat.ref, hyp.words)
    summary.update({"k": k, "exact": is_exact})
    if lats[0].ref is not None:
        summary.update(_wer({"first_pass_wer": first.wer, "rescored_wer": resc.wer,
                             "reference_words": first.ref_words}))
    if output:
        from ..outputs import replaced_directory

        with replaced_directory(output) as tmp:  # the whole directory replaced: no earlier lattice stays beside
            for i, lat in enumerate(lats):  # exact: split by the last n-1 words; else the search's merged expansion
                out = expand(lat, lm, k, w.first_pass_weight) if is_exact else \
                    expansion_lattice(exps[i], lat, w.first_pass_weight)
                write_slf(os.path.join(tmp, f"{lat.id}.slf"), out)
    return best
