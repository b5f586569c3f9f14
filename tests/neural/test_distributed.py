"""Data-parallel training (torchrun, gloo on CPU ranks): two ranks take the step one process takes with the
same global batch; a two-rank run resumes with the very numbers of an uninterrupted one; shards cover a batch."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, strategies as st

from sampledlm.neural.distributed import Ranks, local_launch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torchrun(args, cwd, ranks=2):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    cmd = [*local_launch(ranks, log_dir=os.path.join(cwd, "torchrun-logs")), *args]
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    # a rank's own error comes before torchrun's summary: keep every rank's error lines, then the tail
    errors = [line for line in p.stderr.splitlines() if "Error" in line and "[rank" in line]
    assert p.returncode == 0, "\n".join(errors[:20]) + "\n...\n" + p.stderr[-3000:]
    return p


def metrics(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    return [(m["epoch"], m["step"], m["train_loss"], m["valid_ppl"]) for m in rows]


@given(st.integers(0, 300), st.integers(1, 8))
def test_shards_cover_a_batch_once_in_order(n, world):
    bounds = [Ranks(r, world).bounds(n) for r in range(world)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    sizes = [hi - lo for lo, hi in bounds]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("model", [["--model", "ffnn"], ["--model", "gru", "--hidden", "16", "--embed-dim", "16",
                                                         "--batch-size", "8", "--bptt", "10"]])
def test_two_gloo_ranks_take_the_step_of_one_process(tiny_corpus, tmp_path, model):
    common = ["--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]), "--epochs", "2",
              "--dropout", "0", "--threads", "1", "--seed", "3", *model]
    one = subprocess.run([sys.executable, "-m", "sampledlm", "train", *common, "-o", str(tmp_path / "one")],
                         env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")), capture_output=True, text=True)
    assert one.returncode == 0, one.stderr
    two = torchrun(["-m", "sampledlm", "train", *common, "-o", str(tmp_path / "two")], tmp_path)
    assert "2 ranks" in two.stderr
    a, b = metrics(tmp_path / "one"), metrics(tmp_path / "two")
    assert [r[:2] for r in a] == [r[:2] for r in b]
    for (_, _, loss_a, ppl_a), (_, _, loss_b, ppl_b) in zip(a, b):
        assert loss_b == pytest.approx(loss_a, rel=1e-6)
        assert ppl_b == pytest.approx(ppl_a, rel=1e-6)


SCRIPT = textwrap.dedent("""
    import sys
    from sampledlm.neural.device import resolve_device
    from sampledlm.neural.distributed import Ranks, local_launch
    from sampledlm.neural.trainer import TrainingInterrupted, new_run, resume_run
    from sampledlm.data.corpus import build_vocab
    from sampledlm.data.tokenizer import TextOptions
    from sampledlm.neural import rundir as runs
    from sampledlm.neural.registry import model_spec
    from sampledlm.neural.trainer import TrainOptions

    mode, run_dir, train, valid = sys.argv[1:5]
    ranks = Ranks.from_env(resolve_device("cpu"))
    if mode == "resume":
        resume_run(run_dir, ranks=ranks).train()
    else:
        vocab = build_vocab(train)
        spec = model_spec("gru", embed_dim=8, hidden=12, dropout=0.1)
        opts = dict(TrainOptions(batch_size=8, bptt=6, epochs=2, lr=0.01, optimizer="adam", device="cpu").__dict__)
        data = {"train": train, "valid": valid, "text_options": TextOptions().to_dict()}
        config = runs.make_config(spec, "css-is", {"samples": 20}, opts, data, vocab)
        t = new_run(run_dir, config, vocab, ranks=ranks)
        if mode == "interrupt":
            t.stop_when = lambda st, n=t.data.num_batches() + 2: st.step >= n  # in the middle of epoch 2
            try:
                t.train()
            except TrainingInterrupted:
                pass
        else:
            t.train()
    ranks.close()
