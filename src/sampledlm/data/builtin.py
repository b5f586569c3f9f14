"""The built-in corpus: the documentation text that ships with every Python installation.

``pydoc_data.topics`` (about 65k words of English prose and code), tokenised with the raw-text
tokeniser (lower-cased, numbers -> ``<num>``) and split into sentences; every 10th sentence goes to
test, every 10th (offset 1) to valid, the rest to train. It needs no download, so the demo, the
quick benchmarks and the tests can always train on real text.
"""

from __future__ import annotations

import os

from .textio import atomic_write
from .tokenizer import split_sentences, tokenize_raw


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
