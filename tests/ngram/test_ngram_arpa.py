"""ARPA files: exact round trip for every smoothing, other tools' conventions, errors with line numbers."""

from __future__ import annotations

import numpy as np
import pytest

from sampledlm.errors import UserError
from sampledlm.ngram import SMOOTHINGS, read_arpa, write_arpa, train_ngram

pytestmark = pytest.mark.usefixtures("private_cache")  # parsed-ARPA and corpus caches: not the user's


@pytest.mark.parametrize("smoothing", sorted(SMOOTHINGS))
@pytest.mark.parametrize("order", [1, 3])
def test_round_trip_gives_identical_probabilities(arpa_corpus, tmp_path, smoothing, order):
    vocab, train, valid = arpa_corpus
    lm = train_ngram(train, vocab, order, smoothing, valid_ids=valid)
    path = str(tmp_path / "m.arpa")
    write_arpa(lm, path)
    back = read_arpa(path)
    assert back.words == lm.words and back.counts() == lm.counts()
    for a, b in zip(lm.tables, back.tables):
        np.testing.assert_array_equal(a.keys, b.keys)
        np.testing.assert_array_equal(a.logp, b.logp)
        np.testing.assert_array_equal(a.bow, b.bow)
    np.testing.assert_array_equal(lm.stream_logprobs(valid, vocab), back.stream_logprobs(valid, vocab))
    text = open(path).read()
    assert text.startswith("\n\\data\\\nngram 1=") and text.rstrip().endswith("\\end\\")
    assert "\n-99.00000000\t<s>" in text


OTHER_TOOL = """This header text comes before the data section, as SRILM allows.

\\data\\
ngram  1=4
ngram 2=3

\\1-grams:
-0.5   </s>
-99    <s>   -0.3
-0.6   a     -0.2
-0.9   b

\\2-grams:
-0.1   <s> a
-0.4   a b
-0.2   b </s>

\\end\\
"""


def test_reads_another_tools_file_and_adds_unk(tmp_path):
    path = tmp_path / "srilm.arpa"
    path.write_text(OTHER_TOOL)
    lm = read_arpa(str(path))
    assert "<unk>" in lm.added if hasattr(lm, "added") else "<unk>" in lm.info["added"]
    assert lm.log10_prob(["<s>"], "a") == pytest.approx(-0.1)
    assert lm.log10_prob(["a"], "a") == pytest.approx(-0.2 - 0.6)  # back-off: b(a) + p(a)
    assert lm.log10_prob(["b"], "a") == pytest.approx(-0.6)  # b is not a context: weight 1
    assert lm.log10_prob(["a"], "zzz") == pytest.approx(-0.2 - 100.0)  # unknown word -> <unk> at -100
    assert lm.score("a b") == pytest.approx(-0.1 - 0.4 - 0.2)


def test_missing_prefixes_are_added_with_back_off_probabilities(tmp_path):
    path = tmp_path / "pruned.arpa"
    path.write_text("\n\\data\\\nngram 1=4\nngram 2=1\nngram 3=1\n\n\\1-grams:\n-1\t</s>\n-99\t<s>\t-0.5\n-1\t<unk>\n"
                    "-0.5\ta\t-0.25\n\n\\2-grams:\n-0.3\t<s> a\n\n\\3-grams:\n-0.1\ta a a\n\n\\end\\\n")
    lm = read_arpa(str(path))
    assert lm.counts() == [4, 2, 1]  # 'a a' was added
    assert lm.log10_prob(["a"], "a") == pytest.approx(-0.25 - 0.5)
    assert lm.log10_prob(["a", "a"], "a") == pytest.approx(-0.1)


GOOD = "\n\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-1\t</s>\n-99\t<s>\t-0.5\n-1\t<unk>\n\n\\2-grams:\n-0.3\t<s> </s>\n\n\\end\\\n"


@pytest.mark.parametrize("broken, line, fragment", [
    (GOOD.replace("-0.3\t<s> </s>", "-0.3\t<s> zz"), 12, "not among the 1-grams"),
    (GOOD.replace("-1\t<unk>", "x1\t<unk>"), 9, "is not a number"),
    (GOOD.replace("-1\t<unk>", "-1\t<unk>\t0\t9"), 9, "field"),
    (GOOD.replace("-0.3\t<s> </s>", "-0.3\t<s> </s>\t-0.1"), 12, "highest-order"),
    (GOOD.replace("-1\t<unk>", "0.5\t<unk>"), 9, "<= 0"),
    (GOOD.replace("ngram 2=1", "ngram 3=1"), 4, "orders"),
    (GOOD.replace("ngram 2=1", "ngram 2=2"), 11, "header says"),
    (GOOD.replace("\\2-grams:", "\\3-grams:"), 11, "header lists orders 1..2 only"),
    (GOOD.replace("-1\t<unk>\n", "-1\t<unk>\n-2\t<unk>\n").replace("ngram 1=3", "ngram 1=4"), 10, "already listed at line 9"),
    (GOOD.replace("\\end\\\n", ""), 13, "truncated"),
    (GOOD.replace("\\end\\\n", "\\end\\\nmore\n"), 15, "after \\end\\"),
    (GOOD.replace("ngram 1=3", "ngram one=3"), 3, "ngram N=COUNT"),
])
def test_malformed_files_name_the_line(tmp_path, broken, line, fragment):
    path = tmp_path / "bad.arpa"
    path.write_text(broken)
    with pytest.raises(UserError) as e:
        read_arpa(str(path))
    assert f"bad.arpa:{line}:" in str(e.value), str(e.value)
    assert fragment in str(e.value)


