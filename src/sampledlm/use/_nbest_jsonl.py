"""Reading n-best lists in JSONL (:mod:`.nbest`'s ``jsonl`` format; :mod:`.nbest` re-exports :func:`read_jsonl`): a line per utterance,
``{"id", "ref"?, "hyps": [{"words", "am", "lm"}]}``, every field checked, and a wrong one named by its path
(``hyps[2].lm``) with the file and line."""

from __future__ import annotations

import json
import math

from ..data.jsontext import MAX_DEPTH, too_deep
from ..data.textio import iter_lines
from ..errors import UserError
from ._nbest_types import Hypothesis, NBest, _words


def _json_words(value, what: str) -> list[str]:
    """A JSON n-best's words: a string (split at white space) or a list of strings; anything else is refused
    (``str()`` of a list had read ``['no', 'it']`` as the words ``['no',`` and ``'it']``)."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(w, str) for w in value):
        return [t for w in value for t in w.split()]
    raise ValueError(f"{what}: a string or a list of strings, not {json.dumps(value)[:40]}")


def _json_number(value, what: str) -> float:
    try:
        if isinstance(value, str):  # a number written as a string, as some tools do
            x = float(value)
        elif isinstance(value, bool) or not isinstance(value, (int, float)):  # true is not 1: a score is a number
            raise ValueError
        else:
            x = float(value)
    except (ValueError, OverflowError):
        raise ValueError(f"{what}: {json.dumps(value)[:40]} is not a number") from None
    if not math.isfinite(x):
        raise ValueError(f"{what}: {json.dumps(value)[:40]} is not a finite number")
    return x


def _json_utterance(d) -> NBest:
    """One JSONL line's utterance; ValueError naming the field (``hyps[2].lm``) that is missing or wrong."""
    if not isinstance(d, dict):
        raise ValueError(f"expected an object {{\"id\", \"hyps\": [...]}}, not {json.dumps(d)[:40]}")
    for key in ("id", "hyps"):
        if key not in d:
            raise ValueError(f"missing \"{key}\"")
    uid = d["id"]
    if isinstance(uid, bool) or not isinstance(uid, (str, int)):
        raise ValueError(f"id: a string or an integer, not {json.dumps(uid)[:40]}")
    uid = str(uid)
    if not uid or len(uid.split()) != 1 or uid != uid.strip():  # a 1-best line is "ID words": one token
        raise ValueError(f"id: {uid!r} is not one token (the one-best output's lines are 'ID word word ...')")
    if not isinstance(d["hyps"], list):
        raise ValueError(f"hyps: a list of hypotheses, not {json.dumps(d['hyps'])[:40]}")
    hyps = []
    for i, h in enumerate(d["hyps"]):
        where = f"hyps[{i}]"
        if not isinstance(h, dict):
            raise ValueError(f"{where}: an object {{\"words\", \"am\", \"lm\"}}, not {json.dumps(h)[:40]}")
        missing = [k for k in ("words", "am", "lm") if k not in h]
        if missing:
            raise ValueError(f"{where}: missing \"{missing[0]}\"")
        hyps.append(Hypothesis(_words(_json_words(h["words"], f"{where}.words")), _json_number(h["am"], f"{where}.am"),
                               _json_number(h["lm"], f"{where}.lm")))
    if not hyps:
        raise ValueError(f"utterance {uid!r} has no hypotheses")
    ref = d.get("ref")
    return NBest(uid, hyps, None if ref is None else _words(_json_words(ref, "ref")))


def read_jsonl(path: str) -> list[NBest]:
    """A line per utterance: ``{"id": str, "ref": str (optional), "hyps": [{"words": str, "am": x, "lm": y}]}``;
    ``words`` and ``ref`` may also be lists of strings, ``id`` an integer (one token: no white space)."""
    out = []
    for n, line in enumerate(iter_lines(path), 1):
        if not line.strip():
            continue
        if too_deep(line):
            raise UserError(f"{path}:{n}: JSON nested too deeply (over {MAX_DEPTH} levels)")
        try:
            out.append(_json_utterance(json.loads(line)))
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{n}: not JSON ({e.msg})") from None
        except RecursionError:
            raise UserError(f"{path}:{n}: JSON nested too deeply") from None
        except ValueError as e:
            raise UserError(f"{path}:{n}: {e}") from None
    if not out:
        raise UserError(f"{path}: no utterances")
    return out
