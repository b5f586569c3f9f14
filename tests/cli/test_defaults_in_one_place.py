"""Each default lives in one place: a flag made from a configuration dataclass defaults to None (the library then
applies the dataclass's default), a hand-written flag takes its default from the dataclass, and a model is built
from its config, with no keyword defaults of its own."""

from __future__ import annotations

import dataclasses
import inspect
import json

import click
import pytest

from sampledlm.cli import cli


def command(*path):
    ctx = click.Context(cli)
    cmd = cli
    for name in path:
        cmd = cmd.get_command(ctx, name)
    return cmd


def field_names(*classes):
    return {f.name for cls in classes for f in dataclasses.fields(cls)}


def test_the_training_flags_made_from_dataclasses_leave_the_default_to_them():
    from sampledlm.embed.train import Word2VecConfig
    from sampledlm.neural.registry import MODELS
    from sampledlm.neural.trainer import TrainOptions

    cases = [(command("train"), field_names(TrainOptions, *(m.Config for m in MODELS.values()))),
             (command("embed", "train"), field_names(Word2VecConfig))]
    for cmd, fields in cases:
        generated = [p for p in cmd.params if p.name in fields]
        assert len(generated) >= 10, cmd.name
        assert [p.name for p in generated if p.default is not None] == [], cmd.name


def test_maxent_train_takes_every_default_from_its_config():
    from sampledlm.maxent.config import TrainConfig

    d = TrainConfig()
    expected = {"objective": d.objective, "alpha": d.alpha, "lr": d.lr, "epochs": d.epochs, "l2": d.l2,
                "seed": d.seed, "average": d.average, "optimizer": "adagrad" if d.adagrad else "sgd",
                "neg_subset": "fixed" if d.fixed_negatives else "variable"}
    import dataclasses

    from sampledlm.maxent.run import MaxentRun

    params = {p.name: p for p in command("maxent", "train").params}
    fields = {f.name: f.default for f in dataclasses.fields(MaxentRun)}
    # the flags are made from MaxentRun's fields: None = not given; each default in its help, from TrainConfig
    assert all(params[k].default is None for k in fields)
    assert {k: fields[k] for k in expected if fields[k] is not None} == \
        {k: v for k, v in expected.items() if fields[k] is not None}
    for k, v in expected.items():
        assert f"[default: {v}]" in params[k].help, k
    assert f"[default: {d.min_gain}]" in params["min_improvement"].help


@pytest.mark.parametrize("name", ["ffnn", "gru", "lstm", "transformer"])
def test_a_model_is_built_from_its_config_alone(name):
    from sampledlm.neural.registry import MODELS

    cls = MODELS[name]
    params = inspect.signature(cls.__init__).parameters
    settings = set(params) - {"self", "num_words", "cfg", "sparse_output", "counts"}
    assert settings == set(), f"{cls.__name__}.__init__ has settings of its own: {sorted(settings)}"
    assert params["cfg"].default is inspect.Parameter.empty


def test_every_command_that_reads_a_model_mixes_with_the_same_flags():
    """One grammar: --mix (repeatable), --weights, --interp-valid everywhere; --interpolate a hidden alias."""
    for path in (["eval"], ["score"], ["rescore"], ["generate"], ["serve"]):
        params = {p.name: p for p in command(*path).params}
        mix = params["others"]
        assert mix.opts == ["--mix"] and mix.multiple and not mix.hidden, path
        assert params["others_alias"].opts == ["--interpolate"] and params["others_alias"].hidden, path
        assert {"weights", "interp_valid"} <= set(params), path
        helps = {params[n].help for n in ("others", "weights", "interp_valid")}
        assert len(helps) == 3


def test_the_old_and_the_new_mixing_flag_give_the_same_numbers_and_not_together(tmp_path):
    from click.testing import CliRunner

    (tmp_path / "t.txt").write_text("a b c\nb c a\nc a b a\n" * 20)
    r = CliRunner()
    for name, order in (("k2.arpa", "2"), ("k1.arpa", "1")):
        assert r.invoke(cli, ["ngram", "train", "--train", str(tmp_path / "t.txt"), "--order", order,
                              "-o", str(tmp_path / name)]).exit_code == 0
    base = ["eval", str(tmp_path / "k2.arpa"), "--test", str(tmp_path / "t.txt"), "--weights", "0.7", "--json"]
    new = r.invoke(cli, base + ["--mix", str(tmp_path / "k1.arpa")])
    old = r.invoke(cli, base + ["--interpolate", str(tmp_path / "k1.arpa")])
    assert new.exit_code == 0 and old.exit_code == 0

    def numbers(result):  # the summary without its timings (seconds_load, seconds_score)
        text = result.output[result.output.index("{"):]  # after the old name's warning, where click mixes stderr in
        return {k: v for k, v in json.loads(text).items() if not k.startswith("seconds_")}

    assert numbers(new) == numbers(old)
    assert "--interpolate is deprecated; use --mix" in old.output and "deprecated" not in new.output
    both = r.invoke(cli, base + ["--mix", str(tmp_path / "k1.arpa"), "--interpolate", str(tmp_path / "k1.arpa")])
    assert both.exit_code != 0 and "--mix only" in str(both.exception)



def test_ngram_train_takes_every_default_from_its_build_config():
    from sampledlm.ngram.build import BuildConfig

    d = BuildConfig()
    expected = {"order": d.order, "smoothing": d.smoothing, "add_k": d.k, "memory": d.memory, "temp_dir": d.temp_dir,
                "engine": d.engine, "scheduler": d.scheduler, "workers": d.workers, "prune": None}
    params = {p.name: p for p in command("ngram", "train").params}
    assert {k: params[k].default for k in expected} == expected
    assert d.prune == () and d.thresholds == [0] * d.order  # --prune given as None: nothing pruned
