"""The word-level Python API: load any model (or a mixture) and score, continue or sample text given as words.

    >>> import sampledlm
    >>> lm = sampledlm.load("kn3.arpa")                      # ARPA file, binary directory, run directory
    >>> lm = sampledlm.load(["gru", "kn5.arpa"], weights=[0.7, 0.3])   # a mixture (or valid="dev.txt": EM)
    >>> lm.logprob("the company said")                       # ln P(the company said </s> | <s>)
    >>> lm.log10_prob("the company said")                    # the same in base 10 (KenLM's score)
    >>> lm.logprobs(["the company said", "it rose"])         # many sentences, scored in bunches
    >>> lm.word_scores("the company said")                   # [WordScore("the", logprob, log10_prob, oov, order), ...]
    >>> lm.perplexity(["the company said", "it rose"])      # each sentence on its own, </s> counted
    >>> state = lm.begin_sentence()                          # word by word, for a decoder:
    >>> logp, state = lm.advance(state, "the")               # ln P(the | <s>), O(1) per word
    >>> lm.next_logprobs("the company", top_k=5)             # {"said": -1.2, ...}: ln P(w | <s> the company)
    >>> lm.generate(3, prefix="the", seed=1)                 # three sampled sentences
    >>> lm = sampledlm.train_ngram("train.txt", "kn5.arpa", order=5)   # ngram train, from Python
    >>> lm = sampledlm.train_lm("train.txt", "valid.txt", "gru", model="gru", epochs=2)   # train, from Python
    >>> lm = sampledlm.resume_lm("gru")                                  # an interrupted run continued
    >>> lm = sampledlm.train_maxent("train.txt", "valid.txt", "melm")     # maxent train, from Python
    >>> wv = sampledlm.train_embeddings("corpus.txt", "vec", dim=100)      # embed train, from Python

A sentence is a string (split into words with the model's own text options, as the commands read a file)
or a list of words (taken as they are, after the model's case folding). Scores follow the commands'
counting (:mod:`sampledlm.use.score`): each sentence is read on its own after ``<s>``; its words and its
``</s>`` are predicted; a word outside the vocabulary is ``<unk>``. So ``log10_prob`` equals the ``log10`` of
``sampledlm score --jsonl`` and ``perplexity`` the file total of ``sampledlm score`` (``eval --per-sentence``).

Log bases: every log probability of the API is natural (``ln``, as PyTorch's and the ONNX graph's) unless its name
says ``log10`` (``log10_prob``, ``WordScore.log10_prob``); ``score`` keeps KenLM's name and base (log10).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from .data.tokenizer import TextOptions, token_normaliser, tokenize_line
from .data.tokenizer import MARKERS
from .data.vocab import EOS, EOS_ID, UNK_ID
from .errors import UserError
from .lm import LanguageModel

LN10 = math.log(10.0)

Sentence = str | Sequence[str]


class WordScore(NamedTuple):
    """One word's score in its sentence (:meth:`Model.word_scores`)."""

    word: str
    logprob: float  #: ln P(word | <s> and the words before it)
    log10_prob: float  #: the same in base 10 (KenLM's and SRILM's)
    oov: bool  #: outside the model's vocabulary: scored as <unk>
    order: int | None  #: n-gram models: the order of the n-gram that gave the probability (KenLM's ngram_length)


