"""A small Python client for ``sampledlm serve`` (standard library only: urllib and json).

    >>> from sampledlm.serve.client import Client
    >>> c = Client("http://127.0.0.1:8080")
    >>> c.info()["vocab_size"]
    10000
    >>> c.score(["the cat sat", "a dog ran"])["totals"]["ppl"]
    >>> c.next_words([("the cat", ["sat", "</s>"])])       # [[ln P(sat | <s> the cat), ln P(</s> | ...)]]
    >>> c.top_k(["the cat"], k=5)                           # [[(word, ln P), ...]]

A refused request raises :class:`ServerError` with the server's one-line message and status.
One ``Client`` may be shared by threads (each call opens its own connection).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Sequence


class ServerError(Exception):
    """The server answered with an error: ``status`` and its one-line ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message


Text = str | Sequence[str]


class Client:
    """Calls the endpoints of a server at ``url`` (module docstring); ``timeout`` in seconds."""

    def __init__(self, url: str = "http://127.0.0.1:8080", timeout: float = 60.0):
        self.url, self.timeout = url.rstrip("/"), timeout

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data is not None else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                msg = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                msg = raw.decode("utf-8", "replace").strip() or e.reason
            raise ServerError(e.code, msg) from None

    def health(self) -> dict:
        return self.request("GET", "/health")

    def info(self) -> dict:
        return self.request("GET", "/info")

    def score(self, sentences: Sequence[Text], per_word: bool = False) -> dict:
        """``{"sentences": [...], "totals": {...}}``: what ``sampledlm score --jsonl`` prints, per request."""
        return self.request("POST", "/score", {"sentences": [_text(s) for s in _many(sentences, "score", "sentences")],
                                               "per_word": per_word})

    def next_words(self, queries: Sequence[tuple[Text, Text]]) -> list[list[float]]:
        """``ln P(word | <s> history)`` for each ``(history, words)``: one list of floats per query."""
        body = {"queries": [{"history": _text(h), "words": _text(w)} for h, w in map(_pair, _many(
            queries, "next_words", "(history, words) pairs"))]}
        return [r["ln"] for r in self.request("POST", "/next", body)["results"]]

    def top_k(self, histories: Sequence[Text], k: int = 10) -> list[list[tuple[str, float]]]:
        """The ``k`` most probable next words after each history, with ``ln P``, most probable first."""
        res = self.request("POST", "/topk", {"histories": [_text(h) for h in _many(histories, "top_k", "histories")],
                                             "k": k})["results"]
        return [list(zip(r["words"], r["ln"])) for r in res]


def _many(items, method: str, what: str) -> list:
    """``items`` as a list, refusing a bare string (it would be sent letter by letter, one item a letter)."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"Client.{method}: give a list of {what}, e.g. [{items!r}], not a single string")
    return list(items)


def _pair(q) -> tuple:
    """A ``(history, words)`` query; a dict (the server's JSON shape) is refused: unpacked, it gave its two keys, and
    the numbers of ln P("words" | "history") came back with no error."""
    if isinstance(q, (tuple, list)) and len(q) == 2:
        return tuple(q)
    raise TypeError(f"Client.next_words: each query is a (history, words) pair, e.g. ('the cat', ['sat']); got {q!r}")


def _text(v: Text):
    return v if isinstance(v, str) else list(v)
