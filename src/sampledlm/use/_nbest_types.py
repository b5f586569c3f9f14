"""The n-best lists' types (:mod:`.nbest` re-exports them): an utterance's hypotheses and their first-pass
scores, shared by the readers of every format."""

from __future__ import annotations

from dataclasses import dataclass

MARKERS = frozenset({"<s>", "</s>"})


@dataclass
class Hypothesis:
    """One entry of an n-best list; ``am``, ``lm`` first-pass natural-log scores, ``lm_new`` the rescoring LM's."""

    words: list[str]
    am: float
    lm: float
    lm_new: float | None = None


@dataclass
class NBest:
    """An utterance's hypotheses in first-pass order, and its reference when known."""

    id: str
    hyps: list[Hypothesis]
    ref: list[str] | None = None


def _words(tokens: list[str]) -> list[str]:
    return [t for t in tokens if t not in MARKERS]