def test_not_an_arpa_file(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("just some text\n")
    with pytest.raises(UserError, match="no \\\\data\\\\"):
        read_arpa(str(path))
    with pytest.raises(UserError, match="no such file"):
        read_arpa(str(tmp_path / "missing.arpa"))


def test_kenlm_reads_our_file_and_agrees(arpa_corpus, tmp_path):
    kenlm = pytest.importorskip("kenlm")
    vocab, train, valid = arpa_corpus
    lm = train_ngram(train, vocab, 4)
    path = str(tmp_path / "m.arpa")
    write_arpa(lm, path)
    km = kenlm.Model(path)
    ours = lm.stream_logprobs(valid, vocab) / np.log(10)
    ends = np.flatnonzero(valid == 0)
    start = 0
    for end in ends:
        words = " ".join(vocab.decode(valid[start:end]))
        assert km.score(words, bos=True, eos=True) == pytest.approx(ours[start : end + 1].sum(), abs=1e-4)
        start = end + 1


def test_error_in_a_bulk_parsed_section_names_the_line(arpa_corpus, tmp_path):
    vocab, train, _ = arpa_corpus
    path = tmp_path / "m.arpa"
    write_arpa(train_ngram(train, vocab, 3), str(path))
    lines = path.read_text().split("\n")
    at = lines.index("\\2-grams:") + 5
    lines[at] = lines[at].replace("\t", "\tnot-a-word ", 1)
    path.write_text("\n".join(lines))
    with pytest.raises(UserError, match=f"m.arpa:{at + 1}:"):
        read_arpa(str(path))


def test_parsed_files_are_cached_until_they_change(arpa_corpus, tmp_path):
    vocab, train, valid = arpa_corpus
    path = tmp_path / "m.arpa"
    write_arpa(train_ngram(train, vocab, 3), str(path))
    first = read_arpa(str(path))
    assert len(list((tmp_path / "cache").glob("arpa.*.safetensors"))) == 1
    (tmp_path / "copy.arpa").write_bytes(path.read_bytes())  # the same model under another name: kept once
    assert read_arpa(str(tmp_path / "copy.arpa")).words == first.words
    assert len(list((tmp_path / "cache").glob("arpa.*.safetensors"))) == 1
    again = read_arpa(str(path))
    assert again.words == first.words and again.info == first.info
    np.testing.assert_array_equal(again.stream_logprobs(valid, vocab), first.stream_logprobs(valid, vocab))
    write_arpa(train_ngram(train, vocab, 2), str(path))  # a different model at the same path
    assert read_arpa(str(path)).order == 2


def test_the_old_logprob_name_warns_and_keeps_its_base(tmp_path):
    path = tmp_path / "srilm.arpa"
    path.write_text(OTHER_TOOL)
    lm = read_arpa(str(path))
    with pytest.warns(DeprecationWarning, match="log10_prob"):
        old = lm.logprob(["a"], "b")
    assert old == lm.log10_prob(["a"], "b")  # log10 still: no caller's numbers change base silently


@pytest.mark.parametrize("many", [False, True])  # a small section (line by line) and a large one (parsed at once)
def test_minus_inf_is_a_zero_probability_read_as_srilms_minus_99(tmp_path, many):
    """Some tools write -inf for a zero probability (KenLM reads it); it was refused as not finite."""
    extra = [f"-2.0\tw{i}\t-0.1" for i in range(300 if many else 0)]
    unigrams = ["-inf\t<s>\t-0.5", "-0.5\t</s>", "-1.0\t<unk>", "-0.7\ta\t-inf", *extra]
    text = ("\\data\\\nngram 1=%d\nngram 2=1\n\n\\1-grams:\n%s\n\n\\2-grams:\n-0.2\t<s> a\n\n\\end\\\n"
            % (len(unigrams), "\n".join(unigrams)))
    (tmp_path / "inf.arpa").write_text(text)
    lm = read_arpa(str(tmp_path / "inf.arpa"), cache=False)
    words = lm.words
    uni = lm.tables[0]
    assert uni.logp[words.index("<s>")] == -99.0 and uni.bow[words.index("a")] == -99.0
    (tmp_path / "bad.arpa").write_text(text.replace("-inf\t<s>", "inf\t<s>"))
    with pytest.raises(UserError, match="log10 probability must be a finite number"):
        read_arpa(str(tmp_path / "bad.arpa"), cache=False)
