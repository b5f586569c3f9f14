"""``sampledlm vocab``, ``stats``, ``classes`` and ``samples``: corpus commands."""

from __future__ import annotations

import json
import os

import click

from ..errors import UserError
from .common import CONTEXT, force_option, refuse_existing, text_flags_given, text_options

UNSEEN_WARNING = 0.25  # share of the vocabulary without a context in TRAIN from which classes --from-model warns


@click.command(context_settings=CONTEXT)
@click.argument("train", metavar="TRAIN")
@click.option("-o", "--output", default="-", show_default=True, help="Vocabulary file to write (word<TAB>count); - for stdout; a name ending in .gz, .bz2 or .xz is "
                   "written compressed.")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True, help="Words seen fewer times become <unk>.")
@click.option("--max-size", type=click.IntRange(min=3), default=None, help="Keep at most this many entries, </s> and <unk> included (so at least one word) [default: no limit].")
@force_option("the vocabulary file")
@text_options
def vocab(train, output, min_count, max_size, force, opts):
    """Count TRAIN and write its vocabulary.

    \b
    Ids: </s>=0, <unk>=1, then words by count descending, then by word.
    Example:
      sampledlm vocab ptb.train.txt -o vocab.txt
      sampledlm vocab book.txt.gz --tokenizer raw --lowercase --gutenberg --min-count 2 -o vocab.txt
    """
    from ..data.corpus import build_vocab
    from ..data.textio import check_writable

    check_writable(output)
    refuse_existing(output, force, [train])
    v = build_vocab(train, opts, min_count=min_count, max_size=max_size)
    v.save(output)
    click.echo(f"{len(v):,} entries ({len(v) - 2:,} word type{'' if len(v) == 3 else 's'}, <unk> and </s>); <unk> count {int(v.counts[1]):,}",
               err=True)


@click.command(context_settings=CONTEXT)
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--vocab", "vocab_path", default=None, help="Vocabulary file: report the OOV rate against it (words outside it; literal <unk> tokens are "
                   "counted apart, as unk_tokens_in_text: eval counts both as OOV).")
@click.option("--top-k", type=click.IntRange(min=1), multiple=True, default=(100, 1000, 10000), show_default=True,
              help="Report the share of tokens covered by the k most frequent words (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per file instead of text.")
@text_options
def stats(files, vocab_path, top_k, as_json, opts):
    """Corpus statistics: tokens, types, sentences, OOV rate, top-k coverage.

    \b
    Tokens are words; </s> is not counted among them (there is one per sentence).
    Example:
      sampledlm stats ptb.train.txt
      sampledlm stats ptb.test.txt --vocab vocab.txt
    """
    from ..data.stats import corpus_stats, format_stats
    from ..data.vocab import Vocab

    from ..data.textio import open_binary

    for path in files:  # every file opened first: a missing last one fails before any output, not after it
        if path != "-":
            open_binary(path).close()
    v = Vocab.load(vocab_path) if vocab_path else None
    results = [corpus_stats(path, opts, vocab=v, top_k=top_k) for path in files]  # all read before any is printed:
    for s in results:  # a bad line in the last file leaves no half answer on standard output
        click.echo(json.dumps(s) if as_json else format_stats(s))


@click.command(context_settings=CONTEXT)
@click.argument("train", metavar="TRAIN")
@click.option("-o", "--output", required=True, help="Word-classes file to write (class<TAB>word<TAB>count); a name ending in .gz, .bz2 or .xz is "
                   "written compressed.")
@click.option("--classes", "num_classes", type=click.IntRange(min=1), default=None,
              help="Number of classes C [default: round(2 sqrt(V)), as --objective class].")
@click.option("--vocab", "vocab_path", default=None,
              help="Vocabulary file (the model's): words outside it count as <unk> [default: TRAIN's words].")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True,
              help="Without --vocab: words seen fewer times become <unk>.")
@click.option("--max-size", type=click.IntRange(min=3), default=None,
              help="Without --vocab: keep at most this many entries, </s> and <unk> included.")
@click.option("--iterations", type=click.IntRange(min=1), default=20, show_default=True,
              help="At most this many passes (it stops earlier once a pass moves under 0.1 % of the words).")
@click.option("--from-model", "from_model", default=None, metavar="RUN",
              help="Cluster by a trained neural model's contexts instead: each word's mean context vector over TRAIN, "
                   "k-means (Mnih & Hinton 2009's way); the model's vocabulary and text options.")
