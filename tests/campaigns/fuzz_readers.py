"""The readers of outside files that ``python -m benchmarks fuzz`` attacks, each with a maker of valid inputs and oracles.

A :class:`Reader` writes a valid input of its format (``make``), reads a path (``read``), says what is wrong
with a result it accepted (``check``: an invariant every usable result satisfies, ``None`` when it holds) and
whether an unmutated input read back to what was written (``same``). For the corpus reader the oracle is
exact: any valid UTF-8 must read as the reading rules written independently here say (:func:`reference_sentences`).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

WORDS = ["a", "b", "the", "café", "中文", "x1", "<unk>", "<s>", "</s>"]
BREAKS = ["\n", "\r\n", "\r"]


@dataclass(frozen=True)
class Reader:
    name: str
    what: str  # the format, for the page
    make: Callable[[str, random.Random], tuple[str, Any]]  # (directory, rng) -> (input path, reference)
    read: Callable[[str], Any]
    check: Callable[[Any], str | None]
    same: Callable[[Any, Any], bool]
    victims: Callable[[str], list[str]] = lambda path: [path]  # the files of an input that mutations may hit
    #: a damaged input that reads must still give what was written (model files: a checksum guards the weights,
    #: and a configuration that loads must describe the same model)
    strict: bool = False


# --- corpora and vocabularies --------------------------------------------------------------------------------
def reference_sentences(text: str) -> list[list[str]]:
    """The reading rules: drop a BOM, split lines on LF, CRLF or CR, words on whitespace, drop <s> and </s>,
    skip empty lines."""
    text = text[1:] if text.startswith("\ufeff") else text
    sents = [[w for w in line.split() if w not in ("<s>", "</s>")] for line in re.split(r"\r\n|\r|\n", text)]
    return [s for s in sents if s]


def _make_corpus(d: str, rng: random.Random):
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 7))) for _ in range(rng.randint(1, 12))]
    text = "".join(ln + rng.choice(BREAKS) for ln in lines)
    path = os.path.join(d, "corpus.txt")
    with open(path, "wb") as f:
        f.write(text.encode("utf-8"))
    return path, reference_sentences(text)


def _read_corpus(path: str):
    from sampledlm.data.corpus import count_words, load_ids
    from sampledlm.data.vocab import Vocab

    wc = count_words(path)
    if not wc.sentences:
        return []
    vocab = Vocab.from_counts(wc.counts, wc.sentences)
    words = vocab.decode(load_ids(path, vocab, cache=False).tolist())
    sents, cur = [], []
    for w in words:
        if w == "</s>":
            sents.append(cur)
            cur = []
        else:
            cur.append(w)
    return sents


def _corpus_oracle(path: str) -> list[list[str]] | None:
    """What the file must read as, when it is valid UTF-8 (None when it is not: then an error is right)."""
    try:
        with open(path, "rb") as f:
            return reference_sentences(f.read().decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _make_vocab(d: str, rng: random.Random):
    from sampledlm.data.vocab import Vocab

    words = rng.sample([w for w in WORDS if w not in ("<s>", "</s>", "<unk>")] + [f"w{i}" for i in range(20)],
                       rng.randint(1, 10))
    vocab = Vocab.from_counts({w: rng.randint(1, 100) for w in words}, 5)
    path = os.path.join(d, "vocab.txt")
    vocab.save(path)
    return path, vocab.words


def _check_vocab(v) -> str | None:
    if v.words[:2] != ["</s>", "<unk>"]:
        return f"the first ids are {v.words[:2]}, not </s> <unk>"
    if len(set(v.words)) != len(v.words):
        return "a word appears twice"
    if any(not w or any(c.isspace() for c in w) for w in v.words):
        return "an empty word or one with white space"
    return None


# --- ARPA ----------------------------------------------------------------------------------------------------
def _make_arpa(d: str, rng: random.Random):
    from sampledlm.data.vocab import Vocab
    from sampledlm.ngram import train_ngram, write_arpa

    sents = [[f"w{rng.randrange(12)}" for _ in range(rng.randint(1, 8))] for _ in range(rng.randint(5, 30))]
    vocab = Vocab.from_sentences(sents)
    ids = np.array([i for s in sents for i in (*vocab.encode(s), 0)], dtype=np.int64)
    path = os.path.join(d, "lm.arpa")
    write_arpa(train_ngram(ids, vocab, rng.randint(1, 3)), path)
    with open(path, "rb") as f:
        return path, f.read()


def _read_arpa(path: str):
    from sampledlm.ngram import read_arpa
    from sampledlm.ngram.lm import ArpaLM

    return ArpaLM(read_arpa(path, cache=False), path)


def _check_lm(lm) -> str | None:
    """Any accepted model scores text with finite log-probabilities <= 0."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, len(lm.vocab), 40)
    ids[-1] = 0
    lp = lm.logprobs(ids)
    if not np.all(np.isfinite(lp)) or np.any(lp > 1e-9):
        return f"log-probabilities not finite or above 0: {lp[~np.isfinite(lp) | (lp > 1e-9)][:3]}"
    return None


