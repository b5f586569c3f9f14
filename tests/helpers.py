"""Plain helpers shared by test files (fixtures live in conftest.py).

Import them as ``from helpers import ...``: tests/ is on sys.path (tests/conftest.py puts it there), and no
test file imports another test file.
"""

from __future__ import annotations

import json
import pathlib
import random
import re
from dataclasses import dataclass

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


def as_in_a_terminal() -> None:
    """``preexec_fn`` for a child sent SIGHUP: the default handler, as in a terminal (the suite may run under
    ``nohup``, whose ignored SIGHUP a child would inherit)."""
    import signal

    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def assert_one_line_error(code: int, err: str, words: str, output) -> None:
    """A command refused with exit code 1 and one line of standard error holding ``words``, leaving no ``output``."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and words in lines[0], err
    assert not pathlib.Path(output).exists()


def fake_model(directory: pathlib.Path, family: str) -> pathlib.Path:
    """A directory whose config.json says it holds a model of ``family`` (and nothing else)."""
    directory.mkdir(exist_ok=True)
    (directory / "config.json").write_text(json.dumps({"format": "sampledlm-model", "family": family, "version": 2}))
    return directory


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


# --- the README's and the docs pages' code blocks ---------------------------------------------------------

#: Placed on the line before a fenced block: the block is not run by the tests, for the reason given.
SKIP_MARK = re.compile(r"^<!--\s*skip-test:\s*(\S.*?)\s*-->$")
#: Placed on the line before a sh block: the block starts a server, run in the background until the page ends.
BACKGROUND_MARK = "<!-- test: background -->"
#: The port the pages' server examples use; the tests give each page a free one in its place.
DOC_PORT = "8080"
RUN_LANGS = {"sh", "bash", "python"}


@dataclass
class Block:
    """A fenced code block of a markdown page: its language, text, first line (1-based) and markers."""

    path: pathlib.Path
    line: int
    lang: str
    code: str
    skip: str | None = None
    background: bool = False


def code_blocks(path: pathlib.Path) -> list[Block]:
    """Every fenced code block of ``path``, indented ones (inside lists and notes) too."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^(\s*)```([\w+-]*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, start = m.group(1), i
        before = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        assert j < len(lines), f"{path}:{start + 1}: code block never closed"
        code = "\n".join(ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[start + 1:j]) + "\n"
        skip = SKIP_MARK.match(before)
        blocks.append(Block(path, start + 1, m.group(2), code, skip.group(1) if skip else None,
                            before == BACKGROUND_MARK))
        i = j + 1
    return blocks


def write_docs_corpus(directory: pathlib.Path) -> pathlib.Path:
    """What the README and the docs pages assume in their working directory: ``train.txt`` (1,000 sentences,
    about 17,000 words of the built-in corpus), ``valid.txt`` and ``test.txt`` (150 each), and ``book.txt`` (running
    text between Project Gutenberg markers, for the raw-text examples)."""
    from sampledlm.data.builtin import builtin_sentences

    sents = [" ".join(s) for s in builtin_sentences()]
    parts = {"train": [s for i, s in enumerate(sents) if i % 10 > 1][:1000],
             "valid": [s for i, s in enumerate(sents) if i % 10 == 1][:150],
             "test": [s for i, s in enumerate(sents) if i % 10 == 0][:150]}
    for name, lines in parts.items():
        (directory / f"{name}.txt").write_text("".join(s + "\n" for s in lines), encoding="utf-8")
    paragraphs = [" ".join(s.capitalize() + "." for s in sents[k:k + 5]) for k in range(0, 400, 5)]
    (directory / "book.txt").write_text(
        "The Project Gutenberg eBook of a Test Book\n\n*** START OF THE PROJECT GUTENBERG EBOOK TEST ***\n\n"
        + "\n\n".join(paragraphs) + "\n\n*** END OF THE PROJECT GUTENBERG EBOOK TEST ***\nLicence text.\n",
        encoding="utf-8")
    return directory


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc, seconds: float = 120) -> None:
    import socket
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the background command exited with {proc.returncode}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"nothing listened on port {port} after {seconds} s")


def run_blocks(blocks: list[Block], cwd: pathlib.Path) -> list[str]:
    """Run the sh, bash and python blocks of one page in order in ``cwd``, as a user would paste them: each sh
    block is one ``bash -e`` script (without pipefail, as in a user's shell: ``| head`` cuts a command short),
    each python block one ``python`` process (stdin empty). ``sampledlm`` and
    ``python`` are this interpreter with this checkout's src/ (and the checkout itself, for ``python -m
    benchmarks``) on the path, whatever is installed; caches go to ``cwd/.cache``; torch uses one thread (the
    test machines' cores are shared, and spinning threads slow it tenfold). Blocks marked skip-test are passed
    over; a block marked background runs until the page's last block has run, and :data:`DOC_PORT` in every
    block is replaced by a free port. Returns the labels of the blocks run."""
    import os
    import signal
    import subprocess
    import sys

    bin_dir = cwd / ".bin"
    bin_dir.mkdir(exist_ok=True)
    for name, argv in (("sampledlm", f'"{sys.executable}" -m sampledlm'), ("python", f'"{sys.executable}"')):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]), "SAMPLEDLM_CACHE": str(cwd / ".cache"),
           "OMP_NUM_THREADS": "1", "no_proxy": "*", "PYTHONUNBUFFERED": "1"}
    port = str(_free_port())
    background, ran = [], []
    try:
        for b in blocks:
            if b.lang not in RUN_LANGS or b.skip is not None:
                continue
            label = f"{b.path.name}:{b.line}"
            code = b.code.replace(DOC_PORT, port)
            script = bin_dir / f"{b.path.stem}-{b.line}.{'py' if b.lang == 'python' else 'sh'}"
            script.write_text(code, encoding="utf-8")
            argv = [sys.executable, str(script)] if b.lang == "python" else ["bash", "-e", str(script)]
            if b.background:
                with open(bin_dir / f"{script.name}.log", "w") as log:
                    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
                background.append(proc)
                _wait_for_port(int(port), proc)
            else:
                r = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=900)  # a hang guard only
                assert r.returncode == 0, f"{label}: block failed ({r.returncode})\n{code}\n{r.stderr[-3000:]}"
                assert "Traceback" not in r.stderr and "sampledlm: error" not in r.stderr, \
                    f"{label}: error\n{r.stderr[-3000:]}"
            ran.append(label)
    finally:
        for proc in background:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return ran