def load(path_or_paths: str | os.PathLike | Sequence[str | os.PathLike], weights: Sequence[float] | None = None,
         *, valid: str | None = None, device: str | None = None, text_options=None) -> Model:
    """The model stored at a path, or the linear interpolation of several.

    ``path_or_paths``: an ARPA file (.gz/.bz2/.xz), a binary n-gram directory, a neural run directory or a
    maximum-entropy model directory; a list of them is a mixture, weighted by ``weights`` (summing to 1),
    else by EM on the text file ``valid``, else equally. ``device``: where neural models run (``auto``,
    ``cpu``, ``cuda``; default ``auto``). ``text_options``: how the n-gram models read a string into words
    (a :class:`~sampledlm.data.tokenizer.TextOptions` or a dict of its fields, e.g. ``{"lowercase": True}``):
    ARPA files and binary directories, like KenLM's and SRILM's, do not record it (the commands take
    ``--lowercase`` and the like at each use); a neural or maximum-entropy model records its own, and different
    options for it are refused."""
    from .loader import load_model
    from .lm import Mixture

    if isinstance(path_or_paths, (bytes, bytearray)) or path_or_paths is None:
        raise UserError(f"load: give a model's path or a list of paths, not {type(path_or_paths).__name__}")
    paths = [os.fspath(path_or_paths)] if isinstance(path_or_paths, (str, os.PathLike)) else \
        [os.fspath(p) for p in path_or_paths]
    if not paths:
        raise UserError("load: give at least one model path")
    if (weights is not None or valid) and len(paths) < 2:
        raise UserError("load: weights and valid need a second model to interpolate with")
    if weights is not None and valid:
        raise UserError("load: give weights or valid (weights estimated on it), not both")
    if isinstance(weights, (str, bytes)):
        raise UserError(f"load: weights is a list of numbers, one per model (e.g. [0.7, 0.3]), not {weights!r}")
    opts = _text_options_given(text_options)
    models = [_with_text_options(load_model(p, device=device), p, opts) for p in paths]
    if len(models) == 1:
        return Model(models[0])
    mix = Mixture(models, None if weights is None else [float(w) for w in weights])
    if weights is None and valid:
        from .use.mixing import set_weights

        set_weights(mix, None, valid, paths[0])
    return Model(mix)


def _text_options_given(text_options) -> dict | None:
    """``text_options`` (a TextOptions, a dict of its fields or None) as a dict; None for None and for the
    defaults (a model that records none reads text with those)."""
    if text_options is None:
        return None
    if isinstance(text_options, TextOptions):
        opts = text_options
    elif isinstance(text_options, dict):
        opts = TextOptions.from_dict(text_options, "text_options")
    else:
        raise UserError(f"text_options: a dict of text settings (e.g. {{'lowercase': True}}) or a TextOptions, "
                        f"not {type(text_options).__name__}")
    return None if opts == TextOptions() else opts.to_dict()


def _with_text_options(lm: LanguageModel, path: str, opts: dict | None) -> LanguageModel:
    """``lm`` reading text with ``opts``: set on a model that records none (n-gram), checked against one that
    does."""
    if opts is None:
        return lm
    if lm.text_options is None:
        lm.text_options = opts
    elif TextOptions(**lm.text_options) != TextOptions(**opts):
        raise UserError(f"{path}: the model reads text with {lm.text_options}, recorded when it was trained; "
                        f"text_options {opts} differ (leave them out for this model)")
    return lm


