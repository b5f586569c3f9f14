"""maxent's local ranks end with the command that started them (kill -9 included: left running, they wrote
checkpoints and the model beside a resume of the same directory); --distributed outside torchrun, or beside
--ranks, is refused in one line; ranks started from a script on standard input are refused, not waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import assert_one_line_error, run_cli, synthetic_sentences, write_corpus



@pytest.fixture
def corpus(tmp_path, private_cache):
    sents = synthetic_sentences(300, seed=3)
    return write_corpus(tmp_path / "train.txt", sents[:250]), write_corpus(tmp_path / "valid.txt", sents[250:])


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.append(int(entry))
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process table in /proc")
def test_maxent_ranks_end_when_the_command_is_killed(tmp_path, private_cache):
    """Left running, the ranks wrote checkpoints and the model beside a resume of the same directory."""
    sents = synthetic_sentences(4000, vocab_size=300, seed=5)
    write_corpus(tmp_path / "train.txt", sents[:3600])
    write_corpus(tmp_path / "valid.txt", sents[3600:])
    proc = subprocess.Popen([sys.executable, "-m", "sampledlm", "maxent", "train", "--train", str(tmp_path / "train.txt"),
                             "--valid", str(tmp_path / "valid.txt"), "-o", str(tmp_path / "m"), "--features", "feat-ii",
                             "--ranks", "2", "--epochs", "200", "--min-improvement", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, ranks = time.monotonic() + 120, []
        while len(ranks) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            ranks = [c for c in children(proc.pid) if "spawn_main" in open(f"/proc/{c}/cmdline").read()]
        assert len(ranks) == 2, proc.stderr.read().decode() if proc.poll() is not None else "no ranks started"
        time.sleep(3)  # the ranks at work
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while any(alive(r) for r in ranks) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(alive(r) for r in ranks)
    finally:
        if proc.poll() is None:
            proc.kill()
        for r in children(proc.pid):
            os.kill(r, signal.SIGKILL)


def test_distributed_maxent_outside_torchrun_and_with_ranks_is_refused(tmp_path, corpus, capsys, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    train, valid = map(str, corpus)
    out = tmp_path / "m"
    code, _, err = run_cli(["maxent", "train", "--train", train, "--valid", valid, "-o", str(out), "--distributed"],
                           capsys)
    assert_one_line_error(code, err, "torchrun", out)
    code, _, err = run_cli(["maxent", "train", "--train", train, "--valid", valid, "-o", str(out), "--distributed",
                            "--ranks", "2"], capsys)
    assert_one_line_error(code, err, "give one of them", out)
    monkeypatch.setenv("WORLD_SIZE", "2")
    code, _, err = run_cli(["maxent", "train", "--train", train, "--valid", valid, "-o", str(out), "--distributed"],
                           capsys)
    assert_one_line_error(code, err, "MASTER_ADDR", out)
    # under torchrun without --distributed: every rank locked the same directory ("another process is writing")
    code, _, err = run_cli(["maxent", "train", "--train", train, "--valid", valid, "-o", str(out)], capsys)
    assert_one_line_error(code, err, "add --distributed", out)


def test_local_ranks_from_a_script_on_standard_input_are_refused_not_waited_for(tmp_path, corpus):
    """Each rank imports the calling script again; `python - < script.py` has none to import, so the ranks died
    at start and the caller waited for ever."""
    train, valid = map(str, corpus)
    script = (f"import sampledlm\nsampledlm.train_maxent({train!r}, {valid!r}, {str(tmp_path / 'm')!r}, ranks=2, "
              "epochs=1)\n")
    proc = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 1 and "is not a file" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "m").exists()