""")


def test_a_two_rank_run_resumes_with_the_numbers_of_an_uninterrupted_one(tiny_corpus, tmp_path):
    """GRU with a sampled objective: each rank's negatives, dropout masks and carried state are its own,
    and the row-sparse output gradients are gathered over the ranks."""
    script = tmp_path / "ddp_run.py"
    script.write_text(SCRIPT)
    files = [str(tiny_corpus["train"]), str(tiny_corpus["valid"])]
    torchrun([str(script), "full", str(tmp_path / "full"), *files], tmp_path)
    torchrun([str(script), "interrupt", str(tmp_path / "cut"), *files], tmp_path)
    assert not (tmp_path / "cut" / "metrics.jsonl").exists() or len(metrics(tmp_path / "cut")) == 1
    torchrun([str(script), "resume", str(tmp_path / "cut"), *files], tmp_path)
    assert metrics(tmp_path / "cut") == metrics(tmp_path / "full")

    p = subprocess.run([sys.executable, "-m", "sampledlm", "train", "--resume", str(tmp_path / "full"), "--epochs",
                        "3"], env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")), capture_output=True,
                       text=True)
    assert p.returncode == 1 and "2 rank(s)" in p.stderr and "Traceback" not in p.stderr


def test_no_rank_leaves_the_group_before_every_rank_has_finished(monkeypatch):
    """gloo aborts a rank whose peer closes while it still waits on it (pytorch/gloo#155), which a barrier does not
    prevent; ``close`` meets in the store first. Rank 0 (which may host the store) leaves last."""
    import threading
    import time

    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    store = dist.HashStore()
    events = []
    monkeypatch.setattr(distributed_c10d, "_get_default_store", lambda: store)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)

    def leave():
        rank = threading.current_thread().name
        heard = rank == "0" and store.check(["sampledlm/read/1"])
        events.append(f"rank {rank} left" + (" after rank 1's word" if heard else ""))

    monkeypatch.setattr(dist, "destroy_process_group", leave)
    first = threading.Thread(target=Ranks(0, 2).close, name="0", daemon=True)
    first.start()
    time.sleep(0.5)  # time enough for rank 0 to leave if nothing held it
    events.append("rank 1 finished")
    second = threading.Thread(target=Ranks(1, 2).close, name="1", daemon=True)
    second.start()
    first.join(20), second.join(20)
    assert events[0] == "rank 1 finished" and sorted(events[1:]) == ["rank 0 left after rank 1's word", "rank 1 left"]


def test_a_failed_launch_reports_its_cause_not_the_rule_that_ends_torchruns_summary():
    from sampledlm.neural.distributed import launch_error

    stderr = "\n".join(["[rank1]: Traceback (most recent call last):", "[rank1]: RuntimeError: Connection reset by peer",
                        "=" * 60, "sampledlm FAILED", "-" * 60, "Failures:", "  <NO_OTHER_FAILURES>", "=" * 60, ""])
    got = launch_error(stderr)
    assert "Connection reset by peer" in got and "FAILED" in got and "====" not in got
    assert launch_error("=" * 10) == "torchrun failed without a message"
    assert launch_error("\n".join(f"line {i}" for i in range(40)), lines=3) == "line 37\nline 38\nline 39"
    # the failing rank's own line far above torchrun's summary (which names the rank, not the cause)
    summary = ["=" * 60, "sampledlm FAILED", "Root Cause (first observed failure):", "[0]:", "  rank : 1",
               "  exitcode  : 1 (pid: 4910)", "  traceback : To enable traceback see: ...", "=" * 60]
    lines = ["[rank1]: sampledlm: train.txt, line 3: not UTF-8", *[f"progress {i}" for i in range(20)],
             "Traceback (most recent call last):", "ValueError: bad value", *summary]
    got = launch_error("\n".join(lines))
    assert got.splitlines()[0] == "a rank said: [rank1]: sampledlm: train.txt, line 3: not UTF-8"
    assert "ValueError: bad value" in got and "exitcode  : 1" in got and "progress 3" not in got


def test_only_rank_0_checks_the_new_run_directory(tiny_corpus, tmp_path, monkeypatch):
    """Under torchrun rank 0 creates the run directory and writes vocab.txt, then config.json; a rank that looked
    at it in between found a directory holding vocab.txt alone and refused it (the cause of a rank 1 crash in
    .ci/run). Only the rank that writes the directory judges it."""
    import torch.distributed

    import sampledlm.neural.trainer as trainer
    from sampledlm.data.corpus import build_vocab
    from sampledlm.data.tokenizer import TextOptions
    from sampledlm.errors import UserError
    from sampledlm.neural import rundir as runs
    from sampledlm.neural.registry import model_spec

    vocab = build_vocab(str(tiny_corpus["train"]))
    opts = dict(trainer.TrainOptions(batch_size=8, bptt=6, epochs=1, device="cpu").__dict__)
    data = {"train": str(tiny_corpus["train"]), "valid": str(tiny_corpus["valid"]),
            "text_options": TextOptions().to_dict()}
    config = runs.make_config(model_spec("gru", embed_dim=8, hidden=12), "css-is", {"samples": 20}, opts, data, vocab)
    half_written = tmp_path / "run"
    half_written.mkdir()
    vocab.save(str(half_written / "vocab.txt"))  # rank 0 is between vocab.txt and config.json
    monkeypatch.setattr(trainer, "Trainer", lambda *args, **kwargs: "rank 1's trainer")
    monkeypatch.setattr(torch.distributed, "broadcast_object_list", lambda box, src=0: None)  # rank 0: all well
    assert trainer.new_run(str(half_written), config, vocab, ranks=Ranks(1, 2)) == "rank 1's trainer"
    with pytest.raises(UserError, match="holds vocab.txt"):  # a single process still refuses it
        trainer.new_run(str(half_written), config, vocab)


def test_a_launch_stopped_while_it_runs_passes_sigterm_on_and_waits_for_the_launcher(tmp_path):
    # the launcher stands in for torchrun: it writes a marker when SIGTERM reaches it (as torchrun then stops its
    # ranks); subprocess.run would SIGKILL it, leaving the ranks of a real launch training with nobody to stop them
    import signal
    import threading

    from sampledlm.neural.distributed import run_launch

    marker = tmp_path / "got-sigterm"
    child = ("import pathlib, signal, sys, time\n"
             f"def stop(*a): pathlib.Path({str(marker)!r}).write_text('stopped'); sys.exit(143)\n"
             "signal.signal(signal.SIGTERM, stop)\n"
             f"pathlib.Path({str(tmp_path / 'started')!r}).touch()\n"
             "time.sleep(60)\n")

    class Stop(Exception):
        pass

    def raise_stop(*a):
        raise Stop

    old = signal.signal(signal.SIGUSR1, raise_stop)  # xdist workers ignore SIGINT; SIGTERM is the runner's own
    try:
        def poke():
            while not (tmp_path / "started").exists():
                threading.Event().wait(0.05)
            os.kill(os.getpid(), signal.SIGUSR1)

        threading.Thread(target=poke, daemon=True).start()
        with pytest.raises(Stop):
            run_launch([sys.executable, "-c", child], grace_s=30)
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert marker.read_text() == "stopped"
    done = run_launch([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