@click.option("--tree", is_flag=True,
              help="With --from-model: a binary tree for --objective hsm (recursive 2-means), each word's bit path "
                   "as its class label, instead of flat classes.")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True,
              help="With --from-model: the seed of k-means's starting centres.")
@force_option("the word-classes file")
@text_options
def classes(train, output, num_classes, vocab_path, min_count, max_size, iterations, from_model, tree, seed, force,
            opts):
    """Cluster TRAIN's words into classes (exchange algorithm, Brown-style), or by a model's contexts.

    \b
    Words go to the classes that maximise the likelihood of TRAIN under the class bigram model
    P(c(w) | c(prev)) P(w | c(w)) (Kneser & Ney 1993; Martin et al. 1998): the flat form of Brown
    et al. (1992)'s clustering. The file feeds the class-based and hierarchical output layers.
    With --from-model RUN, words the trained model expects in like places share a class: on PTB's GRU
    these classes bring the class layer closer to the softmax than the exchange algorithm's
    (docs/results/quality-cpu.md). Train a first model, cluster with it, train again.
    Example:
      sampledlm classes ptb.train.txt -o classes.txt
      sampledlm train ... --objective class --word-classes classes.txt
      sampledlm train ... --objective hsm --word-classes classes.txt
      sampledlm classes ptb.train.txt --from-model gru-class -o ctx-classes.txt
      sampledlm classes ptb.train.txt --from-model gru-hsm --tree -o ctx-tree.txt
    Give the model's own --vocab (or the same --min-count / --max-size) so the words agree.
    """
    import math

    from ..data.clusters import cached_exchange_classes, class_bigram_perplexity, write_word_classes
    from ..data.corpus import build_vocab, load_ids
    from ..data.textio import check_writable
    from ..data.vocab import Vocab

    check_writable(output)
    refuse_existing(output, force, [train, vocab_path])
    from .common import given

    if tree and not from_model:
        raise UserError("--tree builds its tree from a model's contexts: give --from-model RUN")
    if given("seed") and not from_model:
        raise UserError("--seed starts --from-model's k-means; the exchange algorithm has no randomness to seed")
    if from_model and given("iterations"):
        raise UserError("--iterations counts the exchange algorithm's passes; --from-model clusters by k-means")
    if vocab_path and (given("min_count") or given("max_size")):
        raise UserError("--vocab gives the words; --min-count and --max-size choose them when it is left out")
    if tree and num_classes:
        raise UserError("--tree writes a binary tree, not --classes C flat classes: give one or the other")
    if from_model:
        if vocab_path or max_size or min_count != 1 or text_flags_given():
            raise UserError("--from-model reads TRAIN with the model's own vocabulary and text options: "
                            "leave out --vocab, --min-count, --max-size and the text flags")
        return _classes_from_model(train, output, from_model, num_classes, tree, seed)
    vocab = Vocab.load(vocab_path) if vocab_path else build_vocab(train, opts, min_count=min_count, max_size=max_size)
    _at_most_v(num_classes, len(vocab))
    ids = load_ids(train, vocab, opts)
    counts = vocab.counts
    if vocab_path:  # TRAIN's counts, not the vocabulary file's (another text's, or none): the file's column and
        import numpy as np  # the clustering's starting order are TRAIN's

        counts = np.bincount(np.asarray(ids), minlength=len(vocab)).astype(vocab.counts.dtype)
    c = num_classes or max(1, min(len(vocab), round(2 * math.sqrt(len(vocab)))))

    def report(it, moved):
        click.echo(f"pass {it}: {moved:,} of {len(vocab):,} words moved", err=True)

    # cached: a clustering stopped part way takes up at its last whole pass, and one already done is not redone
    cls = cached_exchange_classes(ids, len(vocab), c, counts, iterations=iterations, progress=True, report=report)
    write_word_classes(output, vocab.words, cls, counts)
    ppl = class_bigram_perplexity(ids, cls)
    click.echo(f"{int(cls.max()) + 1} class{'' if cls.max() == 0 else 'es'} over {len(vocab):,} words; TRAIN's perplexity under their class "
               f"bigram model {ppl:.1f}; written to {output}", err=True)


def _at_most_v(num_classes: int | None, v: int) -> None:
    if num_classes and num_classes > v:
        raise UserError(f"--classes {num_classes}: at most V = {v}, the vocabulary's size")


