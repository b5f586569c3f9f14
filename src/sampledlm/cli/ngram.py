"""``sampledlm ngram train|eval``: estimate an n-gram model into an ARPA file; exact perplexity of a text."""

from __future__ import annotations

import os
import time

import click

from .common import CONTEXT, FiniteFloat, force_option, given, refuse_existing, text_options, writing_directory
from ..errors import UserError
from ..ngram.build.config import ENGINES, default as build_default
from ..ngram.build.output import model_output, refuse_existing_dir
from ..ngram.build.estimate import DESCRIPTIONS, SMOOTHINGS  # the one list of smoothings
from .configfile import config_option


@click.group(context_settings=CONTEXT)
def ngram():
    """Count-based n-gram models: Kneser-Ney family, Witten-Bell, Jelinek-Mercer, Katz, add-k; ARPA files.

    \b
    Example:
      sampledlm ngram train --train train.txt --order 3 -o kn3.arpa
      sampledlm ngram eval kn3.arpa --test test.txt
    """


@ngram.command(context_settings=CONTEXT)
@click.option("--train", "train_path", required=True,
              help="Training text, one sentence per line (.gz/.bz2/.xz ok; - for stdin).")
@click.option("--order", type=click.IntRange(min=1), default=build_default("order"), show_default=True,
              help="n-gram order (Kneser-Ney, the default: 1 .. 254).")
@click.option("--smoothing", type=click.Choice(list(SMOOTHINGS)), default=build_default("smoothing"),
              show_default=True,
              help="; ".join(f"{k}: {v}" + (" (weights tuned on --valid)" if k == "jm" else "")
                             for k, v in DESCRIPTIONS.items()) + ".")
@click.option("-o", "--output", required=True,
              help="ARPA file to write; a name ending in .gz, .bz2 or .xz is compressed (- for stdout). "
                   "With --binary: the model directory to write.")
@click.option("--binary", is_flag=True,
              help="Write a binary model directory (as ngram build-binary writes from an ARPA file) instead of an "
                   "ARPA file: it loads at once, by memory-mapping. For mkn/kn it is written from the estimator's "
                   "tables, so a model too large to parse still gets one.")
@click.option("--vocab", "vocab_path", default=None, help="Vocabulary file (word<TAB>count) [default: every word of --train].")
@click.option("--valid", "valid_path", default=None,
              help="Held-out text: tunes jm's weights; its perplexity is reported (mkn/kn: of the model written, "
                   "read back as ngram eval reads it).")
@click.option("--k", "add_k", type=FiniteFloat(), default=build_default("k"), show_default=True, help="k for addk smoothing (1 = add-one).")
@click.option("--prune", "prune", default=None, metavar="T1,T2,..",
              help="Count pruning as lmplz --prune: drop k-grams seen at most T_k times, e.g. 0,0,1 drops singleton "
                   "trigrams (and above: the last value repeats). T1 must be 0; values must not decrease. mkn/kn only.")
@click.option("--memory", default=None, metavar="SIZE",
              help="Memory budget (2G, 500M, 40%) of mkn/kn, estimated through sorted runs that stay in memory "
                   "while they fit beside the window and are spilled to --temp-dir beyond, so that the process stays "
                   "within it (the other smoothings hold the whole model in memory). [default: half the available "
                   "memory]")
@click.option("--temp-dir", default=None, help="Where bounded estimation spills its runs, and a local Dask cluster "
                                               "keeps its scratch space [default: $TMPDIR or /tmp]; its free space "
                                               "is checked before the first spill; removed when done, and what a "
                                               "killed run left is removed at the next.")
@click.option("--engine", type=click.Choice(ENGINES), default=build_default("engine"), show_default=True,
              help="dask: count n-grams on a Dask cluster (shards of the corpus counted by the workers, merged here; "
                   "the same model as local; with --memory merged and estimated within the budget). Needs pip "
                   "install 'dask[distributed]'.")
@click.option("--scheduler", default=None, metavar="ADDR", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 "
                                                                 "[default: start a local cluster of --workers processes].")
@click.option("--workers", type=click.IntRange(min=1), default=build_default("workers"), show_default=True,
              help="Worker processes of the local Dask cluster (without --scheduler).")
