"""Regression tests for text reading and writing: stdin read once, line ends, BOM, sentence markers,
compressed files, content-keyed corpus cache, full disk, file permissions."""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import os
import stat
import sys

import numpy as np
import pytest

import sampledlm.data.textio as textio
from sampledlm.data.corpus import build_vocab, count_words, encode_file, load_ids
from sampledlm.data.textio import atomic_write, iter_lines
from sampledlm.data.tokenizer import TextOptions, iter_sentences
from sampledlm.data.vocab import Vocab
from sampledlm.errors import UserError

TEXT = "the cat sat\non the mat\nthe dog\n"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))


def fake_stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


# --- 3: standard input is read once, every reader sees all of it --------------------------------
def test_stdin_can_be_read_twice(monkeypatch, tmp_path):
    fake_stdin(monkeypatch, TEXT.encode())
    (tmp_path / "t.txt").write_text(TEXT)
    assert count_words("-").sentences == 3
    vocab = build_vocab("-")  # a second pass over stdin
    assert len(vocab) == 2 + 6  # </s>, <unk>, the cat sat on mat dog
    ids = load_ids("-", vocab)  # and a third
    np.testing.assert_array_equal(ids, encode_file(str(tmp_path / "t.txt"), vocab))
    assert list(iter_lines("-")) == TEXT.splitlines()


def test_new_stdin_is_read_afresh(monkeypatch):
    fake_stdin(monkeypatch, b"a b\n")
    assert list(iter_sentences("-")) == [["a", "b"]]
    fake_stdin(monkeypatch, b"c\nd\n")
    assert list(iter_sentences("-")) == [["c"], ["d"]]


# --- 6: line ends, byte-order mark, literal sentence markers ------------------------------------
def test_cr_crlf_lf_line_ends_and_bom(tmp_path):
    p = tmp_path / "mixed.txt"
    p.write_bytes(b"\xef\xbb\xbfa b\rc d\r\ne\nf\r")
    assert list(iter_lines(str(p))) == ["a b", "c d", "e", "f"]
    assert list(iter_sentences(str(p))) == [["a", "b"], ["c", "d"], ["e"], ["f"]]
    assert list(iter_sentences(str(p), TextOptions(lowercase=True))) == [["a", "b"], ["c", "d"], ["e"], ["f"]]


def test_lone_cr_file_is_many_sentences(tmp_path):
    p = tmp_path / "mac.txt"
    p.write_bytes(TEXT.replace("\n", "\r").encode())
    assert count_words(str(p)).sentences == 3


def test_crlf_split_across_chunks_gives_no_extra_line(tmp_path, monkeypatch):
    monkeypatch.setattr(textio, "CHUNK_BYTES", 4)
    p = tmp_path / "crlf.txt"
    p.write_bytes(b"abc\r\ndefgh\r\n\r\nij\rk")
    assert list(iter_lines(str(p))) == ["abc", "defgh", "", "ij", "k"]
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a\rb\r\nc\r\xff\n")
    with pytest.raises(UserError, match=r"bad\.txt:4: invalid UTF-8"):
        list(iter_lines(str(bad)))


def test_bom_is_not_glued_to_the_first_word(tmp_path):
    p = tmp_path / "bom.txt"
    p.write_bytes(b"\xef\xbb\xbfthe cat\nthe\n")
    vocab = build_vocab(str(p))
    assert vocab.words[2] == "the" and "\ufeffthe" not in vocab


def test_literal_sentence_markers_are_dropped(tmp_path):
    p = tmp_path / "markers.txt"
    p.write_text("<s> a b </s>\na </s> b\n<s>\n</s> <s>\na<s> b</s>\n")
    want = [["a", "b"], ["a", "b"], ["a<s>", "b</s>"]]  # marker-only lines are blank; markers inside words stay
    assert list(iter_sentences(str(p))) == want
    assert list(iter_sentences(str(p), TextOptions(gutenberg=True))) == want  # the general path agrees
    vocab = Vocab.from_sentences(want)
    ids = load_ids(str(p), vocab)
    assert int((ids == 0).sum()) == 3  # one </s> per line with words, none from the literal markers


# --- 4: compressed input and output --------------------------------------------------------------
def test_bz2_input_and_compression_recognised_by_content(tmp_path):
    (tmp_path / "t.txt.bz2").write_bytes(bz2.compress(TEXT.encode()))
    (tmp_path / "gz-content.txt").write_bytes(gzip.compress(TEXT.encode()))
    (tmp_path / "plain-named.gz").write_text(TEXT)  # a misnamed plain file reads as plain text, as in KenLM
    for name in ("t.txt.bz2", "gz-content.txt", "plain-named.gz"):
        assert list(iter_lines(str(tmp_path / name))) == TEXT.splitlines(), name


