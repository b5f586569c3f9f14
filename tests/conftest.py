"""Shared test helpers: every test makes its own data; PTB-backed tests skip when it is absent."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PTB_DIR = REPO.parent / "shared" / "data" / "ptb"


def synthetic_sentences(n_sentences: int, vocab_size: int = 50, seed: int = 0) -> list[list[str]]:
    """Sentences from a random sparse bigram model over Zipf-weighted words: learnable structure."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab_size)]
    zipf = 1.0 / np.arange(1, vocab_size + 1)
    nexts = [rng.choice(vocab_size, size=5, replace=False, p=zipf / zipf.sum()) for _ in range(vocab_size + 1)]
    sents = []
    for _ in range(n_sentences):
        prev, sent = vocab_size, []
        for _ in range(int(rng.integers(3, 12))):
            prev = int(rng.choice(nexts[prev])) if rng.random() < 0.8 else int(rng.integers(vocab_size))
            sent.append(words[prev])
        sents.append(sent)
    return sents


def write_corpus(path: pathlib.Path, sentences: list[list[str]]) -> pathlib.Path:
    path.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    return path


@pytest.fixture
def tiny_corpus(tmp_path) -> dict[str, pathlib.Path]:
    """train.txt (400 sentences), valid.txt and test.txt (60 each) in tmp_path."""
    sents = synthetic_sentences(520, seed=0)
    return {
        "train": write_corpus(tmp_path / "train.txt", sents[:400]),
        "valid": write_corpus(tmp_path / "valid.txt", sents[400:460]),
        "test": write_corpus(tmp_path / "test.txt", sents[460:]),
    }


@pytest.fixture
def ptb_dir() -> pathlib.Path:
    if not (PTB_DIR / "ptb.train.txt").exists():
        pytest.skip(f"PTB not found at {PTB_DIR} (it lives in ../shared/data/ptb beside the repository)")
    return PTB_DIR
