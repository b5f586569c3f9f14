"""The real server on a free loopback port, spoken to over HTTP: every endpoint, the numbers of
``sampledlm score``, concurrent clients getting the same numbers, requests batched into one model call."""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import pytest

pytest.importorskip("aiohttp")

from sampledlm.loader import load_model  # noqa: E402
from sampledlm.lm import Mixture  # noqa: E402
from sampledlm.serve.app import Batching, Server  # noqa: E402
from sampledlm.serve.client import Client  # noqa: E402
from sampledlm.serve.engine import enable_history_cache  # noqa: E402

NAMES = ["kn3.arpa", "ffnn3", "gru"]
#: n-gram numbers are equal bit for bit; neural ones up to float32 rounding, which depends on a batch's shape
ATOL = {"kn3.arpa": 0.0, "ffnn3": 2e-6, "gru": 2e-6, "mix": 2e-6}


@pytest.fixture(scope="module")
def servers(serve_models):
    """One running server per model (and one for a mixture), a 20 ms batching window."""
    running = {}
    for name in NAMES + ["mix"]:
        lm = (Mixture([load_model(str(serve_models / "gru")), load_model(str(serve_models / "kn3.arpa"))], [0.5, 0.5])
              if name == "mix" else load_model(str(serve_models / name)))
        enable_history_cache(lm, 1000)
        running[name] = Server(lm, batching=Batching(wait_ms=20.0, max_batch=64)).start()
    yield running
    for s in running.values():
        s.close(timeout=30)


@pytest.fixture(scope="module")
def test_lines(serve_models):
    return [ln for ln in (serve_models / "test.txt").read_text(encoding="utf-8").splitlines() if ln.split()]


@pytest.fixture(scope="module")
def cli_scores(serve_models, test_lines):
    """``sampledlm score MODEL test.txt --per-word --jsonl`` of every model (in this process), one JSON object
    per sentence."""
    import contextlib
    import io

    from sampledlm.cli import main

    out = {}
    for name in NAMES:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            with pytest.raises(SystemExit) as e:
                main(["score", str(serve_models / name), str(serve_models / "test.txt"), "--per-word", "--jsonl"])
        assert e.value.code == 0
        out[name] = [json.loads(x) for x in buf.getvalue().splitlines()]
        assert len(out[name]) == len(test_lines)
    return out


def test_health_and_info(servers, serve_models):
    for name, s in servers.items():
        assert s.host == "127.0.0.1" and s.url.startswith("http://127.0.0.1:")
        c = Client(s.url)
        assert c.health() == {"status": "ok"}
        info = c.info()
        assert info["vocab_size"] == len(s.lm.vocab) and info["device"] == "cpu"
        assert info["family"] == s.lm.family and info["model"] == s.lm.describe()
        assert info["limits"]["max_body"] == 1 << 20 and info["batching"]["enabled"] is True
    assert servers["ffnn3"].lm.history_cache is not None
    assert Client(servers["ffnn3"].url).info()["history_cache"]["capacity"] == 1000


