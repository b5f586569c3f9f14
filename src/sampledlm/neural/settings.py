"""A new neural run's settings, resolved from what the user gave: the library's side of ``sampledlm train`` and of
:func:`sampledlm.train_lm` (neither the command line nor the API holds a rule of its own).

The settings are the fields of the models' ``Config`` dataclasses (:data:`MODEL_FIELDS`), of
:class:`~sampledlm.neural.trainer.TrainOptions` (:data:`TRAIN_FIELDS`) and the objectives' options
(:data:`OBJECTIVE_FIELDS`); None means "not given", and the default then comes from, in this order, the
objective's defaults on this trunk (``sequence_defaults``), the model kind's training defaults
(``train_defaults``) and the dataclass. Every setting that one rule derived from another is reported as a note
(a line of text) rather than printed.
"""

from __future__ import annotations

import dataclasses
import os

from ..config import setting_name, setting_value
from ..errors import UserError
from ..objectives.registry import OBJECTIVES, objective_options, objective_settings
from .registry import MODELS
from .trainer import TrainOptions


def _field_names(classes) -> list[str]:
    names: list[str] = []
    for cls in classes:
        names += [f.name for f in dataclasses.fields(cls) if f.name not in names]
    return names


#: every model kind's settings (the union of the ``Config`` fields), in the order of the ``--help``
MODEL_FIELDS = _field_names(cls.Config for cls in MODELS.values())
#: the training loop's settings
TRAIN_FIELDS = _field_names([TrainOptions])
#: every objective's options
OBJECTIVE_FIELDS = sorted({k for cls in OBJECTIVES.values() for k in objective_options(cls)})


def counts_from_text(vocab, vocab_path: str, train_path: str, opts, notes: list[str] | None = None):
    """``vocab`` with each word the file gave no count (or count 0) counted in the training text instead.

    The counts feed the output objectives (noise distributions, initial biases, Huffman trees, class and head
    sizes). A vocabulary file rarely lists ``</s>``, and a plain word list gives every word count 0: with ``</s>``
    at count 0 NCE never drew it as a noise word and its score drifted up unchecked (a GRU at V = 485k gave it a
    probability of 12.6 % where it is 1.6 % of the text, and its exact validation perplexity rose from 315 to 1,575
    over four epochs). The training text is encoded here once (the id stream is cached for training)."""
    import numpy as np

    from ..data.corpus import load_ids
    from ..data.vocab import UNK_ID, Vocab

    missing = np.flatnonzero(vocab.counts == 0)
    if len(missing) == 0:
        return vocab
    seen = np.bincount(np.asarray(load_ids(train_path, vocab, opts)), minlength=len(vocab))
    counts = vocab.counts.copy()
    counts[missing] = seen[missing]
    words = missing[missing != UNK_ID]  # <unk>: counted from the text without a word said (a vocabulary file
    if len(words):                       # gives it no count: `sampledlm vocab` writes 0)
        named = [vocab.words[i] for i in words[:3]]
        _note(notes, f"--vocab {vocab_path}: {len(words):,} word(s) without a count there (not in the file, or "
                     f"listed with count 0: {', '.join(named)}{', ...' if len(words) > 3 else ''}); counted in the "
                     "training text")
    return Vocab(vocab.words, counts)


def _vocabulary(train_path: str, vocab_path: str | None, opts, min_count: int, max_size: int | None,
                notes: list[str] | None):
    """A new run's vocabulary: the ``--vocab`` file's (its missing counts from the text), else the text's own."""
    from ..data.corpus import build_vocab
    from ..data.vocab import Vocab

    if vocab_path:
        return counts_from_text(Vocab.load(vocab_path), vocab_path, train_path, opts, notes)
    return build_vocab(train_path, opts, min_count=min_count, max_size=max_size)