class Model:
    """A language model used on words (module docstring); ``lm`` is the id-level model underneath
    (:class:`sampledlm.lm.LanguageModel`) and ``vocab`` its vocabulary."""

    def __init__(self, lm: LanguageModel):
        self.lm = lm
        self.vocab = lm.vocab
        self.text_options = TextOptions(**(lm.text_options or {}))
        self._normalise = token_normaliser(lm.text_options)

    def __repr__(self) -> str:
        return f"<sampledlm.Model {self.lm.describe()}>"

    @property
    def context_length(self) -> int | None:
        """How many previous words the probabilities depend on (n - 1 for n-gram and feed-forward models; None when
        the whole history counts): :attr:`sampledlm.lm.LanguageModel.context_length`."""
        return self.lm.context_length

    # --- words ---------------------------------------------------------------------------------------------------
    def words(self, sentence: Sentence) -> list[str]:
        """The words the model reads in ``sentence`` (a string is tokenised with the model's text options; literal
        ``<s>`` and ``</s>`` are dropped from a string and from a list alike, as a file's reader drops them)."""
        if isinstance(sentence, str):
            return tokenize_line(sentence, self.text_options)
        if (isinstance(sentence, (bytes, bytearray, os.PathLike)) or not isinstance(sentence, Iterable)
                or not all(isinstance(w, str) for w in sentence)):
            raise UserError(f"a sentence is a string or a list of words (strings), not {_brief(sentence)}"
                            + (" (a file: perplexity(path), or logprobs of its lines)"
                               if isinstance(sentence, os.PathLike) else ""))
        bad = next((w for w in sentence if not _one_word(w)), None)
        if bad is not None:
            raise UserError(f"a list of words holds {bad!r}, which is not one word (a word is a non-empty string "
                            "without spaces; give a string to have it split)")
        return [self._normalise(w) for w in sentence if w not in MARKERS]

    def _ids(self, words: Sequence[str]) -> list[int]:
        return self.vocab.encode(list(words))

    # --- scores --------------------------------------------------------------------------------------------------
    def _scored(self, sentences: Iterable[Sentence]):
        from .use.score import score_sentences

        return score_sentences(self.lm, [self.words(s) for s in sentences])

    def logprob(self, sentence: Sentence) -> float:
        """``ln P(w_1 .. w_n </s> | <s>)``: the sentence read on its own, its end predicted (a sentence with no
        words, an empty hypothesis, is ``</s>`` alone)."""
        return self._scored([sentence])[0].ln_prob

    def log10_prob(self, sentence: Sentence) -> float:
        """:meth:`logprob` in base 10, as KenLM's ``score`` and SRILM's ``-ppl`` give it."""
        return self._scored([sentence])[0].log10_prob

    def score(self, sentence: Sentence) -> float:
        """``log10 P(w_1 .. w_n </s> | <s>)``: KenLM's name for :meth:`log10_prob` (base 10, as there)."""
        return self.log10_prob(sentence)

    def logprobs(self, sentences: Iterable[Sentence]) -> list[float]:
        """:meth:`logprob` of many sentences, scored in bunches (the speed of ``sampledlm score``): one float
        each, in order. A single string is refused here (give a list of sentences)."""
        if isinstance(sentences, str):
            raise UserError("logprobs: give a list of sentences (for one sentence, logprob(sentence))")
        if isinstance(sentences, (bytes, bytearray)) or not isinstance(sentences, Iterable):
            raise UserError(f"logprobs: give a list of sentences, not {_brief(sentences)}"
                            + (" (a file's lines: logprobs(open(path).read().splitlines()))"
                               if isinstance(sentences, os.PathLike) else ""))
        return [s.ln_prob for s in self._scored_stream(sentences, skip_blank=False)]

    def word_scores(self, sentence: Sentence) -> list[WordScore]:
        """A :class:`WordScore` for every word and the closing ``</s>``: ``ln P`` and ``log10 P`` of the word after
        ``<s>`` and the words before it, whether it is outside the vocabulary (scored as ``<unk>`` under its own
        spelling) and, for an n-gram model, the order of the n-gram that gave it (KenLM's ``full_scores``)."""
        from .use.score import score_sentences

        s = score_sentences(self.lm, [self.words(sentence)], with_orders=True)[0]
        words = s.words + [EOS]
        oov = [w not in self.vocab.index for w in s.words] + [False]
        orders = [None] * len(words) if s.orders is None else [int(o) for o in s.orders]
        return [WordScore(w, float(lp), float(lp) / LN10, o, n)
                for w, lp, o, n in zip(words, s.token_lp.tolist(), oov, orders)]

    def perplexity(self, sentences: Sentence | Iterable[Sentence] | os.PathLike) -> float:
        """Perplexity over the words and ``</s>`` of ``sentences`` (an iterable of sentences, read as it goes:
        a generator over a file of any size is fine; one string is one sentence; a ``pathlib.Path`` is a text
        file, one sentence per line), each read on its own. A sentence with no words counts as a file's blank
        line does: as no sentence."""
        from .use.score import Totals, score_file

        totals = Totals()
        if isinstance(sentences, os.PathLike):
            scored = score_file(self.lm, os.fspath(sentences), opts=self.text_options)
        else:
            if isinstance(sentences, str):
                if os.path.isfile(sentences) and len(sentences.split()) == 1:
                    raise UserError(f"perplexity({sentences!r}): a string is one sentence, and {sentences!r} is also a "
                                    f"file: give pathlib.Path({sentences!r}) to score the file, or [{sentences!r}] "
                                    "for the one-word sentence")
                sentences = [sentences]
            scored = self._scored_stream(sentences, skip_blank=True)
        for s in scored:
            totals.add(s)
        if totals.sentences == 0:
            raise UserError("perplexity: no sentences")
        return totals.ppl

    def _scored_stream(self, sentences: Iterable[Sentence], skip_blank: bool, bunch: int = 4096):
        """The :class:`~sampledlm.use.score.SentenceScore` of each sentence, scored ``bunch`` at a time (blank ones
        left out with ``skip_blank``, as a file's blank lines are)."""
        from .use.score import score_sentences

        pending: list[list[str]] = []
        for sentence in sentences:
            words = self.words(sentence)
            if words or not skip_blank:
                pending.append(words)
            if len(pending) >= bunch:
                yield from score_sentences(self.lm, pending)
                pending = []
        yield from score_sentences(self.lm, pending)

    # --- word by word, for decoders ----------------------------------------------------------------------------
    def begin_sentence(self):
        """The state at the start of a sentence (after ``<s>``), for :meth:`advance` (:mod:`sampledlm.states`)."""
        from .states import begin

        return begin(self.lm)

    def advance(self, state, word: str) -> tuple[float, object]:
        """``(ln P(word | state), the state after word)``: one word of a hypothesis, O(1) work for n-gram,
        feed-forward and recurrent models. ``word`` ``</s>`` ends the sentence (its probability, and the start
        state again). The sum over a sentence's words and its ``</s>`` is :meth:`logprob`. A state is a value: keep
        it to branch."""
        logp, states = self.advance_many([state], [word])
        return float(logp[0]), states[0]

    def advance_many(self, states: Sequence, words: Sequence[str]) -> tuple[np.ndarray, list]:
        """:meth:`advance` for N hypotheses at once (one call of the model): ``(ln P [N], N new states)``."""
        from .states import advance, fits

        if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
            raise UserError("advance_many: give a list of words, one per state")
        start = self.begin_sentence()
        if isinstance(states, type(start)) or isinstance(states, (str, bytes)) or not isinstance(states, Sequence):
            raise UserError("advance_many: give a list of states (from begin_sentence or advance), one per word")
        if len(states) != len(words):
            raise UserError(f"advance_many: {len(states)} states and {len(words)} words: give one word per state")
        for i, w in enumerate(words):
            if not isinstance(w, str) or not w or len(w.split()) != 1 or w != w.strip() or w == "<s>":
                raise UserError(f"advance: word {i} is {w!r}: give one word (a non-empty string without spaces; "
                                "</s> ends the sentence, <s> is not a word to advance with)")
        for i, st in enumerate(states):
            if not fits(self.lm, st, start):
                raise UserError(f"advance: state {i} ({type(st).__name__}) is not a state of this model: take it from "
                                "this model's begin_sentence or advance")
        ids = [EOS_ID if w == EOS else self.vocab.index.get(self._normalise(w), UNK_ID) for w in words]
        return advance(self.lm, list(states), ids)

    # --- continuing and sampling -------------------------------------------------------------------------------
    def next_logprobs(self, words: Sentence = (), top_k: int | None = None) -> dict[str, float]:
        """``ln P(w | <s> words)`` for every vocabulary word ``w`` (``</s>`` included), most probable first;
        ``top_k`` keeps the k most probable."""
        lp = np.asarray(self.lm.next_logprobs(self._ids(self.words(words))), dtype=np.float64)
        k = len(lp) if top_k is None else int(top_k)
        if k < 1:
            raise UserError(f"top_k {top_k}: give a number >= 1")
        order = np.argsort(-lp, kind="stable")[:k]
        return {self.vocab.words[i]: float(lp[i]) for i in order.tolist()}

    def generate(self, n: int = 1, prefix: Sentence = (), *, temperature: float = 1.0, top_k: int = 0,
                 max_words: int = 50, seed: int | None = None, allow_unk: bool = True) -> list[str]:
        """``n`` sentences sampled after ``prefix`` (each with its prefix), as ``sampledlm generate`` samples
        them: the same ``seed`` gives the same sentences (``sampledlm generate --seed``); None (the default) draws
        fresh ones each call."""
        from .use.generate import sample_sentence

        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise UserError(f"generate: n {n!r}: give a whole number >= 0")
        _check_number("generate: temperature", temperature, lambda x: x > 0, "a positive number")
        _check_number("generate: top_k", top_k, lambda x: x >= 0, "a whole number >= 0 (0: every word)", whole=True)
        _check_number("generate: max_words", max_words, lambda x: x >= 1, "a whole number >= 1", whole=True)
        rng = np.random.default_rng(seed)
        start = self._ids(self.words(prefix))
        return [" ".join(self.vocab.decode(sample_sentence(self.lm, start, rng, temperature=temperature,
                                                           top_k=top_k, max_words=max_words, allow_unk=allow_unk)))
                for _ in range(n)]


