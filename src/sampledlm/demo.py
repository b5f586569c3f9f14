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
from dataclasses import dataclass, field
from typing import Callable

import click
import numpy as np

from .corpus import build_vocab, load_ids
from .stats import corpus_stats, format_stats
from .textio import atomic_write
from .tokenizer import split_sentences, tokenize_raw
from .vocab import Vocab


@dataclass
class DemoData:
    """What every step receives: the files, the vocabulary and the encoded streams."""

    directory: str
    train: str
    valid: str
    test: str
    vocab: Vocab
    ids: dict[str, np.ndarray]
    seed: int = 1
    extra: dict = field(default_factory=dict)  # steps may leave things for later steps (e.g. an ARPA path)


@dataclass
class Result:
    model: str
    valid_ppl: float
    test_ppl: float
    seconds: float
    note: str = ""


def builtin_sentences() -> list[list[str]]:
    """Sentences of the standard library's pydoc topics, tokenised (lower-cased, numbers -> <num>)."""
    from pydoc_data.topics import topics

    sents: list[list[str]] = []
    for name in sorted(topics):
        for para in topics[name].split("\n\n"):
            toks = tokenize_raw(" ".join(para.split()), lowercase=True, numbers=True)
            sents.extend(s for s in split_sentences(toks) if s)
    return sents


def write_builtin_corpus(directory: str) -> dict[str, str]:
    """Write the built-in corpus as ``directory/{train,valid,test}.txt`` (one sentence per line:
    every 10th sentence to test, every 10th with offset 1 to valid); returns the three paths."""
    sents = builtin_sentences()
    split = {"train": [], "valid": [], "test": []}
    for i, s in enumerate(sents):
        split["test" if i % 10 == 0 else "valid" if i % 10 == 1 else "train"].append(s)
    paths = {}
    for name, ss in split.items():
        paths[name] = os.path.join(directory, f"{name}.txt")
        with atomic_write(paths[name]) as f:
            f.write("".join(" ".join(s) + "\n" for s in ss))
    return paths


def prepare(directory: str, seed: int = 1) -> DemoData:
    """Write train/valid/test files into ``directory``, build the vocabulary and encode them."""
    paths = write_builtin_corpus(directory)
    vocab = build_vocab(paths["train"], min_count=2)
    vocab.save(os.path.join(directory, "vocab.txt"))
    ids = {k: load_ids(p, vocab, cache=False) for k, p in paths.items()}
    return DemoData(directory, paths["train"], paths["valid"], paths["test"], vocab, ids, seed)


STEPS: list[Callable[[DemoData], list[Result]]] = []
from .ngram.demo_step import addone_bigram_step, kneser_ney_step; STEPS += [addone_bigram_step, kneser_ney_step]  # noqa: E402,E702
from .maxent.demo import maxent_step; STEPS.append(maxent_step)  # noqa: E402,E702
from .neural_demo import ffnn_step; STEPS.append(ffnn_step)  # noqa: E402,E702


def run_demo(out_dir: str | None = None, seed: int = 1) -> list[Result]:
    """Run every step of :data:`STEPS` and print a results table."""
    with tempfile.TemporaryDirectory(prefix="sampledlm-demo-") as tmp:
        directory = out_dir or tmp
        os.makedirs(directory, exist_ok=True)
        data = prepare(directory, seed)
        click.echo("== corpus (built in: Python's pydoc topics) ==")
        for name in ("train", "valid", "test"):
            click.echo(format_stats(corpus_stats(getattr(data, name), vocab=data.vocab, top_k=(100, 1000))))
            click.echo("")
        click.echo(f"vocabulary: {len(data.vocab):,} entries (min count 2), written to {os.path.join(directory, 'vocab.txt')}"
                   if out_dir else f"vocabulary: {len(data.vocab):,} entries (min count 2)")
        results: list[Result] = []
        for step in STEPS:
            results.extend(step(data))
        click.echo("\n== models (exact perplexity; </s> counted, <s> not) ==")
        click.echo(f"{'model':<40} {'valid ppl':>10} {'test ppl':>10} {'seconds':>8}")
        for r in results:
            click.echo(f"{r.model:<40} {r.valid_ppl:>10.2f} {r.test_ppl:>10.2f} {r.seconds:>8.1f}  {r.note}")
    return results