def check_rereadable(train_path: str, valid_path: str) -> None:
    """A neural run's texts are files it can read again: every epoch reads the training text's id stream, and
    ``--resume`` reads both once more (hashed against the run's record). Standard input, a pipe or a process
    substitution is read once: refused, naming the flag."""
    import stat

    for flag, path in (("--train", train_path), ("--valid", valid_path)):
        try:
            regular = path != "-" and stat.S_ISREG(os.stat(path).st_mode)
        except (OSError, TypeError, ValueError):
            continue  # missing, unreadable or not a path: reading it says so, naming the file
        if not regular:
            raise UserError(f"{flag} {path}: not a file (standard input or a pipe is read once); a neural run reads "
                            "its texts again, every epoch and on --resume: save the text to a file and give that")


def _note(notes: list[str] | None, line: str) -> None:
    if notes is not None:
        notes.append(line)


def sequence_defaults(model_type: str, objective: str, flags: dict, notes: list[str] | None = None) -> dict:
    """``flags`` with the objective's ``sequence_defaults`` filled in where the user gave none, when the model is
    recurrent (``sequence_model``); what it set and why is appended to ``notes``."""
    from .registry import model_class
    from ..objectives.registry import OBJECTIVES

    cls = OBJECTIVES[objective]
    if not model_class(model_type).sequence_model or not cls.sequence_defaults:
        return flags
    flags = dict(flags)
    given = {k for k, v in flags.items() if v not in (None, ())}
    unset = {k: v for k, v in cls.sequence_defaults.items()
             if k in flags and k not in given and not given & set(cls.sequence_unless.get(k, ()))}
    flags.update(unset)
    if unset:
        set_now = " ".join(setting_value(k, v) for k, v in unset.items())
        _note(notes, f"{setting_value('objective', objective)} on a {model_type}: {set_now} ({cls.sequence_why})")
    return flags


def _given(value) -> bool:
    return value is not None and value != () and value != []


def _record(sources: dict | None, names, source: str) -> None:
    if sources is not None:
        for name in names:
            sources.setdefault(name, source)