def _arpa_same(lm, original: bytes) -> bool:
    import tempfile

    from sampledlm.ngram import write_arpa

    with tempfile.TemporaryDirectory() as t:
        write_arpa(lm.ngram, os.path.join(t, "again.arpa"))
        with open(os.path.join(t, "again.arpa"), "rb") as f:
            return f.read() == original


# --- model directories (config.json, safetensors) ------------------------------------------------------------
_TEMPLATE: dict[str, Any] = {}


def _template_model() -> tuple[str, np.ndarray]:
    """A tiny feed-forward LM trained once (one epoch on a made-up corpus) by the ``train`` command, kept for the
    whole campaign; each case works on a copy."""
    if "dir" not in _TEMPLATE:
        import contextlib
        import io
        import tempfile

        from sampledlm.cli import main
        from sampledlm.loader import load_model

        import atexit
        import shutil

        d = tempfile.mkdtemp(prefix="sampledlm-fuzz-model-")
        atexit.register(shutil.rmtree, d, True)  # the template outlives every case; gone with the process
        rng = random.Random(0)
        for name, n in (("train", 60), ("valid", 10)):
            with open(os.path.join(d, f"{name}.txt"), "w") as f:
                f.writelines(" ".join(f"w{rng.randrange(12)}" for _ in range(rng.randint(1, 8))) + "\n"
                             for _ in range(n))
        argv = ["train", "--train", f"{d}/train.txt", "--valid", f"{d}/valid.txt", "--order", "3", "-d", "4",
                "--hidden", "5", "--epochs", "1", "--threads", "1", "-o", f"{d}/model"]
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            try:
                main(argv)
            except SystemExit as e:
                if e.code:
                    raise RuntimeError(f"training the fuzz campaign's model failed: {argv}") from None
        _TEMPLATE["dir"] = f"{d}/model"
        _TEMPLATE["ref"] = load_model(f"{d}/model").logprobs(MODEL_IDS)
    return _TEMPLATE["dir"], _TEMPLATE["ref"]


MODEL_IDS = np.array([2, 3, 4, 0, 5, 6, 0], dtype=np.int64)


def _make_model(d: str, rng: random.Random):
    import shutil

    template, ref = _template_model()
    out = os.path.join(d, "model")
    shutil.copytree(template, out, ignore=shutil.ignore_patterns("checkpoints"))
    return out, ref


def _read_model(path: str):
    from sampledlm.loader import load_model

    return load_model(path)


def _model_same(lm, reference) -> bool:
    return bool(np.allclose(lm.logprobs(MODEL_IDS), reference))


def _check_model(lm) -> str | None:
    problem = _check_lm(lm)
    if problem:
        return problem
    p = np.exp(lm.next_logprobs([2, 3]))
    if not math.isclose(float(p.sum()), 1.0, abs_tol=1e-5):
        return f"next-word probabilities sum to {p.sum():.6f}"
    return None


