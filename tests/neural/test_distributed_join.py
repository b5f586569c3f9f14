"""How the ranks of a torchrun job meet, and part when one of them refuses: a wait for ranks that never come is
bounded and stopped by a signal (torch's own wait sits 30 minutes in C++, deaf to Ctrl-C and SIGTERM), and what
rank 0 alone refuses ends every rank with its one line (another rank died in gloo with a traceback)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from sampledlm.errors import UserError
from sampledlm.neural.distributed import free_port, local_launch, meet_ranks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_rank_waits_for_the_others_only_as_long_as_it_says():
    port = free_port()
    with pytest.raises(UserError, match="1 of the job's 2 ranks reached 127.0.0.1"):
        meet_ranks("127.0.0.1", port, 0, 2, timeout_s=1)
    with pytest.raises(UserError, match="rank 0 of the job never started"):
        meet_ranks("127.0.0.1", free_port(), 1, 2, timeout_s=1)


def test_the_ranks_meet_in_rank_0s_store():
    import threading

    port, got = free_port(), {}

    def rank(r):
        got[r] = meet_ranks("127.0.0.1", port, r, 2, timeout_s=60)

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in (1, 0)]  # rank 1 first: it waits
    for t in threads:
        t.start()
        time.sleep(0.3)
    for t in threads:
        t.join(60)
    assert got[0].add("sampledlm/joined/0", 0) == 2 and got[1].add("sampledlm/joined/0", 0) == 2


@pytest.mark.parametrize("rank, signum", [("0", signal.SIGTERM), ("1", signal.SIGINT)])
def test_a_wait_for_ranks_that_never_come_stops_on_a_signal(tiny_corpus, tmp_path, rank, signum):
    """A job wrapper's WORLD_SIZE, RANK, MASTER_ADDR and MASTER_PORT left in the environment of a plain command."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), WORLD_SIZE="2", RANK=rank,
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "sampledlm", "train", "--train", str(tiny_corpus["train"]), "--valid",
           str(tiny_corpus["valid"]), "--model", "gru", "--hidden", "8", "--embed-dim", "8", "-o", str(out)]
    p = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        if rank == "0":
            assert "waiting for 2 ranks at 127.0.0.1" in p.stderr.readline()
        time.sleep(3)  # a rank other than 0 says nothing: it looks for rank 0's store every half second
        p.send_signal(signum)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 128 + signum and "Traceback" not in err, err
    assert not out.exists()


def torchrun(args, cwd):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"), OMP_NUM_THREADS="1")
    return subprocess.run([*local_launch(2, log_dir=str(cwd / "torchrun-logs")), "-m", "sampledlm", "train", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_what_rank_0_alone_refuses_ends_every_rank_with_one_line(tiny_corpus, tmp_path):
    common = ["--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]), "--model", "gru",
              "--hidden", "8", "--embed-dim", "8", "--threads", "1", "--epochs", "1"]
    (tmp_path / "taken").write_text("not a run\n")
    for extra, said in ((["-o", str(tmp_path / "taken")], "exists and is not a directory"),
                        (["-o", str(tmp_path / "taken" / "run")], "cannot create run directory"),
                        (["--batch-size", "1", "-o", str(tmp_path / "one-row")], "--batch-size 1 is below the job's 2")):
        p = torchrun([*common, *extra], tmp_path)
        assert p.returncode != 0
        lines = [line for line in p.stderr.splitlines() if "sampledlm: error:" in line]
        assert len(lines) == 1 and said in lines[0], p.stderr[-3000:]
        assert "[rank1]: Traceback" not in p.stderr and "Connection closed" not in p.stderr, p.stderr[-3000:]
    assert not (tmp_path / "one-row").exists()