@force_option("the ARPA file (with --binary: the model directory)")
@config_option
@text_options
def train(train_path, order, smoothing, output, binary, vocab_path, valid_path, add_k, prune, memory, temp_dir, engine,
          scheduler, workers, force, opts):
    """Estimate an n-gram model from TRAIN and write it as an ARPA file.

    \b
    Counting follows KenLM/SRILM: one <s> before each sentence, </s> predicted, <s> never;
    the model holds every vocabulary word (unseen ones get back-off mass).
    Example:
      sampledlm ngram train --train ptb.train.txt --order 5 -o kn5.arpa
      sampledlm ngram train --train train.txt --smoothing jm --valid valid.txt -o jm3.arpa
      sampledlm ngram train --train train.txt --order 2 --smoothing addk --k 1 -o addone.arpa
      sampledlm ngram train --train train.txt --order 5 --prune 0,0,1 -o kn5-pruned.arpa
      sampledlm ngram train --train big.txt.gz --order 5 --memory 2G --temp-dir /scratch -o kn5.arpa
      sampledlm ngram train --train big.txt.gz --order 5 --memory 2G --binary -o kn5.bin
      sampledlm ngram train --train big.txt --order 5 --engine dask --scheduler tcp://head:8786 -o kn5.arpa
      sampledlm ngram train --train big.txt --order 5 --engine dask --workers 2 --memory 1G -o kn5.arpa
    """
    if smoothing != "addk" and given("add_k"):
        raise UserError(f"--k is add-k's k: give it with --smoothing addk (not {smoothing})")
    if given("workers") and (engine != "dask" or scheduler):
        raise UserError("--workers sizes the local Dask cluster: give it with --engine dask and without --scheduler")
    if given("workers") and workers > (os.cpu_count() or 1):
        click.echo(f"note: --workers {workers} on {os.cpu_count()} CPUs: the workers share them, so counting is no "
                   "faster than with one worker a CPU (and each holds its shard's counts)", err=True)
    stdin = [flag for flag, path in (("--train", train_path), ("--vocab", vocab_path), ("--valid", valid_path))
             if path == "-"]
    if len(stdin) > 1:  # standard input is read once: the second would read what is left of it (nothing)
        raise UserError(f"{' and '.join(stdin)} both read standard input, which can be read only once: give a file "
                        "for all but one")
    if valid_path:
        _refuse_empty(valid_path, opts)
    with model_output(output, binary, force, [train_path, vocab_path, valid_path], opts):
        _train(train_path, order, smoothing, output, binary, vocab_path, valid_path, add_k, prune, memory, temp_dir,
               engine, scheduler, workers, opts)


def _refuse_empty(path: str, opts) -> None:
    """A held-out text without a sentence has no perplexity: refused before anything is written."""
    from contextlib import closing

    from ..data.tokenizer import iter_sentences

    with closing(iter_sentences(path, opts)) as sentences:
        if next(sentences, None) is None:
            raise UserError(f"{path}: no sentences (empty file or blank lines only)")


def _train(train_path, order, smoothing, output, binary, vocab_path, valid_path, add_k, prune, memory, temp_dir, engine,
           scheduler, workers, opts):
    """``ngram train`` once its output is checked (and, with ``binary``, its directory locked)."""
    from ..ngram import DESCRIPTIONS
    from ..ngram.build import BuildConfig, build
    from ..ngram.build.config import parse_prune

    config = BuildConfig(order=order, smoothing=smoothing, k=add_k, prune=parse_prune(prune, order), memory=memory,
                         temp_dir=temp_dir, engine=engine, scheduler=scheduler, workers=workers)
    r = build(config, train_path, output, binary=binary, vocab=vocab_path, valid=valid_path, text_options=opts,
              locked=binary)
    if r.dask:
        d = r.dask
        click.echo(f"dask: {_plural(d['shards'], 'shard')} counted by {_plural(d['workers'], 'worker')} "
                   + ("and merged " if r.path == "bounded" else "") + f"in {d['seconds_count']:.1f} s", err=True)
    msg = (f"{DESCRIPTIONS[smoothing]}, order {order}: n-grams {', '.join(f'{c:,}' for c in r.ngrams)}; "
           f"vocabulary {r.vocabulary:,}; ")
    if r.path == "bounded":
        msg += (f"bounded to {r.budget / 2**20:,.0f} MiB ("
                + ("half the available memory; " if r.auto_budget else "")
                + (f"{r.spilled_bytes / 2**20:,.0f} MiB spilled); " if r.spilled_bytes else "nothing spilled); ")
                + f"{r.seconds:.1f} s (stages: " + ", ".join(f"{k} {v:.1f} s" for k, v in r.stages.items()) + ")")
    else:
        msg += f"{r.seconds:.1f} s"
    if r.valid_ppl is not None:
        msg += f"; valid perplexity {r.valid_ppl:.2f}"
    click.echo(msg, err=True)
    if r.fallback_orders:
        click.echo(f"sampledlm: warning: the Kneser-Ney discounts of order(s) {', '.join(map(str, r.fallback_orders))} "
                   "are out of range when estimated from this text's counts of counts (usual for small text or order 1): "
                   "KenLM's fallback discounts 0.5, 1, 1.5 are used there, as lmplz --discount_fallback does "
                   "(lmplz stops without that flag)",
                   err=True)


