"""ArpaLM (the LanguageModel interface of ARPA files) and regression tests of the n-gram side:
stdin test text, compressed ARPA files, a file without <unk>, IRSTLM padding n-grams, the
content-keyed ARPA cache, header overflow, corrupt input, a full disk. KenLM is the reference."""

from __future__ import annotations

import errno
import gzip
import io
import json
import re
import math
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import sampledlm.data.textio as textio
from sampledlm.cli import main
from sampledlm.data.corpus import load_ids
from sampledlm.data.vocab import Vocab
from sampledlm.errors import UserError
from sampledlm.ngram import ArpaLM, read_arpa, train_ngram, write_arpa

LN10 = math.log(10)

TRAIN = "".join(["a b c d\n", "b c a\n", "c a b d d\n", "a c\n", "d b a c\n"] * 8)
TEST = "a b c\nd d a e\nc b\nb e e a\n"  # 'e' is not in the model


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def run(capsys):
    """``sampledlm ARGS`` in-process, as the console entry point runs it."""

    def _run(*args, cwd):
        old = os.getcwd()
        os.chdir(cwd)
        try:
            with pytest.raises(SystemExit) as e:
                main(list(args))
        finally:
            os.chdir(old)
        out = capsys.readouterr()
        return SimpleNamespace(returncode=e.value.code, stdout=out.out, stderr=out.err)

    return _run


def one_line_error(r, *fragments):
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sampledlm: error:"), r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def kenlm_scores(path, text):
    """KenLM's per-token log10 probabilities and OOV flags of every line, as its query counts them."""
    kenlm = pytest.importorskip("kenlm")
    m = kenlm.Model(str(path))
    lp, oov = [], []
    for line in text.splitlines():
        for p, _, o in m.full_scores(line):
            lp.append(p)
            oov.append(o)
    return np.array(lp), np.array(oov)


@pytest.fixture
def k3(tmp_path, run):
    (tmp_path / "train.txt").write_text(TRAIN)
    (tmp_path / "test.txt").write_text(TEST)
    assert run("ngram", "train", "--train", "train.txt", "--order", "3", "-o", "k3.arpa", cwd=tmp_path).returncode == 0
    return tmp_path / "k3.arpa"


# --- A: ArpaLM ---------------------------------------------------------------------------------------
def test_arpa_lm_vocabulary_and_scores_match_kenlm(k3):
    lm = ArpaLM.open(str(k3))
    assert lm.family == "ngram" and lm.order == 3 and lm.text_options is None
    assert lm.vocab.words[:2] == ["</s>", "<unk>"] and "<s>" not in lm.vocab
    file_words = [ln.split("\t")[1] for ln in k3.read_text().split("\\1-grams:\n")[1].split("\n\n")[0].splitlines()]
    assert lm.vocab.words[2:] == [w for w in file_words if w not in ("</s>", "<unk>", "<s>")]  # file order
    assert lm.vocab.bos_id == len(lm.vocab) and not lm.vocab.counts.any()
    ids = load_ids(str(k3.parent / "test.txt"), lm.vocab)
    lp = lm.logprobs(ids)
    assert lp.dtype == np.float64 and lp.shape == (len(ids),)
    np.testing.assert_array_equal(lm.logprobs(ids, independent=True), lp)
    ref, ref_oov = kenlm_scores(k3, TEST)
    np.testing.assert_allclose(lp / LN10, ref, atol=1e-5)
    np.testing.assert_array_equal(lm.oov_mask(ids), ref_oov)
    assert lm.perplexity(ids) == pytest.approx(10 ** (-ref.sum() / len(ref)), rel=1e-6)
    assert isinstance(lm.ngram, type(read_arpa(str(k3))))
    assert "order 3" in lm.describe() and f"{lm.ngram.counts()[1]:,}" in lm.describe()


def test_load_model_opens_an_arpa_file(k3):
    from sampledlm.loader import load_model

    lm = load_model(str(k3))
    assert isinstance(lm, ArpaLM) and lm.path == str(k3)


