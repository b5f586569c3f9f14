"""``sampledlm serve`` as a user runs it: it says where it listens (localhost by default), SIGTERM lets a request
in flight finish, a taken port is one line; and the curl examples of docs/serving.md run as written."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys

import pytest

pytest.importorskip("aiohttp")

from conftest import REPO  # noqa: E402
from sampledlm.loader import load_model  # noqa: E402
from sampledlm.serve.app import Server  # noqa: E402
from sampledlm.serve.client import Client  # noqa: E402


def start(*args: str) -> tuple[subprocess.Popen, str, str]:
    """``sampledlm serve ARGS --port 0`` in a subprocess; returns it, its URL and its first line."""
    p = subprocess.Popen([sys.executable, "-m", "sampledlm", "serve", *args, "--port", "0"], stderr=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(r"listening on (http://\S+?),", line)
    assert m, line + p.stderr.read() if p.poll() is not None else line
    return p, m.group(1), line


def test_sigterm_finishes_the_request_in_flight(serve_models):
    """A request whose body is half sent when SIGTERM arrives is still read and answered; then the server exits 0."""
    import time

    p, url, line = start(str(serve_models / "kn3.arpa"))
    try:
        assert "localhost only" in line and url.startswith("http://127.0.0.1:")
        body = json.dumps({"queries": [{"history": "w1 w2", "words": ["w3"]}]}).encode()
        host, port = url[len("http://"):].rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
        s.settimeout(60)
        s.sendall(b"POST /next HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
        time.sleep(0.5)  # the request is inside the server, its body half read
        p.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        s.sendall(body[10:])
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < 10:
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
        s.close()
        head, _, payload = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), answer
        lm = load_model(str(serve_models / "kn3.arpa"))
        want = lm.logprobs_after([lm.vocab.encode(["w1", "w2"])], [lm.vocab.encode(["w3"])])[0].tolist()
        assert json.loads(payload)["results"][0]["ln"] == want
        assert p.wait(60) == 0
        err = p.stderr.read()
        assert "stopped" in err and "Traceback" not in err
    finally:
        if p.poll() is None:
            p.kill()


def test_a_signal_after_the_clean_stop_does_not_kill_the_exit(serve_models):
    """Issue 54: a second SIGTERM or SIGINT that arrived after the "stopped" line found Python's default handler
    (put back when the event loop closed, and again at finalisation) and the process died by the signal (-15)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
        p, url, line = start(str(serve_models / "kn3.arpa"))
        try:
            p.send_signal(sig)
            while "stopped" not in (got := p.stderr.readline()):
                assert got, "the server ended without its 'stopped' line"
            for _ in range(3):
                p.send_signal(sig)
            assert p.wait(60) == 0
        finally:
            if p.poll() is None:
                p.kill()


def test_a_taken_port_is_one_line(serve_models):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "sampledlm", "serve", str(serve_models / "kn3.arpa"), "--port",
                            str(port)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stderr.startswith("sampledlm: error: 127.0.0.1:") and "cannot listen" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "give another --port" in r.stderr


def test_an_address_not_of_this_machine_asks_for_another_host(serve_models):
    r = subprocess.run([sys.executable, "-m", "sampledlm", "serve", str(serve_models / "kn3.arpa"), "--host",
                        "256.1.1.1", "--port", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "cannot listen" in r.stderr and "give another --host" in r.stderr, r.stderr


def test_announce_says_who_can_reach_it():
    from sampledlm.serve.app import Batching, announce

    class Fake:
        def __init__(self, host):
            self.host, self.url, self.batching = host, f"http://{host}:1", Batching()
            self.lm = type("L", (), {"describe": lambda self: "m"})()

    import io

    for host, words in (("127.0.0.1", "localhost only"), ("0.0.0.0", "any machine")):
        out = io.StringIO()
        announce(Fake(host), out)
        assert words in out.getvalue()


def docs_curl_lines() -> list[str]:
    text = (REPO / "docs" / "serving.md").read_text(encoding="utf-8")
    m = re.search(r"^## Ask it\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "docs/serving.md lost its curl examples"
    block = re.findall(r"```sh\n(.*?)```", m.group(1), re.S)[0]
    return [ln for ln in block.splitlines() if ln.startswith("curl ")]


def test_docs_curl_examples_answer_every_endpoint(serve_models):
    """The curl lines of docs/serving.md (which tests/test_docs.py runs too) reach every endpoint, answered."""
    lines = docs_curl_lines()
    assert {"/info", "/score", "/next", "/topk"} <= {re.search(r"localhost:8080(/\w+)", ln).group(1) for ln in lines}
    with Server(load_model(str(serve_models / "kn3.arpa"))) as s:
        for ln in lines:
            cmd = ln.replace("localhost:8080", f"127.0.0.1:{s.port}")
            r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60,
                               env={**os.environ, "no_proxy": "*"})
            assert r.returncode == 0, (ln, r.stderr, r.stdout)
            got = json.loads(r.stdout)
            assert "error" not in got
    assert "results" in got and len(got["results"][0]["words"]) == 5