@pytest.mark.parametrize("name", NAMES)
def test_score_gives_the_numbers_of_sampledlm_score(servers, cli_scores, test_lines, name):
    got = Client(servers[name].url).score(test_lines, per_word=True)
    want = cli_scores[name]
    assert len(got["sentences"]) == len(want)
    for g, w in zip(got["sentences"], want):
        assert (g["text"], g["words"], g["oovs"], g["predictions"]) == (w["text"], w["words"], w["oovs"], w["predictions"])
        assert abs(g["ln"] - w["ln"]) <= ATOL[name] * g["predictions"]
        np.testing.assert_allclose([x["ln"] for x in g["per_word"]], [x["ln"] for x in w["per_word"]],
                                   rtol=0, atol=ATOL[name])
        if name == "kn3.arpa":
            assert [x["order"] for x in g["per_word"]] == [x["order"] for x in w["per_word"]]
    total = sum(w["ln"] for w in want)
    assert got["totals"]["sentences"] == len(want)
    assert got["totals"]["ln"] == pytest.approx(total, abs=1e-4)
    assert got["totals"]["ppl"] == pytest.approx(math.exp(-total / sum(w["predictions"] for w in want)), rel=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_sentence_is_its_end_alone_as_in_the_python_api(servers, serve_models, name):
    import sampledlm

    got = Client(servers[name].url).score(["", "<s> </s>", []], per_word=True)["sentences"]
    want = sampledlm.load(serve_models / name).logprob("")
    assert [g["predictions"] for g in got] == [1, 1, 1] and [g["per_word"][0]["word"] for g in got] == ["</s>"] * 3
    assert [g["ln"] for g in got] == pytest.approx([want] * 3, abs=ATOL[name])
    totals = Client(servers[name].url).score(["w1 w2", ""])["totals"]  # no sentence there, as in sampledlm score
    assert (totals["sentences"], totals["words"], totals["predictions"]) == (1, 2, 3)


@pytest.mark.parametrize("name", NAMES)
def test_next_words_are_the_per_word_scores(servers, cli_scores, test_lines, name):
    """Each word's ln P after its sentence's prefix (and </s> after the whole sentence), asked as the
    decoder asks, equals the per-word score of ``sampledlm score``."""
    queries, want = [], []
    for line, w in zip(test_lines[:12], cli_scores[name][:12]):
        toks = line.split()
        for i, tok in enumerate(toks + ["</s>"]):
            queries.append((toks[:i], [tok]))
            want.append(w["per_word"][i]["ln"])
    got = Client(servers[name].url).next_words(queries)
    np.testing.assert_allclose([g[0] for g in got], want, rtol=0, atol=ATOL[name])


@pytest.mark.parametrize("name", NAMES + ["mix"])
def test_top_k_is_the_head_of_the_next_word_distribution(servers, name):
    s = servers[name]
    lm = s.lm
    hist = lm.vocab.words[2:5]
    got = Client(s.url).top_k([" ".join(hist), []], k=5)
    for row, h in zip(got, (hist, [])):
        full = lm.next_logprobs(lm.vocab.encode(h))
        assert [w for w, _ in row] == [lm.vocab.words[i] for i in np.lexsort((np.arange(len(full)), -full))[:5]]
        np.testing.assert_allclose([lp for _, lp in row], np.sort(full)[::-1][:5], rtol=0, atol=2e-6)


@pytest.mark.parametrize("name", ["ffnn3", "gru", "mix"])
def test_concurrent_clients_get_the_same_numbers_in_fewer_model_calls(servers, name):
    s = servers[name]
    c = Client(s.url)
    words = s.lm.vocab.words[2:]
    rng = np.random.default_rng(7)
    jobs = [[(list(rng.choice(words, int(rng.integers(0, 8)))), list(rng.choice(words + ["</s>"], 3)))
             for _ in range(4)] for _ in range(48)]
    alone = [c.next_words(j) for j in jobs]  # one at a time: each request its own model call
    before = c.info()["batching"]
    together: list = [None] * len(jobs)

    def worker(k):
        for i in range(k, len(jobs), 16):
            together[i] = Client(s.url).next_words(jobs[i])

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = c.info()["batching"]
    for a, b in zip(alone, together):
        np.testing.assert_allclose(np.concatenate(a), np.concatenate(b), rtol=0, atol=ATOL[name])
    calls, requests = after["calls"] - before["calls"], after["requests"] - before["requests"]
    assert requests == len(jobs)
    assert calls < requests  # some requests shared a model call


def test_batching_off_sends_every_request_alone(serve_models):
    lm = load_model(str(serve_models / "kn3.arpa"))
    with Server(lm, batching=Batching(enabled=False)) as s:
        c = Client(s.url)
        out: list = []
        threads = [threading.Thread(target=lambda: out.append(c.next_words([("w1", ["w2"])]))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        b = c.info()["batching"]
        assert b["enabled"] is False and b["calls"] == b["requests"] == 8
        assert len({json.dumps(x) for x in out}) == 1


def test_next_flags_the_words_outside_the_vocabulary(servers):
    """A word outside the vocabulary is scored as <unk>; the answer says which ones (it did not)."""
    name = NAMES[0]
    got = Client(servers[name].url).request("POST", "/next", {"queries": [
        {"history": "", "words": ["zzqqxx", "<unk>", "</s>"]}]})["results"][0]
    assert got["oov"] == [True, False, False]
    assert got["ln"][0] == got["ln"][1]  # the same number: P(<unk>)


def test_score_per_word_flags_the_words_outside_the_vocabulary(servers):
    """/score's per-word entries carry the oov flag /next gives (they had none)."""
    got = Client(servers[NAMES[0]].url).score(["zzqqxx <unk>"], per_word=True)["sentences"][0]["per_word"]
    assert [(w["word"], w["oov"]) for w in got] == [("zzqqxx", True), ("<unk>", False), ("</s>", False)]
