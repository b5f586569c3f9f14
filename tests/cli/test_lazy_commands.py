"""Commands load their modules on first use: the n-gram and corpus commands never import torch or numba
(each would add seconds to every call a decoder or a shell script makes), and every command is listed."""

from __future__ import annotations

import subprocess
import sys

from sampledlm.cli import COMMANDS, cli

PROBE = """
import sys
from sampledlm.cli import main
try:
    main({args!r})
except SystemExit as e:
    assert not e.code, e.code
print(sorted(m for m in ("torch", "numba", "matplotlib") if m in sys.modules))
"""


def heavy_modules(args, cwd):
    p = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], cwd=cwd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()[-1]


def test_ngram_and_corpus_commands_do_not_import_torch(tmp_path):
    (tmp_path / "train.txt").write_text("a b c\nb c d\na c d\n" * 5)
    (tmp_path / "test.txt").write_text("a b d\n")
    assert heavy_modules(["ngram", "train", "--train", "train.txt", "--order", "2", "-o", "k2.arpa"], tmp_path) == "[]"
    assert heavy_modules(["ngram", "eval", "k2.arpa", "--test", "test.txt"], tmp_path) == "[]"
    assert heavy_modules(["vocab", "train.txt", "-o", "v.txt"], tmp_path) == "[]"
    assert heavy_modules(["stats", "train.txt"], tmp_path) == "[]"


def test_every_command_resolves_and_is_listed():
    import click

    ctx = click.Context(cli)
    hidden = {n for n in cli.list_commands(ctx) if cli.get_command(ctx, n).hidden}
    assert hidden == set()  # the benchmarks are python -m benchmarks, from a checkout
    assert [n for n in cli.list_commands(ctx) if n not in hidden] == sorted(COMMANDS)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name
