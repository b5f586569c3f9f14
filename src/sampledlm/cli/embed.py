"""``sampledlm embed train|eval|neighbors|export|plot``: word vectors from the command line."""

from __future__ import annotations

import json
import math
import os

import click

from .common import CONTEXT, force_option, refuse_existing, text_options
from .options import dataclass_options
from ..errors import UserError
from .configfile import config_option


def _default_eval(name: str, directory: str | None = None) -> str | None:
    from ..embed.evaluate import default_eval_file

    return default_eval_file(name, directory)


@click.group(context_settings=CONTEXT)
def embed():
    """Word embeddings: word2vec's skip-gram and CBOW, word2vec files, similarity and analogy evaluation.

    \b
    Example:
      sampledlm embed train corpus.txt -o vec --model skipgram
      sampledlm embed eval vec --analogy questions-words.txt --similarity wordsim353.tsv
      sampledlm embed neighbors vec/vectors.bin king paris
      sampledlm embed export ffnn3 -o ffnn3.bin      # a neural LM's projections as word vectors
    """


def _w2v_options():
    from ..embed.train import Word2VecConfig

    return dataclass_options({"word2vec": Word2VecConfig}, None)


_W2V, _W2V_FIELDS = _w2v_options()


@embed.command(context_settings=CONTEXT)
@click.argument("corpus", nargs=-1, required=True)
@click.option("-o", "--output", "out_dir", required=True,
              help="Directory to write: config.json, vocab.txt, vectors.safetensors, vectors.bin, vectors.txt.")
@click.option("--force", is_flag=True,
              help="Replace the embeddings already in the output directory (refused otherwise; never another model "
                   "or other files).")
@click.option("--no-text", is_flag=True, help="Skip vectors.txt (the text format: large and slow for big vocabularies).")
@click.option("--init-from", "init_dir", default=None, metavar="RUN",
              help="Start from a trained embeddings run's vectors (its --model, --objective, --dim and text options; "
                   "this command's other settings and corpus): domain adaptation. The corpus is read with RUN's "
                   "vocabulary unless --min-count makes a new one (shared words keep their vectors).")
@_W2V
@config_option
@text_options
def train(corpus, out_dir, force, no_text, init_dir, opts, **kw):
    """Train word vectors on CORPUS (one or more text files, read with the same text options).

    \b
    Skip-gram or CBOW (Mikolov et al. 2013), negative sampling or hierarchical softmax, word2vec's
    defaults; the hot loop is compiled (numba) and runs on --threads threads without a lock. A
    progress bar (on a terminal) shows words/s and the current learning rate.

    \b
    Example:
      sampledlm embed train corpus.txt -o vec
      sampledlm embed train book.txt -o vec --tokenizer raw --lowercase --gutenberg --model cbow --objective hs
      sampledlm embed train domain.txt --init-from vec --epochs 2 -o vec-domain
    """
    from ..embed.run import train_directory
    from .common import keep_source_settings

    given = {k: v for k, v in kw.items() if k in _W2V_FIELDS and v is not None}
    train_directory(list(corpus), out_dir, given, opts, force=force, no_text=no_text, init_dir=init_dir,
                    check_source=lambda where, what, theirs: keep_source_settings(where, what, theirs),
                    log=lambda line: click.echo(line, err=True))


def _which_option():
    return click.option("--which", type=click.Choice(["input", "output", "sum"]), default="input", show_default=True,
                        help="For a model directory: the word vectors (input), the output vectors, or their sum.")


@embed.command("eval", context_settings=CONTEXT)
@click.argument("vectors")
@click.option("--similarity", "sim_files", multiple=True,
              help="Word-pair file(s) 'w1 w2 score' (WS-353, SimLex-999) [default: WS-353 and SimLex-999 from --eval-dir or $SAMPLEDLM_EVAL].")
@click.option("--analogy", "analogy_file", default=None,
              help="Analogy questions (questions-words.txt) [default: questions-words.txt from --eval-dir or $SAMPLEDLM_EVAL].")
@click.option("--restrict", type=click.IntRange(min=1), default=30_000, show_default=True,
              help="Analogy answers are searched among this many most frequent words.")
@click.option("--sections", is_flag=True, help="Also print the analogy accuracy of every section.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option("--eval-dir", default=None, metavar="DIR",
              help="A folder holding wordsim353.tsv, simlex999.txt and/or questions-words.txt, used where "
                   "--similarity / --analogy are not given [default: $SAMPLEDLM_EVAL].")
