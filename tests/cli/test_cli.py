"""The command line: help for every command, and one-line errors with nothing half-written."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from helpers import as_in_a_terminal
from sampledlm.cli import cli


def run(*args, cwd=None, stdin=None):
    return subprocess.run([sys.executable, "-m", "sampledlm", *args], capture_output=True, text=True,
                          cwd=cwd, input=stdin, timeout=120)


def all_commands(group=cli, prefix=()):
    import click

    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the top level loads its commands lazily: ask, don't read .commands
        cmd = group.get_command(ctx, name)
        if cmd.hidden:  # `sampledlm bench`: a one-line pointer to python -m benchmarks, not a command
            continue
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from all_commands(cmd, (*prefix, name))


def test_top_level_help_lists_subcommands():
    r = run("--help")
    assert r.returncode == 0
    for name in ("vocab", "stats", "demo"):
        assert name in r.stdout


@pytest.mark.parametrize("path", [p for p, _ in all_commands()], ids=lambda p: " ".join(p))
def test_every_command_has_help_with_an_example(path):
    r = CliRunner().invoke(cli, [*path, "--help"])
    assert r.exit_code == 0, r.output
    assert "Example" in r.output or "example" in r.output, f"`sampledlm {' '.join(path)} --help` shows no example"


def assert_one_line_error(r, *fragments):
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def test_bad_inputs_give_one_line_errors_and_no_output_file(tmp_path):
    out = tmp_path / "v.txt"
    (tmp_path / "bad.txt").write_bytes(b"good\nbad \xff\n")
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01\x02binary")
    (tmp_path / "empty.txt").write_text("")
    cases = [
        (["vocab", str(tmp_path / "bad.txt"), "-o", str(out)], ["bad.txt:2", "invalid UTF-8"]),
        (["vocab", str(tmp_path / "bin.dat"), "-o", str(out)], ["bin.dat", "binary"]),
        (["vocab", str(tmp_path / "missing.txt"), "-o", str(out)], ["missing.txt", "no such file"]),
        (["vocab", str(tmp_path / "empty.txt"), "-o", str(out)], ["empty.txt", "no words"]),
        (["stats", str(tmp_path / "missing.txt")], ["missing.txt"]),
        (["stats", str(tmp_path / "empty.txt"), "--vocab", str(tmp_path / "nope.txt")], ["nope.txt"]),
    ]
    for args, fragments in cases:
        assert_one_line_error(run(*args), *fragments)
        assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt", "bin.dat", "empty.txt"]


def test_unwritable_output(tmp_path):
    (tmp_path / "c.txt").write_text("a b\n")
    r = run("vocab", str(tmp_path / "c.txt"), "-o", str(tmp_path / "no-dir" / "v.txt"))
    assert_one_line_error(r, "no-dir")


def test_encoding_errors_replace_reads_on(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"good\nbad \xff\n")
    r = run("vocab", str(tmp_path / "bad.txt"), "--encoding-errors", "replace", "-o", str(tmp_path / "v.txt"))
    assert r.returncode == 0, r.stderr
    assert "\ufffd" in (tmp_path / "v.txt").read_text(encoding="utf-8")


def test_stdin_and_stdout(tmp_path):
    r = run("vocab", "-", stdin="b a a\n")
    assert r.returncode == 0
    assert r.stdout.splitlines() == ["</s>\t1", "<unk>\t0", "a\t2", "b\t1"]


def test_stats_json_and_oov(tiny_corpus):
    import json

    v = tiny_corpus["train"].parent / "v.txt"
    assert run("vocab", str(tiny_corpus["train"]), "--max-size", "20", "-o", str(v)).returncode == 0
    r = run("stats", str(tiny_corpus["test"]), "--vocab", str(v), "--json", "--top-k", "5")
    s = json.loads(r.stdout)
    assert s["sentences"] == 60 and s["vocab_size"] == 20 and 0 < s["oov_rate"] < 1
    assert set(s["coverage"]) == {"5"}


def test_usage_error_exit_code():
    r = run("vocab")
    assert r.returncode == 2 and "Traceback" not in r.stderr


HANG_UP = getattr(__import__("signal"), "SIGHUP", None)  # not on Windows


@pytest.mark.parametrize("command, signame", [
    (["ngram", "train", "--train", "-", "--order", "3", "-o", "out.arpa"], "SIGTERM"),
    (["embed", "train", "-", "-o", "vec"], "SIGTERM"),
    pytest.param(["ngram", "build-binary", "-", "-o", "bin"], "SIGHUP",
                 marks=pytest.mark.skipif(HANG_UP is None, reason="no SIGHUP on this platform"))])
def test_a_stop_signal_cleans_up_as_ctrl_c_does(tmp_path, command, signame):
    """SIGTERM (a scheduler's stop, `timeout`) killed the command outright: no message, status -15, and an n-gram
    build's spill directory and hidden partial output (or embed's half-made directory) left behind; SIGHUP (a closed
    terminal) left `build-binary -`'s copy of standard input (as large as the model). The command waits on its open
    standard input when the signal comes, so it is always mid-run."""
    import os
    import signal
    import time

    p = subprocess.Popen([sys.executable, "-m", "sampledlm", *command], cwd=tmp_path, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "TMPDIR": str(tmp_path)}, preexec_fn=as_in_a_terminal)
    p.stdin.write("the cat sat on the mat\n" * 200)
    p.stdin.flush()
    time.sleep(5)  # started and reading (a slow start only delays the signal's handler, never skips it)
    sig = getattr(signal, signame)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    said = {"SIGTERM": "terminated (SIGTERM)", "SIGHUP": "hung up (SIGHUP: the terminal closed)"}[signame]
    assert p.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == f"sampledlm: {said}" and "Traceback" not in err
    assert sorted(x.name for x in tmp_path.iterdir()) == []


def test_an_interrupt_inside_compiled_code_is_an_interrupt_not_a_traceback(monkeypatch, capsys):
    """numba turns a ^C raised inside a compiled function's call into SystemError("... returned a result with an
    exception set"), whose context is the KeyboardInterrupt: it printed 57 lines of traceback and exited 1."""
    import click

    from sampledlm.cli import main

    @click.command()
    def compiled():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("CPUDispatcher(<function join_texts>) returned a result with an exception set")

    with pytest.raises(SystemExit) as e:
        main([], command=compiled)
    assert e.value.code == 130 and capsys.readouterr().err == "sampledlm: interrupted\n"

    @click.command()
    def other():
        raise SystemError("a bug")

    with pytest.raises(SystemError, match="a bug"):  # any other SystemError stays a bug with its traceback
        main([], command=other)
