"""Every number flag of every command refuses nan and infinity, and every seed refuses a negative number: one click
type each (``FiniteFloat``, ``SEED`` in ``cli/common.py``), checked by walking the whole command tree."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from sampledlm.cli import COMMANDS, cli
from sampledlm.cli.common import FiniteFloat


def every_command():
    """(path, click.Command) of every command and subcommand, the lazy ones imported."""
    ctx = click.Context(cli)
    out = []

    def walk(path, cmd):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(path + [name], cmd.get_command(ctx, name))
        else:
            out.append((" ".join(path), cmd))

    for name in COMMANDS:
        walk([name], cli.get_command(ctx, name))
    return out


COMMANDS_ALL = every_command()


def float_params():
    return [(path, p) for path, cmd in COMMANDS_ALL for p in cmd.params
            if isinstance(p, click.Option) and isinstance(p.type, (click.types.FloatParamType, click.FloatRange))]


def test_the_walk_finds_the_commands_and_their_float_flags():
    paths = {path for path, _ in COMMANDS_ALL}
    assert {"train", "rescore", "serve", "generate", "ngram prune", "maxent train", "embed train"} <= paths
    assert len(float_params()) >= 20


@pytest.mark.parametrize("path,param", float_params(), ids=lambda x: x if isinstance(x, str) else x.name)
def test_every_float_flag_refuses_nan_and_infinity(path, param):
    assert isinstance(param.type, FiniteFloat), f"{path} {param.opts[0]}: not a FiniteFloat"
    for bad in ("nan", "inf", "-inf", "NaN", "1e999"):
        with pytest.raises(click.BadParameter, match="not a finite number"):
            param.type.convert(bad, param, None)


def test_every_seed_refuses_a_negative_number():
    seeds = [(path, p) for path, cmd in COMMANDS_ALL for p in cmd.params if p.name == "seed"]
    assert len(seeds) >= 5
    for path, p in seeds:
        with pytest.raises(click.BadParameter):
            p.type.convert("-1", p, None)


@pytest.mark.parametrize("args", [
    ["rescore", "x.arpa", "n.jsonl", "--lm-weight", "nan"],
    ["rescore", "x.arpa", "n.jsonl", "--am-scale", "inf"],
    ["rescore", "x.arpa", "n.jsonl", "--word-penalty", "nan"],
    ["rescore", "x.arpa", "n.jsonl", "--first-pass-weight", "nan"],
    ["serve", "x.arpa", "--batch-wait-ms", "nan"],
    ["serve", "x.arpa", "--read-timeout", "nan"],
    ["serve", "x.arpa", "--idle-timeout", "nan"],
    ["serve", "x.arpa", "--shutdown-timeout", "nan"],
    ["generate", "x.arpa", "--temperature", "nan"],
    ["generate", "x.arpa", "--seed", "-1"],
    ["ngram", "prune", "x.arpa", "-o", "y.arpa", "--keep", "nan"],
    ["train", "--train", "t.txt", "--valid", "v.txt", "-o", "r", "--lr", "inf"],
])
def test_the_campaigns_cases_are_usage_errors_without_a_traceback(args):
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert "Invalid value" in r.output
