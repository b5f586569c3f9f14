"""JSON read from outside (request bodies, n-best lines) with a nesting bound that holds on every Python build.

``json.loads`` refuses deep nesting only through ``RecursionError``, whose threshold depends on the interpreter
(its recursion limit, its C stack, the release): ``[[[...`` 3,000 deep is refused by one Python and read by
another. :func:`nesting_depth` counts the depth of the text itself, so the same input is refused everywhere.
"""

from __future__ import annotations

import re

import numpy as np

MAX_DEPTH = 100  # far above any request or n-best line (depth 3-4), far below any interpreter's recursion limit

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)  # disjoint alternatives: linear time on any input
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


def nesting_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text``, brackets inside JSON strings not counted."""
    bare = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    steps = _STEP[np.frombuffer(bare, dtype=np.uint8)].astype(np.int32)
    return int(np.cumsum(steps).max(initial=0))


def too_deep(text: str) -> bool:
    """Whether ``text`` nests deeper than :data:`MAX_DEPTH` (refuse it before ``json.loads``)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # too few brackets to nest that deep
        return False
    return nesting_depth(text) > MAX_DEPTH
