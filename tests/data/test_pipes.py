"""Every input path reads pipes once: a named pipe or a shell's ``<(cmd)`` gives the same results as the file itself
(the compression sniff used to read the pipe's first 8 KiB and open it again, losing them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import pytest

from sampledlm.data.textio import readable_path


def fifo_of(tmp_path, source, name):
    """A named pipe that a thread fills with ``source``'s bytes once, when a reader opens it."""
    path = tmp_path / name
    os.mkfifo(path)
    data = source.read_bytes()

    def feed():
        with open(path, "wb") as f:
            f.write(data)

    threading.Thread(target=feed, daemon=True).start()
    return path


def test_a_pipe_is_copied_once_and_read_whole(tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {i} of a text longer than the 8 KiB a sniff reads\n" for i in range(2000)))
    fifo = fifo_of(tmp_path, big, "p")
    copy = readable_path(str(fifo))
    assert copy != str(fifo) and open(copy, "rb").read() == big.read_bytes()
    assert readable_path(str(fifo)) == copy  # a second reader of the same pipe gets the same copy
    assert readable_path(str(big)) == str(big)  # a regular file is read in place


@pytest.mark.parametrize("args", [
    ["vocab", "{train}"],
    ["stats", "{train}"],
    ["ngram", "train", "--train", "{train}", "--order", "3", "-o", "{out}/k3.arpa"],
    ["ngram", "train", "--train", "{train}", "--order", "3", "--memory", "4G", "-o", "{out}/k3.arpa"],
    ["score", "{model}", "{test}"],
    ["eval", "{model}", "--test", "{test}"],
    ["ngram", "eval", "{model}", "--test", "{test}"],
    ["classes", "{train}", "--classes", "8", "-o", "{out}/c.txt"],
    ["embed", "train", "{train}", "--min-count", "1", "--epochs", "1", "--dim", "8", "--threads", "1", "-o", "{out}/e"],
])
def test_every_reading_command_gives_the_same_result_from_a_pipe(args, tiny_corpus, tmp_path, run_in_process):
    corpus = tiny_corpus["train"].parent
    model = corpus / "m.arpa"
    assert run_in_process("ngram", "train", "--train", str(tiny_corpus["train"]), "--order", "2", "-o", str(model),
                          cwd=corpus).returncode == 0
    results = []
    for kind in ("file", "pipe"):
        out = tmp_path / kind
        out.mkdir()
        files = {k: str(fifo_of(out, v, f"{k}.pipe")) if kind == "pipe" else str(v) for k, v in tiny_corpus.items()}
        argv = [a.format(out=out, model=model, **files) for a in args]
        r = run_in_process(*argv, cwd=out)
        assert r.returncode == 0, r.stderr
        written = sorted(p for p in out.rglob("*") if p.is_file() and not p.name.endswith(".pipe"))
        text = r.stdout.replace(files["train"], "TRAIN").replace(files["test"], "TEST").replace(str(out), "OUT")
        results.append((text, [(p.relative_to(out), p.read_bytes()) for p in written if p.suffix in (".arpa", ".txt")]))
    assert results[0] == results[1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash for <(...)")
def test_process_substitution_as_a_user_types_it(tiny_corpus):
    d = tiny_corpus["train"].parent
    cmd = f"{sys.executable} -m sampledlm vocab <(cat train.txt) && {sys.executable} -m sampledlm vocab train.txt"
    r = subprocess.run(["bash", "-c", cmd], cwd=d, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[: len(lines) // 2] == lines[len(lines) // 2:]
