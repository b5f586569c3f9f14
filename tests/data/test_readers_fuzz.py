"""Property-based tests of the text readers (corpora and vocabulary files): any bytes either read correctly or
stop with a UserError naming the file (and the line, for bad UTF-8); never another exception.

The number of examples comes from the hypothesis profile (tests/conftest.py: ``ci`` by default,
``SAMPLEDLM_HYPOTHESIS=nightly`` for a long run)."""

from __future__ import annotations

import re

import pytest
hypothesis = pytest.importorskip("hypothesis", reason="property-based tests need hypothesis (the test extra)")
from hypothesis import given
from hypothesis import strategies as st

from sampledlm.data import textio
from sampledlm.data.corpus import count_words, load_ids
from sampledlm.data.vocab import Vocab
from sampledlm.errors import UserError

# words the generator draws from: plain, accented, CJK, the sentence markers, and a word with a digit
WORDS = ["a", "b", "the", "café", "中文", "<s>", "</s>", "x1", "<unk>"]
SPACES = [" ", "  ", "\t", " \t "]
BREAKS = ["\n", "\r\n", "\r"]


@st.composite
def texts(draw):
    """A corpus as lines of words with mixed separators and line ends, maybe a BOM and a missing final break."""
    lines = draw(st.lists(st.lists(st.sampled_from(WORDS), max_size=6), max_size=12))
    out = []
    for words in lines:
        sep = draw(st.sampled_from(SPACES))
        lead, trail = draw(st.sampled_from(["", " "])), draw(st.sampled_from(["", "\t"]))
        out.append(lead + sep.join(words) + trail + draw(st.sampled_from(BREAKS)))
    text = "".join(out)
    if text and draw(st.booleans()):
        text = text.rstrip("\r\n")
    bom = draw(st.booleans())
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")


def reference_sentences(data: bytes) -> list[list[str]]:
    """The reading rules, written independently: drop a BOM, split on LF, CRLF or CR, split words on whitespace,
    drop literal <s> and </s>, skip lines with no words."""
    text = data.decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split(r"\r\n|\r|\n", text)
    sents = [[w for w in line.split() if w not in ("<s>", "</s>")] for line in lines]
    return [s for s in sents if s]


def names_file(e: UserError, path) -> bool:
    return str(e).startswith(str(path))


@given(data=texts(), chunk=st.integers(4, 64))
def test_well_formed_text_reads_as_the_reference_at_any_chunk_size(tmp_path_factory, data, chunk):
    path = tmp_path_factory.mktemp("t") / "corpus.txt"
    path.write_bytes(data)
    ref = reference_sentences(data)
    old, textio.CHUNK_BYTES = textio.CHUNK_BYTES, chunk  # chunk edges may fall inside a CRLF or a UTF-8 character
    try:
        if not ref:
            return
        wc = count_words(str(path))
        assert wc.sentences == len(ref) and wc.tokens == sum(map(len, ref))
        vocab = Vocab.from_counts(wc.counts, wc.sentences)
        ids = load_ids(str(path), vocab, cache=False)
        assert vocab.decode(ids.tolist()) == [w for s in ref for w in (*s, "</s>")]
    finally:
        textio.CHUNK_BYTES = old


@given(data=st.binary(max_size=300), chunk=st.integers(4, 64))
def test_any_bytes_read_or_stop_with_an_error_naming_the_file(tmp_path_factory, data, chunk):
    path = tmp_path_factory.mktemp("t") / "corpus.txt"
    path.write_bytes(data)
    old, textio.CHUNK_BYTES = textio.CHUNK_BYTES, chunk
    try:
        try:
            wc = count_words(str(path))
        except UserError as e:
            assert names_file(e, path), e
            if "invalid UTF-8" in str(e):  # the line named is the line of the first bad byte
                body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
                good = body[: UnicodeDecodeErrorAt(body)]
                want = len(re.findall(rb"\r\n|\r|\n", good)) + 1
                assert f"{path}:{want}:" in str(e), (str(e), want)
            return
        ref = reference_sentences(data)
        assert wc.sentences == len(ref) and wc.tokens == sum(map(len, ref))
    finally:
        textio.CHUNK_BYTES = old


def UnicodeDecodeErrorAt(data: bytes) -> int:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start
    return len(data)


@given(data=st.binary(max_size=200))
def test_any_bytes_as_a_vocabulary_file(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("v") / "vocab.txt"
    path.write_bytes(data)
    try:
        v = Vocab.load(str(path))
    except UserError as e:
        assert names_file(e, path), e
        return
    assert v.words[:2] == ["</s>", "<unk>"] and len(set(v.words)) == len(v.words)


@st.composite
def vocab_lines(draw):
    """Vocabulary files as users write them: word<TAB>count, bare words, blank lines, bad counts, extra tabs."""
    lines = []
    for _ in range(draw(st.integers(0, 10))):
        word = draw(st.sampled_from(WORDS + ["", " a", "b "]))
        form = draw(st.sampled_from(["count", "bare", "blank", "badcount", "tabs", "negative"]))
        lines.append({"count": f"{word}\t{draw(st.integers(0, 10**6))}", "bare": word, "blank": "",
                      "badcount": f"{word}\t1.5", "tabs": f"{word}\t1\t2", "negative": f"{word}\t-3"}[form])
    return lines


@given(lines=vocab_lines(), end=st.sampled_from(BREAKS))
def test_vocabulary_files_load_as_written_or_name_the_line(tmp_path_factory, lines, end):
    path = tmp_path_factory.mktemp("v") / "vocab.txt"
    path.write_text(end.join(lines), newline="")
    try:
        v = Vocab.load(str(path))
    except UserError as e:
        if str(e) == f"{path}: empty vocabulary file":  # the file as a whole: no word in it (<s> is not one)
            assert not any(ln.strip() and ln.split("\t")[0] != "<s>" for ln in lines)
            return
        assert re.match(re.escape(str(path)) + r":\d+: ", str(e)), e
        n = int(str(e)[len(str(path)) + 1:].split(":")[0])
        assert 1 <= n <= len(lines)
        return
    words = [ln.split("\t")[0] for ln in lines if ln.strip()]  # accepted: ids in file order after the specials
    assert v.words == ["</s>", "<unk>"] + [w for w in words if w not in ("</s>", "<unk>", "<s>")]


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