def planned_steps(train_path: str, vocab, opts, train_opts) -> int:
    """The optimiser steps a recurrent run of ``train_opts`` will take on ``train_path``: its epochs times the BPTT
    segments of ``batch_size`` rows an epoch (:class:`.rnn.RecurrentData`), or ``max_steps`` when fewer. The text is
    encoded (and its id stream cached for the training) to count its predictions."""
    from ..data.corpus import load_ids

    columns = -(-(len(load_ids(train_path, vocab, opts)) - 1) // train_opts.batch_size)
    steps = train_opts.epochs * -(-columns // train_opts.bptt)
    return min(steps, train_opts.max_steps) if train_opts.max_steps else steps


def _long_run_defaults(cls, steps_of, what: str, train_opts, obj_opts: dict, given: dict, notes: list[str] | None,
                       sources: dict | None):
    """``(train_opts, obj_opts)`` with the objective's :attr:`~.OutputObjective.sequence_train_long` settings (a
    recurrent default measured on a short run, replaced on a long one: a training setting such as the rate, or one of
    the objective's options such as its samples) for a run of ``steps_of()`` planned steps (counted only when the
    objective has such settings; ``steps_of`` False: not a recurrent run), each where the user gave none (``given``),
    said in ``notes`` and ``sources`` as ``what`` ("--objective is on a gru") over so many steps."""
    if not steps_of or not cls.sequence_train_long:
        return train_opts, obj_opts
    steps = steps_of()
    values, why = cls.sequence_train_for_steps(steps)
    long = {k: v for k, v in values.items() if not _given(given.get(k))}
    if not long:
        return train_opts, obj_opts
    short = {k: getattr(train_opts, k) if k in TRAIN_FIELDS else obj_opts.get(k) for k in long}
    where = f"{what} over {steps:,} steps"
    _note(notes, f"{where}: " + " ".join(f"{setting_value(k, v)} (not {short[k]})" for k, v in long.items())
          + f" ({why})")
    if sources is not None:
        sources.update({k: where for k in long})
    train = {k: v for k, v in long.items() if k in TRAIN_FIELDS}
    return dataclasses.replace(train_opts, **train), {**obj_opts, **{k: v for k, v in long.items() if k not in train}}


#: from this many planned steps on, a recurrent run of one epoch reads a long text once: no sentence is seen twice,
#: so the dropout chosen against overfitting PTB's 8 epochs (0.25) only slows learning. 20,000 steps of 32 rows x 35
#: tokens are 22M predictions; measured at 130,000 steps (a GRU on 145M tokens, test 85.41 without dropout against
#: 98.45 with it), not between
ONE_PASS_STEPS = 20_000


def _one_pass_dropout(model_type: str, spec: dict, steps_of, train_opts, given: dict, notes: list[str] | None,
                      sources: dict | None) -> dict:
    """``spec`` with the model's :attr:`~.NeuralScorer.one_pass_dropout` when the run reads its text once
    (``epochs`` 1) over at least :data:`ONE_PASS_STEPS` planned steps (``steps_of()``) and no dropout was given."""
    rate = MODELS[model_type].one_pass_dropout
    if rate is None or _given(given.get("dropout")) or train_opts.epochs != 1 or spec.get("dropout") == rate:
        return spec
    steps = steps_of()
    if steps < ONE_PASS_STEPS:
        return spec
    where = f"--model {model_type} reading its text once over {steps:,} steps"
    _note(notes, f"{where}: {setting_value('dropout', rate)} (not {spec.get('dropout')}; no sentence is seen twice, "
                 f"and on 145M Wikipedia tokens a GRU without dropout scored 13 % lower perplexity; give "
                 f"{setting_name('dropout')} to choose)")
    if sources is not None:
        sources["dropout"] = where
    return {**spec, "dropout": rate}


#: below this many planned steps a model's :attr:`~.NeuralScorer.short_run_train` settings apply: the GRU's AdamW
#: recipe was chosen on PTB (8 epochs, 6,640 steps); the rates that Adam keeps beyond it were measured at 22,000 to
#: 130,000 steps on 145M Wikipedia tokens
SHORT_RUN_STEPS = 20_000


def _short_run_defaults(model_type: str, steps_of, train_opts, given: dict, notes: list[str] | None,
                        sources: dict | None):
    """``train_opts`` with the model's :attr:`~.NeuralScorer.short_run_train` settings where the user gave none, for a
    run of fewer than :data:`SHORT_RUN_STEPS` planned steps (``steps_of()``). Nothing when the user chose another
    optimiser than the recipe's (``--optimizer adam`` keeps the Adam defaults and each objective's Adam rate)."""
    recipe = MODELS[model_type].short_run_train
    chosen = given.get("optimizer")
    if not recipe or (_given(chosen) and chosen != recipe.get("optimizer")):
        return train_opts
    unset = {k: v for k, v in recipe.items() if not _given(given.get(k))}
    if not unset or all(getattr(train_opts, k) == v for k, v in unset.items()):
        return train_opts
    steps = steps_of()
    if steps >= SHORT_RUN_STEPS:
        return train_opts
    where = f"--model {model_type} over {steps:,} steps"
    _note(notes, f"{where}: " + " ".join(f"{setting_value(k, v)} (not {getattr(train_opts, k)})"
                                         for k, v in unset.items())
          + f" (the best measured for every output on PTB's 6,640-step runs; from {SHORT_RUN_STEPS:,} steps Adam, "
            f"as measured at V = 485k; give {setting_name('optimizer')} to choose)")
    if sources is not None:
        sources.update({k: where for k in unset})
    return dataclasses.replace(train_opts, **unset)


def _run_length_defaults(cls, objective: str, model_type: str, spec: dict, text: tuple, train_opts, obj_opts: dict,
                         given: dict, notes: list[str] | None, sources: dict | None):
    """``(spec, train_opts, obj_opts)`` with the defaults that depend on how long a recurrent run is: the objective's
    (:func:`_long_run_defaults`) or else the model's for a short run (:func:`_short_run_defaults`), then the model's
    dropout on a text read once (:func:`_one_pass_dropout`). The planned steps (``text`` = ``(train_path, vocab,
    opts)``, :func:`planned_steps`) are counted once, and only when a rule needs them."""
    if not MODELS[model_type].sequence_model:
        return spec, train_opts, obj_opts
    counted: dict = {}

    def steps_of(t=None) -> int:
        t = t or train_opts
        key = (t.batch_size, t.bptt, t.epochs, t.max_steps)
        if key not in counted:
            counted[key] = planned_steps(*text, t)
        return counted[key]

    longer, obj_opts = _long_run_defaults(cls, steps_of, f"--objective {objective} on a {model_type}", train_opts,
                                          obj_opts, given, notes, sources)
    if longer == train_opts:  # an objective's long-run training settings replace the short run's recipe
        train_opts = _short_run_defaults(model_type, lambda: steps_of(train_opts), train_opts, given, notes, sources)
    else:
        train_opts = longer
    spec = _one_pass_dropout(model_type, spec, lambda: steps_of(train_opts), train_opts, given, notes, sources)
    return spec, train_opts, obj_opts


def _model_flags(model_type: str, context_size: int | None, flags: dict) -> dict:
    """The given model settings (None = not given; ``--context-size`` as ``order``), the flags the model kind would
    silently ignore refused by the names the user gave (``--context-size`` is ``--order`` inside, which would name
    a flag that was never typed)."""
    from .registry import model_class

    cls = model_class(model_type)
    if context_size is not None and "order" not in {f.name for f in dataclasses.fields(cls.Config)}:
        raise UserError(f"option(s) {setting_name('context_size')} do not apply to model {model_type!r}")
    if _given(flags.get("bptt")) and not cls.uses_bptt:
        raise UserError(f"option(s) {setting_name('bptt')} do not apply to model {model_type!r} (its context is "
                        f"{setting_name('order')} - 1 words)")
    model_flags = {k: (list(flags[k]) if isinstance(flags[k], tuple) else flags[k]) for k in MODEL_FIELDS}
    model_flags = {k: (v or None) if isinstance(v, list) else v for k, v in model_flags.items()}
    if context_size is not None:
        if model_flags.get("order") is not None and model_flags["order"] != context_size + 1:
            raise UserError(f"{setting_value('order', model_flags['order'])} and {setting_value('context_size', context_size)} disagree "
                            "(order = context size + 1)")
        model_flags["order"] = context_size + 1
    return model_flags


#: from this vocabulary size on, an output that scores every word is said to be the slow choice
LARGE_VOCABULARY = 100_000


def _whole_vocabulary_note(cls, objective: str, v: int, notes: list[str] | None) -> None:
    """A note when the output scores all of a large vocabulary at every position (a GRU's softmax at V = 485k trained
    at 43 words a second on one CPU thread, NCE and IS at 9,500-17,600): the objectives made for that V."""
    if getattr(cls, "scores_every_word", False) and v >= LARGE_VOCABULARY:
        _note(notes, f"{setting_value('objective', objective)} scores all {v:,} words at every position, training "
                     f"and memory growing with V: at this size {setting_value('objective', 'is')} or nce trains "
                     "hundreds of times faster (docs/neural.md, Large vocabularies)")


def build_config(opts, train_path, valid_path, vocab_path, min_count, max_size, model_type, context_size, objective,
                 flags: dict, notes: list[str] | None = None, sources: dict | None = None):
    """``(config, vocab)`` of a new run from the given settings (``flags``: every field of :data:`MODEL_FIELDS`,
    :data:`TRAIN_FIELDS` and :data:`OBJECTIVE_FIELDS`, None = not given). Where a setting follows from another
    (an objective's needs of the model, its defaults on a recurrent trunk, ``samples`` capped at V/2, tied adaptive
    input bands following the softmax's head), the line saying so is appended to ``notes``: the command line prints
    them, the Python API hands them to its ``log``. ``sources``, when given, receives where each setting came from
    (``{name: "given" | "--objective nce on a gru" | "--model gru" | "default" | ...}``), the first rule that set it
    winning: what ``RUN/config.toml`` records beside each value."""
    from .registry import complete_spec, model_class, model_spec
    from .rundir import make_config
    from .trainer import train_options_for

    check_rereadable(train_path, valid_path)
    _record(sources, [k for k in (*MODEL_FIELDS, *TRAIN_FIELDS, *OBJECTIVE_FIELDS) if _given(flags.get(k))], "given")
    model_flags = _model_flags(model_type, context_size, flags)
    defaults = model_spec(model_type)
    cls = OBJECTIVES[objective]  # what the objective needs of the model, and takes on a recurrent trunk
    recurrent = model_class(model_type).sequence_model
    settings = [(f"--objective {objective}", name, value, why, ())
                for name, (value, why) in cls.model_settings_for(flags, recurrent).items()]
    if recurrent:
        settings += [(f"--objective {objective} on a {model_type}", name, *rest)
                     for name, rest in cls.sequence_model_settings.items()]
    for where, name, value, why, needs in settings:
        if name in defaults and model_flags.get(name) is None and defaults[name] != value \
                and all(model_flags.get(n) is not False for n in needs):
            model_flags[name] = value
            _note(notes, f"{where}: {why}")
            _record(sources, [name], where)
    if model_flags.get("input_weights") is False and model_flags.get("tie") is None and defaults.get("tie"):
        model_flags["tie"] = False
        _record(sources, ["tie"], "--no-input-weights")
        _note(notes, "--no-input-weights: input and output embeddings untied, as in faster-rnnlm (the embedding goes "
                     "into the gates as it is; tied to the output rows, NCE on 10,000 PTB sentences reached valid 381 "
                     "against 246 untied; give --tie to tie them anyway)")
    spec = model_spec(model_type, **model_flags)
    samples_given = flags.get("samples") is not None
    before = flags
    flags = sequence_defaults(model_type, objective, flags, notes)
    _record(sources, [k for k in flags if flags[k] is not before.get(k)], f"--objective {objective} on a {model_type}")
    _record(sources, model_class(model_type).train_defaults, f"--model {model_type}")
    train_opts = train_options_for(model_type, {k: flags[k] for k in TRAIN_FIELDS})
    if spec.get("adaptive_input") and spec.get("input_cutoffs") is None and flags.get("cutoffs"):
        spec["input_cutoffs"] = list(flags["cutoffs"])  # one --cutoffs for the input bands and the adaptive softmax
    spec = complete_spec(spec, dataclasses.asdict(train_opts))
    obj_opts = {k: (list(v) or None) if isinstance(v := flags.get(k), tuple) else v for k in OBJECTIVE_FIELDS}
    vocab = _vocabulary(train_path, vocab_path, opts, min_count, max_size, notes)
    spec, train_opts, obj_opts = _run_length_defaults(cls, objective, model_type, spec, (train_path, vocab, opts),
                                                      train_opts, obj_opts, before, notes, sources)
    _whole_vocabulary_note(cls, objective, len(vocab), notes)
    fields = {f.name: f for f in dataclasses.fields(cls.Options)} if getattr(cls, "Options", None) else {}
    default = obj_opts.get("samples") if obj_opts.get("samples") is not None else \
        getattr(fields.get("samples"), "default", None)  # the objective's own default (250) as much as its GRU one
    if not samples_given and isinstance(default, int) and default >= len(vocab):
        obj_opts["samples"] = max(1, len(vocab) // 2)  # a default made for large vocabularies, on a small one
        _note(notes, f"--objective {objective}: --samples {obj_opts['samples']} (half the vocabulary of "
                     f"{len(vocab):,} words: the default, {default:,}, is not smaller than V)")
        _record(sources, ["samples"], f"half the vocabulary of {len(vocab):,} words")
    if spec.get("adaptive_input") and spec.get("input_cutoffs") is None and obj_opts.get("head_coverage") \
            and not obj_opts.get("cutoffs"):  # tied bands: the input's default bands follow the softmax's head
        from ..objectives.adaptive import MAX_HEAD, default_cutoffs

        spec["input_cutoffs"] = default_cutoffs(vocab.counts, len(vocab), obj_opts["head_coverage"],
                                                obj_opts.get("max_head") or MAX_HEAD)
    if spec.get("adaptive_input") and spec.get("tie") and model_flags.get("input_factor") is None \
            and obj_opts.get("div_value") is not None:  # tied bands: the input's widths follow the softmax's tails
        spec["input_factor"] = float(obj_opts["div_value"])
    # refuses options that do not apply, early; the objective checks its own against the vocabulary
    objective_settings(objective, **obj_opts)  # the objective itself is built once, by the run (neural.rundir)
    obj_opts, settled = cls.settle_options(obj_opts, vocab)
    obj_opts = {**objective_options(cls), **{k: v for k, v in obj_opts.items() if v is not None}}  # config.json: all
    for note in settled:
        _note(notes, note)
    _record(sources, objective_options(cls), f"--objective {objective}")
    _record(sources, [*MODEL_FIELDS, "order"], f"--model {model_type}")
    _record(sources, TRAIN_FIELDS, "default")
    data = {"train": os.path.abspath(train_path), "valid": os.path.abspath(valid_path), "text_options": opts.to_dict()}
    return make_config(spec, objective, obj_opts, dataclasses.asdict(train_opts), data, vocab), vocab


#: objectives whose output structure is a function of the vocabulary (classes, a tree, frequency bands)
FIXED_BY_VOCABULARY = frozenset({"class", "hsm", "adaptive"})


def init_config(init_dir: str, train_path: str, valid_path: str, vocab_path: str | None, min_count: int | None,
                max_size: int | None, flags: dict, notes: list[str] | None = None):
    """``(source, config, vocab)`` of a run started from the trained run ``init_dir``
    (:mod:`sampledlm.neural.finetune`): the source's model, objective and text options; these training settings
    (``flags``, None = not given) and texts. The vocabulary is the source's unless ``vocab_path``, ``min_count`` or
    ``max_size`` (None = not given) asks for a new one (shared words keep their rows)."""
    import copy

    from ..data.corpus import build_vocab
    from ..data.tokenizer import TextOptions
    from ..data.vocab import Vocab
    from ..data.vocabmap import origin
    from .finetune import source_run
    from .rundir import make_config
    from .trainer import train_options_for

    check_rereadable(train_path, valid_path)
    source = source_run(init_dir)
    _, _, src_vocab, src_config = source
    text = TextOptions.from_dict(src_config["data"].get("text_options"), init_dir)
    if vocab_path:
        vocab = counts_from_text(Vocab.load(vocab_path), vocab_path, train_path, text, notes)
    elif min_count is not None or max_size is not None:
        vocab = build_vocab(train_path, text, min_count=min_count or 1, max_size=max_size)
    else:
        vocab = src_vocab
    fixed = src_config["objective"]["name"] in FIXED_BY_VOCABULARY or src_config["model"].get("adaptive_input")
    if fixed and list(vocab.words) != list(src_vocab.words):
        raise UserError(f"{setting_value('init_from', init_dir)}: its output ({src_config['objective']['name']}"
                        f"{', adaptive input' if src_config['model'].get('adaptive_input') else ''}) is built on its "
                        f"vocabulary's classes or frequency bands, so a new vocabulary "
                        f"({', '.join(map(setting_name, ('vocab', 'min_count', 'max_size')))}) cannot take its weights: drop those to keep its vocabulary, or train a new run")
    model_type = src_config["model"]["type"]
    flags = sequence_defaults(model_type, src_config["objective"]["name"],
                              {k: v for k, v in flags.items() if k not in OBJECTIVE_FIELDS}, notes)
    train_opts = train_options_for(model_type, {k: flags.get(k) for k in TRAIN_FIELDS})
    data = {"train": os.path.abspath(train_path), "valid": os.path.abspath(valid_path), "text_options": text.to_dict(),
            "init_from": origin(init_dir, src_vocab, vocab)}
    objective = src_config["objective"]
    config = make_config(copy.deepcopy(src_config["model"]), objective["name"], dict(objective.get("options", {})),
                         dataclasses.asdict(train_opts), data, vocab)
    return source, config, vocab
