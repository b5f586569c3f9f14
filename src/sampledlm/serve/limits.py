"""What the server accepts: its limits, and the checks that turn a request body into model ids or a 4xx.

Every request body is a JSON object with known fields only; a bad one is refused with one line that
names the field and the value (:class:`BadRequest`, status 400; 413 when it is over a limit), before
any model work. The three request kinds (field: type)::

    POST /score   sentences: [TEXT, ...]            per_word: bool (false)
    POST /next    queries: [{"history": TEXT, "words": TEXT}, ...]
    POST /topk    histories: [TEXT, ...]            k: int (10)

A TEXT is a string (tokenised as ``sampledlm score`` reads a line of a file: the model's text
options; literal ``<s>``/``</s>`` dropped) or a list of tokens taken as they are. Words outside the
vocabulary are scored as ``<unk>``, as everywhere in the toolkit. A history is the sentence so far
(no ``<s>``, no ``</s>``); a next word may be ``</s>`` (the sentence ends there).

Counts: a request holds at most ``max_items`` sentences, (history, word) pairs or histories, each
sentence or history at most ``max_words`` tokens, and ``k <= max_k``; the body is at most
``max_body`` bytes (checked by the server library while reading, status 413) and arrives within
``read_timeout`` seconds (408); a connection idle for ``idle_timeout`` seconds, or still sending its
headers then, is closed (no request held open forever by a slow or silent client).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from ..data.jsontext import MAX_DEPTH, too_deep
from ..data.tokenizer import TextOptions, token_normaliser, tokenize_line
from ..data.vocab import BOS, EOS, UNK_ID, Vocab


@dataclass(frozen=True)
class Limits:
    """The server's bounds on one request (module docstring); every one is a ``sampledlm serve`` flag."""

    max_body: int = 1 << 20  # bytes
    max_items: int = 1000  # sentences, (history, word) pairs or histories per request
    max_words: int = 200  # tokens per sentence or history
    max_k: int = 1000  # top-k
    read_timeout: float = 10.0  # seconds to receive a request's body
    idle_timeout: float = 30.0  # seconds a connection may stay idle or in its headers before it is closed

    def to_dict(self) -> dict:
        return asdict(self)


class BadRequest(Exception):
    """A request the server refuses: ``status`` (400, 413, ...) and a one-line message."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def parse_json(body: bytes) -> dict:
    """The JSON object in ``body`` (strict UTF-8, no NaN/Infinity, bounded nesting), or BadRequest."""
    if not body.strip():
        raise BadRequest("empty request body: send a JSON object")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"request body is not valid UTF-8 (byte 0x{body[e.start]:02x} at offset {e.start})") from None
    if too_deep(text):
        raise BadRequest(f"malformed JSON: nested too deeply (over {MAX_DEPTH} levels)")
    try:
        obj = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise BadRequest(f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise BadRequest("malformed JSON: nested too deeply") from None
    except ValueError as e:  # NaN / Infinity
        raise BadRequest(f"malformed JSON: {e}") from None
    if not isinstance(obj, dict):
        raise BadRequest(f"the request must be a JSON object, not {_kind(obj)}")
    return obj


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    # json's default keeps the last of two equal keys in silence: a client that sends {"k": 5, "k": 50} or two
    # "sentences" lists gets answers to a request other than the one it believes it sent
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise BadRequest(f"malformed JSON: field {_show(dup)} given twice in one object")
    return obj


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _kind(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    return "an object"


def check_fields(obj: dict, required: tuple[str, ...], optional: tuple[str, ...] = (), where: str = "request") -> None:
    """BadRequest for an unknown or missing field of ``obj``."""
    allowed = required + optional
    for k in obj:
        if k not in allowed:
            raise BadRequest(f"{where}: unknown field {_show(k)} (expected: {', '.join(allowed)})")
    for k in required:
        if k not in obj:
            raise BadRequest(f"{where}: missing field {_show(k)}")


def _show(v, width: int = 40) -> str:
    s = json.dumps(v, ensure_ascii=True)
    return s if len(s) <= width else s[: width - 3] + "..."


def items_list(obj: dict, field: str, limits: Limits) -> list:
    """``obj[field]``, a non-empty list of at most ``max_items`` entries."""
    v = obj[field]
    if not isinstance(v, list):
        raise BadRequest(f"{field}: expected a list, got {_kind(v)}")
    if not v:
        raise BadRequest(f"{field}: empty list: nothing to score")
    if len(v) > limits.max_items:
        raise BadRequest(f"{field}: {len(v)} entries, over the limit of {limits.max_items} per request (--max-items)", 413)
    return v


class Reader:
    """Turns a TEXT (module docstring) into tokens and ids of one model's vocabulary."""

    def __init__(self, vocab: Vocab, text_options: dict | None, limits: Limits):
        self.vocab, self.limits = vocab, limits
        self.opts = TextOptions(**(text_options or {}))
        self.index = vocab.index
        # a token list is read as the Python API reads one: already split, each token normalised as the model's
        # text was (lower-cased, numbers as <num>); unnormalised, an upper-case word was <unk> here alone
        self.normalise = token_normaliser(text_options)

    def tokens(self, v, where: str, *, allow_empty: bool = False, allow_eos: bool = False) -> list[str]:
        """The tokens of a text or token list. ``allow_eos``: next words, each of which gets its number: ``</s>`` is
        a word there (the end of the sentence, in a text too) and ``<s>`` is refused. Elsewhere (a history, a
        sentence) a text drops a literal ``<s>`` or ``</s>`` as the tokeniser (and the Python API) does, and a list
        of tokens, which names each token, refuses it."""
        if isinstance(v, str):
            toks = self._text_tokens(v, where, allow_eos)
        elif isinstance(v, list):
            toks = []
            for i, t in enumerate(v):
                if not isinstance(t, str):
                    raise BadRequest(f"{where}[{i}]: expected a string (a token), got {_kind(t)}")
                if not t or t != t.strip() or len(t.split()) != 1:
                    raise BadRequest(f"{where}[{i}]: {_show(t)} is not one token (empty or holds whitespace)")
                if t == BOS or (t == EOS and not allow_eos):
                    raise BadRequest(f"{where}[{i}]: {t} is not a word here (sentence markers are implied)")
                toks.append(t if t == EOS else self.normalise(t))
        else:
            raise BadRequest(f"{where}: expected a string or a list of tokens, got {_kind(v)}")
        if not toks and not allow_empty:
            raise BadRequest(f"{where}: empty: give at least one word")
        if len(toks) > self.limits.max_words:
            raise BadRequest(f"{where}: {len(toks)} tokens, over the limit of {self.limits.max_words} (--max-words)", 413)
        return toks

    def _text_tokens(self, v: str, where: str, next_words: bool) -> list[str]:
        """A text's tokens as the model's text was read; as next words, each ``</s>`` kept in its place (the
        tokeniser drops markers: a decoder got fewer numbers than the words it sent, paired with the wrong ones)."""
        if not next_words:
            return tokenize_line(v, self.opts)
        parts = v.split()
        if BOS in parts:
            raise BadRequest(f"{where}: {BOS} is not a next word (the sentence's start is implied)")
        toks, run = [], []
        for part in parts + [EOS]:
            if part == EOS:
                toks += tokenize_line(" ".join(run), self.opts) if run else []
                toks.append(EOS)
                run = []
            else:
                run.append(part)
        return toks[:-1]  # the EOS that closed the last run

    def ids(self, toks: list[str]) -> list[int]:
        get = self.index.get
        return [get(t, UNK_ID) for t in toks]


