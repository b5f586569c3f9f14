"""`sampledlm train --help` states the defaults the code applies: every model kind's, every objective's and every
objective's default on recurrent models, read from the one place each is declared (no text to drift)."""

from __future__ import annotations

import dataclasses
import re

from click.testing import CliRunner

from sampledlm.cli import cli
from sampledlm.neural.registry import MODELS
from sampledlm.neural.train_options import TrainOptions
from sampledlm.objectives.registry import OBJECTIVES, objective_options


def _help() -> str:
    r = CliRunner().invoke(cli, ["train", "--help"], terminal_width=10_000)
    assert r.exit_code == 0, r.output
    return re.sub(r"\s+", " ", r.output)


def _records() -> dict[str, str]:
    """``{--flag: its help as --help shows it}``, from click's own help records."""
    import click

    command = cli.get_command(click.Context(cli), "train")
    ctx = click.Context(command, info_name="train")
    out = {}
    for p in command.get_params(ctx):
        rec = p.get_help_record(ctx)
        if rec:
            out[rec[0].split()[0].split("/")[0].rstrip(",")] = re.sub(r"\s+", " ", rec[1])
    return out


def _flag_help(text: str, flag: str) -> str:
    records = _records()
    assert flag in records, flag
    assert records[flag].split("[")[0][:30] in text  # the record is what --help prints
    return records[flag]


def _shown(v) -> str:
    return "on" if v is True else "off" if v is False else f"{v:,}" if isinstance(v, int) else str(v)


def test_each_objective_option_names_its_defaults_and_recurrent_defaults():
    text = _help()
    for name, cls in OBJECTIVES.items():
        for option, default in objective_options(cls).items():
            help_text = _flag_help(text, "--" + option.replace("_", "-"))
            if default is not None:
                assert _shown(default) in help_text, (name, option)
            recurrent = cls.sequence_defaults.get(option)
            if recurrent is not None:
                assert f"on recurrent models {_shown(recurrent)}" in help_text or \
                    re.search(rf"on recurrent models .*{re.escape(_shown(recurrent))} \([^)]*\b{re.escape(name)}\b",
                              help_text), (name, option)


def test_the_learning_rate_help_gives_each_model_and_objective_default():
    lr = _flag_help(_help(), "--lr")
    for kind, cls in MODELS.items():
        value = cls.train_defaults.get("lr", TrainOptions.lr)
        assert f"{kind} {value}" in lr, kind
    for name, cls in OBJECTIVES.items():
        if "lr" in cls.sequence_train:
            assert re.search(rf"--objective [^:]*\b{re.escape(name)}\b[^:]* on recurrent models: "
                             rf"{cls.sequence_train['lr']}", lr), name
    fields = {f.name for f in dataclasses.fields(TrainOptions)}
    assert "lr" in fields


def test_the_description_no_longer_says_the_rate_is_halved_for_every_model():
    text = _help()
    assert "halved when it stops improving" not in text and "Transformer" in text


def test_the_training_flags_help_holds_only_training_settings_long_run_values():
    """A long-run default of an objective option (css-is's samples) is said in that option's help, not collected
    among the training settings' (where it would name no flag)."""
    from sampledlm.cli.neural import _objective_train_defaults
    from sampledlm.neural.settings import TRAIN_FIELDS

    collected = _objective_train_defaults()
    assert collected and set(collected) <= set(TRAIN_FIELDS)
    assert "css-is over 20,000 steps" in collected["lr"]


def test_the_dropout_help_gives_each_model_default_and_the_one_pass_rate():
    from sampledlm.neural.settings import ONE_PASS_STEPS

    dropout = _flag_help(_help(), "--dropout")
    for kind, cls in MODELS.items():
        assert f"{kind} {cls.Config().dropout}" in dropout, kind
        if cls.one_pass_dropout is not None:
            assert re.search(rf"\b{kind}\b[^:;]* reading their text once \(--epochs 1, >= {ONE_PASS_STEPS:,} steps\): "
                             rf"{cls.one_pass_dropout}", dropout), kind
