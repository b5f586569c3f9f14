"""Properties every LanguageModel must have, checked through the public interface only (``load_model`` and
``logprobs``), for every family and every output objective:

- normalisation: for a history h, sum over the vocabulary of P(x | <s> h) = 1 within 1e-6. Computed from id
  streams alone: one sentence ``h x </s>`` per word x (x = </s> is the sentence ``h </s>``), scored with
  ``independent=True``; the log-probability at x's position is ln P(x | <s> h);
- batch invariance: scores do not depend on the evaluation batch size or on which sentences share a batch;
- the ARPA writer: write -> read -> write gives the same bytes.
Histories come from hypothesis (profile ``ci``: tests/conftest.py)."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="property-based tests need hypothesis (the test extra)")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from helpers import write_word_corpus  # noqa: E402

from sampledlm.data.vocab import EOS_ID  # noqa: E402
from sampledlm.loader import load_mixture, load_model  # noqa: E402
from sampledlm.objectives.registry import OBJECTIVES  # noqa: E402

TINY = ["--epochs", "1", "--batch-size", "16", "--threads", "1", "-d", "6"]
# objectives that need more than the defaults on a tiny corpus
EXTRA = {"is": ["--samples", "5"], "css-is": ["--samples", "5"], "css-bernoulli": ["--samples", "5"],
         "nce": ["--samples", "5"], "neg": ["--samples", "5"], "blackout": ["--samples", "5"],
         "ranking": ["--samples", "5"], "adaptive": ["--cutoffs", "8"], "shortlist": None}


def _ok(r):
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """name -> model path: an ARPA model, a maxent model, a feed-forward model per objective, GRUs."""
    import os

    from sampledlm.cli import main

    d = tmp_path_factory.mktemp("props")
    for name, n, seed in (("train", 60, 1), ("valid", 15, 2)):
        write_word_corpus(d / f"{name}.txt", n, seed)

    def run(*args):
        old = os.getcwd()
        os.chdir(d)
        try:
            main(list(args))
        except SystemExit as e:
            assert e.code == 0, args
        finally:
            os.chdir(old)

    out = {"kn3": str(d / "kn3.arpa"), "maxent": str(d / "melm")}
    run("ngram", "train", "--train", "train.txt", "--order", "3", "-o", "kn3.arpa")
    run("maxent", "train", "--train", "train.txt", "--valid", "valid.txt", "-o", "melm", "--epochs", "1")
    for obj in OBJECTIVES:
        if EXTRA.get(obj, []) is None:  # needs a companion model (short-list + back-off): tested in its own file
            continue
        run("train", "--train", "train.txt", "--valid", "valid.txt", "--model", "ffnn", "--order", "3", "--hidden",
            "8", "--objective", obj, *EXTRA.get(obj, []), *TINY, "-o", f"ffnn-{obj}")
        out[f"ffnn-{obj}"] = str(d / f"ffnn-{obj}")
    for obj in ("softmax", "css-is", "class", "hsm"):
        if obj in OBJECTIVES:
            run("train", "--train", "train.txt", "--valid", "valid.txt", "--model", "gru", "--hidden", "6",
                "--objective", obj, *EXTRA.get(obj, []), *TINY, "--bptt", "5", "-o", f"gru-{obj}")
            out[f"gru-{obj}"] = str(d / f"gru-{obj}")
    return out


def next_word_logprobs(lm, history: list[int]) -> np.ndarray:
    """ln P(x | <s> history) for every x of the vocabulary, from id streams."""
    V = len(lm.vocab)
    sents = [np.array(history + ([x, EOS_ID] if x != EOS_ID else [EOS_ID]), dtype=np.int32) for x in range(V)]
    lp = lm.logprobs(np.concatenate(sents), independent=True)
    starts = np.concatenate([[0], np.cumsum([len(s) for s in sents])[:-1]])
    return lp[starts + len(history)]


HISTORIES = st.lists(st.integers(2, 200), max_size=4)  # word ids (clipped to V below); <unk> is id 1


def check_sums_to_one(lm, raw_history):
    V = len(lm.vocab)
    history = [2 + h % (V - 2) for h in raw_history]
    lp = next_word_logprobs(lm, history)
    total = float(np.exp(np.asarray(lp, dtype=np.float64)).sum())
    assert abs(total - 1) < 1e-6, (lm.describe(), history, total)


@pytest.mark.parametrize("name", ["kn3", "maxent"] + [f"ffnn-{o}" for o in OBJECTIVES if EXTRA.get(o, []) is not None]
                         + [f"gru-{o}" for o in ("softmax", "css-is", "class", "hsm") if o in OBJECTIVES])
@given(raw=HISTORIES)
def test_next_word_probabilities_sum_to_one(models, name, raw):
    check_sums_to_one(_load(models[name]), raw)


@given(raw=HISTORIES)
def test_a_mixture_sums_to_one(models, raw):
    check_sums_to_one(_mixture(models["kn3"], models["ffnn-softmax"], models["maxent"]), raw)


_CACHE: dict = {}


def _load(path):
    if path not in _CACHE:
        _CACHE[path] = load_model(path)
    return _CACHE[path]


def _mixture(*paths):
    key = paths
    if key not in _CACHE:
        _CACHE[key] = load_mixture(list(paths), [0.5, 0.3, 0.2])
    return _CACHE[key]


@pytest.mark.parametrize("name", ["ffnn-softmax", "gru-softmax", "gru-class"])
@given(sents=st.lists(st.lists(st.integers(0, 200), min_size=0, max_size=7), min_size=1, max_size=9),
       batch=st.integers(1, 6))
def test_scores_do_not_depend_on_the_batch(models, name, sents, batch):
    """Independent sentences scored together, in any batch size, score as each does alone."""
    from sampledlm.neural.lm import NeuralLM

    lm = _load(models[name])
    V = len(lm.vocab)
    ids = [np.array([2 + w % (V - 2) for w in s] + [EOS_ID], dtype=np.int32) for s in sents]
    together = lm.logprobs(np.concatenate(ids), independent=True)
    alone = np.concatenate([lm.logprobs(s, independent=True) for s in ids])
    np.testing.assert_allclose(together, alone, atol=1e-5, rtol=0)
    assert isinstance(lm, NeuralLM)
    old, lm.batch_size = lm.batch_size, batch
    try:
        np.testing.assert_allclose(lm.logprobs(np.concatenate(ids), independent=True), together, atol=1e-5, rtol=0)
    finally:
        lm.batch_size = old


@given(sents=st.lists(st.lists(st.sampled_from("a b c d e f".split()), min_size=1, max_size=6), min_size=1,
                      max_size=20),
       order=st.integers(1, 4), smoothing=st.sampled_from(["mkn", "kn", "wb", "katz", "addk"]))
def test_arpa_write_read_write_is_byte_identical(tmp_path_factory, sents, order, smoothing):
    from sampledlm.data.vocab import Vocab
    from sampledlm.ngram import read_arpa, train_ngram, write_arpa
    from helpers import encode_sentences

    vocab = Vocab.from_sentences(sents)
    lm = train_ngram(encode_sentences(vocab, sents), vocab, order, smoothing)
    d = tmp_path_factory.mktemp("arpa")
    write_arpa(lm, str(d / "a.arpa"))
    write_arpa(read_arpa(str(d / "a.arpa"), cache=False), str(d / "b.arpa"))
    assert (d / "a.arpa").read_bytes() == (d / "b.arpa").read_bytes()
