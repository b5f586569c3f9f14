"""Mutations of a valid file, for fuzzing the readers of outside files (ARPA, n-best lists, lattices, corpora...).

A mutation is a short list of :class:`Op` applied in order to the file's bytes, seen as lines split on
``\\n`` (so invalid UTF-8, NUL bytes and lost line ends can all appear):

==============  =====================================================================================
``truncate``    cut the file at byte ``i`` (``i`` taken modulo its length)
``delete``      remove line ``i``
``duplicate``   repeat line ``i``
``swap``        exchange lines ``i`` and ``j``
``token``       replace the ``j``-th token of line ``i`` with ``token`` (for ``KEY=VALUE`` tokens the value)
``insert``      insert ``raw`` as a new line before line ``i``
``splice``      insert ``raw`` inside line ``i`` at byte ``j``
``flip``        xor byte ``i`` of the file with ``j % 255 + 1``
==============  =====================================================================================

The property tests draw the operations with hypothesis; ``python -m benchmarks fuzz`` draws them from a seeded
:class:`random.Random` (:func:`random_ops`), so a case is reproducible from its seed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

KINDS = ("truncate", "delete", "duplicate", "swap", "token", "insert", "splice", "flip")
#: how often :func:`random_ops` draws each kind: mostly changes a parser must understand, less often bytes
#: that make the file invalid UTF-8 at once
WEIGHTS = (1, 2, 2, 2, 4, 2, 1, 1)

#: replacement tokens: bad numbers, huge integers, empty, separators, non-ASCII and control bytes
BAD_TOKENS = ("nan", "inf", "-inf", "1e999", "-1e999", "abc", "", "0x10", "--1", "-1", "0", "1.5", "-0",
              "99999999999999999999", "-99999999999999999999", "1e308", "=", "é", "\x00", "\t", "[", "{}", "null")
#: raw byte strings to insert: markup of the formats themselves, invalid UTF-8, NUL, a BOM, CR, long runs
RAW = (b"", b"\\data\\", b"ngram 1=3", b"\\end\\", b"N=3 L=2", b"J=0 S=0 E=5", b"I=7", b"\xff\xfe", b"\x00",
       b"\xef\xbb\xbf", b"\r", b"{", b'{"id": 1}', b"[[[[", b"x" * 5000, b"\xc3", b"-1.5 -2.5 2 a b",
       b"utt-1 1.0", b"0 0 0")

_TOKEN = re.compile(rb"\S+")


@dataclass(frozen=True)
class Op:
    kind: str
    i: int = 0
    j: int = 0
    token: str = ""
    raw: bytes = b""


def _replace_token(line: bytes, j: int, token: bytes) -> bytes:
    spans = [m.span() for m in _TOKEN.finditer(line)]
    if not spans:
        return token
    a, b = spans[j % len(spans)]
    eq = line.find(b"=", a, b)
    if eq >= 0:  # KEY=VALUE: replace the value
        a = eq + 1
    return line[:a] + token + line[b:]


def mutate(data: bytes, ops: list[Op]) -> bytes:
    """``data`` with ``ops`` applied in order (module docstring)."""
    for op in ops:
        if op.kind == "truncate":
            data = data[: op.i % (len(data) + 1)]
            continue
        if op.kind == "flip":
            if data:
                k = op.i % len(data)
                data = data[:k] + bytes([data[k] ^ (op.j % 255 + 1)]) + data[k + 1:]
            continue
        lines = data.split(b"\n")
        i, j = op.i % len(lines), op.j % len(lines)
        if op.kind == "delete":
            del lines[i]
        elif op.kind == "duplicate":
            lines.insert(i, lines[i])
        elif op.kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op.kind == "token":
            lines[i] = _replace_token(lines[i], op.j, op.token.encode("utf-8"))
        elif op.kind == "insert":
            lines.insert(i, op.raw)
        elif op.kind == "splice":
            k = op.j % (len(lines[i]) + 1)
            lines[i] = lines[i][:k] + op.raw + lines[i][k:]
        else:
            raise ValueError(f"unknown mutation {op.kind!r}")
        data = b"\n".join(lines)
    return data


def random_ops(rng: random.Random, max_ops: int = 3) -> list[Op]:
    """One to ``max_ops`` operations drawn from ``rng`` (indices are large: :func:`mutate` takes them modulo)."""
    return [Op(rng.choices(KINDS, WEIGHTS)[0], rng.randrange(1 << 30), rng.randrange(1 << 30), rng.choice(BAD_TOKENS),
               rng.choice(RAW)) for _ in range(rng.randint(1, max_ops))]
