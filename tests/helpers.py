"""Plain helpers shared by test files (fixtures live in conftest.py).

Import them as ``from helpers import ...``: tests/ is on sys.path (tests/conftest.py puts it there), and no
test file imports another test file.
"""

from __future__ import annotations

import json
import pathlib
import random

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PTB_DIR = REPO.parent / "shared" / "data" / "ptb"


# --- corpora ---------------------------------------------------------------------------------------------

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


def encode_sentences(vocab, sents: list[list[str]]) -> np.ndarray:
    """One id stream: each sentence's ids followed by 0 (</s>)."""
    return np.array([i for s in sents for i in vocab.encode(s) + [0]], dtype=np.int32)


WORDS = "the a cat dog sat ran on under mat log big small red".split()


def write_word_corpus(path, n, seed):
    """``n`` random sentences of 2-8 words drawn uniformly from WORDS (the trainer's tests' corpus)."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            k = rng.randint(2, 8)
            f.write(" ".join(rng.choice(WORDS) for _ in range(k)) + "\n")


# --- the command line --------------------------------------------------------------------------------------

def run_cli(args, capsys):
    """Run ``sampledlm ARGS`` in-process through the console entry point; return (exit code, stdout, stderr)."""
    from sampledlm.cli import main

    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


# --- neural runs ---------------------------------------------------------------------------------------------

def config_for(corpus, model="ffnn", **train):
    """A run configuration and vocabulary for a tiny ``model`` on ``corpus``/train.txt and valid.txt."""
    from sampledlm.data.corpus import build_vocab
    from sampledlm.data.tokenizer import TextOptions
    from sampledlm.neural import rundir as runs
    from sampledlm.neural.registry import model_spec
    from sampledlm.neural.trainer import TrainOptions

    vocab = build_vocab(str(corpus / "train.txt"))
    spec = model_spec("ffnn", order=3, embed_dim=6, hidden=[8]) if model == "ffnn" else \
        model_spec(model, embed_dim=6, hidden=8, dropout=0.1)
    t = dict(TrainOptions(batch_size=16, bptt=5, epochs=3, lr=0.5).__dict__)
    t.update(train)
    data = {"train": str(corpus / "train.txt"), "valid": str(corpus / "valid.txt"), "text_options": TextOptions().to_dict()}
    return runs.make_config(spec, "softmax", {}, t, data, vocab), vocab


# --- python -m benchmarks -------------------------------------------------------------------------------------

def bench(*args):
    from click.testing import CliRunner

    from benchmarks.__main__ import bench as command

    return CliRunner().invoke(command, list(args))


def run_quick(name, tmp_path, page=None, against="Against the paper"):
    """Run ``python -m benchmarks NAME --quick --out tmp_path``; check the page (``page``: its file name
    when it is not the experiment's) and return its data."""
    page = page or name
    r = bench(name, "--quick", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output + repr(r.exception)
    for ext in ("md", "json", "png"):
        assert (tmp_path / f"{page}.{ext}").stat().st_size > 0
    doc = json.loads((tmp_path / f"{page}.json").read_text())
    assert {"meta", "data"} <= set(doc) and doc["meta"]["command"].startswith(f"python -m benchmarks {name} --quick")
    assert against in (tmp_path / f"{page}.md").read_text()
    return doc["data"]
