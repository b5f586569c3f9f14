"""The contract between models (*scorers*) and training objectives (*output objectives*).

A scorer gives a real-valued score ``a_w(h)`` for any candidate word ``w`` after any history
``h`` of a batch. An output objective turns the scores of the true words and of a candidate set
(all of V, a sample, ...) into a training loss, and defines the model's *exact* inference rule
(:meth:`OutputObjective.log_prob`), which evaluation always uses. Neither reaches into the other:
a new model is one :class:`Scorer`, a new objective one :class:`OutputObjective`.

Shapes: ``N`` histories in a batch (a recurrent model flattens batch x time and drops padding
before calling an objective), ``V`` predicted words, ``S`` candidates.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np  # noqa: F401  (annotations)
import torch
from torch import nn

from ..config import check
from .normaliser import scorer_blocks
from .options import NoOptions


@runtime_checkable
class Scorer(Protocol):
    """What an objective may ask of a model.

    ``ctx`` is whatever the model computed for a batch of ``N`` histories (for neural models
    the hidden states ``[N, h]``; for maximum-entropy models the active features). Objectives
    never look inside it; they only hand it back to these methods.
    """

    num_words: int  # V

    def score_targets(self, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """``targets [N]`` -> ``[N]``: ``a_{targets[i]}(h_i)``."""

    def score_shared(self, ctx: Any, words: torch.Tensor) -> torch.Tensor:
        """``words [S]`` shared by the batch -> ``[N, S]``: one dense product against S columns."""

    def score_each(self, ctx: Any, words: torch.Tensor) -> torch.Tensor:
        """``words [N, S]``, a candidate set per history -> ``[N, S]``."""

    def score_blocks(self, ctx: Any, ctx_sizes: list[int], words: torch.Tensor,
                     word_sizes: list[int]) -> list[torch.Tensor]:
        """Block-diagonal scores: the histories cut into consecutive groups of ``ctx_sizes``, ``words [S]``
        into as many groups of ``word_sizes``; group g's histories against group g's words only ->
        ``[n_g, s_g]`` per group (a class-factored softmax: each class's examples against its members)."""

    def score_all(self, ctx: Any) -> torch.Tensor:
        """``[N, V]``: every word's score (O(V) per history; evaluation and full softmax)."""

    def shift_bias(self, delta: torch.Tensor | float) -> None:
        """Add ``delta`` (scalar or ``[V]``) to every word's bias, e.g. log-alpha calibration."""


def score_true_and_candidates(scorer: Scorer, ctx: Any, targets: torch.Tensor,
                               words: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(true [N], scores [N, S])``: the true words' scores and the candidates' (``words [S]`` shared by
    the batch or ``[N, S]`` per history). Per-history candidates are scored in one ``score_each`` call over
    ``[targets | words]`` ``[N, 1 + S]``: the output rows then get one gradient, where two calls would give two
    row-sparse gradients that autograd adds and the optimiser merges again (on the PTB GRU with NCE, 4.5 ms of a
    22 ms CPU step)."""
    if words.dim() == 1:
        return scorer.score_targets(ctx, targets), scorer.score_shared(ctx, words)
    both = scorer.score_each(ctx, torch.cat([targets.unsqueeze(1).to(words.dtype), words], 1))
    return both[:, 0], both[:, 1:]


class OutputObjective(nn.Module):
    """Base class of training objectives over a scorer's output scores.

    Subclasses implement :meth:`forward` (the training loss) and, when the model's inference
    rule is not the softmax over V, :meth:`log_prob`. An objective may hold state (a noise
    distribution, a learned normaliser) and its own parameters.
    """

    name: ClassVar[str] = "base"
    #: True when the objective touches only a candidate set, so the model should build its
    #: OutputLayer with sparse=True, and its word embeddings too (and the trainer use an optimiser
    #: that takes sparse gradients): a training step then costs the same at any V.
    sparse_output: ClassVar[bool] = False
    #: True when :meth:`forward` takes ``positions [N]``, each example's position in the training
    #: stream (e.g. to key per-example negative subsets); the trainer passes it only then.
    uses_positions: ClassVar[bool] = False
    #: True when a training step scores all V words of every prediction (the softmax's ``[N, V]``): the trainer
    #: then checks, before the first step, that such a step fits in memory.
    scores_every_word: ClassVar[bool] = False
    #: True when the exact rule needs each position's previous words (an n-gram back-off, as in the
    #: short-list): the evaluator then passes ``ids=`` (the id stream) and ``positions=`` (each row's
    #: index in it) to :meth:`log_prob` and :meth:`log_prob_targets`. Training never needs them.
    uses_history: ClassVar[bool] = False
    #: Model settings this objective needs where the user set none: ``{field: (value, why)}`` (hsm unties the
    #: embeddings). The command line applies them, says why, and leaves any value the user gave alone.
    model_settings: ClassVar[dict] = {}
    #: The dataclass of this objective's options (:mod:`sampledlm.objectives.options`): each option's default, its
    #: default on a recurrent trunk, its help and its range, in one place.
    Options: ClassVar[type] = NoOptions
    #: Training settings this objective takes on a recurrent trunk where the user gave none (``{"lr": 0.004}``);
    #: its options' recurrent defaults are in :attr:`Options`. ``sequence_why`` says why, in the note printed.
    sequence_train: ClassVar[dict] = {}
    sequence_why: ClassVar[str] = ""
    #: Settings that replace the recurrent defaults (:attr:`sequence_train`'s, or an option's ``recurrent`` default)
    #: for a long run: ``(above, {setting: value}, why)`` entries, the one with the largest ``above`` below the run's
    #: planned optimiser steps (epochs x steps an epoch, or ``--max-steps``) applying, each setting only where the user
    #: gave none (a rate chosen on PTB's 6,640-step run that loses over a run ten times as long; samples worth their
    #: cost over a few passes of a small text, not where the CPU budget, not the text, ends the run).
    sequence_train_long: ClassVar[tuple] = ()
    #: Derived from :attr:`Options` and :attr:`sequence_train` (never written by hand): every setting this objective
    #: takes on a recurrent trunk (``NeuralScorer.sequence_model``) where the user gave none, and
    #: ``{setting: (option, ...)}``, a default left out when the user gave one of those options (the class layer's
    #: ``--word-classes auto`` gives way to ``--classes``).
    sequence_defaults: ClassVar[dict] = {}
    sequence_unless: ClassVar[dict] = {}
    #: Model settings this objective takes on a recurrent trunk where the user gave none: ``{field: (value, why,
    #: needs)}``, left out when the user turned off one of the model options named in ``needs`` (the adaptive
    #: softmax's input bands need tied embeddings and input matrices). The command line says why.
    sequence_model_settings: ClassVar[dict] = {}

    @classmethod
    def model_settings_for(cls, flags: dict, recurrent: bool) -> dict:
        """:attr:`model_settings` as they apply to these command-line ``flags`` (an option not given is None) on a
        recurrent trunk or another: all of them, unless an objective's options decide (hsm's ``arity``)."""
        return cls.model_settings

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        recurrent = {f.name: f.metadata for f in dataclasses.fields(cls.Options) if "recurrent" in f.metadata}
        cls.sequence_defaults = {**{k: m["recurrent"] for k, m in recurrent.items()}, **cls.sequence_train}
        cls.sequence_unless = {k: m["recurrent_unless"] for k, m in recurrent.items() if m["recurrent_unless"]}

    def __init__(self, counts: "np.ndarray | None" = None, **options):
        """``counts``: training unigram counts ``[V]`` (``vocab.counts``), for noise distributions; ``options``: the
        fields of :attr:`Options` by name (the others at their defaults), kept as ``self.options`` once their ranges
        are checked (:func:`sampledlm.objectives.make_objective` passes the user's)."""
        super().__init__()
        known = {f.name for f in dataclasses.fields(self.Options)}
        wrong = sorted(set(options) - known)
        if wrong:
            raise TypeError(f"{type(self).__name__}: unknown option(s) {', '.join(wrong)}")
        self.options = self.Options(**options)
        check(self.options)

    def forward(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """Scalar training loss: the mean over the ``N`` targets of the per-example loss."""
        raise NotImplementedError

    def log_prob(self, scorer: Scorer, ctx: Any) -> torch.Tensor:
        """Exact, normalised ``log P(w | h)``, ``[N, V]``. Default: softmax over all V scores."""
        return torch.log_softmax(scorer.score_all(ctx).float(), dim=-1)

    def log_prob_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor) -> torch.Tensor:
        """Exact ``log P(targets[i] | h_i)``, ``[N]``. Default: the softmax's, in blocks of output rows at a large
        V (the scorer's ``normalised_targets``), else :meth:`log_prob` then the targets' entries."""
        if type(self).log_prob is OutputObjective.log_prob:
            found = self.normalised_targets(scorer, ctx, targets)
            if found is not None:
                return found
        return self.log_prob(scorer, ctx).gather(1, targets.unsqueeze(1)).squeeze(1)

    def normalised_targets(self, scorer: Scorer, ctx: Any, targets: torch.Tensor, **rule) -> torch.Tensor | None:
        """The scorer's blocked exact rule (:mod:`.normaliser`; ``rule``: its ``offset`` and ``log_sigmoid``),
        or None where the scorer has none or the vocabulary is too small for it to pay."""
        blocked = getattr(scorer, "normalised_targets", None)
        return None if blocked is None else blocked(ctx, targets, **rule)

    def scores_in_blocks(self, scorer: Scorer) -> bool:
        """Whether :meth:`log_prob_targets` walks the vocabulary in blocks (no ``[N, V]`` matrix), so that
        evaluation may hand it many histories per call."""
        plain = (type(self).log_prob_targets is OutputObjective.log_prob_targets
                 and type(self).log_prob is OutputObjective.log_prob)
        return plain and scorer_blocks(scorer)

    def bind(self, scorer: Scorer) -> None:
        """Called once when the objective meets its scorer, fresh or loaded: after the model is built,
        before weights are loaded and before any optimiser is made.

        Objectives with output parameters of their own (the class layer of ``class``, the head
        and tail projections of ``adaptive``) create them here, sized by ``scorer.hidden_size``
        (``h``: the width of ``ctx``); the others need nothing.
        """

    def sparse_parameters(self) -> list[nn.Parameter]:
        """This objective's parameters that take row-sparse gradients (hsm's node layer, when the model's output
        rows do); the trainer updates them row-wise. Default: none."""
        return []

    def log_normaliser(self, scorer: Scorer, ctx: Any) -> torch.Tensor | None:
        """``[N]`` the log normaliser ``log Z(h) = log sum_w exp a_w(h)`` when the objective offers an
        unnormalised scoring mode (the raw score ``a_w(h)`` used as ``log P(w|h)``); None otherwise.

        Evaluation reports its mean and spread beside the exact perplexity (how far the shortcut is
        from the exact rule); it never replaces the exact figure.
        """
        return None

    @classmethod
    def sequence_train_for_steps(cls, steps: int) -> tuple[dict, str]:
        """The entry of :attr:`sequence_train_long` for a run of ``steps`` planned optimiser steps (its settings and
        why), or ``({}, "")`` when none applies."""
        fit = [e for e in cls.sequence_train_long if steps > e[0]]
        if not fit:
            return {}, ""
        _, values, why = max(fit, key=lambda e: e[0])
        return dict(values), why

    @classmethod
    def settle_options(cls, options: dict, vocab) -> tuple[dict, list[str]]:
        """Before a new run starts: check the options against the vocabulary (``vocab``: its words and counts) and
        read the files they name once, so that a bad one fails before training; returns the options to record in
        the run's config (paths made absolute, so the run directory finds them from anywhere) and notes for the
        user. Default: the options as given, no notes."""
        return dict(options), []

    def attach(self, vocab, fresh: bool, open_ngram, train_ids=None) -> None:
        """When a run's model is built (new or resumed), after :meth:`bind`: load what the recorded options name
        (a back-off n-gram, word classes). ``fresh``: a new run (a resumed one has learnt its classes into its
        buffers). ``open_ngram(path, vocab)`` opens an n-gram over ``vocab``, given by the caller so that objectives
        import nothing of the model families; ``train_ids()`` (a new run's caller gives it) the training text's id
        stream, for what is learnt from it before training (``--word-classes auto``). Default: nothing to load."""

    def start_epoch(self, epoch: int) -> None:
        """Called by the trainer before each epoch (e.g. to draw a fresh negative subset)."""

    def prepare(self, scorer: Scorer) -> None:
        """Optional: called once on a *freshly initialised* model before training (never on resume).

        Sampled objectives that do not normalise over V (NCE, binary, ...) override it to start the
        output biases at the log unigram (see :func:`sampledlm.objectives.sampled.unigram_bias`),
        which removes a long initial phase where every word's score is far too high.
        """

    def finalize(self, scorer: Scorer) -> None:
        """Called once after training, before the model is saved for use (e.g. calibration)."""

    def unfinalize(self, scorer: Scorer) -> None:
        """Undo :meth:`finalize` on a finished model that trains again (``--init-from``, a finished run resumed
        with more epochs), so that training sees the scores it was trained on."""
