import pytest

from sampledlm.errors import InputWarning
from sampledlm.data.tokenizer import TextOptions, iter_sentences, split_sentences, tokenize_raw


def test_raw_tokenizer_splits_punctuation_keeps_word_internal_marks():
    toks = tokenize_raw('"Well," said Mr. Smith, "it\'s a well-known fact: 3.14 and 1,000!"')
    assert toks == ['"', "Well", ",", '"', "said", "Mr.", "Smith", ",", '"', "it's", "a", "well-known",
                    "fact", ":", "3.14", "and", "1,000", "!", '"']


def test_raw_tokenizer_lowercase_and_numbers():
    assert tokenize_raw("In 1812 Napoleon had 600,000 men.", lowercase=True, numbers=True) == [
        "in", "<num>", "napoleon", "had", "<num>", "men", "."]


def test_non_ascii_words_are_words():
    assert tokenize_raw("Пьер Безухов — naïve café") == ["Пьер", "Безухов", "—", "naïve", "café"]


def test_sentence_split_keeps_closing_quotes():
    toks = tokenize_raw('He said: "Go!" Then he left. Did he?')
    assert split_sentences(toks) == [["He", "said", ":", '"', "Go", "!", '"'], ["Then", "he", "left", "."],
                                     ["Did", "he", "?"]]


def test_whitespace_lines_blank_lines_skipped_tabs_separate(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("a b\n\n   \nc\td  e\n", encoding="utf-8")
    assert list(iter_sentences(str(p))) == [["a", "b"], ["c", "d", "e"]]


def test_gutenberg_header_footer_stripped_and_paragraphs_split(tmp_path):
    p = tmp_path / "book.txt"
    p.write_text(
        "The Project Gutenberg eBook of Something\nLicense blah.\n"
        "*** START OF THE PROJECT GUTENBERG EBOOK SOMETHING ***\n\n"
        "It was a dark\nnight. The end\nwas near.\n\nNew paragraph\n\n"
        "*** END OF THE PROJECT GUTENBERG EBOOK SOMETHING ***\nMore license text.\n",
        encoding="utf-8",
    )
    opts = TextOptions(tokenizer="raw", lowercase=True, gutenberg=True)
    assert list(iter_sentences(str(p), opts)) == [
        ["it", "was", "a", "dark", "night", "."], ["the", "end", "was", "near", "."], ["new", "paragraph"]]


def test_gutenberg_without_markers_keeps_everything(tmp_path):
    p = tmp_path / "plain.txt"
    p.write_text("one line\nanother line\n", encoding="utf-8")
    opts = TextOptions(gutenberg=True, sentences="lines")
    with pytest.warns(InputWarning, match="plain.txt: --gutenberg found no .* the whole file is read as text"):
        assert list(iter_sentences(str(p), opts)) == [["one", "line"], ["another", "line"]]


def test_plain_fast_path_equals_general_path(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("x y z\n\nq r\n", encoding="utf-8")
    fast = list(iter_sentences(str(p)))
    with pytest.warns(InputWarning):
        slow = list(iter_sentences(str(p), TextOptions(gutenberg=True)))  # no markers: general path, same result
    assert fast == slow == [["x", "y", "z"], ["q", "r"]]
