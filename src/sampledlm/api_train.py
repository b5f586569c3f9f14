"""The Python API's training functions: each trains as its command does and returns a :class:`~sampledlm.api.Model`.

    >>> lm = sampledlm.train_ngram("train.txt", "kn5.arpa", order=5)                     # sampledlm ngram train
    >>> lm = sampledlm.train_lm("train.txt", "valid.txt", "gru", model="gru", epochs=2)  # sampledlm train
    >>> lm = sampledlm.resume_lm("gru")                                                  # sampledlm train --resume
    >>> lm = sampledlm.train_maxent("train.txt", "valid.txt", "melm")                    # sampledlm maxent train
    >>> wv = sampledlm.train_embeddings("corpus.txt", "vec", dim=100)                    # sampledlm embed train

Texts are files (``str`` or ``pathlib.Path``) or iterables of sentences (strings, or lists of words); the
functions print nothing unless given ``log`` and take the commands' options by their Python names, which their
messages use too (``epochs=0: must be >= 1``, where the command says ``--epochs 0``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable

from .api import Model, _one_word, _text_options_given, _with_text_options, load
from .config import python_names
from .data.tokenizer import TextOptions
from .errors import UserError


def _python_names(fn):
    """Run ``fn`` with messages naming settings by their keyword arguments (:func:`sampledlm.config.python_names`)."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with python_names():
            return fn(*args, **kwargs)
    return wrapped