def _one_word(w: str) -> bool:
    return bool(w) and len(w.split()) == 1 and w == w.strip()


def _brief(value) -> str:
    """``value`` as an error message names it: its type and the start of its repr."""
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '...' if len(text) > 40 else text}"


def _check_number(what: str, value, ok, want: str, whole: bool = False) -> None:
    """A :class:`UserError` unless ``value`` is a finite number (a whole one with ``whole``; never a bool) and
    ``ok(value)``."""
    kinds = (int, np.integer) if whole else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or not ok(value):
        raise UserError(f"{what} {value!r}: give {want}")


def train_ngram(text, output: str | os.PathLike | None = None, *, binary: bool = False, vocab=None, valid=None,
                text_options=None, force: bool = False, **settings) -> Model:
    """Estimate an n-gram model from words, as ``sampledlm ngram train`` does, and return it as a :class:`Model`.

    ``text``: a text file's path (``str`` or ``pathlib.Path``; one sentence per line) or an iterable of sentences
    (strings or lists of words). ``output``: where to write it (an ARPA file, or with ``binary`` a binary
    directory); ``None`` keeps it in memory only. An existing ``output`` is refused, as the command refuses it,
    unless ``force``; one of the input files never is replaced. ``settings``: the fields of
    :class:`sampledlm.ngram.build.BuildConfig` (``order=5``, ``smoothing="kn"``, ``memory="2G"``, ...), each
    defaulting as the command's flags do. ``text_options``: how text becomes words (a dict of
    :class:`~sampledlm.data.tokenizer.TextOptions` fields, e.g. ``{"lowercase": True}``); the model returned reads
    strings the same way, but the ARPA file or binary directory does not record it (as KenLM's and SRILM's do
    not): give the same ``text_options`` to :func:`load`. (:func:`sampledlm.ngram.train_ngram` is the id-level
    estimator.)

        >>> lm = sampledlm.train_ngram(["the cat sat", "the dog sat"], order=2)
        >>> lm.perplexity(["the cat sat"])
    """
    import tempfile

    from .ngram.build import BuildConfig, build
    from .ngram.lm import ArpaLM

    settings, given = _split_settings("train_ngram", settings, set(BuildConfig.__dataclass_fields__), text_options)
    config = BuildConfig(**settings)
    opts = _text_options_given(given)
    vocab = None if vocab is None else os.fspath(vocab)
    valid = None if valid is None else os.fspath(valid)
    if output is None:
        with tempfile.TemporaryDirectory(prefix="sampledlm-ngram-") as tmp, _text_files({"train": text}) as files:
            target = os.path.join(tmp, "model.arpa")
            build(config, files["train"], target, vocab=vocab, valid=valid, text_options=opts)
            return Model(_with_text_options(ArpaLM.open(target), target, opts))
    from .ngram.build.output import model_output

    target = os.fspath(output)
    with _text_files({"train": text}) as files, model_output(target, binary, force, [files["train"], vocab, valid]):
        build(config, files["train"], target, binary=binary, vocab=vocab, valid=valid, text_options=opts,
              locked=binary)
    # the model file does not record how text was read (module docstring of load): this Model does
    return Model(_with_text_options(ArpaLM.open(target), target, opts))


