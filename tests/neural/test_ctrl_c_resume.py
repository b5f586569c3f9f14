"""Ctrl-C during `sampledlm train` checkpoints and says how to resume (issue 21, item 22)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from sampledlm.data.builtin import write_builtin_corpus


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_during_training_names_the_resume_command(tmp_path):
    paths = write_builtin_corpus(str(tmp_path))
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "sampledlm", "train", "--train", paths["train"], "--valid", paths["valid"],
           "--model", "ffnn", "-d", "8", "--hidden", "16", "--batch-size", "8", "--epochs", "50",
           "--checkpoint-every", "5", "--threads", "1", "-o", str(run)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        # a checkpoint on disk means the training loop (and its Ctrl-C handler) is running
        while not (run / "checkpoint.json").exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert p.poll() is None and (run / "checkpoint.json").exists(), "training did not reach its first checkpoint"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert "Traceback" not in err
    assert last.startswith("sampledlm: interrupted at step") and f"--resume {run}" in last, last
    assert (run / "checkpoint.json").exists() and (run / "config.json").exists()