# --- n-best lists and lattices -------------------------------------------------------------------------------
def _random_lists(rng: random.Random):
    from sampledlm.use.nbest import Hypothesis, NBest

    return [NBest(f"utt{u}", [Hypothesis([rng.choice(WORDS[:6]) for _ in range(rng.randint(0, 5))],
                                         round(-rng.uniform(1, 50), 4), round(-rng.uniform(1, 20), 4))
                              for _ in range(rng.randint(1, 4))]) for u in range(rng.randint(1, 3))]


def _make_nbest(fmt: str):
    def make(d: str, rng: random.Random):
        from sampledlm.use.nbest import write_nbest

        lists = _random_lists(rng)
        path = os.path.join(d, "lists.jsonl" if fmt == "jsonl" else fmt)
        write_nbest(path, lists, fmt)
        return path, [(nb.id, [(h.words, h.am, h.lm) for h in nb.hyps]) for nb in lists]
    return make


def _read_nbest(fmt: str):
    def read(path: str):
        from sampledlm.use.nbest import read_nbest

        return read_nbest(path, fmt)
    return read


def _nbest_same(lists, reference) -> bool:
    got = [(nb.id, [(h.words, h.am, h.lm) for h in nb.hyps]) for nb in lists]
    return len(got) == len(reference) and all(
        a[0] == b[0] and len(a[1]) == len(b[1]) and all(
            x[0] == y[0] and math.isclose(x[1], y[1], rel_tol=1e-9) and math.isclose(x[2], y[2], rel_tol=1e-9)
            for x, y in zip(a[1], b[1])) for a, b in zip(got, reference))


def _check_nbest(lists) -> str | None:
    if not lists:
        return "no lists"
    for nb in lists:
        if not nb.hyps:
            return f"{nb.id}: no hypotheses"
        for h in nb.hyps:
            if not (math.isfinite(h.am) and math.isfinite(h.lm)):
                return f"{nb.id}: a score is not finite"
            if not all(isinstance(w, str) and w and not any(c.isspace() for c in w) for w in h.words):
                return f"{nb.id}: an empty word or one with white space"
    return None


def _files_of(path: str) -> list[str]:
    return [os.path.join(path, n) for n in sorted(os.listdir(path))] if os.path.isdir(path) else [path]


def _make_lattice(d: str, rng: random.Random):
    from sampledlm.use.slf import Lattice, Link, write_slf

    nodes = rng.randint(2, 6)
    links = [Link(i, i + 1, rng.choice(WORDS[:6]), -round(rng.uniform(1, 5), 3), -round(rng.uniform(1, 3), 3))
             for i in range(nodes - 1)]
    for _ in range(rng.randint(0, 4)):
        a = rng.randrange(nodes - 1)
        links.append(Link(a, rng.randrange(a + 1, nodes), None if rng.random() < 0.2 else rng.choice(WORDS[:6]),
                          -round(rng.uniform(1, 5), 3), -round(rng.uniform(1, 3), 3)))
    path = os.path.join(d, "a.slf")
    write_slf(path, Lattice("a", nodes, links))
    return path, [(k.start, k.end, k.word, k.am, k.lm) for k in links]


def _read_lattice(path: str):
    from sampledlm.use.slf import read_lattices

    return read_lattices(path)


def _lattice_same(lats, reference) -> bool:
    got = [(k.start, k.end, k.word, k.am, k.lm) for k in lats[0].links]
    return len(lats) == 1 and len(got) == len(reference) and all(
        a[:3] == b[:3] and math.isclose(a[3], b[3]) and math.isclose(a[4], b[4]) for a, b in zip(got, reference))


def _check_lattice(lats) -> str | None:
    from sampledlm.errors import UserError
    from sampledlm.use.lattice import best_path, nbest

    for lat in lats:
        if not (0 <= lat.start < lat.num_nodes and 0 <= lat.end < lat.num_nodes):
            return "start or end node out of range"
        for k in lat.links:
            if not (0 <= k.start < lat.num_nodes and 0 <= k.end < lat.num_nodes):
                return "a link's node out of range"
            if not (math.isfinite(k.am) and math.isfinite(k.lm)):
                return "a link's score is not finite"
        try:  # what comes next: the best path and a short n-best list (no complete path is a clean error)
            best_path(lat)
            nbest(lat, 3)
        except UserError:
            pass
    return None


