"""What every demo step receives (:class:`DemoData`) and returns (:class:`Result`)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import numpy as np

from ..data.builtin import write_builtin_corpus
from ..data.corpus import build_vocab, load_ids
from ..data.vocab import Vocab


def say(line: str = "") -> None:
    """One line of the demo's report, on standard output."""
    print(line, flush=True)


def note(line: str) -> None:
    """A training's progress line, on standard error (as the commands print theirs)."""
    print(line, file=sys.stderr, flush=True)


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


def prepare(directory: str, seed: int = 1) -> DemoData:
    """Write train/valid/test files into ``directory``, build the vocabulary and encode them."""
    paths = write_builtin_corpus(directory)
    vocab = build_vocab(paths["train"], min_count=2)
    vocab.save(os.path.join(directory, "vocab.txt"))
    ids = {k: load_ids(p, vocab, cache=False) for k, p in paths.items()}
    return DemoData(directory, paths["train"], paths["valid"], paths["test"], vocab, ids, seed)