def _classes_from_model(train: str, output: str, run: str, num_classes: int | None, tree: bool, seed: int) -> None:
    """``classes --from-model``: the model's mean contexts over TRAIN, then k-means classes or a tree's paths."""
    import time

    import numpy as np

    from ..data.clusters import write_word_classes
    from ..data.corpus import load_ids
    from ..data.textio import atomic_write
    from ..data.tokenizer import TextOptions
    from ..loader import load_model
    from ..neural.context_classes import kmeans_classes, mean_contexts, tree_paths
    from ..objectives.structure import auto_class_count

    from .. import store

    if not os.path.isdir(run):
        raise store.no_run_directory(run, "--from-model")
    family = store.read_config(run)[1]
    if family != "neural":
        raise UserError(f"--from-model {run}: holds a {family} model; give a neural run directory (what 'sampledlm "
                        "train -o' wrote)")
    lm = load_model(run, device="cpu")
    if not hasattr(lm, "model") or not hasattr(lm.model, "eval_contexts"):
        raise UserError(f"--from-model {run}: this neural model gives no context vectors to cluster")
    _at_most_v(num_classes, len(lm.vocab))
    ids = load_ids(train, lm.vocab, TextOptions(**(lm.text_options or {})), cache=False)
    if len(ids) == 0:
        raise UserError(f"{train}: no sentences")
    t0 = time.perf_counter()
    x, counts = mean_contexts(lm.model, ids)
    click.echo(f"mean contexts of {int((counts > 0).sum()):,} of {len(counts):,} words over {len(ids):,} predictions "
               f"({time.perf_counter() - t0:.0f} s)", err=True)
    unseen = int((counts == 0).sum())
    if unseen >= UNSEEN_WARNING * len(counts):
        click.echo(f"sampledlm: warning: {unseen:,} of the model's {len(counts):,} words ({100 * unseen / len(counts):.0f} "
                   f"%) never occur in {train}: they are placed by their output rows alone, not by contexts; the "
                   "model's own training text shows them all", err=True)
    words = lm.vocab.words
    if tree:
        paths = tree_paths(x, counts, seed=seed)
        with atomic_write(output) as f:
            for word, path, n in zip(words, paths, counts.tolist()):
                f.write(f"{path}\t{word}\t{n}\n")
        depth = np.array([len(p) for p in paths], dtype=np.float64)
        mean = float(np.average(depth, weights=np.maximum(counts, 0.5)))
        click.echo(f"a binary tree over {len(words):,} words, {mean:.2f} decisions per token on average "
                   f"(at most {int(depth.max())}); written to {output}", err=True)
        return
    c = num_classes or auto_class_count(len(words))
    cls = kmeans_classes(x, counts, c, seed=seed)
    write_word_classes(output, words, cls, counts)
    click.echo(f"{int(cls.max()) + 1} class{'' if cls.max() == 0 else 'es'} over {len(words):,} words from {run}'s contexts; written to {output}",
               err=True)


@click.command(context_settings=CONTEXT)
@click.argument("directory", metavar="DIR")
@force_option("the sample files")
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=1, show_default=True,
              help="Seed of the simulated recogniser's errors and scores.")
def samples(directory, force, seed):
    """Write sample files into DIR: a corpus, n-best lists and lattices to try every command on.

    \b
    train.txt, valid.txt, test.txt: the built-in corpus (Python's documentation text);
    nbest.jsonl and nbest-srilm/: n-best lists of 20 test sentences from a simulated recogniser,
    with references (JSONL; SRILM's 'am lm nwords words' files, references in refs.txt);
    lattices/: HTK SLF lattices of 3 of them. Files already in DIR with these names are replaced only
    with --force.
    Example:
      sampledlm samples data && cd data
      sampledlm ngram train --train train.txt --order 3 -o kn3.arpa
      sampledlm rescore kn3.arpa nbest.jsonl --tune-on nbest.jsonl
      sampledlm rescore kn3.arpa lattices --lm-weight 10
    """
    from ..data.samples import NAMES, write_samples

    if directory == "-":
        raise UserError("DIR names the directory to write the sample files into; '-' (standard output) is not one")
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UserError(f"{directory}: is a file; DIR names a directory")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise UserError(f"{directory}: cannot create the directory ({e.strerror})") from None
    there = [n for n in NAMES if os.path.exists(os.path.join(directory, n))]
    if there and not force:
        raise UserError(f"{os.path.join(directory, there[0])}: already exists; give --force to replace the sample "
                        "files, or choose another DIR")
    paths = write_samples(directory, seed=seed)
    click.echo(f"wrote {', '.join(os.path.relpath(p, directory) for p in paths.values())} into {directory}", err=True)
