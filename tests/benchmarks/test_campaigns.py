"""The fault campaign as tests: each case of ``tests/campaigns/faults_cases.py`` and each kill point of
``tests/campaigns/faults.py`` run against the working tree, one test each (``--campaigns`` runs them; see conftest).

A case passes when it ends as the campaign's page wants it: ``ok`` (the right numbers, the intended output) or
``clean error`` (a short message naming the problem, nothing changed or left behind); a kill point when the
recovered run reaches the uninterrupted run's numbers. ``python -m benchmarks faults`` runs the same cases for the
page, with the before column.
"""

from __future__ import annotations

import pytest

from tests.campaigns import faults
from tests.campaigns.faults_cases import CASES
from tests.campaigns.faults_engine import Fixtures, write_corpus

GOOD = ("ok", "clean error")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """The working tree's side, its fixtures (models built on first use) and a scratch folder."""
    scratch = tmp_path_factory.mktemp("campaign")
    corpus = scratch / "corpus"
    write_corpus(str(corpus))
    side = faults.now_side()
    (scratch / "fx").mkdir()
    return side, Fixtures(side, str(scratch / "fx"), str(corpus)), str(scratch)


@pytest.mark.campaign
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fault_case(case, campaign):
    side, fx, scratch = campaign
    out = faults.run_case(case, side, fx, scratch)
    if out.category == "skipped":
        pytest.skip(out.note)
    assert out.category in GOOD, f"{case.id} ({case.what}): {out.category}: {out.note}\n  {out.command}"


@pytest.mark.campaign
@pytest.mark.parametrize("point", faults.KILLS, ids=[k.id for k in faults.KILLS])
def test_kill_point(point, campaign):
    side, fx, scratch = campaign
    out = faults.run_kill(point, side, fx, scratch)
    assert out.verdict() == "same", out


def test_every_case_has_a_unique_id_and_a_check():
    ids = [c.id for c in CASES] + [k.id for k in faults.KILLS]
    assert len(ids) == len(set(ids)) and all(callable(c.check) for c in CASES)