@_python_names
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
    strings the same way; a binary directory records it, an ARPA file does not (as KenLM's and SRILM's do not):
    give the same ``text_options`` to :func:`load` for one. (:func:`sampledlm.ngram.train_ngram` is the id-level
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

    target = _path("train_ngram", "output", output)
    with _text_files({"train": text}) as files, model_output(target, binary, force, [files["train"], vocab, valid], opts):
        build(config, files["train"], target, binary=binary, vocab=vocab, valid=valid, text_options=opts,
              locked=binary)
    # an ARPA file does not record how text was read (module docstring of load): this Model does
    return Model(_with_text_options(ArpaLM.open(target), target, opts))


@_python_names
def train_lm(train, valid, output, *, model: str | None = None, objective: str | None = None, vocab=None,
             min_count: int = 1, max_size: int | None = None, text_options=None, threads: int | None = None, log=None,
             init_from=None, **settings) -> Model:
    """Train a neural LM into the run directory ``output``, as ``sampledlm train`` does, and return it as a
    :class:`Model`.

    ``train``, ``valid``: text files or iterables of sentences; ``model``: ``ffnn`` (the default), ``gru``,
    ``lstm`` or ``transformer``; ``objective``: any of ``sampledlm train --objective``'s (default ``softmax``). ``settings``: the command's other options by their Python names
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

    if objective is not None and objective not in OBJECTIVES:
        raise UserError(f"train_lm: unknown objective {objective!r}; choose from {', '.join(OBJECTIVES)}")
    known = set(MODEL_FIELDS) | set(TRAIN_FIELDS) | set(OBJECTIVE_FIELDS)
    settings, opts = _split_settings("train_lm", settings, known, text_options)  # lowercase=True and the like too
    empty = sorted(k for k, v in settings.items() if isinstance(v, (list, tuple)) and not v)
    if empty:  # the flag given no value is the flag not given: its default would train, not what was asked
        raise UserError(f"train_lm: {empty[0]}=[]: give at least one value (e.g. hidden=[256]), or leave it out for "
                        "its default")
    flags = {k: None for k in known} | settings
    _whole("train_lm", "min_count", min_count, 1, "1 keeps every word")
    if max_size is not None:
        _whole("train_lm", "max_size", max_size, 3, "</s> and <unk> included; None for no limit")
    _set_threads("train_lm", threads)
    log = _log(log)
    notes: list[str] = []
    vocab = None if vocab is None else os.fspath(vocab)
    _path("train_lm", "output", output)
    with _text_files({"train": train, "valid": valid}) as files, _nothing_left_on_error(os.fspath(output)):
        files = _kept_in_run(os.fspath(output), files, {"train": train, "valid": valid})
        try:
            if init_from is not None:
                from .neural.settings import init_config

                shape = sorted(k for k, v in settings.items() if v is not None and k not in TRAIN_FIELDS)
                if shape or opts != TextOptions() or (model, objective) != (None, None):
                    raise UserError(f"train_lm: init_from={os.fspath(init_from)!r}: the model, its objective and "
                                    "how text is read come from that run; give training settings only"
                                    + (f" (got {shape[0]})" if shape else ""))
                source, config, words = init_config(os.fspath(init_from), files["train"], files["valid"], vocab,
                                                    None if min_count == 1 else min_count, max_size, flags, notes)
                from .data.vocabmap import announce

                notes.append(announce(os.fspath(init_from), config["data"]["init_from"]))
            else:
                config, words = build_config(opts, files["train"], files["valid"], vocab, min_count, max_size,
                                             model or "ffnn", None, objective or "softmax", flags, notes)
        finally:
            for note in notes:
                log(note)
        trainer = new_run(os.fspath(output), config, words, log=log)
        if init_from is not None:
            from .neural.finetune import copy_into_trainer

            copy_into_trainer(source, trainer, words, os.fspath(init_from))
    trainer.train()  # from here a stopped run is kept, to go on with resume_lm
    return load(output)


def _path(call: str, name: str, value) -> str:
    """``value`` as a path, or a one-line refusal naming the argument (``os.fspath`` raised a bare TypeError)."""
    if not isinstance(value, (str, os.PathLike)):
        raise UserError(f"{call}: {name} should be a path (a str or a pathlib.Path), not {type(value).__name__}")
    return os.fspath(value)


def _whole(call: str, name: str, value, least: int, why: str) -> None:
    """A one-line refusal unless ``value`` is a whole number >= ``least`` (as the flag's range checks it)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UserError(f"{call}: {name}={value!r}: give a whole number >= {least} ({why})")


def _set_threads(call: str, threads) -> None:
    """torch's CPU threads for the process, when given (1-1,024, as ``--threads``)."""
    if threads is None:
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise UserError(f"{call}: threads {threads!r}: give a whole number from 1 to 1024")
    import torch

    torch.set_num_threads(threads)


class _nothing_left_on_error:
    """On a :class:`UserError` while a run is set up (a bad setting, an unknown device), remove what the setup
    wrote in ``run_dir``: the whole directory when it did not exist before, else the entries it added (a retry
    into the same directory was refused, or found a stray ``texts/``)."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self.before = set(os.listdir(run_dir)) if os.path.isdir(run_dir) else None

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb) -> None:
        import shutil

        if kind is None or not issubclass(kind, UserError) or not os.path.isdir(self.run_dir):
            return
        if self.before is None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            return
        for name in set(os.listdir(self.run_dir)) - self.before:
            path = os.path.join(self.run_dir, name)
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)


@_python_names
def resume_lm(run_dir, *, epochs: int | None = None, max_halvings: int | None = None, device: str | None = None,
              checkpoint_every: int | None = None, threads: int | None = None, log=None) -> Model:
    """Continue the neural run in ``run_dir`` from its last checkpoint, as ``sampledlm train --resume`` does
    (a run stopped by Ctrl-C, a crash or a time limit; the same numbers as an unbroken run), and return it as a
    :class:`Model`. ``epochs``, ``max_halvings``: train a run longer (a finished one too); ``device``: move it
    between a GPU and the CPU; ``checkpoint_every``: checkpoint every N steps from here on (0: at epoch ends only);
    every other setting is the run's own. ``threads``: torch's CPU threads for the
    process (``torch.set_num_threads``). ``log``: a function given each progress line (default: silent).

        >>> lm = sampledlm.resume_lm("gru")              # after an interrupted sampledlm.train_lm(..., "gru", ...)
    """
    from .neural.trainer import resume_run

    run_dir = _path("resume_lm", "run_dir", run_dir)
    _set_threads("resume_lm", threads)
    given = (("epochs", epochs), ("max_halvings", max_halvings), ("device", device),
             ("checkpoint_every", checkpoint_every))
    over = {k: v for k, v in given if v is not None}
    trainer = resume_run(run_dir, over, log=_log(log), refuse_finished=True)
    trainer.train()
    return load(run_dir)


@_python_names
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

    from .config import from_dict

    fields = {f.name for f in dataclasses.fields(MaxentRun)}
    run_settings, opts = _split_settings("train_maxent", settings, fields, text_options, _flag_renames(MaxentRun))
    run = from_dict(MaxentRun, run_settings, "train_maxent")  # types and ranges, as the flags check theirs
    _path("train_maxent", "output", output)
    with _text_files({"train": train, "valid": valid}) as files:
        train_directory(files["train"], files["valid"], os.fspath(output), run, opts,
                        force=force, init_dir=None if init_from is None else os.fspath(init_from),
                        vocab_path=None if vocab is None else os.fspath(vocab), ranks=ranks,
                        check_source=_refuse_changed(run_settings), log=_log(log),
                        keep_texts=tuple(k for k, v in (("train", train), ("valid", valid))
                                         if not isinstance(v, (str, os.PathLike))))
    return load(output)


@_python_names
def resume_maxent(output, *, log=None) -> Model:
    """Go on with the maximum-entropy training stopped in ``output`` (Ctrl-C, a crash, kill -9) from its last
    finished epoch, as ``sampledlm maxent train --resume`` does, with the texts and settings it began with, and
    return the model (the same one an unbroken run makes). ``log``: a function given each progress line.

        >>> lm = sampledlm.resume_maxent("melm")        # after an interrupted sampledlm.train_maxent(..., "melm")
    """
    from .maxent.run import resume_directory

    resume_directory(_path("resume_maxent", "output", output), log=_log(log))
    return load(output)


@_python_names
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
                  check_source=_refuse_changed(given), log=_log(log))
    paths = _corpus_files(corpus)
    if paths is not None:
        return train_directory(paths, os.fspath(output), given, opts, **common)
    with _text_files({"corpus": corpus}) as files:
        return train_directory([files["corpus"]], os.fspath(output), given, opts, **common,
                               corpus_label="sentences given to train_embeddings")


def _log(log):
    """``log`` checked before any work (a file name given for it would fail only at the first progress line, an
    epoch in): a function of one line, or None for silence."""
    if log is None:
        return lambda line: None
    if not callable(log):
        raise UserError(f"log: {log!r} is not a function: give one that takes each progress line (print, "
                        "list.append, a logger's info), or None for silence")
    return log


def _corpus_files(corpus) -> list[str] | None:
    """The files of ``train_embeddings``'s corpus, or None for sentences: a path, or a list of paths (one ``Path``
    in it, or one string naming an existing file, makes it a list of files, so a misspelt name among them is
    refused rather than read as a sentence)."""
    if isinstance(corpus, (str, os.PathLike)):
        return [os.fspath(corpus)]
    if not (isinstance(corpus, (list, tuple)) and corpus and all(isinstance(c, (str, os.PathLike)) for c in corpus)):
        return None
    if not any(isinstance(c, os.PathLike) or os.path.isfile(c) for c in corpus):
        return None
    for c in corpus:
        if not os.path.isfile(c):
            raise UserError(f"corpus: {os.fspath(c)}: no such file (the list's other entries are files, so it is "
                            "read as a list of files)")
    return [os.fspath(c) for c in corpus]


def _split_settings(caller: str, settings: dict, fields: set[str], text_options, renamed: dict | None = None):
    """``(the family's settings, TextOptions)`` from keyword arguments: the family's fields, and the text options
    by name (``lowercase=True``) beside or instead of ``text_options``; any other name is refused, with the
    nearest known name, or the Python name of a flag whose name differs (``renamed``: ``{"neg_rate": "alpha"}``)."""
    from .data.tokenizer import TextOptions

    text_names = set(TextOptions.__dataclass_fields__)
    unknown = sorted(set(settings) - fields - text_names)
    if unknown:
        raise UserError(f"{caller}: unknown setting(s) {', '.join(_with_hint(u, fields | text_names, renamed) for u in unknown)}"
                        " (the command's --help lists its options; the Python names use _ for -)")
    if not (text_options is None or isinstance(text_options, (TextOptions, dict))):
        raise UserError(f"{caller}: text_options is a dict of text settings (e.g. {{'lowercase': True}}) or a "
                        f"TextOptions, not {type(text_options).__name__}")
    base = (text_options.to_dict() if isinstance(text_options, TextOptions) else dict(text_options or {}))
    base.update({k: v for k, v in settings.items() if k in text_names and v is not None})
    opts = TextOptions.from_dict(base, "text_options")
    return {k: v for k, v in settings.items() if k in fields}, opts


def _with_hint(name: str, known: set[str], renamed: dict | None) -> str:
    """``name`` with what was probably meant: ``neg_rate (the Python name is alpha)``, ``epoch (did you mean
    epochs?)``."""
    import difflib

    if renamed and name in renamed:
        return f"{name} (the Python name of --{name.replace('_', '-')} is {renamed[name]})"
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f"{name} (did you mean {close[0]}?)" if close else name


def _flag_renames(config_class) -> dict[str, str]:
    """``{flag's Python form: field}`` for the fields of ``config_class`` whose flag is not their name."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(config_class):
        flag = f.metadata.get("flag")
        if flag and flag.startswith("--") and flag[2:].replace("-", "_") != f.name:
            out[flag[2:].replace("-", "_")] = f.name
    return out


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
            if not isinstance(text, Iterable) or isinstance(text, (bytes, bytearray)):
                raise UserError(f"{name}: give a text file's path or an iterable of sentences, not "
                                f"{type(text).__name__}")
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
