"""`sampledlm bench crashes --quick`: the writers of one file and build-binary, killed at two moments of their run
and two of their final write, leave nothing torn, and the next run leaves no temporary file and writes the very
bytes of an uninterrupted run."""

from __future__ import annotations

from helpers import run_quick


def test_crashes_quick_finds_nothing_torn(tmp_path):
    data = run_quick("crashes", tmp_path, against="Totals")
    t = data["totals"]
    assert {r["writer"]: r["tried"] for r in data["writers"]} == {"vocab": 4, "ngram train": 4,
                                                                   "ngram build-binary": 4}, data["kills"]
    assert (t["torn"], t["differs"], t["not recovered"], t["temp left"]) == (0, 0, 0, 0), data["kills"]
    assert t["same"] == t["tried"] == 12


def test_a_recovery_that_ends_refused_is_not_recovered_even_when_the_killed_run_left_the_numbers():
    """A killed run can leave a loadable model with the reference numbers while --resume and the same command both
    refuse (a checkpoint pointer naming half a checkpoint did): that is no recovery."""
    from tests.campaigns.crashes import Kill

    left = dict(writer="train gru", at=6.6, killed="killed", state="loadable", final="valid 1, test 2", same=True,
                temps_after="none")
    assert Kill(recovery="--resume: ok", **left).verdict() == "same"
    assert Kill(recovery="--resume: refused (...); same command: refused (...)", stuck=True, **left).verdict() \
        == "not recovered"
