"""``sampledlm eval``: exact perplexity of any model (ARPA file or model directory) or mixture of models."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys

import click

from ..errors import UserError
from .common import CONTEXT, device_option, mix_options, text_flags_given, text_options, THREADS


@click.command("eval", context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@click.option("--test", "test_path", required=True, help="Text to evaluate, one sentence per line ('-' for stdin).")
@mix_options
@click.option("--weight", default=None, hidden=True, help="Two models: the weight of MODEL (old name of --weights W).")
@click.option("--per-sentence", is_flag=True, help="One line per sentence: ln-prob, predictions, perplexity, text "
                                                  "(each sentence scored from a fresh state); blank lines hold no sentence and get no "
                                                  "line.")
@click.option("--running-text", is_flag=True,
              help="Recurrent, Transformer and trigger maxent models: carry the history across sentences also with "
                   "--per-sentence (the default for the overall perplexity).")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Evaluation batch: feed-forward histories, sentences, or (recurrent running text) tokens per "
                   "call; it never changes the perplexity.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--threads", type=THREADS, default=None, help="Torch CPU threads.")
@click.option("--no-verify", is_flag=True, help="Binary n-gram directories: skip checking their files against the "
                                                "checksums config.json records (the check reads each model once).")
@click.option("--sum-precision", type=click.Choice(["fp32", "bf16"]), default="fp32", show_default=True,
              help="Neural models over 65,536 words: the precision of the products inside the normaliser's sum "
                   "over V (each word's own score stays float32). bf16 is about 2.5x faster on CPUs with AMX and "
                   "GPUs, its ln P off by about 1e-5 per word on average (docs/neural.md#large-vocabularies).")
@click.option("--stride", type=click.IntRange(min=1), default=None,
              help="Transformer models, running text: advance the sliding window by this many tokens, so every token "
                   "is predicted from at least window - stride words [default: the model's, half its window]; "
                   "the window's length gives block evaluation.")
@device_option
@text_options
def eval_cmd(model, test_path, others, weights, weight, interp_valid, per_sentence, running_text, batch_size, as_json,
             threads, stride, device, no_verify, sum_precision, opts):
    """Exact perplexity of a model, or of a linear interpolation of models, on a test file.

    \b
    MODEL is an ARPA file (.arpa, .arpa.gz/.bz2/.xz; ours or another tool's), a binary n-gram
    directory, or a model directory written by 'sampledlm train' or 'sampledlm maxent train'
    ('ngram eval' and 'maxent eval' are this command). Every word and </s> is counted, <s> never;
    OOVs are the tokens scored as <unk> (a model without <unk> gives them log10 p = -100, as KenLM's
    query does), and the perplexity excluding them is reported beside. The text is read as the
    model's training text was (its config.json records how, a binary n-gram directory's too; an ARPA file records nothing); text
    flags given here replace that.
    With --mix: P = sum_k W_k P_k (weights by EM on held-out text unless given).
    Recurrent models read the test file as running text (the state carried across sentences, the
    PTB tables' convention); --per-sentence scores each line on its own.
    Example:
      sampledlm eval kn3.arpa --test test.txt
      sampledlm eval ffnn3 --test test.txt --mix kn3.arpa
      sampledlm eval gru --test test.txt --mix ffnn3 --mix kn3.arpa --weights 0.5,0.3,0.2
      sampledlm eval gru --test test.txt --per-sentence > scores.tsv
    """
    if weight is not None:
        if weights is not None:
            raise UserError("give --weights only (--weight is its old two-model form)")
        click.echo("sampledlm: warning: --weight is deprecated; use --weights", err=True)
        weights = weight
    evaluate(model, test_path, others, weights, interp_valid, per_sentence=per_sentence, running_text=running_text,
             batch_size=batch_size, as_json=as_json, threads=threads, stride=stride, device=device,
             no_verify=no_verify, sum_precision=sum_precision, opts=opts if text_flags_given() else None)


OOV_WARNING = 0.10  # share of the test words outside the vocabulary from which eval warns (as train and rescore do)


def _warn_many_oovs(shown: str, ids, oov_mask, has_unk: bool = True) -> None:
    """A warning when :data:`OOV_WARNING` or more of the test words are scored as ``<unk>``: most often the text is
    read otherwise than the model's training text was (case, tokeniser), and the perplexity is of ``<unk>``."""
    from ..data.vocab import EOS_ID

    words = len(ids) - int((ids == EOS_ID).sum())
    share = int(oov_mask.sum()) / max(words, 1)
    if words and share >= OOV_WARNING:
        click.echo(f"sampledlm: warning: {shown}: {100 * share:.1f} % of its {words:,} words are outside the "
                   f"model's vocabulary ({'scored as <unk>' if has_unk else 'log10 p -100 each: the model has no <unk>'}"
                   "): is the text read as the training text was (--lowercase, --tokenizer)?", err=True)


def evaluate(model: str, test_path: str, others=(), weights: str | None = None, interp_valid: str | None = None, *,
             per_sentence: bool = False, running_text: bool = False, batch_size: int | None = None,
             as_json: bool = False, threads: int | None = None, stride: int | None = None, device=None,
             no_verify: bool = False, sum_precision: str = "fp32", opts=None) -> dict:
    """What ``sampledlm eval`` (and its aliases ``ngram eval``, ``maxent eval``) prints, for one test file; the
    summary. ``opts``: text options replacing the models' own (None: theirs); ``sum_precision``: see
    :func:`sampledlm.objectives.normaliser.sum_precision`."""
    from ..data.corpus import load_ids, sentence_count
    from ..data.textio import readable_path
    from ..data.tokenizer import TextOptions, iter_sentences
    from ..lm import perplexity_of, sentence_scores

    if threads:
        import torch

        torch.set_num_threads(threads)
    if (weights is not None or interp_valid) and not others:
        raise UserError("--weights and --interp-valid need --mix MODEL2")
    from ..use.mixing import check_weight_source

    check_weight_source(weights, interp_valid)
    import time

    t0 = time.perf_counter()
    lm, mix = _open(model, others, device, batch_size, stride, running_text, no_verify)
    if sum_precision != "fp32" and not any(_has_normaliser(m) for m in (mix.models if mix else [lm])):
        raise UserError(f"--sum-precision {sum_precision} applies to neural models (the products of their "
                        f"normaliser); {', '.join([model, *others])} has none")
    if opts is None:
        opts = TextOptions(**((mix or lm).text_options or {}))  # a mixture: the options its models agree on
    given = test_path
    shown = "standard input" if test_path == "-" else test_path
    test_path = readable_path(test_path)  # standard input or a pipe: read once, into a file every pass reads again
    ids = load_ids(test_path, (mix or lm).vocab, opts, cache=False)  # a mixture reads the union of its vocabularies
    if len(ids) == 0:  # a perplexity of nothing is not a number: say so, as ngram eval does
        raise UserError(f"{shown}: no sentences to score")
    independent = per_sentence and not running_text
    t_load, t1 = time.perf_counter() - t0, time.perf_counter()

    # OOVs as KenLM and `ngram eval` count them: tokens scored as <unk> (words outside the vocabulary, literal <unk>)
    # The one schema of `eval --json` (docs/formats.md#eval-json): "ppl" is always the perplexity of what was evaluated
    # (the mixture when mixing); each model's own is under "components", in the order given.
    oov_mask = (mix or lm).oov_mask(ids)
    _warn_many_oovs(shown, ids, oov_mask, lm.has_unk)
    result = {"model": model, "test": given, "predictions": int(len(ids)), "sentences": sentence_count(ids),
              "oov": int(oov_mask.sum()), "model_has_unk": lm.has_unk}
    result.update(_history(lm, mix, independent))
    from .. import progress

    # a neural model's exact scoring draws a bar (V = 485k: about 25 CPU-minutes for 227k tokens)
    with _sum_precision(sum_precision), progress.announced(f"scoring {os.path.basename(shown)}"):
        lp = _logprobs(lm, mix, ids, [model, *others], weights, interp_valid, independent, result)
    result["sum_precision"] = sum_precision
    result["ppl_excluding_oov"] = perplexity_of(lp[~oov_mask])
    result["log10_prob"] = float(lp.sum() / math.log(10))
    # loading (with the checksum check) and reading the test text; scoring (EM of the weights included)
    result["seconds_load"], result["seconds_score"] = round(t_load, 3), round(time.perf_counter() - t1, 3)
    if per_sentence:
        tot, cnt = sentence_scores(lp, ids)
        click.echo("ln_prob\tpredictions\tppl\tsentence")
        for (t, c), words in zip(zip(tot.tolist(), cnt.tolist()), iter_sentences(test_path, opts)):
            click.echo(f"{t:.4f}\t{c}\t{math.exp(-t / c):.2f}\t{' '.join(words)}")
    _print_summary(result, lm, shown, as_json, per_sentence)
    return result


def _has_normaliser(lm) -> bool:
    """Whether ``lm`` normalises scores over its vocabulary with products (a neural model's output layer)."""
    from ..neural.lm import NeuralLM

    return isinstance(lm, NeuralLM)


def _sum_precision(precision: str):
    """The normaliser's precision for the scoring (torch is imported only when it is not the default, so that
    n-gram evaluation never loads it)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    from ..objectives.normaliser import sum_precision

    return sum_precision(precision)


def _history(lm, mix, independent: bool) -> dict:
    """How the words were predicted, for the JSON summary: ``history`` "running text" (a recurrent or Transformer
    model, or trigger features, reading across sentence ends) or "each sentence alone", and for a Transformer on
    running text its ``stride`` (each window's first ``window - stride`` words are context only)."""
    running = not independent and (mix or lm).crosses_sentences
    out = {"history": "running text" if running else "each sentence alone"}
    stride = getattr(getattr(lm, "model", None), "stride", None)
    if running and isinstance(stride, int):
        out["stride"] = stride
    return out


def _open(model: str, others, device, batch_size: int | None, stride: int | None, running_text: bool,
          no_verify: bool):
    """``(lm, mixture or None)``: the models loaded (binary n-gram directories checked first unless ``no_verify``),
    with ``batch_size`` and ``stride`` set; the refusals of flags that do not apply to them."""
    from ..lm import Mixture
    from ..loader import load_model

    if not no_verify:
        from ..ngram.mapped import check_before_use

        check_before_use([model, *others])
    lm = load_model(model, device=device)
    if batch_size and hasattr(lm, "batch_size"):
        lm.batch_size = batch_size
    if stride is not None:
        window = getattr(getattr(lm, "model", None), "context", None)
        if window is None:
            raise UserError(f"--stride applies to transformer models only ({model} is {lm.describe()})")
        if stride > window:
            raise UserError(f"--stride {stride}: longer than the model's window ({window} tokens)")
        lm.model.stride = stride
    mix = Mixture([lm] + [load_model(p, device=device) for p in others]) if others else None
    if running_text and not (mix or lm).crosses_sentences:
        names = [model, *others]
        raise UserError(f"--running-text: {', '.join(names)} read{'' if others else 's'} each sentence on its own "
                        "(the flag applies to models whose history crosses sentences: recurrent, Transformer, maxent with "
                        "trigger features)")
    return lm, mix


def _logprobs(lm, mix, ids, names: list[str], weights, interp_valid, independent: bool, result: dict):
    """The natural-log probability of each token under the mixture (its weights set: given, or by EM on
    ``interp_valid``) or the one model; their perplexities (and a self-normalised model's error) into ``result``."""
    from ..lm import mix_logprobs, perplexity_of
    from ..use.mixing import set_weights

    if mix is not None:
        alone = mix.component_logprobs(ids, independent=independent, own_vocabulary=True)
        comps = mix.in_union(alone, ids)  # each model's own vocabulary: its figure alone; the union: the mixture's
        weights_from = set_weights(mix, weights, interp_valid, names[0])
        lp = mix_logprobs(comps, mix.weights)
        result["ppl"] = perplexity_of(lp)
        result["weights"] = [float(x) for x in mix.weights]
        if weights_from:
            result["weights_from"] = weights_from
        result["components"] = [{"model": p, "ppl": perplexity_of(c)} for p, c in zip(names, alone)]
        return lp
    lp = lm.logprobs(ids, independent=independent)
    result["ppl"] = perplexity_of(lp)
    if hasattr(lm, "self_normalisation"):  # an objective with an unnormalised scoring mode: its error
        report = lm.self_normalisation(ids, lp, independent=independent)
        if report is not None:
            result["self_normalisation"] = report
    return lp


def shown_ppl(ppl: float) -> str:
    """A perplexity as the summary line shows it: two decimals, or in powers of ten past a billion (a model
    without ``<unk>`` scores each OOV at log10 p = -100, so a text with many of them reaches 1e40)."""
    return f"{ppl:.2f}" if ppl < 1e9 else f"{ppl:.3e}"


def _print_summary(result: dict, lm, shown: str, as_json: bool, per_sentence: bool) -> None:
    """The summary: one JSON object, or a line (and the self-normalisation line); on standard error when the
    per-sentence lines hold standard output."""
    if as_json:
        click.echo(json.dumps(result), file=sys.stderr if per_sentence else None)
        return
    how = "scored as <unk>" if lm.has_unk else "log10 p -100 each, plus the history's back-off as in KenLM: the model has no <unk>"
    msg = (f"{shown}: {result['predictions']:,} predictions ({result['sentences']:,} sentence{'' if result['sentences'] == 1 else 's'}; {result['oov']:,} "
           f"OOV, {how}), ppl {shown_ppl(result['ppl'])}")
    if "components" in result:
        parts = ", ".join(f"{c['model']} {c['ppl']:.2f}" for c in result["components"])
        msg += f" (interpolated, weights {', '.join(f'{x:.3f}' for x in result['weights'])}; alone: {parts})"
    msg += f"; excluding OOVs {shown_ppl(result['ppl_excluding_oov'])}; log10 prob {result['log10_prob']:.2f}"
    click.echo(msg, err=per_sentence)
    if "self_normalisation" in result:
        sn = result["self_normalisation"]
        click.echo(f"  unnormalised scoring (raw scores as log P, not exact): ppl {sn['unnormalised_ppl']:.2f}; "
                   f"log Z mean {sn['log_z_mean']:+.3f}, sd {sn['log_z_sd']:.3f}, mean |log Z| "
                   f"{sn['log_z_abs_mean']:.3f}", err=per_sentence)