def train_lm(train, valid, output, *, model: str = "ffnn", objective: str = "softmax", vocab=None,
             min_count: int = 1, max_size: int | None = None, text_options=None, threads: int | None = None, log=None,
             init_from=None, **settings) -> Model:
    """Train a neural LM into the run directory ``output``, as ``sampledlm train`` does, and return it as a
    :class:`Model`.

    ``train``, ``valid``: text files or iterables of sentences; ``model``: ``ffnn``, ``gru``, ``lstm`` or
    ``transformer``; ``objective``:
    any of ``sampledlm train --objective``'s. ``settings``: the command's other options by their Python names
    (the fields of the model's ``Config``, of :class:`sampledlm.neural.trainer.TrainOptions` and the objectives'
    options: ``epochs=2``, ``hidden=[256]``, ``lr=0.002``, ``samples=20``, ``device="cuda"``, ...), each
    defaulting as the flag does. ``threads``: torch's CPU threads (``torch.set_num_threads``, for the process).
    ``log``: a function given each progress line and each setting derived from another (default: silent).
    ``init_from``: a trained run to start from (its model, objective, text options and, unless ``vocab``,
    ``min_count`` or ``max_size`` is given, its vocabulary; ``settings`` are then training settings only).

        >>> lm = sampledlm.train_lm("train.txt", "valid.txt", "gru", model="gru", epochs=2)
    """
    from .data.tokenizer import TextOptions
    from .neural.settings import MODEL_FIELDS, OBJECTIVE_FIELDS, TRAIN_FIELDS, build_config
    from .neural.trainer import new_run
    from .objectives.registry import OBJECTIVES

    if objective not in OBJECTIVES:
        raise UserError(f"train_lm: unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
    known = set(MODEL_FIELDS) | set(TRAIN_FIELDS) | set(OBJECTIVE_FIELDS)
    settings, opts = _split_settings("train_lm", settings, known, text_options)  # lowercase=True and the like too
    flags = {k: None for k in known} | settings
    if threads:
        import torch

        torch.set_num_threads(threads)
    log = log or (lambda msg: None)
    notes: list[str] = []
    vocab = None if vocab is None else os.fspath(vocab)
    with _text_files({"train": train, "valid": valid}) as files:
        files = _kept_in_run(os.fspath(output), files, {"train": train, "valid": valid})
        try:
            if init_from is not None:
                from .neural.settings import init_config

                shape = sorted(k for k, v in settings.items() if v is not None and k not in TRAIN_FIELDS)
                if shape or opts != TextOptions() or (model, objective) != ("ffnn", "softmax"):
                    raise UserError(f"train_lm: init_from={os.fspath(init_from)!r}: the model, its objective and "
                                    "how text is read come from that run; give training settings only"
                                    + (f" (got {shape[0]})" if shape else ""))
                source, config, words = init_config(os.fspath(init_from), files["train"], files["valid"], vocab,
                                                    None if min_count == 1 else min_count, max_size, flags, notes)
                from .data.vocabmap import announce

                notes.append(announce(os.fspath(init_from), config["data"]["init_from"]))
            else:
                config, words = build_config(opts, files["train"], files["valid"], vocab, min_count, max_size, model,
                                             None, objective, flags, notes)
        finally:
            for note in notes:
                log(note)
        trainer = new_run(os.fspath(output), config, words, log=log)
        if init_from is not None:
            from .neural.finetune import copy_weights

            copy_weights(source, trainer.model, trainer.objective, words, os.fspath(init_from))
        trainer.train()
    return load(output)


def resume_lm(run_dir, *, epochs: int | None = None, max_halvings: int | None = None, device: str | None = None,
              threads: int | None = None, log=None) -> Model:
    """Continue the neural run in ``run_dir`` from its last checkpoint, as ``sampledlm train --resume`` does
    (a run stopped by Ctrl-C, a crash or a time limit; the same numbers as an unbroken run), and return it as a
    :class:`Model`. ``epochs``, ``max_halvings``: train a run longer (a finished one too); ``device``: move it
    between a GPU and the CPU; every other setting is the run's own. ``threads``: torch's CPU threads for the
    process (``torch.set_num_threads``). ``log``: a function given each progress line (default: silent).

        >>> lm = sampledlm.resume_lm("gru")              # after an interrupted sampledlm.train_lm(..., "gru", ...)
    """
    from .neural.trainer import resume_run

    run_dir = os.fspath(run_dir)
    if threads:
        import torch

        torch.set_num_threads(threads)
    over = {k: v for k, v in (("epochs", epochs), ("max_halvings", max_halvings), ("device", device))
            if v is not None}
    trainer = resume_run(run_dir, over, log=log or (lambda msg: None), refuse_finished=True)
    trainer.train()
    return load(run_dir)


def train_maxent(train, valid, output, *, force: bool = False, init_from=None, vocab=None, ranks: int = 1,
                 text_options=None, log=None, **settings) -> Model:
    """Train a maximum-entropy LM into the model directory ``output``, as ``sampledlm maxent train`` does, and
    return it as a :class:`Model`.

    ``train``, ``valid``: text files or iterables of sentences. ``settings``: the fields of
    :class:`sampledlm.maxent.run.MaxentRun` (``features="feat-i"``, ``objective="binary"``, ``alpha=0.05`` for
    ``--neg-rate``, ``epochs``, ``lr``, ...), each defaulting as the flag does; the text options (``lowercase=True``,
    ``tokenizer="raw"``, ...) may be given by name too. ``init_from``: a maxent model to start from;
    ``vocab``: a vocabulary file; ``ranks``: local processes; ``log``: a function given each progress line
    (default: silent).

        >>> lm = sampledlm.train_maxent("train.txt", "valid.txt", "melm", features="feat-i", alpha=0.05)
    """
    import dataclasses

    from .maxent.run import MaxentRun, train_directory

    fields = {f.name for f in dataclasses.fields(MaxentRun)}
    run_settings, opts = _split_settings("train_maxent", settings, fields, text_options)
    with _text_files({"train": train, "valid": valid}) as files:
        train_directory(files["train"], files["valid"], os.fspath(output), MaxentRun(**run_settings), opts,
                        force=force, init_dir=None if init_from is None else os.fspath(init_from),
                        vocab_path=None if vocab is None else os.fspath(vocab), ranks=ranks,
                        check_source=_refuse_changed(run_settings), log=log or (lambda line: None))
    return load(output)


def train_embeddings(corpus, output, *, force: bool = False, init_from=None, no_text: bool = False,
                     text_options=None, log=None, **settings):
    """Train word vectors into the directory ``output``, as ``sampledlm embed train`` does, and return them as
    :class:`sampledlm.embed.vectors.WordVectors` (``neighbors``, ``similarity``, ``lookup``, ``vectors``).

    ``corpus``: a text file, a list of files, or an iterable of sentences. ``settings``: the fields of
    :class:`sampledlm.embed.train.Word2VecConfig` (``model="cbow"``, ``objective="hs"``, ``dim=100``,
    ``window=5``, ``threads=2``, ``seed=1``, ...), each defaulting as the flag does; the text options
    (``lowercase=True``, ...) may be given by name too. ``init_from``: vectors to start from; ``log``: a function
    given each progress line (default: silent).

        >>> wv = sampledlm.train_embeddings("corpus.txt", "vec", model="skipgram", dim=100)
        >>> wv.neighbors("king", 5)
    """
    import dataclasses

    from .embed.run import train_directory
    from .embed.train import Word2VecConfig

    fields = {f.name for f in dataclasses.fields(Word2VecConfig)}
    given, opts = _split_settings("train_embeddings", settings, fields, text_options)
    given = {k: v for k, v in given.items() if v is not None}
    common = dict(force=force, no_text=no_text, init_dir=None if init_from is None else os.fspath(init_from),
                  check_source=_refuse_changed(given), log=log or (lambda line: None))
    if isinstance(corpus, (str, os.PathLike)) or (isinstance(corpus, (list, tuple)) and corpus
                                                  and all(isinstance(c, (str, os.PathLike)) for c in corpus)
                                                  and all(os.path.exists(c) for c in corpus)):
        paths = [os.fspath(corpus)] if isinstance(corpus, (str, os.PathLike)) else [os.fspath(c) for c in corpus]
        return train_directory(paths, os.fspath(output), given, opts, **common)
    with _text_files({"corpus": corpus}) as files:
        return train_directory([files["corpus"]], os.fspath(output), given, opts, **common)


def _split_settings(caller: str, settings: dict, fields: set[str], text_options):
    """``(the family's settings, TextOptions)`` from keyword arguments: the family's fields, and the text options
    by name (``lowercase=True``) beside or instead of ``text_options``; any other name is refused."""
    from .data.tokenizer import TextOptions

    text_names = set(TextOptions.__dataclass_fields__)
    unknown = sorted(set(settings) - fields - text_names)
    if unknown:
        raise UserError(f"{caller}: unknown setting(s) {', '.join(unknown)} (the command's --help lists its options; "
                        "the Python names use _ for -)")
    if not (text_options is None or isinstance(text_options, (TextOptions, dict))):
        raise UserError(f"{caller}: text_options is a dict of text settings (e.g. {{'lowercase': True}}) or a "
                        f"TextOptions, not {type(text_options).__name__}")
    base = (text_options.to_dict() if isinstance(text_options, TextOptions) else dict(text_options or {}))
    base.update({k: v for k, v in settings.items() if k in text_names and v is not None})
    opts = TextOptions.from_dict(base, "text_options")
    return {k: v for k, v in settings.items() if k in fields}, opts


def _refuse_changed(given: dict):
    """``check_source`` for a run started from another: a setting given here that differs from the source's is
    refused, as the command line refuses its flag."""
    def check(where: str, what: str, theirs: dict, here: dict | None = None) -> None:
        values = {**given, **(here or {})}
        for name, value in theirs.items():
            if name in given and given[name] is not None and values[name] != value:
                raise UserError(f"init_from={where}: {what} come from that run ({name}={value!r} there, "
                                f"{values[name]!r} here); leave {name} out")
    return check


def _kept_in_run(run_dir: str, files: dict, texts: dict) -> dict:
    """``files`` with the texts given as sentences (not paths) copied into the new run's directory
    (``RUN/texts/<name>.txt``), where the run's config records them: a temporary file would be gone when the run
    is resumed (:func:`resume_lm`)."""
    import shutil

    from .data.textio import atomic_write
    from .neural.trainer import TEXTS, _check_new_run_dir

    given = [name for name, text in texts.items() if not isinstance(text, (str, os.PathLike))]
    if not given:
        return files
    _check_new_run_dir(run_dir)  # refused before anything is written there
    os.makedirs(os.path.join(run_dir, TEXTS), exist_ok=True)
    out = dict(files)
    for name in given:
        out[name] = os.path.join(run_dir, TEXTS, f"{name}.txt")
        with open(files[name], encoding="utf-8") as src, atomic_write(out[name]) as dst:
            shutil.copyfileobj(src, dst)
    return out


class _text_files:
    """``{name: path}`` for ``{name: a path or an iterable of sentences}``: sentences are written to temporary files
    (one per line, words joined by spaces), removed on exit."""

    def __init__(self, texts: dict):
        self.texts, self.tmp = texts, None

    def __enter__(self) -> dict:
        import tempfile

        from .data.textio import atomic_write

        files = {}
        for name, text in self.texts.items():
            if isinstance(text, (str, os.PathLike)):
                files[name] = os.fspath(text)
                continue
            if self.tmp is None:
                self.tmp = tempfile.TemporaryDirectory(prefix="sampledlm-text-")
            files[name] = os.path.join(self.tmp.name, f"{name}.txt")
            lines = 0
            with atomic_write(files[name]) as f:
                for i, s in enumerate(text):
                    if isinstance(s, str):
                        if "\n" in s or "\r" in s:
                            raise UserError(f"{name}: sentence {i} holds a line break: give one sentence per item")
                    elif not isinstance(s, Iterable) or not all(isinstance(w, str) and _one_word(w) for w in s):
                        raise UserError(f"{name}: sentence {i}: a sentence is a string or a list of words (each a "
                                        f"non-empty string without spaces), not {s!r:.60}")
                    line = (s if isinstance(s, str) else " ".join(s)).strip()
                    if line:
                        try:
                            f.write(line + "\n")
                        except UnicodeEncodeError as e:
                            raise UserError(f"{name}: sentence {i} is not valid text ({e.reason} at character "
                                            f"{e.start})") from None
                        lines += 1
            if not lines:
                raise UserError(f"{name}: no sentences (the sentences given hold no words)")
        return files

    def __exit__(self, *exc) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()
