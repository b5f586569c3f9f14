"""Bad requests get a 4xx and one line, never a crash: malformed JSON, wrong types, unknown fields, empty
input, invalid UTF-8, oversized bodies and counts, slow clients, wrong paths and methods; the server
answers valid requests correctly afterwards."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("aiohttp")

from sampledlm.loader import load_model  # noqa: E402
from sampledlm.serve.app import Server  # noqa: E402
from sampledlm.serve.client import Client  # noqa: E402
from sampledlm.serve.limits import Limits  # noqa: E402

LIMITS = Limits(max_body=4000, max_items=5, max_words=10, max_k=20, read_timeout=0.5, idle_timeout=1.0)


@pytest.fixture(scope="module")
def server(serve_models):
    s = Server(load_model(str(serve_models / "kn3.arpa")), limits=LIMITS).start()
    yield s
    s.close(timeout=30)


def post(url: str, body: bytes, path: str = "/score", method: str = "POST", headers: dict | None = None):
    req = urllib.request.Request(url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


BAD = [
    # (path, body, status, words the one-line message holds)
    ("/score", b"", 400, "empty request body"),
    ("/score", b"   \n", 400, "empty request body"),
    ("/score", b"{", 400, "malformed JSON"),
    ("/score", b'{"sentences": ["a b"],}', 400, "malformed JSON"),
    ("/score", b"[1, 2]", 400, "must be a JSON object"),
    ("/score", b'"text"', 400, "must be a JSON object"),
    ("/score", b"\xff\xfe{}", 400, "not valid UTF-8"),
    ("/score", b'{"sentences": ["caf\xe9"]}', 400, "not valid UTF-8"),
    ("/score", b"[" * 3000, 400, "nested too deeply"),
    ("/score", b'{"sentences": ' + b"[" * 150 + b"]" * 150 + b"}", 400, "nested too deeply"),  # valid JSON anywhere
    ("/score", b'{"sentences": [NaN]}', 400, "NaN"),
    ("/score", b'{"sentences": ["w1"], "sentences": ["w2"]}', 400, 'field "sentences" given twice'),
    ("/next", b'{"queries": [{"history": "w1", "words": "w2", "words": "w3"}]}', 400, 'field "words" given twice'),
    ("/score", b'{"sentences": []}', 400, "empty list"),
    ("/score", b'{"sentences": "w1 w2"}', 400, "expected a list"),
    ("/score", b'{"sentences": [5]}', 400, "sentences[0]: expected a string or a list"),
    ("/score", b'{"sentences": [["w1", 2]]}', 400, "sentences[0][1]: expected a string"),
    ("/score", b'{"sentences": [["w1 w2"]]}', 400, "not one token"),
    ("/score", b'{"sentences": [["w1", "</s>"]]}', 400, "not a word here"),
    ("/score", b'{"sentences": ["w1"], "per_word": "yes"}', 400, "per_word: expected true or false"),
    ("/score", b'{"sentences": ["w1"], "extra": 1}', 400, 'unknown field "extra"'),
    ("/score", b'{"sentence": ["w1"]}', 400, 'unknown field "sentence"'),
    ("/score", b'{"sentences": ["w1", "w1", "w1", "w1", "w1", "w1"]}', 413, "over the limit of 5"),
    ("/score", json.dumps({"sentences": ["w1 " * 11]}).encode(), 413, "11 tokens"),
    ("/score", json.dumps({"sentences": ["w1"] * 2000}).encode(), 413, "4000 bytes"),
    ("/next", b'{"queries": [{"history": "w1"}]}', 400, 'queries[0]: missing field "words"'),
    ("/next", b'{"queries": [{"history": "w1", "words": []}]}', 400, "queries[0].words: empty"),
    ("/next", b'{"queries": [{"history": 1, "words": "w1"}]}', 400, "queries[0].history: expected"),
    ("/next", b'{"queries": [{"history": "w1", "words": "w2", "k": 1}]}', 400, 'unknown field "k"'),
    ("/next", b'{"queries": [["w1", "w2"]]}', 400, "queries[0]: expected an object"),
    ("/next", b'{"queries": [{"history": ["</s>"], "words": "w2"}]}', 400, "not a word here"),
    ("/next", b'{"queries": [{"history": "", "words": ["<s>"]}]}', 400, "not a word here"),
    ("/next", b'{"queries": [{"history": "", "words": "w1 <s>"}]}', 400, "<s> is not a next word"),
    ("/next", json.dumps({"queries": [{"history": "", "words": "w1 w2 w3"}] * 2}).encode(), 413, "pairs"),
    ("/topk", b'{"histories": ["w1"], "k": 0}', 400, "out of range"),
    ("/topk", b'{"histories": ["w1"], "k": 21}', 400, "out of range 1..20"),
    ("/topk", b'{"histories": ["w1"], "k": 2.5}', 400, "k: expected a whole number"),
    ("/topk", b'{"histories": ["w1"], "k": true}', 400, "k: expected a whole number"),
    ("/topk", b'{"histories": null}', 400, "histories: expected a list"),
    ("/nowhere", b"{}", 404, "no endpoint"),
]


@pytest.mark.parametrize("path,body,status,words", BAD, ids=[f"{i}-{b[3]}" for i, b in enumerate(BAD)])
def test_bad_request_gets_a_4xx_and_one_line(server, path, body, status, words):
    got_status, got = post(server.url, body, path)
    assert got_status == status, got
    assert set(got) == {"error"} and "\n" not in got["error"] and words in got["error"]


def test_a_body_not_encoded_as_its_headers_say_is_the_clients_fault(server):
    status, got = post(server.url, b'{"sentences": ["w1"]}', headers={"Content-Encoding": "gzip"})
    assert status == 400 and "cannot be read as sent" in got["error"] and "\n" not in got["error"]  # was a 500


def test_wrong_method(server):
    status, got = post(server.url, None, "/score", method="GET")
    assert status == 405 and "GET is not allowed" in got["error"]
    status, got = post(server.url, b"{}", "/info", method="POST")
    assert status == 405


def test_chunked_body_over_the_limit(server):
    """A body without Content-Length (chunked) is cut at the limit too."""
    def chunks():
        for _ in range(100):
            yield b'{"x": "' + b"a" * 100 + b'"}'

    req = urllib.request.Request(server.url + "/score", data=chunks(), method="POST",
                                 headers={"Transfer-Encoding": "chunked"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=30)
    assert e.value.code == 413


def test_slow_client_gets_408_and_others_are_served_meanwhile(server):
    host, port = server.url.rsplit("/", 1)[1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    try:
        s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"sent")  # and then nothing
        t = time.monotonic()
        assert Client(server.url).health() == {"status": "ok"}  # served while the slow one waits
        s.settimeout(30)
        answer = b""
        while b"}" not in answer and (chunk := s.recv(4096)):  # headers and body may come in separate packets
            answer += chunk
        answer = answer.decode()
        assert answer.startswith("HTTP/1.1 408") and "not received within 0.5 s" in answer
        assert time.monotonic() - t < 29  # the timeout fired; not a wall-clock assertion on speed
    finally:
        s.close()


def test_silent_client_is_closed_after_the_idle_timeout(server):
    host, port = server.url.rsplit("/", 1)[1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    try:
        s.sendall(b"POST /ne")  # half a request line, then nothing
        s.settimeout(30)
        assert s.recv(4096) == b""  # closed by the server (after idle_timeout), not held open
    finally:
        s.close()


def test_garbage_on_the_socket_is_refused_and_the_server_goes_on(server):
    host, port = server.url.rsplit("/", 1)[1].rsplit(":", 1)
    for junk in (b"\x00\x01\x02 garbage\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"POST /score HTTP/1.1\r\nContent-Length: -5\r\n\r\n"):
        s = socket.create_connection((host, int(port)))
        s.settimeout(30)
        s.sendall(junk)
        answer = s.recv(4096)
        s.close()
        assert answer.startswith(b"HTTP/1.") and answer.split()[1][:1] == b"4"


def raw_answer(server, data: bytes) -> tuple[int, dict, dict]:
    """Send raw bytes; the answer's status, headers (lower-case names) and JSON body."""
    host, port = server.url.rsplit("/", 1)[1].rsplit(":", 1)
    with socket.create_connection((host, int(port))) as s:
        s.settimeout(30)
        s.sendall(data)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict((k.strip().lower(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:]))
    return int(lines[0].split()[1]), headers, json.loads(body)


