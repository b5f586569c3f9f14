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
    >>> lm = sampledlm.train_ngram("train.txt", "kn5.arpa", order=5)   # training: sampledlm.api_train

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
    an ARPA file, like KenLM's and SRILM's, does not record it (the commands take ``--lowercase`` and the like at
    each use); a binary n-gram directory written by ``ngram train --binary``, a neural or a maximum-entropy model
    records its own, and different options for it are refused."""
    from .loader import load_model
    from .lm import Mixture

    if isinstance(path_or_paths, (bytes, bytearray)) or path_or_paths is None or not (
            isinstance(path_or_paths, (str, os.PathLike)) or isinstance(path_or_paths, Iterable)):
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
    if device is not None and not (isinstance(device, str) and (device in ("auto", "cpu", "cuda") or (
            device.startswith("cuda:") and device[5:].isdigit()))):  # an n-gram model alone would never read it
        raise UserError(f"load: device {device!r}: choose auto, cpu, cuda or cuda:N")
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
        self._start_state = None

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
            elif not isinstance(sentences, Iterable):
                raise UserError("perplexity: give a sentence, an iterable of sentences or a pathlib.Path, not "
                                f"{type(sentences).__name__}")
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
    def _start(self):
        """:meth:`begin_sentence`'s state, made once (every :meth:`advance_many` checks its states against it)."""
        if self._start_state is None:
            self._start_state = self.begin_sentence()
        return self._start_state

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

        if isinstance(words, np.ndarray) and words.ndim == 1:  # a decoder's array of words
            words = words.tolist()
        if isinstance(words, (str, bytes)) or not isinstance(words, Sequence):
            raise UserError("advance_many: give a list of words, one per state")
        start = self._start()
        if isinstance(states, type(start)) or isinstance(states, (str, bytes)) or not isinstance(states, Sequence):
            raise UserError("advance_many: give a list of states (from begin_sentence or advance), one per word")
        if len(states) != len(words):
            raise UserError(f"advance_many: {len(states)} states and {len(words)} words: give one word per state")
        for i, w in enumerate(words):
            if not isinstance(w, str) or not _one_word(w) or w == "<s>":
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
        if top_k is not None:
            _check_number("top_k", top_k, lambda x: x >= 1, "a whole number >= 1, or None for every word", whole=True)
        lp = np.asarray(self.lm.next_logprobs(self._ids(self.words(words))), dtype=np.float64)
        k = len(lp) if top_k is None else int(top_k)
        cand = np.arange(len(lp))
        if k < len(lp):  # the words at or above the k-th score (ties kept), then sorted: not a sort of all V
            cand = np.flatnonzero(-lp <= np.partition(-lp, k - 1)[k - 1])
        order = cand[np.argsort(-lp[cand], kind="stable")][:k]
        return {self.vocab.words[i]: float(lp[i]) for i in order.tolist()}

    def generate(self, n: int = 1, prefix: Sentence = (), *, temperature: float = 1.0, top_k: int = 0,
                 max_words: int = 50, seed: int | None = None, allow_unk: bool = True) -> list[str]:
        """``n`` sentences sampled after ``prefix`` (each with its prefix), as ``sampledlm generate`` samples
        them: the same ``seed`` gives the same sentences (``sampledlm generate --seed``); None (the default) draws
        fresh ones each call."""
        from .use.generate import generate

        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise UserError(f"generate: n {n!r}: give a whole number >= 0")
        _check_number("generate: temperature", temperature, lambda x: x > 0, "a positive number")
        _check_number("generate: top_k", top_k, lambda x: x >= 0, "a whole number >= 0 (0: every word)", whole=True)
        _check_number("generate: max_words", max_words, lambda x: x >= 1, "a whole number >= 1", whole=True)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise UserError(f"generate: seed {seed!r}: give a whole number >= 0, or None for fresh sentences")
        # the prefix as typed (a word outside the vocabulary is conditioned on as <unk>), as sampledlm generate
        return [" ".join(words) for words in generate(self.lm, self.words(prefix), n, seed, temperature=temperature,
                                                       top_k=top_k, max_words=max_words, allow_unk=allow_unk)]


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
