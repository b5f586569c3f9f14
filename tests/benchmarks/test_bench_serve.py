"""The serve bench's parts on a tiny model: the hostile campaign (every kind of bad request, slow clients, valid
requests checked) and the load cell, against a real server on a free loopback port (the full page:
``sampledlm bench serve``)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

pytest.importorskip("aiohttp")

from tests.campaigns.serve_hostile import KINDS, campaign  # noqa: E402
from benchmarks.serve_load import load_cell, next_word_queries  # noqa: E402
from sampledlm.loader import load_model  # noqa: E402
from sampledlm.serve.app import Server  # noqa: E402
from sampledlm.serve.limits import Limits  # noqa: E402
from sampledlm.use.score import score_sentences  # noqa: E402


class InThread:
    """What the campaign reads of a server process, for a server running in this process."""

    def __init__(self, server: Server):
        self.server, self.url = server, server.url
        self.host, self.port = server.host, server.port

    def memory_kb(self) -> dict:
        with open(f"/proc/{os.getpid()}/status") as f:
            return {ln.split(":")[0]: int(ln.split()[1]) for ln in f if ln.startswith(("VmRSS:", "VmHWM:"))}

    def alive(self) -> bool:
        return self.server._thread.is_alive()


@pytest.fixture(scope="module")
def scored(serve_models):
    lm = load_model(str(serve_models / "kn3.arpa"))
    sents = [ln.split() for ln in (serve_models / "test.txt").read_text().splitlines() if ln.split()][:10]
    return lm, [json.loads(json.dumps(s.to_dict(per_word=True))) for s in score_sentences(lm, sents)]


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads memory from /proc")
def test_hostile_campaign_finds_no_crash_and_no_wrong_answer(scored):
    lm, sc = scored
    with Server(lm, limits=Limits(read_timeout=0.5, idle_timeout=0.5)) as s:
        got = asyncio.run(campaign(InThread(s), next_word_queries(sc), sc, n_hostile=2 * len(KINDS), n_valid=8,
                                   n_slow=1, seconds_per_byte=0.05, tol=0.0, concurrency=8))
    assert set(got["outcomes"]) == set(KINDS)
    assert got["alive"] and got["server_5xx"] == 0
    assert got["valid_results"] == {"right": 8, "wrong": 0, "errors": 0, "max_abs_diff": 0.0}
    assert got["slow"] == {"408": 1}
    for kind in ("unknown-field", "wrong-types", "bad-utf8", "deep-nesting", "too-many", "huge-body", "lying-length"):
        assert all(k.isdigit() and k.startswith("4") for k in got["outcomes"][kind]), (kind, got["outcomes"][kind])


def test_load_cell_checks_every_answer(scored):
    lm, sc = scored
    queries = next_word_queries(sc)
    with Server(lm) as s:
        cell = asyncio.run(load_cell(s.url, queries, clients=4, seconds=0.5))
        wrong = [(h, w, lp + 1.0) for h, w, lp in queries]
        bad = asyncio.run(load_cell(s.url, wrong, clients=2, seconds=0.2))
    assert cell["queries"] > 0 and cell["errors"] == 0 and cell["max_abs_diff"] == 0.0
    assert cell["p50_ms"] <= cell["p99_ms"]
    assert bad["max_abs_diff"] == pytest.approx(1.0)


def test_serve_quick_page(tmp_path, monkeypatch):
    """The whole bench on the built-in corpus: both models served, every valid answer right, no crash."""
    from helpers import run_quick

    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path / "cache"))
    data = run_quick("serve", tmp_path / "out", against="### GRU")
    text = json.dumps(data)
    assert "KN5" in text and "GRU" in text