def _plural(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


@ngram.command(name="eval", context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@click.option("--test", "test_path", required=True,
              help="Text to score, one sentence per line (.gz/.bz2/.xz ok; - for stdin).")
@click.option("--per-sentence", is_flag=True, help="One line per sentence: ln-prob, predictions, perplexity, text "
                                                  "(as sampledlm eval; blank lines get no line); the summary then "
                                                  "goes to stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--no-verify", is_flag=True, help="A binary directory: skip checking its files against the checksums "
                                                "config.json records (the check reads the whole model once).")
@text_options
def eval_(model, test_path, per_sentence, as_json, no_verify, opts):
    """Exact perplexity of TEST under an ARPA model (ours or another tool's; .gz/.bz2/.xz ok) or a
    binary model directory: 'sampledlm eval' by another name, with the same output.

    \b
    Every word and every </s> is one prediction (<s> is not). As in KenLM's query, OOVs are
    the tokens scored as <unk> (words the model lacks, and a literal <unk>); a model without
    <unk> gives them log10 p = -100 (with a warning). The perplexity excluding OOVs leaves
    the OOV tokens out of sum and count.
    Example:
      sampledlm ngram eval kn5.arpa --test ptb.test.txt
      sampledlm ngram eval kn5.arpa --test test.txt --per-sentence > scores.tsv
    """
    import os

    from .common import text_flags_given
    from .eval import evaluate

    if os.path.isdir(model) and os.path.exists(os.path.join(model, "config.json")):
        from .. import store

        family = store.read_config(model)[1]
        if family != "ngram":
            raise UserError(f"{model}: holds a {family} model; `ngram eval` reads ARPA files and binary n-gram "
                            "directories (`sampledlm eval` reads any)")
    evaluate(model, test_path, per_sentence=per_sentence, as_json=as_json, no_verify=no_verify,
             opts=opts if text_flags_given() else None)


@ngram.command(name="build-binary", context_settings=CONTEXT)
@click.argument("model", metavar="MODEL.arpa")
@click.option("-o", "--output", default=None, help="Model directory to write (required unless --verify).")
@click.option("--verify", is_flag=True, help="Instead: check MODEL, a binary directory, against the SHA-256 of "
                                             "each file recorded in its config.json.")
@click.option("--memory", default=None, metavar="SIZE",
              help="Memory budget of the conversion (2G, 500M, 40%): the file is read in memory when that fits in it "
                   "(about 10x the file's size), else streamed a section at a time, each order sorted in runs held in "
                   "memory while they fit and spilled to --temp-dir beyond. [default: half the available memory]")
@click.option("--temp-dir", default=None, metavar="DIR",
              help="Where a conversion within a budget spills its sorted runs (unused when the file is read in "
                   "memory) [default: the system's temporary directory].")
@force_option("the model directory")
@text_options
def build_binary(model, output, verify, memory, temp_dir, force, opts):
    """Convert an ARPA model into a binary directory that loads by memory-mapping.

    \b
    The directory holds the sorted n-gram keys, log10 probabilities and back-off weights as
    flat .npy arrays (and config.json, words.json). Every command that takes an n-gram model
    (ngram eval, eval, score, rescore, generate, --mix, --backoff) accepts it.
    Loading reads two small JSON files and maps the arrays: its cost does not grow with the model.
    Converting parses the ARPA file in memory (a few hundred bytes per n-gram) when that fits in the
    budget (--memory); a larger file is streamed within it, its orders sorted on disk: the same arrays.
    Streaming needs every n-gram's prefix listed (KenLM, SRILM and ngram train list them); the in-memory
    reader adds a missing prefix, as KenLM does. MODEL.arpa may be compressed (.gz, .bz2, .xz), or -
    for standard input, copied first to --temp-dir or the system's temporary directory (the copy's size
    then sets the choice).
    Example:
      sampledlm ngram build-binary kn5.arpa -o kn5.bin
      sampledlm ngram eval kn5.bin --test test.txt
      sampledlm ngram build-binary lmplz5.arpa.gz --memory 2G --temp-dir /scratch -o lmplz5.bin
      sampledlm ngram build-binary book5.arpa --tokenizer raw --lowercase -o book5.bin
      xzcat big5.arpa.xz | sampledlm ngram build-binary - --memory 4G -o big5.bin

    \b
    The text flags say how the model's training text was read (an ARPA file cannot record it): the
    directory records them, and eval, score and generate then read text the same way.
    """
    from ..ngram.mapped import data_records_of_write, lock_directory, verify_binary
    from .common import text_flags_given

    if verify:
        if output or text_flags_given() or memory or temp_dir:
            raise UserError("--verify checks MODEL and writes nothing: leave out -o and the text flags")
        if not os.path.isdir(model):
            raise UserError(f"{model}: not a binary model directory (--verify checks a directory that "
                            "ngram build-binary or ngram train --binary wrote)")
        bad = verify_binary(model)
        if bad:
            odd = [b for b in bad if b.endswith(")")]  # "NAME (missing)", "NAME (unreadable: ...)"
            differ = [b for b in bad if not b.endswith(")")]
            raise UserError(f"{model}: damaged: " + "; ".join(
                ([", ".join(odd)] if odd else [])
                + ([f"{', '.join(differ)} differ{'s' if len(differ) == 1 else ''} from the checksums in config.json"]
                   if differ else [])))
        click.echo(f"{model}: every file matches its checksum", err=True)
        return
    if not output:
        raise UserError("give -o DIR, the model directory to write")
    refuse_existing_dir(output, force, "a binary n-gram model")
    if temp_dir is not None:
        from ..ngram.build.spill import check_temp_dir

        check_temp_dir(temp_dir)
    from ..data.textio import readable_path

    copy = readable_path(model, temp_dir)  # standard input or a pipe copied once, into --temp-dir where given
    budget, in_memory = _conversion_budget(copy, memory)
    t0 = time.perf_counter()
    with writing_directory(output, lock_directory):  # held to the end: a second writer of the directory stops at once
        refuse_existing_dir(output, force, "a binary n-gram model")  # again, under the lock
        with data_records_of_write({}, opts):
            if in_memory:
                counts, how = _in_memory(model, copy, output), " (read in memory)"
            else:
                counts, how = _bounded(model, output, budget, temp_dir)
    click.echo(f"{output}: order {len(counts)}, n-grams {', '.join(f'{c:,}' for c in counts)}; "
               f"{time.perf_counter() - t0:.1f} s{how}", err=True)


def _conversion_budget(path: str, memory: str | None) -> tuple[int, bool]:
    """The conversion's memory budget (``--memory``, else half the available memory) and whether the file at
    ``path`` (standard input's copy for ``-``) is read in memory within it
    (:func:`..ngram.build.arpa_convert.in_memory_need`), else streamed."""
    from ..ngram.build.arpa_convert import in_memory_need
    from ..ngram.build.budget import auto_budget, parse_memory

    budget = parse_memory(memory) if memory is not None else auto_budget()
    need = in_memory_need(path)
    return budget, need is None or need <= budget


def _in_memory(model: str, path: str, output: str) -> list[int]:
    """The file read in memory (a progress bar over its bytes) and written as a directory; its counts."""
    from ..ngram.arpa import read_arpa
    from ..ngram.mapped import write_binary
    from ..progress import bar

    size = os.path.getsize(path) if os.path.isfile(path) else None  # path: model's copy where it is standard input
    with bar(total=size, desc="reading", unit="B") as b:
        lm = read_arpa(model, cache=False, on_bytes=b.update)
    write_binary(lm, output, locked=True)
    return lm.counts()


def _bounded(model: str, output: str, budget: int, temp_dir: str | None) -> tuple[list[int], str]:
    """:func:`..ngram.build.arpa_convert.convert` with a progress bar; the counts and what the report adds."""
    from ..memory import gigabytes
    from ..ngram.build.arpa_convert import convert, header_counts, mib, text_window
    from ..ngram.build.budget import current_rss
    from ..progress import bar, say

    counts = header_counts(model)
    text_window(budget, current_rss(), counts)  # a budget too small says so before anything else
    say(f"{model}: converting within --memory {mib(budget)}")
    with bar(total=sum(counts[1:]), desc="n-grams", unit="n-gram") as b:
        got = convert(model, output, budget, temp_dir, progress=lambda k, n: b.update(n))
    spilled = f", {gigabytes(got['spilled'])} spilled to disk" if got["spilled"] else ""
    return got["counts"], f" (within --memory {mib(budget)}{spilled})"


@ngram.command(context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@click.option("-o", "--output", required=True, help="Pruned model: an ARPA file (.gz/.bz2/.xz ok), or a binary "
                                                    "model directory with --binary.")
@click.option("--threshold", type=FiniteFloat(min=0), default=None,
              help="Drop an n-gram when its removal raises the training-set perplexity by less than this relative "
                   "amount (SRILM's -prune; e.g. 1e-8 .. 1e-6).")
@click.option("--keep", type=FiniteFloat(0, 1, min_open=True), default=None,
              help="Instead of --threshold: the threshold that keeps about this fraction of the 2-grams and above.")
@click.option("--history-lm", "history_lm", default=None, metavar="MODEL2",
              help="Take the contexts' probabilities P(h) from this model (ARPA or binary), as SRILM's "
                   "-prune-history-lm: for a Kneser-Ney MODEL give a Katz or Witten-Bell model of the same text "
                   "(Chelba et al. 2010); KN's own lower orders misjudge P(h).")
@click.option("--binary", is_flag=True, help="Write a binary model directory instead of an ARPA file.")
@force_option("the output")
def prune(model, output, threshold, keep, history_lm, binary, force):
    """Relative-entropy pruning of a back-off model (Stolcke 1998), as SRILM's ngram -prune.

    \b
    Each n-gram (order >= 2) is scored by the relative change in training-set perplexity its removal
    causes; those below the threshold go, except contexts of n-grams that stay. The back-off weights
    are then recomputed so that every distribution sums to one.
    Example:
      sampledlm ngram prune kn5.arpa --threshold 1e-7 -o kn5-pruned.arpa
      sampledlm ngram prune kn5.bin --keep 0.1 -o kn5-10pct.bin --binary
      sampledlm ngram train --train train.txt --order 5 --smoothing katz -o katz5.arpa
      sampledlm ngram prune kn5.arpa --keep 0.1 --history-lm katz5.arpa -o kn5-10pct.arpa
    """
    from ..data.textio import check_writable
    from ..ngram.arpa import write_arpa
    from ..ngram.lm import ArpaLM
    from ..ngram.build.prune import entropy_prune, entropy_scores, threshold_for_size

    if (threshold is None) == (keep is None):
        raise UserError("give exactly one of --threshold T and --keep FRACTION")
    if binary:
        refuse_existing_dir(output, force, "a binary n-gram model")
    else:
        check_writable(output)
        refuse_existing(output, force, [model, history_lm])
    t0 = time.perf_counter()
    from ..ngram.mapped import MappedNgramLM

    lm = ArpaLM.open(model, warn=False).ngram
    history = ArpaLM.open(history_lm, warn=False).ngram if history_lm else None
    for m in (lm, history):  # pruning reads every value: a binary directory's are checked as an ARPA file's are
        if isinstance(m, MappedNgramLM):
            m.check_all()
    if history is not None:
        lacks = len(set(lm.words) - set(history.words))
        if lacks:
            click.echo(f"warning: {history_lm} lacks {lacks:,} of the {len(lm.words):,} words of {model} (a model of "
                       "other text?); contexts with them take its <unk>'s probability", err=True)
    scores = entropy_scores(lm, history)
    if keep is not None:
        threshold = threshold_for_size(scores, keep)
    pruned = entropy_prune(lm, threshold, scores)
    if binary:
        from ..ngram.mapped import write_binary

        write_binary(pruned, output)
    else:
        write_arpa(pruned, output)
    before, after = sum(lm.counts()), sum(pruned.counts())
    click.echo(f"threshold {threshold:.3g}: n-grams {', '.join(f'{c:,}' for c in pruned.counts())} "
               f"({after / before:.1%} of {before:,}); {time.perf_counter() - t0:.1f} s", err=True)
