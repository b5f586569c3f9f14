"""The simulated recogniser's noisy channel: seeded, confusable substitutions, distinct hypotheses by score."""

from __future__ import annotations

from sampledlm.use.channel import Channel
from sampledlm.use.wer import align

WORDS = "the then they there cat cart car dog dot sat set on in a an mat map".split()


def test_same_seed_same_lists_and_sorted_distinct_hypotheses():
    ref = "the cat sat on the mat".split()
    a = Channel(WORDS, seed=3).nbest("u", ref, n=8)
    b = Channel(WORDS, seed=3).nbest("u", ref, n=8)
    assert [(h.words, h.am) for h in a.hyps] == [(h.words, h.am) for h in b.hyps]
    assert [(h.words, h.am) for h in a.hyps] != [(h.words, h.am) for h in Channel(WORDS, seed=4).nbest("u", ref, n=8).hyps]
    assert len({tuple(h.words) for h in a.hyps}) == len(a.hyps) <= 8
    assert [h.am for h in a.hyps] == sorted((h.am for h in a.hyps), reverse=True)
    assert a.ref == ref


def test_substitutions_are_confusable_and_rates_hold():
    ch = Channel(WORDS, sub=0.2, dele=0.0, ins=0.0, seed=1)
    ref = ["cat"] * 2000
    hyp, _ = ch.corrupt(ref)
    changed = [w for w in hyp if w != "cat"]
    assert set(changed) <= {"car", "cart"}  # same first two letters, length within 2
    assert 0.17 < len(changed) / len(ref) < 0.23
    ref = [WORDS[(7 * i) % len(WORDS)] for i in range(2000)]
    hyp, _ = Channel(WORDS, sub=0.0, dele=0.1, ins=0.1, seed=2).corrupt(ref)
    assert 0.85 < (len(ref) - len(hyp)) / 2000 + 1 < 1.15  # as many insertions as deletions, about
    e = align(ref, hyp)
    assert 0.1 < e.errors / len(ref) < 0.21  # 10 % deleted, 10 % inserted (a pair may align as one substitution)