# --- 3: test text from standard input ----------------------------------------------------------------
def test_eval_reads_test_text_from_stdin_once(k3, run, monkeypatch):
    want = run("ngram", "eval", "k3.arpa", "--test", "test.txt", "--json", cwd=k3.parent)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TEST.encode())))
    got = run("ngram", "eval", "k3.arpa", "--test", "-", "--json", cwd=k3.parent)
    assert got.returncode == 0, got.stderr
    w, g = json.loads(want.stdout), json.loads(got.stdout)
    assert g["sentences"] == w["sentences"] == 4 and g["oov"] == w["oov"] == 3
    assert g["ppl"] == w["ppl"] and g["predictions"] == w["predictions"]


def test_train_reads_training_text_from_stdin(tmp_path, run, monkeypatch):
    (tmp_path / "train.txt").write_text(TRAIN)
    assert run("ngram", "train", "--train", "train.txt", "-o", "file.arpa", cwd=tmp_path).returncode == 0
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(TRAIN.encode())))
    r = run("ngram", "train", "--train", "-", "-o", "stdin.arpa", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "stdin.arpa").read_text() == (tmp_path / "file.arpa").read_text()


# --- 4: compressed ARPA files --------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_compressed_arpa_output_is_compressed_and_reads_back(k3, run, suffix):
    d = k3.parent
    r = run("ngram", "train", "--train", "train.txt", "--order", "3", "-o", f"k3.arpa{suffix}", cwd=d)
    assert r.returncode == 0, r.stderr
    assert textio.compression_of((d / f"k3.arpa{suffix}").read_bytes()[:10]) == suffix[1:]
    plain = run("ngram", "eval", "k3.arpa", "--test", "test.txt", cwd=d)
    packed = run("ngram", "eval", f"k3.arpa{suffix}", "--test", "test.txt", cwd=d)
    assert packed.returncode == 0, packed.stderr
    assert packed.stdout == plain.stdout
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".")) == []  # no temporary file left


def test_kenlm_reads_our_gzip_file(k3, run):
    r = run("ngram", "train", "--train", "train.txt", "--order", "3", "-o", "k3.arpa.gz", cwd=k3.parent)
    assert r.returncode == 0
    try:
        ref, _ = kenlm_scores(k3.parent / "k3.arpa.gz", TEST)
    except OSError:
        pytest.skip("this kenlm build reads no gzip")
    np.testing.assert_allclose(ref, kenlm_scores(k3, TEST)[0], atol=1e-6)


def zlib_damaged(good: bytes) -> bytes:
    """``good`` (gzip) with one bit flipped where zlib itself fails (zlib.error, not OSError)."""
    import zlib

    for pos in range(10, len(good)):
        bad = bytearray(good)
        bad[pos] ^= 0x10
        try:
            gzip.decompress(bytes(bad))
        except zlib.error:
            return bytes(bad)
        except (OSError, EOFError):
            continue
    pytest.skip("no single-bit damage makes zlib raise zlib.error here")


def test_corrupt_gzip_arpa_is_a_one_line_error(k3, run):
    (k3.parent / "bad.arpa.gz").write_bytes(zlib_damaged(gzip.compress(k3.read_bytes(), mtime=0)))
    (k3.parent / "short.arpa.gz").write_bytes(gzip.compress(k3.read_bytes())[:300])
    one_line_error(run("ngram", "eval", "bad.arpa.gz", "--test", "test.txt", cwd=k3.parent), "bad.arpa.gz")
    one_line_error(run("ngram", "eval", "short.arpa.gz", "--test", "test.txt", cwd=k3.parent), "short.arpa.gz")
    (k3.parent / "test.txt.gz").write_bytes(gzip.compress(TEST.encode())[:-12])
    one_line_error(run("ngram", "eval", "k3.arpa", "--test", "test.txt.gz", cwd=k3.parent), "test.txt.gz")


# --- 5: an ARPA file without <unk> ------------------------------------------------------------------------
NO_UNK = """
\\data\\
ngram 1=5
ngram 2=5

\\1-grams:
-1.0\t<s>\t-0.3
-0.5\ta\t-0.2
-0.7\tb\t-0.1
-0.6\t</s>
-1.3\tc\t-0.4

\\2-grams:
-0.2\t<s> a
-0.3\ta b
-0.4\tb </s>
-0.25\ta </s>
-0.15\tc a

\\end\\
"""
NO_UNK_TEST = "a b\na zz b\nzz\n<unk> c a\nb c zz zz a\n"


