"""The objectives' options as dataclasses: each option's default, its default on a recurrent trunk, its help and its
range, declared once (:func:`sampledlm.config.option`).

Each objective class names its options' dataclass (``Options``); the command line generates one flag per option
name that some objective accepts (:func:`sampledlm.objectives.registry.option_help`), with every objective's
default in its help, and :func:`sampledlm.neural.settings.build_config` fills in the recurrent defaults. The
options several objectives share are declared here; an objective that wants another default for one of them
redeclares it with :func:`like` (the help and range stay the shared ones).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..config import NO_RECURRENT_DEFAULT, option

_KEEP = object()


def like(options_cls: type, name: str, default: Any = _KEEP, *, recurrent: Any = _KEEP,
         recurrent_unless: tuple[str, ...] | None = None):
    """The field ``name`` of ``options_cls`` with another ``default`` and/or ``recurrent`` default (help and range
    kept), for a subclass that redeclares it."""
    field = {f.name: f for f in dataclasses.fields(options_cls)}[name]
    meta = dict(field.metadata)
    own_default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    own_recurrent = meta.pop("recurrent", NO_RECURRENT_DEFAULT)
    own_unless = meta.pop("recurrent_unless", ())
    return option(own_default if default is _KEEP else default,
                  recurrent=own_recurrent if recurrent is _KEEP else recurrent,
                  recurrent_unless=own_unless if recurrent_unless is None else recurrent_unless, **meta)


@dataclass
class NoOptions:
    """An objective without options (the softmax)."""


@dataclass
class SampledOptions:
    """The options of every objective that scores a bag of words drawn from a noise distribution q."""

    samples: int = option(250, "candidates drawn per step (S); at most V - 1", min=1)
    noise_power: float = option(0.75, "noise distribution = unigram^power (0: uniform, 1: unigram)", min=0.0, max=2.0)
    sample_mode: str = option("shared", "how candidates are drawn and shared: shared (one bag per batch) or each "
                              "(per example)", choices=("shared", "each"))
    sampler: str = option("alias", "how noise words are drawn: alias (Walker's alias method) or multinomial",
                          choices=("alias", "multinomial"))


@dataclass
class NegativesOptions(SampledOptions):
    """The options of the objectives over negatives (NEG, BlackOut, ranking)."""

    exclude_true: bool = option(True, "drop the true word from the negatives", negatable="include-true")


@dataclass
class WordClassOptions:
    """The options of the objectives that can take word classes from a file or cluster the text (class, hsm)."""

    word_classes: str | None = option(
        None, "class, hsm: word classes from a file (class<TAB>word[<TAB>count]; make one with 'sampledlm classes'): "
              "the class layer's classes, or hsm's tree grouped by class (bit-path labels, as Brown clustering writes "
              "them, also arrange the classes' tree); 'auto' clusters the training text first as 'sampledlm classes' "
              "does (2 sqrt(V) classes; a file named auto: ./auto); 'none' frequency bins, a Huffman tree")
    components: int = option(
        1, "class, hsm with --arity 4 or more: each class's (tree node's) score is the log-sum-exp of this many "
           "linear scores instead of one (M directions per class, as a softmax's class marginal sums its members' "
           "exponentials)", min=1)