@pytest.mark.parametrize("damage", ["truncate", "flip"])
@pytest.mark.parametrize("kind", ["gz", "bz2", "xz"])
def test_corrupt_compressed_input_is_a_one_line_error(tmp_path, kind, damage):
    comp = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind]
    data = bytearray(comp(("word%d " % 7 * 50 + "\n").encode() * 2000))
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        mid = len(data) // 2
        data[mid : mid + 16] = bytes(16)
    p = tmp_path / f"bad.txt.{kind}"
    p.write_bytes(bytes(data))
    with pytest.raises(UserError) as e:
        list(iter_lines(str(p)))
    msg = str(e.value)
    assert f"bad.txt.{kind}" in msg and "\n" not in msg


def test_gzip_with_a_bad_deflate_stream_is_a_user_error(tmp_path):
    """The damage that made zlib raise zlib.error (not an OSError) used to escape as a traceback."""
    import zlib

    good = gzip.compress(TEXT.encode() * 200, mtime=0)
    for pos in range(10, len(good)):
        bad = bytearray(good)
        bad[pos] ^= 0x10
        try:
            gzip.decompress(bytes(bad))
        except zlib.error:
            break
        except (OSError, EOFError):
            continue
    else:
        pytest.skip("no single-bit damage makes zlib raise zlib.error here")
    p = tmp_path / "bad.txt.gz"
    p.write_bytes(bytes(bad))
    with pytest.raises(UserError, match=r"bad\.txt\.gz: cannot read"):
        list(iter_lines(str(p)))


@pytest.mark.parametrize("suffix, opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_atomic_write_compresses_by_name(tmp_path, suffix, opener):
    p = tmp_path / f"out.txt{suffix}"
    with atomic_write(str(p)) as f:
        f.write(TEXT)
    assert textio.compression_of(p.read_bytes()[:10]) == suffix[1:]
    with opener(p, "rt") as f:
        assert f.read() == TEXT
    assert list(iter_lines(str(p))) == TEXT.splitlines()
    with atomic_write(str(p), "wb") as f:
        f.write(b"bytes\n")
    with opener(p, "rb") as f:
        assert f.read() == b"bytes\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == [p.name]


def test_vocab_round_trips_through_gzip(tmp_path):
    v = Vocab.from_sentences([["a", "b", "b"]])
    v.save(str(tmp_path / "v.tsv.gz"))
    assert gzip.decompress((tmp_path / "v.tsv.gz").read_bytes()).startswith(b"</s>\t1\n")
    assert Vocab.load(str(tmp_path / "v.tsv.gz")) == v


# --- 8: the corpus cache is keyed on content -----------------------------------------------------
def test_corpus_cache_sees_a_same_size_same_mtime_rewrite(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("a b\nb a\n")
    vocab = Vocab.from_sentences([["a", "b"]])
    first = np.array(load_ids(str(p), vocab))
    st = os.stat(p)
    p.write_text("b b\na a\n")  # same size
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # same modification time
    assert os.stat(p).st_size == st.st_size and os.stat(p).st_mtime_ns == st.st_mtime_ns
    again = np.array(load_ids(str(p), vocab))
    assert not np.array_equal(first, again)
    np.testing.assert_array_equal(again, encode_file(str(p), vocab))


# --- 19: a full disk is a one-line error and leaves nothing behind -------------------------------
class FullDisk(io.FileIO):
    def write(self, b):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def full_disk(monkeypatch):
    real_fdopen = os.fdopen

    def fdopen(fd, mode="r", *a, **kw):
        if "w" in mode:
            return io.BufferedWriter(FullDisk(fd, "w"))
        return real_fdopen(fd, mode, *a, **kw)

    monkeypatch.setattr(textio.os, "fdopen", fdopen)


@pytest.mark.parametrize("name", ["out.txt", "out.txt.gz"])
def test_full_disk_is_a_user_error_and_leaves_no_file(tmp_path, monkeypatch, name):
    p = tmp_path / name
    full_disk(monkeypatch)
    with pytest.raises(UserError) as e:
        with atomic_write(str(p)) as f:
            f.write("x" * 100)
    assert str(e.value).startswith(f"{p}: cannot write") and "No space left" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_full_disk_keeps_the_previous_version(tmp_path, monkeypatch):
    p = tmp_path / "v.tsv"
    Vocab.from_sentences([["a"]]).save(str(p))
    before = p.read_bytes()
    full_disk(monkeypatch)
    with pytest.raises(UserError, match="v.tsv: cannot write"):
        Vocab.from_sentences([["b", "c"]]).save(str(p))
    assert p.read_bytes() == before and [x.name for x in tmp_path.iterdir()] == ["v.tsv"]


# --- 20: written files honour the umask ------------------------------------------------------------
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_honour_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        for name in ("a.txt", "b.txt.gz"):
            with atomic_write(str(tmp_path / name)) as f:
                f.write("x\n")
            assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == mode, name
    finally:
        os.umask(old)