def test_missing_unk_scores_and_counts_like_kenlm(tmp_path, run):
    path = tmp_path / "nounk.arpa"
    path.write_text(NO_UNK)
    (tmp_path / "t.txt").write_text(NO_UNK_TEST)
    ref, ref_oov = kenlm_scores(path, NO_UNK_TEST)
    lm = ArpaLM.open(str(path), warn=False)
    assert not lm.has_unk and "no <unk>" in lm.describe()
    ids = load_ids(str(tmp_path / "t.txt"), lm.vocab)
    lp10 = lm.logprobs(ids) / LN10
    np.testing.assert_allclose(lp10, ref, atol=1e-5)
    np.testing.assert_array_equal(lm.oov_mask(ids), ref_oov)
    # KenLM's query: perplexity including OOVs, and excluding them (their tokens and probabilities)
    incl = 10 ** (-ref.sum() / len(ref))
    excl = 10 ** (-ref[~ref_oov].sum() / (~ref_oov).sum())
    r = run("ngram", "eval", "nounk.arpa", "--test", "t.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["oov"] == int(ref_oov.sum()) == 5 and s["predictions"] == len(ref) and s["model_has_unk"] is False
    assert s["ppl"] == pytest.approx(incl, rel=1e-5)
    assert s["ppl_excluding_oov"] == pytest.approx(excl, rel=1e-6)
    # (5 of its words are OOV, on purpose: eval's warning about that share is the other line)
    warning = [ln for ln in r.stderr.splitlines() if ln.strip() and "outside the model's vocabulary" not in ln]
    assert len(warning) == 1 and warning[0].startswith("sampledlm: warning: nounk.arpa") and "<unk>" in warning[0]
    assert "-100" in warning[0]
    share = [ln for ln in r.stderr.splitlines() if "outside the model's vocabulary" in ln]
    assert len(share) == 1 and "log10 p -100 each: the model has no <unk>" in share[0] and "scored as" not in share[0]
    text = run("ngram", "eval", "nounk.arpa", "--test", "t.txt", cwd=tmp_path).stdout
    assert "has no <unk>" in text and "excluding OOVs" in text
    # a perplexity of 1e40 in powers of ten, not 41 digits
    assert re.search(r"ppl \d\.\d{3}e\+\d+;", text) and f"ppl {incl:.3e}" in text, text


def test_a_model_with_unk_gives_no_warning(k3, run):
    r = run("ngram", "eval", "k3.arpa", "--test", "test.txt", cwd=k3.parent)
    # the only line: that 3 of the 13 test words are outside the vocabulary (on purpose here)
    assert r.returncode == 0 and [ln for ln in r.stderr.splitlines() if ln.strip()] == [
        "sampledlm: warning: test.txt: 23.1 % of its 13 words are outside the model's vocabulary (scored as <unk>): "
        "is the text read as the training text was (--lowercase, --tokenizer)?"]
    assert "3 OOV, scored as <unk>" in r.stdout


# --- 6: literal sentence markers in test text ---------------------------------------------------------------
def test_kenlm_scores_literal_markers_as_words_so_we_drop_them(k3):
    """What the tokenizer docstring says of KenLM, checked: it does not skip a leading <s>."""
    kenlm = pytest.importorskip("kenlm")
    m = kenlm.Model(str(k3))
    assert m.score("<s> a b") < m.score("a b") - 50  # the literal <s> costs p(<s>) = -99
    assert len(list(m.full_scores("a </s> b"))) == 4  # a literal </s> is one more predicted word
    lm = ArpaLM.open(str(k3))
    (k3.parent / "marked.txt").write_text("<s> a b </s>\n")
    lp = lm.logprobs(load_ids(str(k3.parent / "marked.txt"), lm.vocab)) / LN10
    assert lp.sum() == pytest.approx(m.score("a b"), abs=1e-5)


# --- 7: IRSTLM-style <s> <s> padding n-grams ------------------------------------------------------------------
IRSTLM = """
\\data\\
ngram 1=5
ngram 2=7
ngram 3=5

\\1-grams:
-1.0\t</s>
-99\t<s>\t-0.5
-1.2\t<unk>\t-0.05
-0.6\ta\t-0.3
-0.7\tb\t-0.2

\\2-grams:
-2.0\t<s> <s>\t-0.4
-0.3\t<s> a\t-0.1
-0.9\t<s> b\t-0.25
-0.5\ta b\t-0.15
-0.8\ta a\t-0.12
-0.4\tb </s>
-0.45\tb a\t-0.11

\\3-grams:
-1.5\t<s> <s> a
-1.7\t<s> <s> b
-0.2\t<s> a b
-0.35\ta b </s>
-0.33\t<s> b a

\\end\\
"""
IRSTLM_TEST = "a b\nb a b\na\nb\nzz a b\na a a b b\n"


def test_irstlm_padding_ngrams_are_scored_as_kenlm_does(tmp_path):
    path = tmp_path / "irstlm.arpa"
    path.write_text(IRSTLM)
    (tmp_path / "t.txt").write_text(IRSTLM_TEST)
    ref, _ = kenlm_scores(path, IRSTLM_TEST)
    lm = ArpaLM.open(str(path))
    ids = load_ids(str(tmp_path / "t.txt"), lm.vocab)
    np.testing.assert_allclose(lm.logprobs(ids) / LN10, ref, atol=1e-6)
    ng = lm.ngram
    assert ng.log10_prob(["<s>", "<s>"], "a") == pytest.approx(-0.3)  # '<s> <s> a' is never used
    assert ng.score("a b") == pytest.approx(-0.3 - 0.2 - 0.35)
    assert ng.score("b") == pytest.approx(ref[9] + ref[10])


# --- 8: the ARPA cache is keyed on content ---------------------------------------------------------------------
def test_arpa_cache_sees_a_same_size_same_mtime_rewrite(tmp_path):
    path = tmp_path / "m.arpa"
    path.write_text(IRSTLM)
    assert read_arpa(str(path)).log10_prob(["a"], "b") == pytest.approx(-0.5)
    st = os.stat(path)
    path.write_text(IRSTLM.replace("-0.5\ta b", "-0.6\ta b"))  # same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_mtime_ns == st.st_mtime_ns
    assert read_arpa(str(path)).log10_prob(["a"], "b") == pytest.approx(-0.6)
    assert read_arpa(str(path)).info["source"] == str(path)


# --- 19: absurd header counts, full disk -----------------------------------------------------------------------
def test_header_count_beyond_int64_names_the_header_line(tmp_path, run):
    big = IRSTLM.replace("ngram 2=7", "ngram 2=99999999999999999999999")
    (tmp_path / "big.arpa").write_text(big)
    with pytest.raises(UserError, match=r"big\.arpa:4: ngram 2=99999999999999999999999: .*64 bits"):
        read_arpa(str(tmp_path / "big.arpa"))
    (tmp_path / "t.txt").write_text("a\n")
    one_line_error(run("ngram", "eval", "big.arpa", "--test", "t.txt", cwd=tmp_path), "big.arpa:4:")


class FullDisk(io.FileIO):
    def write(self, b):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("out", ["m.arpa", "m.arpa.gz"])
def test_full_disk_while_writing_the_model(tmp_path, run, monkeypatch, out):
    (tmp_path / "train.txt").write_text(TRAIN)
    real_fdopen = os.fdopen
    monkeypatch.setattr(textio.os, "fdopen",
                        lambda fd, mode="r", *a, **kw: io.BufferedWriter(FullDisk(fd, "w")) if "w" in mode
                        else real_fdopen(fd, mode, *a, **kw))
    r = run("ngram", "train", "--train", "train.txt", "-o", out, cwd=tmp_path)
    one_line_error(r, f"{out}: cannot write", "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "cache") == ["train.txt"]


def test_arpa_written_with_the_umask(tmp_path):
    vocab = Vocab.from_sentences([s.split() for s in TRAIN.splitlines()])
    ids = np.array([i for s in TRAIN.splitlines() for i in vocab.encode(s.split()) + [0]], dtype=np.int32)
    old = os.umask(0o022)
    try:
        write_arpa(train_ngram(ids, vocab, 2), str(tmp_path / "m.arpa"))
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "m.arpa").st_mode & 0o777 == 0o644