# --- word2vec files ------------------------------------------------------------------------------------------
def _make_word2vec(binary: bool):
    def make(d: str, rng: random.Random):
        from sampledlm.embed.formats import save_vectors
        from sampledlm.embed.vectors import WordVectors

        words = rng.sample([w for w in WORDS if w not in ("<s>", "</s>")] + [f"w{i}" for i in range(20)],
                           rng.randint(1, 8))
        vectors = np.asarray([[rng.uniform(-1, 1) for _ in range(4)] for _ in words], dtype=np.float32)
        path = os.path.join(d, "vectors.bin" if binary else "vectors.txt")
        save_vectors(path, WordVectors(words, vectors), binary=binary)
        return path, (words, vectors)
    return make


def _read_word2vec(path: str):
    from sampledlm.embed.formats import load_vectors

    return load_vectors(path)


def _word2vec_same(wv, reference) -> bool:
    words, vectors = reference
    return wv.words == words and np.array_equal(wv.vectors, vectors)


def _check_word2vec(wv) -> str | None:
    if not len(wv.words) or wv.vectors.ndim != 2 or wv.vectors.shape[0] != len(wv.words) or wv.vectors.shape[1] < 1:
        return f"{len(wv.words)} words, vectors of shape {wv.vectors.shape}"
    if not np.all(np.isfinite(wv.vectors)):
        return "a vector value is not finite"
    if any(not w or any(c.isspace() for c in w) for w in wv.words):
        return "an empty word or one with white space"
    return None


def _model_victims(path: str) -> list[str]:
    return [os.path.join(path, "config.json")]


def _weights_victims(path: str) -> list[str]:
    return [os.path.join(path, "model.safetensors")]


READERS: list[Reader] = [
    Reader("corpus", "text, one sentence per line", _make_corpus, _read_corpus, lambda r: None, lambda a, b: a == b),
    Reader("vocabulary", "word<TAB>count lines", _make_vocab, lambda p: __import__(
        "sampledlm.data.vocab", fromlist=["Vocab"]).Vocab.load(p), _check_vocab, lambda v, words: v.words == words),
    Reader("ARPA", "back-off n-gram model", _make_arpa, _read_arpa, _check_lm, _arpa_same),
    Reader("config.json", "model directory: its configuration", _make_model, _read_model, _check_model, _model_same,
           _model_victims, strict=True),
    Reader("safetensors", "model directory: its weights", _make_model, _read_model, _check_model, _model_same,
           _weights_victims, strict=True),
    Reader("n-best srilm", "SRILM n-best files", _make_nbest("srilm"), _read_nbest("srilm"), _check_nbest,
           _nbest_same, _files_of),
    Reader("n-best kaldi", "Kaldi text/ac_cost/lm_cost", _make_nbest("kaldi"), _read_nbest("kaldi"), _check_nbest,
           _nbest_same, _files_of),
    Reader("n-best jsonl", "JSON lines", _make_nbest("jsonl"), _read_nbest("jsonl"), _check_nbest, _nbest_same),
    Reader("SLF lattice", "HTK standard lattice format", _make_lattice, _read_lattice, _check_lattice,
           _lattice_same),
    Reader("word2vec text", "word vectors, word2vec -binary 0", _make_word2vec(False), _read_word2vec,
           _check_word2vec, _word2vec_same),
    Reader("word2vec binary", "word vectors, word2vec -binary 1", _make_word2vec(True), _read_word2vec,
           _check_word2vec, _word2vec_same),
]

#: readers whose result has an exact oracle for any valid UTF-8 input (not only the unmutated one)
ORACLES: dict[str, Callable[[str], Any]] = {"corpus": _corpus_oracle}


def json_safe(obj):
    return json.loads(json.dumps(obj, default=str))
