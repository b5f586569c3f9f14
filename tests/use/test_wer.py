"""Word error rate against cases counted by hand."""

from __future__ import annotations

import pytest

from sampledlm.use.wer import Errors, align, corpus_errors, edit_distance

CASES = [  # ref, hyp, (sub, del, ins)
    ("a b c", "a b c", (0, 0, 0)),
    ("a b c", "a x c", (1, 0, 0)),
    ("a b c", "a c", (0, 1, 0)),
    ("a b c", "a b b c", (0, 0, 1)),
    ("a b c", "", (0, 3, 0)),
    ("", "a b", (0, 0, 2)),
    ("the cat sat on the mat", "the cat sat on mat", (0, 1, 0)),
    ("the cat sat on the mat", "a cat sat in the mat here", (2, 0, 1)),
    ("a b c d", "b c d e", (0, 1, 1)),  # shift: one deletion, one insertion (2), not four substitutions
    ("a b", "c d e", (2, 0, 1)),
]


@pytest.mark.parametrize("ref,hyp,counts", CASES)
def test_hand_counted(ref, hyp, counts):
    e = align(ref.split(), hyp.split())
    assert (e.sub, e.dele, e.ins) == counts
    assert e.ref_words == len(ref.split())
    assert edit_distance(ref.split(), hyp.split()) == sum(counts)


def test_levenshtein_is_symmetric_and_bounded():
    import random

    rng = random.Random(0)
    for _ in range(200):
        a = [rng.choice("abc") for _ in range(rng.randint(0, 7))]
        b = [rng.choice("abc") for _ in range(rng.randint(0, 7))]
        d = edit_distance(a, b)
        assert d == edit_distance(b, a)
        assert abs(len(a) - len(b)) <= d <= max(len(a), len(b))


def test_corpus_wer_sums_errors_over_reference_words():
    e = corpus_errors([["a", "b", "c"], ["d"]], [["a", "c"], ["e", "f"]])
    assert (e.errors, e.ref_words) == (3, 4) and e.wer == 0.75
    assert Errors().wer == 0.0 and Errors(ins=1).wer == float("inf")