def read_score(obj: dict, reader: Reader) -> tuple[list[list[str]], bool]:
    """``(sentences as token lists, per_word)`` of a /score request."""
    check_fields(obj, ("sentences",), ("per_word",))
    per_word = obj.get("per_word", False)
    if not isinstance(per_word, bool):
        raise BadRequest(f"per_word: expected true or false, got {_kind(per_word)}")
    sents = items_list(obj, "sentences", reader.limits)
    # an empty sentence (an empty hypothesis) is </s> alone, as the Python API's logprob("") and a decoder's
    # advance(begin_sentence(), "</s>") score it
    return [reader.tokens(s, f"sentences[{i}]", allow_empty=True) for i, s in enumerate(sents)], per_word


def read_next(obj: dict, reader: Reader) -> list[tuple[list[int], list[int], list[str]]]:
    """``[(history ids, next-word ids, next-word tokens)]`` of a /next request."""
    check_fields(obj, ("queries",))
    queries = items_list(obj, "queries", reader.limits)
    out, pairs = [], 0
    for i, q in enumerate(queries):
        where = f"queries[{i}]"
        if not isinstance(q, dict):
            raise BadRequest(f"{where}: expected an object {{\"history\": ..., \"words\": ...}}, got {_kind(q)}")
        check_fields(q, ("history", "words"), where=where)
        hist = reader.tokens(q["history"], f"{where}.history", allow_empty=True)
        words = reader.tokens(q["words"], f"{where}.words", allow_eos=True)
        pairs += len(words)
        if pairs > reader.limits.max_items:
            raise BadRequest(f"queries: over {reader.limits.max_items} (history, word) pairs per request (--max-items)",
                             413)
        out.append((reader.ids(hist), reader.ids(words), words))
    return out


def read_topk(obj: dict, reader: Reader) -> tuple[list[list[int]], int]:
    """``(history ids, k)`` of a /topk request."""
    check_fields(obj, ("histories",), ("k",))
    k = obj.get("k", 10)
    if isinstance(k, bool) or not isinstance(k, int):
        raise BadRequest(f"k: expected a whole number, got {_kind(k)}")
    top = min(reader.limits.max_k, len(reader.vocab))
    if not 1 <= k <= top:
        raise BadRequest(f"k: {k} is out of range 1..{top}" + (" (--max-k)" if top == reader.limits.max_k else ""))
    hists = items_list(obj, "histories", reader.limits)
    return [reader.ids(reader.tokens(h, f"histories[{i}]", allow_empty=True)) for i, h in enumerate(hists)], k


def finite(x: float) -> float | None:
    """JSON has no infinities: a log-probability of -inf (a zero probability) is sent as null."""
    return x if math.isfinite(x) else None