@pytest.mark.parametrize("data, status, words", [
    (b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 10_000 + b"\r\n\r\n", 431, "header"),
    (b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(200)) + b"\r\n", 431, "headers"),
    (b"\x00\x01\x02 garbage\r\n\r\n", 400, ""),
    (b"GET / HTTP/9.9\r\n\r\n", 400, ""),
], ids=["long-header", "many-headers", "garbage", "bad-version"])
def test_what_the_http_parser_refuses_is_answered_in_json(server, caplog, data, status, words):
    """The README's promise holds before a request exists too: one line of JSON, 431 for oversized headers
    (RFC 6585), a log line without a traceback."""
    code, headers, body = raw_answer(server, data)
    assert code == status and headers["content-type"].startswith("application/json"), (code, headers)
    assert list(body) == ["error"] and words in body["error"].lower() and "\n" not in body["error"]
    assert "Traceback" not in caplog.text


def test_valid_requests_are_right_after_the_bad_ones(server):
    c = Client(server.url)
    lm = server.lm
    want = lm.logprobs_after([lm.vocab.encode(["w1", "w2"])], [lm.vocab.encode(["w3", "</s>"])])[0]
    assert c.next_words([("w1 w2", ["w3", "</s>"])]) == [want.tolist()]
    # a text of next words keeps its </s> in place: one number a word (the tokeniser dropped it: 2 numbers for 3)
    assert c.next_words([("w1 w2", "w3 </s> w1"), ("w1 w2", "</s>")]) == [
        lm.logprobs_after([lm.vocab.encode(["w1", "w2"])], [lm.vocab.encode(["w3", "</s>", "w1"])])[0].tolist(),
        want.tolist()[1:]]
    with pytest.raises(TypeError, match=r"\(history, words\) pair"):  # the server's JSON shape, not the client's
        c.next_words([{"history": "w1", "words": ["w2"]}])
    assert c.info()["counters"]["refused"] > 0 and c.info()["counters"]["errors"] == 0
