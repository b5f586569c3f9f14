"""`sampledlm bench fuzz`: the campaign counts outcomes correctly (a reader that crashes or lies is caught),
and the quick run finds no defect in the readers and commands of the toolkit."""

from __future__ import annotations

import random
import signal

from helpers import run_quick

from sampledlm.errors import UserError
from tests.campaigns import fuzz
from tests.campaigns.fuzz_readers import READERS, Reader
from tests.campaigns.mutate import Op, mutate, random_ops


def test_mutations_are_reproducible_and_do_what_they_say():
    data = b"a b\nc=1 d\ne"
    assert mutate(data, [Op("truncate", 3)]) == b"a b"
    assert mutate(data, [Op("delete", 1)]) == b"a b\ne"
    assert mutate(data, [Op("swap", 0, 2)]) == b"e\nc=1 d\na b"
    assert mutate(data, [Op("token", 1, 0, "nan")]) == b"a b\nc=nan d\ne"
    assert mutate(data, [Op("insert", 2, raw=b"\xff")]) == b"a b\nc=1 d\n\xff\ne"
    assert random_ops(random.Random(5)) == random_ops(random.Random(5))


def _classify(reader, cases, tmp_path):
    old = signal.signal(signal.SIGALRM, fuzz._alarm)
    try:
        return {fuzz.run_reader_case(reader, c, str(tmp_path))[0] for c in range(cases)}
    finally:
        signal.signal(signal.SIGALRM, old)


def test_the_campaign_catches_a_crashing_a_lying_and_an_anonymous_reader(tmp_path):
    corpus = READERS[0]

    def crash(path):
        raise KeyError("boom")

    def anonymous(path):
        raise UserError("something is wrong")

    assert _classify(Reader("x", "", corpus.make, crash, corpus.check, corpus.same), 5, tmp_path) == {"traceback"}
    assert _classify(Reader("x", "", corpus.make, anonymous, corpus.check, corpus.same), 5, tmp_path) == {
        "unclear error", "wrong"}  # refusing the input as written is wrong, the others unclear
    liar = Reader("corpus", "", corpus.make, lambda p: [["made", "up"]], corpus.check, corpus.same)
    assert _classify(liar, 5, tmp_path) == {"wrong"}


def test_fuzz_quick_finds_no_defect(tmp_path):
    data = run_quick("fuzz", tmp_path, against="## Readers")
    assert set(data["readers"]) == {r.name for r in READERS}
    for section, n in (("readers", 15), ("commands", 5)):
        for name, r in data[section].items():
            assert r["cases"] == n and sum(r[o] for o in fuzz.OUTCOMES) == n
            assert not any(r[o] for o in fuzz.DEFECTS), (name, r["examples"])
