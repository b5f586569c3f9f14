from collections import Counter

import pytest

from sampledlm.data.corpus import build_vocab
from sampledlm.errors import UserError
from sampledlm.data.vocab import BOS, EOS, UNK, Vocab


def write(tmp_path, name, data):
    p = tmp_path / name
    (p.write_bytes if isinstance(data, bytes) else lambda d: p.write_text(d, encoding="utf-8"))(data)
    return str(p)


def test_order_is_specials_then_count_desc_then_word(tmp_path):
    v = build_vocab(write(tmp_path, "c.txt", "b a c a\nb a d\n"))
    assert v.words == [EOS, UNK, "a", "b", "c", "d"]
    assert v.counts.tolist() == [2, 0, 3, 2, 1, 1]
    assert v.bos_id == 6 and v.eos_id == 0 and v.unk_id == 1
    assert v.encode(["a", "zzz", "d"]) == [2, 1, 5]
    assert v.decode([6, 2, 0]) == [BOS, "a", EOS]


def test_min_count_and_max_size_move_counts_to_unk(tmp_path):
    path = write(tmp_path, "c.txt", "a a a b b c\nd <unk>\n")
    v = build_vocab(path, min_count=2)
    assert v.words == [EOS, UNK, "a", "b"] and v.counts[1] == 1 + 1 + 1  # c, d and the literal <unk>
    v = build_vocab(path, max_size=3)
    assert v.words == [EOS, UNK, "a"] and v.counts[1] == 2 + 1 + 1 + 1
    with pytest.raises(UserError):
        build_vocab(path, max_size=1)


def test_round_trip_is_exact_including_non_ascii(tmp_path):
    v = build_vocab(write(tmp_path, "c.txt", "Пьер café naïve 東京 café\n"))
    out = str(tmp_path / "v.txt")
    v.save(out)
    w = Vocab.load(out)
    assert w == v and w.fingerprint() == v.fingerprint()
    assert w.index["café"] == v.index["café"]


def test_single_token_file(tmp_path):
    v = build_vocab(write(tmp_path, "one.txt", "hello"))
    assert v.words == [EOS, UNK, "hello"] and v.counts.tolist() == [1, 0, 1]


@pytest.mark.parametrize("content", ["", "\n\n   \n\t\n"])
def test_empty_or_blank_file_is_an_error(tmp_path, content):
    with pytest.raises(UserError, match="no words"):
        build_vocab(write(tmp_path, "empty.txt", content))


def test_invalid_bytes_error_or_replace(tmp_path):
    path = write(tmp_path, "bad.txt", b"ok line\nbad \xfe\n")
    with pytest.raises(UserError, match=r"bad\.txt:2"):
        build_vocab(path)
    from sampledlm.data.tokenizer import TextOptions

    v = build_vocab(path, TextOptions(encoding_errors="replace"))
    assert "\ufffd" in v.index


def test_token_with_tab_cannot_be_saved_and_tabs_separate_tokens(tmp_path):
    v = build_vocab(write(tmp_path, "t.txt", "a\tb\n"))
    assert v.words == [EOS, UNK, "a", "b"]  # a tab is whitespace: it separates tokens
    bad = Vocab.from_counts(Counter({"x\ty": 1}), 1)
    with pytest.raises(UserError, match="tab"):
        bad.save(str(tmp_path / "v.txt"))
    assert not (tmp_path / "v.txt").exists()


def test_load_errors_name_the_line(tmp_path):
    with pytest.raises(UserError, match=r"v\.txt:2: count"):
        Vocab.load(write(tmp_path, "v.txt", "</s>\t3\nword\tmany\n"))
    with pytest.raises(UserError, match=r"v2\.txt:3: word 'a' repeats line 1"):
        Vocab.load(write(tmp_path, "v2.txt", "a\t1\nb\t1\na\t1\n"))
    with pytest.raises(UserError, match="empty vocabulary"):
        Vocab.load(write(tmp_path, "v3.txt", "\n"))


def test_plain_word_list_loads_with_specials_added(tmp_path):
    v = Vocab.load(write(tmp_path, "words.txt", "the\nof\n<unk>\n"))
    assert v.words == [EOS, UNK, "the", "of"] and v.counts.tolist() == [0, 0, 0, 0]
