"""Property-based tests of the ARPA reader: mutations of a valid file (truncation, lost, repeated, swapped or
inserted lines, sections out of order, wrong counts, bad numbers, a lower-order entry missing) and arbitrary
bytes either read as a usable model or stop with a UserError naming the file; never another exception.

A model the reader accepts must score text with finite log-probabilities no greater than 0."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="property-based tests need hypothesis (the test extra)")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from helpers import encode_sentences, synthetic_sentences  # noqa: E402

from sampledlm.errors import UserError  # noqa: E402
from sampledlm.ngram import read_arpa, train_ngram, write_arpa  # noqa: E402
from sampledlm.data.vocab import Vocab  # noqa: E402

BAD_NUMBERS = ["nan", "inf", "-inf", "1.5", "abc", "", "1e999", "-1e999", "0x10", "--1"]


@pytest.fixture(scope="module")
def valid_arpa(tmp_path_factory) -> list[str]:
    sents = synthetic_sentences(40, vocab_size=12, seed=3)
    vocab = Vocab.from_sentences(sents)
    path = tmp_path_factory.mktemp("arpa") / "k3.arpa"
    write_arpa(train_ngram(encode_sentences(vocab, sents), vocab, 3), str(path))
    return path.read_text().split("\n")


@st.composite
def mutations(draw, n_lines: int):
    kinds = ["truncate", "delete", "duplicate", "swap", "number", "count", "insert", "sections", "bytes"]
    return [(draw(st.sampled_from(kinds)), draw(st.integers(0, n_lines - 1)), draw(st.integers(0, n_lines - 1)),
             draw(st.sampled_from(BAD_NUMBERS)), draw(st.integers(-5, 10**20)),
             draw(st.text(max_size=30)), draw(st.binary(max_size=20)))
            for _ in range(draw(st.integers(1, 3)))]


def mutate(lines: list[str], ops) -> bytes:
    lines = list(lines)
    for kind, i, j, bad, count, text, raw in ops:
        i, j = i % len(lines), j % len(lines)
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "number":
            fields = lines[i].split("\t")
            fields[j % len(fields)] = bad
            lines[i] = "\t".join(fields)
        elif kind == "count":
            heads = [k for k, ln in enumerate(lines) if ln.startswith("ngram ")]
            k = heads[i % len(heads)] if heads else i
            lines[k] = f"{lines[k].split('=')[0]}={count}"
        elif kind == "insert":
            lines.insert(i, text)
        elif kind == "sections":  # move the section that starts at a header line (or any line) before another
            starts = [k for k, ln in enumerate(lines) if ln.endswith("-grams:")] or [i]
            a = starts[i % len(starts)]
            end = next((k for k in range(a + 1, len(lines)) if lines[k].endswith("-grams:") or lines[k] == "\\end\\"),
                       len(lines))
            block = lines[a:end]
            del lines[a:end]
            lines[j % (len(lines) or 1):j % (len(lines) or 1)] = block
        if not lines:
            lines = [""]
    data = "\n".join(lines).encode("utf-8", errors="surrogatepass")
    for kind, i, j, bad, count, text, raw in ops:
        if kind == "truncate":
            data = data[: i * len(data) // max(len(lines), 1)]
        elif kind == "bytes":
            k = (i * 37) % (len(data) + 1)
            data = data[:k] + raw + data[k:]
    return data


def read_or_error(path) -> None:
    try:
        lm = read_arpa(str(path), cache=False)
    except UserError as e:
        assert str(e).startswith(str(path)), e
        return
    words = [w for w in lm.words if w not in ("<s>", "</s>")][:12]
    vocab = Vocab.from_sentences([words + ["never-in-the-model"]])
    ids = encode_sentences(vocab, [words[i:] + words[:i] + ["never-in-the-model"] for i in range(len(words))])
    lp = np.asarray(lm.stream_logprobs(ids, vocab), dtype=np.float64)
    assert np.isfinite(lp).all() and (lp <= 1e-9).all(), lp


@given(data=st.data())
def test_mutated_arpa_files_read_or_name_the_file(valid_arpa, tmp_path_factory, data):
    ops = data.draw(mutations(len(valid_arpa)))
    path = tmp_path_factory.mktemp("m") / "m.arpa"
    path.write_bytes(mutate(valid_arpa, ops))
    read_or_error(path)


@given(raw=st.binary(max_size=400))
def test_arbitrary_bytes_as_an_arpa_file(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("b") / "b.arpa"
    path.write_bytes(raw)
    read_or_error(path)
