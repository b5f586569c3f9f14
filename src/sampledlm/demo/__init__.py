"""``sampledlm demo``: the whole pipeline on a built-in corpus, as a list of steps that grows.

The corpus is the documentation text of the Python installation running the demo
(``pydoc_data.topics``: about 65k words of English prose and code), so the demo needs no
download and no data. It is tokenised with the raw-text tokeniser, split into sentences, and
every 10th sentence goes to test, every 10th (offset 1) to valid, the rest to train.

Each step is a function ``step(data) -> list[Result]``; :data:`STEPS` lists them in order.
A new model family adds one step.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable


from ..errors import UserError
from ..data.stats import corpus_stats, format_stats
from .common import DemoData, Result, prepare, say
from .maxent import maxent_step
from .neural import ffnn_step
from .ngram import addone_bigram_step, kneser_ney_step
from .serve import serve_step
from .transformer import transformer_step
from .parallel import parallel_step
from .ngram_scale import ngram_scale_step
from .use import use_step
from .api import api_step
from .embed import embed_step
from .export import export_step
from .adapt import adapt_step

#: a file that marks a directory as a demo run's (so that -o DIR may be reused, and nothing else overwritten)
MARKER = ".sampledlm-demo"

#: the demo's steps, in order; a new capability adds one
STEPS: list[Callable[[DemoData], list[Result]]] = [addone_bigram_step, kneser_ney_step, ngram_scale_step, maxent_step,
                                                   ffnn_step, parallel_step, transformer_step, use_step, api_step,
                                                   export_step, adapt_step, serve_step, embed_step]


def run_demo(out_dir: str | None = None, seed: int = 1) -> list[Result]:
    """Run every step of :data:`STEPS` and print a results table."""
    if out_dir and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"{out_dir}: exists and is not a directory; choose a new directory for the demo")
    if out_dir and os.path.isdir(out_dir) and os.listdir(out_dir) and not os.path.exists(os.path.join(out_dir, MARKER)):
        raise UserError(f"{out_dir}: exists and is not empty (nor an earlier demo run); the demo writes train.txt, "
                        "valid.txt, test.txt, vocab.txt and model directories there: choose a new directory")
    with tempfile.TemporaryDirectory(prefix="sampledlm-demo-") as tmp:
        directory = out_dir or tmp
        if out_dir and os.path.isdir(out_dir):
            _remove_earlier_demo(out_dir)
        try:
            os.makedirs(directory, exist_ok=True)
            theirs = set(os.listdir(directory))  # the user's own files, left alone
            _mark(directory, theirs)
        except OSError as e:
            raise UserError(f"{directory}: cannot write the demo there ({e.strerror or e})") from None
        data = prepare(directory, seed)
        _mark(directory, theirs)
        say("== corpus (built in: Python's pydoc topics) ==")
        for name in ("train", "valid", "test"):
            say(format_stats(corpus_stats(getattr(data, name), vocab=data.vocab, top_k=(100, 1000))))
            say("")
        say(f"vocabulary: {len(data.vocab):,} entries (min count 2), written to {os.path.join(directory, 'vocab.txt')}"
                   if out_dir else f"vocabulary: {len(data.vocab):,} entries (min count 2)")
        results: list[Result] = []
        for step in STEPS:
            results.extend(step(data))
            _mark(directory, theirs)
        say("\n== models (exact perplexity; </s> counted, <s> not) ==")
        width = max([len("model"), *(len(r.model) for r in results)])
        say(f"{'model':<{width}} {'valid ppl':>10} {'test ppl':>10} {'seconds':>8}")
        for r in results:
            say(f"{r.model:<{width}} {r.valid_ppl:>10.2f} {r.test_ppl:>10.2f} {r.seconds:>8.1f}  {r.note}".rstrip())
    return results


def _mark(directory: str, theirs: set[str]) -> None:
    """Write :data:`MARKER` listing what the demo wrote in ``directory`` so far (every entry but ``theirs``)."""
    ours = sorted(set(os.listdir(directory)) - theirs - {MARKER})
    with open(os.path.join(directory, MARKER), "w", encoding="utf-8") as f:
        f.write("".join(name + "\n" for name in ours))


def _remove_earlier_demo(out_dir: str) -> None:
    """Remove what an earlier demo in ``out_dir`` wrote (the entries its :data:`MARKER` lists), nothing else."""
    import shutil

    with open(os.path.join(out_dir, MARKER), encoding="utf-8") as f:
        ours = [line.strip() for line in f if line.strip()]
    if not ours and len(os.listdir(out_dir)) > 1:  # a marker of a version that did not list its files
        raise UserError(f"{out_dir}: holds an earlier demo that did not record which files are its own; remove it, "
                        "or choose a new directory")
    for name in ours:
        p = os.path.join(out_dir, os.path.basename(name))  # a name, never a path out of the directory
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.remove(p)