@_which_option()
def eval_cmd(vectors, sim_files, analogy_file, restrict, sections, as_json, eval_dir, which):
    """Similarity (Spearman rho) and analogy (3CosAdd, 3CosMul) scores of VECTORS.

    VECTORS: a word2vec file (binary or text, told apart by content) or an embedding directory.

    \b
    Example:
      sampledlm embed eval vec
      sampledlm embed eval vectors.bin --similarity wordsim353.tsv --analogy questions-words.txt --sections
    """
    from ..embed import evaluate as ev
    from ..embed.formats import load_vectors

    if eval_dir is not None and not os.path.isdir(eval_dir):
        raise UserError(f"--eval-dir {eval_dir}: no such directory")
    wv = load_vectors(vectors, which)  # first: a wrong VECTORS path is the error to report
    sim_files = list(sim_files) or [p for p in (_default_eval("wordsim353.tsv", eval_dir),
                                                _default_eval("simlex999.txt", eval_dir)) if p]
    analogy_file = analogy_file or _default_eval("questions-words.txt", eval_dir)
    if not sim_files and not analogy_file:
        from ..embed.evaluate import EVAL_SETS

        env = os.environ.get("SAMPLEDLM_EVAL")
        where = (f"in {eval_dir}" if eval_dir else f"in $SAMPLEDLM_EVAL ({env}"
                 + ("" if os.path.isdir(env) else ": no such directory") + ")" if env
                 else "(no --eval-dir, and $SAMPLEDLM_EVAL is not set)")
        sets = "; ".join(f"{name}: {what}" for name, what in EVAL_SETS.items())
        raise UserError(f"no evaluation data {where}: give --similarity FILE and/or --analogy FILE, or a folder "
                        f"holding the public sets with --eval-dir DIR or SAMPLEDLM_EVAL=DIR ({sets})")
    out = {"vectors": vectors, "words": len(wv), "dim": wv.dim, "similarity": [], "analogy": None}
    for path in sim_files:
        out["similarity"].append(ev.similarity(wv, ev.read_pairs(path), os.path.basename(path)).to_dict())
    if analogy_file:
        out["analogy"] = ev.analogy(wv, ev.read_analogies(analogy_file), restrict).to_dict()
    out = _finite(out)
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    click.echo(f"{vectors}: {len(wv):,} words x {wv.dim}")
    for s in out["similarity"]:
        rho = (f"{s['spearman']:.3f}" if s["spearman"] is not None else
               "n/a (fewer than 2 pairs known)" if s["pairs"] < 2 else "n/a (constant scores)")
        if s["ci95"]:
            rho += f" (95 % CI {s['ci95'][0]:.3f} to {s['ci95'][1]:.3f})"
        few = "; too few pairs to compare models" if 2 <= s["pairs"] < 30 else ""
        click.echo(f"  {s['name']:<22} Spearman rho {rho}  ({s['pairs']} pairs, {s['skipped']} skipped: "
                   f"out of vocabulary{few})")
    if out["analogy"]:
        a = out["analogy"]
        for kind in ("semantic", "syntactic", "all"):
            t = a[kind]
            scores = f"3CosAdd {t['add']:.3f}  3CosMul {t['mul']:.3f}" if t["answered"] else "n/a (no question covered)"
            coverage = f", coverage {t['coverage']:.1%}" if t["questions"] else ""
            click.echo(f"  analogy {kind:<10} {scores}  ({t['answered']}/{t['questions']} questions{coverage}, "
                       f"top {min(restrict, len(wv)):,} words)")  # all of them when the vocabulary is smaller
        if sections:
            for s in a["sections"]:
                n = s["answered"]
                scores = f"{s['add'] / n:.3f}  {s['mul'] / n:.3f}" if n else "n/a"
                click.echo(f"    {s['name']:<28} {scores}  ({n}/{s['questions']})")


def _finite(value):
    """``value`` with every nan or infinite number (a score with nothing to score) as None: JSON's null, where
    ``json`` writes the invalid NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


@embed.command(context_settings=CONTEXT)
@click.argument("vectors")
@click.argument("words", nargs=-1, required=True)
@click.option("-n", "--top", type=click.IntRange(min=1), default=10, show_default=True, help="Neighbours per word.")
@_which_option()
def neighbors(vectors, words, top, which):
    """The nearest words (cosine) to each of WORDS in VECTORS.

    \b
    Example:
      sampledlm embed neighbors vec king paris -n 5
    """
    from ..embed.formats import load_vectors

    wv = load_vectors(vectors, which)
    for w in words:
        near = wv.neighbors(w, top)
        click.echo(f"{w}\t" + "  ".join(f"{n} {s:.3f}" for n, s in near))


@embed.command(context_settings=CONTEXT)
@click.argument("run_dir")
@click.option("-o", "--output", "out_path", required=True,
              help="word2vec file to write (binary when the name ends in .bin, else text).")
@click.option("--which", type=click.Choice(["input", "output", "sum"]), default="input", show_default=True,
              help="input: the projection table; output: the output layer's word vectors; sum: both added.")
@force_option("the vectors file")
def export(run_dir, out_path, which, force):
    """Write the word vectors of a trained neural LM (RUN_DIR) as a word2vec file.

    \b
    Example:
      sampledlm embed export ffnn3 -o ffnn3-input.bin
      sampledlm embed export gru -o gru-output.bin --which output
    """
    from ..embed.export import lm_vectors
    from ..embed.formats import save_vectors

    from ..data.textio import check_writable

    check_writable(out_path)  # a directory, or a missing folder: said before the model is read
    refuse_existing(out_path, force, [run_dir])
    wv = lm_vectors(run_dir, which)
    save_vectors(out_path, wv)
    click.echo(f"{len(wv):,} x {wv.dim} {which} vectors of {run_dir} -> {out_path}", err=True)


@embed.command(context_settings=CONTEXT)
@click.argument("vectors", nargs=-1, required=True)
@click.option("-w", "--words", "words", required=True,
              help="Comma-separated words to place (e.g. king,queen,man,woman,paris,france).")
@click.option("-o", "--output", "out_path", required=True, help="PNG file to write.")
@force_option("the picture")
@_which_option()
def plot(vectors, words, out_path, force, which):
    """A PNG of WORDS on the first two principal components of each of VECTORS (one panel each).

    \b
    Example:
      sampledlm embed plot vec ffnn3-input.bin -w king,queen,man,woman,paris,france -o words.png
    """
    from ..embed.formats import load_vectors
    from ..embed.plot import write_plot

    from ..data.textio import check_writable

    check_writable(out_path)
    refuse_existing(out_path, force)
    ws = [w for w in words.split(",") if w.strip()]
    panels = [(os.path.basename(os.path.normpath(v)), load_vectors(v, which)) for v in vectors]
    missing = write_plot(out_path, panels, [w.strip() for w in ws])
    if missing:
        click.echo(f"not in the vocabulary (left out): {', '.join(missing)}", err=True)
    click.echo(f"wrote {out_path}", err=True)
