"""Regression tests for what an audit of `sampledlm train` as a new user found: a resumed run followed an edited
training text without a word; a validation text all outside the vocabulary trained silently; --momentum with Adam
and --bptt on a feed-forward model were recorded as given and did nothing; a damaged cached id stream was trained
on; an allocation failure inside a training step was a traceback; progress lines in a log had no ETA."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from helpers import as_in_a_terminal, assert_one_line_error, run_cli

SMALL = ["-d", "8", "--hidden", "16", "--epochs", "1"]


def train_args(tiny_corpus, out, *more):
    return ["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]), *SMALL, *more,
            "-o", str(out)]


def test_resume_refuses_a_training_text_changed_since_the_run_began(tiny_corpus, tmp_path, capsys, private_cache):
    run = tmp_path / "gru"
    args = train_args(tiny_corpus, run, "--model", "gru", "-b", "4", "--bptt", "5", "--checkpoint-every", "10")
    args[args.index("--epochs") + 1] = "2"
    from sampledlm.neural import loop

    calls = {"n": 0}
    real = loop.Trainer.step

    def stop_soon(self, batch):  # a Ctrl-C after 12 steps: a checkpoint at step 10 and one at the interruption
        calls["n"] += 1
        if calls["n"] == 12:
            raise KeyboardInterrupt
        return real(self, batch)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loop.Trainer, "step", stop_soon)
        code, _, err = run_cli(args, capsys)
    assert code == 130, err
    text = tiny_corpus["train"].read_text()
    tiny_corpus["train"].write_text("\n".join(text.splitlines()[:50]) + "\n")  # edited before the resume
    code, _, err = run_cli(["train", "--resume", str(run)], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and "changed since the run began" in err and str(tiny_corpus["train"]) in err
    assert "--init-from" in err
    tiny_corpus["train"].write_text(text)  # put back: the run resumes and finishes
    code, _, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    assert "best valid ppl" in err and "(epoch " in err and " of 2)" in err


def test_a_text_mostly_outside_the_vocabulary_is_warned_about(tiny_corpus, tmp_path, capsys, private_cache):
    oov = tmp_path / "oov-valid.txt"
    oov.write_text("".join(" ".join(f"zz{i}x{j}" for j in range(6)) + "\n" for i in range(20)))
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(oov), *SMALL,
                            "-o", str(tmp_path / "r")], capsys)
    assert code == 0, err
    assert f"warning: {oov}: 100.0 % of its 120 words are outside the vocabulary" in err
    assert "the vocabulary was made from" in err
    assert f"warning: {tiny_corpus['train']}" not in err  # the training text defines the vocabulary: none
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "plain"), capsys)
    assert code == 0 and "outside the vocabulary" not in err, err


@pytest.mark.parametrize("flags, words", [
    (["--optimizer", "adam", "--momentum", "0.9"], "--momentum applies to --optimizer sgd only"),
    (["--model", "ffnn", "--bptt", "7"], "--bptt do not apply to model 'ffnn'"),
    (["--model", "gru", "--context-size", "4"], "--context-size do not apply to model 'gru'"),
    # the flag as typed (a boolean's off form too) and the objectives that take it
    (["--objective", "softmax", "--samples", "5"], "--samples applies to --objective is, css-is, "),
    (["--objective", "is", "--samples", "5", "--include-true"],
     "--include-true applies to --objective neg, blackout, ranking only (this run: is)"),
    (["--objective", "softmax", "--no-true-term"], "--no-true-term applies to --objective is only (this run: softmax)"),
])
def test_flags_that_would_do_nothing_are_refused(tiny_corpus, tmp_path, capsys, private_cache, flags, words):
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "r", *flags), capsys)
    assert_one_line_error(code, err, words, tmp_path / "r")
    assert "--order" not in err or "--context-size" not in words


def test_standard_input_is_refused_as_a_neural_runs_text(tiny_corpus, tmp_path, capsys, private_cache):
    args = train_args(tiny_corpus, tmp_path / "r")
    args[args.index("--train") + 1] = "-"
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, "--train -: not a file", tmp_path / "r")


def test_a_missing_required_option_is_a_usage_error(tiny_corpus, tmp_path, capsys):
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "-o", str(tmp_path / "r")], capsys)
    assert code == 2 and "--valid is required" in err and "Usage:" in err, err


def test_a_longer_cosine_run_says_at_which_rate_it_goes_on(tiny_corpus, tmp_path, capsys, private_cache):
    run = tmp_path / "cos"
    code, _, err = run_cli(train_args(tiny_corpus, run, "--model", "gru", "-b", "4", "--bptt", "5",
                                      "--lr-schedule", "cosine", "--lr", "0.004"), capsys)
    assert code == 0, err
    code, _, err = run_cli(["train", "--resume", str(run), "--epochs", "2"], capsys)
    assert code == 0, err
    assert "spreads the cosine schedule over 2 epochs, so training goes on at lr 0.002" in err, err


def test_a_damaged_cached_id_stream_is_encoded_again(tiny_corpus, private_cache):
    from sampledlm.data.corpus import CHECKSUM, load_ids
    from sampledlm.data.corpus import build_vocab

    vocab = build_vocab(str(tiny_corpus["train"]))
    clean = np.array(load_ids(str(tiny_corpus["train"]), vocab))
    (cached,) = [p for p in private_cache.iterdir() if p.suffix == ".npy"]
    for bad in (len(vocab) + 7, 5):  # an id outside V (was an IndexError traceback); one inside (was trained on)
        ids = clean.copy()
        ids[3] = bad if ids[3] != bad else bad + 1
        np.save(cached, ids)
        assert np.array_equal(load_ids(str(tiny_corpus["train"]), vocab), clean)
    (private_cache / (cached.name + CHECKSUM)).unlink()  # a stream cached before checksums: ids checked in range
    ids = clean.copy()
    ids[3] = len(vocab)
    np.save(cached, ids)
    assert np.array_equal(load_ids(str(tiny_corpus["train"]), vocab), clean)


def test_an_allocation_failure_in_a_training_step_is_one_line(tiny_corpus, tmp_path, capsys, private_cache,
                                                               monkeypatch):
    from sampledlm.neural import loop

    def no_memory(self, batch):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                           "memory: you tried to allocate 24508000000 bytes. Error code 12")

    monkeypatch.setattr(loop.Trainer, "step", no_memory)
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "r", "-b", "64"), capsys)
    assert_one_line_error(code, err, "not enough memory for a training step (batch -b 64)", tmp_path / "r")
    assert "smaller -b" in err and "no checkpoint had been written yet" in err and "x --bptt" not in err

    def other(self, batch):
        raise RuntimeError("shapes do not match")

    monkeypatch.setattr(loop.Trainer, "step", other)
    with pytest.raises(RuntimeError, match="shapes do not match"):  # any other error stays what it is
        run_cli(train_args(tiny_corpus, tmp_path / "r2"), capsys)


def test_the_progress_line_off_a_terminal_has_the_time_left():
    from sampledlm.neural.reporting import progress_line

    st = SimpleNamespace(epoch=0, batch=25, step=25, loss_sum=50.0, loss_count=10, epoch_tokens=1000,
                         epoch_seconds=50.0, wall_seconds=50.0, cpu_seconds=40.0)
    line = progress_line(st, batches=100, epochs=3)
    assert line.startswith("epoch 1: 25%  loss 5.0000  20 tok/s  00:50 elapsed")
    assert line.endswith("ETA epoch 02:30, run 09:10")  # 75 + 200 batches at 2 s each (validation not counted)
    assert progress_line(st, batches=100, epochs=1).endswith("ETA epoch 02:30")
    # a budget that ends the run within this epoch: its time left, named, and no epoch ETA
    assert progress_line(st, batches=100, epochs=3, max_steps=40).endswith("ETA --max-steps 00:30")  # 15 steps
    assert progress_line(st, batches=100, epochs=3, max_time=110).endswith("ETA --max-time 01:00")  # wall clock
    assert progress_line(st, batches=100, epochs=3, max_time=110, clock="cpu").endswith("ETA --max-time 01:10")
    # a budget past this epoch's end: the epoch's time left, then the budget's
    assert progress_line(st, batches=100, epochs=3, max_steps=150).endswith("ETA epoch 02:30, --max-steps 04:10")
    assert progress_line(st, batches=100, epochs=3, max_time=1e6).endswith("ETA epoch 02:30, run 09:10")
    assert json.dumps(line)  # plain text


def test_evaluating_an_unfinished_run_says_so(tiny_corpus, tmp_path, capsys, private_cache):
    from sampledlm.neural import loop

    run = tmp_path / "ffnn"
    args = train_args(tiny_corpus, run, "-b", "64")
    args[args.index("--epochs") + 1] = "2"
    real = loop.Trainer.step

    def stop_in_epoch_2(self, batch):
        if self.state.epoch == 1:
            raise KeyboardInterrupt
        return real(self, batch)

    with pytest.MonkeyPatch.context() as mp:  # (monkeypatch.undo would undo the private cache too)
        mp.setattr(loop.Trainer, "step", stop_in_epoch_2)
        code, _, err = run_cli(args, capsys)
    assert code == 130 and (run / "model.safetensors").exists(), err
    code, out, err = run_cli(["eval", str(run), "--test", str(tiny_corpus["test"])], capsys)
    assert code == 0 and "ppl" in out.lower(), err
    assert f"{run}: training has not finished (1 of 2 epochs; sampledlm train --resume {run} goes on)" in err, err
    code, _, err = run_cli(["train", "--resume", str(run)], capsys)
    assert code == 0, err
    code, out, err = run_cli(["eval", str(run), "--test", str(tiny_corpus["test"])], capsys)
    assert code == 0 and "has not finished" not in err, err


@pytest.mark.parametrize("signame", ["SIGTERM", pytest.param("SIGHUP", marks=pytest.mark.skipif(
    not hasattr(__import__("signal"), "SIGHUP"), reason="no SIGHUP on this platform"))])
def test_a_stop_signal_stops_training_at_a_checkpoint_with_the_shells_status(tiny_corpus, tmp_path, signame):
    """A batch scheduler's SIGTERM, or a closed terminal's SIGHUP: a checkpoint, the resume hint, and status 128 + the
    signal (SIGTERM's was 130, Ctrl-C's; SIGHUP killed the run between checkpoints)."""
    import signal
    import subprocess
    import sys
    import time

    run = tmp_path / "gru"
    args = train_args(tiny_corpus, run, "--model", "gru", "-b", "2", "--bptt", "3", "--threads", "1",
                      "--checkpoint-every", "1")  # a checkpoint after the first step: the loop is running then
    args[args.index("--epochs") + 1] = "50"
    p = subprocess.Popen([sys.executable, "-m", "sampledlm", *args], stderr=subprocess.PIPE, text=True,
                         env={**__import__("os").environ, "SAMPLEDLM_CACHE": str(tmp_path / "cache")},
                         preexec_fn=as_in_a_terminal)
    deadline = time.monotonic() + 120
    while not (run / "checkpoint.json").exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    sig = getattr(signal, signame)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 128 + sig, err
    assert f"resume with --resume {run}" in err and "Traceback" not in err


def test_a_min_count_that_leaves_no_word_is_refused(tiny_corpus, tmp_path, capsys, private_cache):
    out = tmp_path / "vocab.txt"
    code, _, err = run_cli(["vocab", str(tiny_corpus["train"]), "--min-count", "100000", "-o", str(out)], capsys)
    assert_one_line_error(code, err, "no word occurs --min-count 100,000 times (the most frequent", out)
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "r", "--min-count", "100000"), capsys)
    assert_one_line_error(code, err, "would hold only </s> and <unk>", tmp_path / "r")


def test_a_read_only_file_system_is_named_as_such(tmp_path, monkeypatch):
    import os

    from sampledlm.data import textio
    from sampledlm.errors import UserError

    monkeypatch.setattr(textio.os, "access", lambda path, mode: False)
    monkeypatch.setattr(textio.os, "statvfs", lambda path: SimpleNamespace(f_flag=os.ST_RDONLY))
    with pytest.raises(UserError, match="cannot write: read-only file system"):
        textio.check_writable(str(tmp_path / "x.txt"))
    monkeypatch.setattr(textio.os, "statvfs", lambda path: SimpleNamespace(f_flag=0))
    with pytest.raises(UserError, match="cannot write: permission denied"):
        textio.check_writable(str(tmp_path / "x.txt"))


def test_a_softmax_step_past_the_memory_is_refused_before_training(tiny_corpus, tmp_path, capsys, private_cache,
                                                                   monkeypatch):
    """The [N, V] scores of a full-softmax step are checked against the memory before the first step (where the
    kernel overcommits, such a step is killed with no message); a sampled output, scoring a few words, is not."""
    from sampledlm import memory
    from sampledlm.data.corpus import build_vocab

    v = len(build_vocab(str(tiny_corpus["train"])))
    scores = 8 * 512 * v  # -b 512 predictions of a feed-forward model, two float32 [N, V] arrays
    monkeypatch.setattr(memory, "available_memory", lambda: scores - 1)  # the model fits, the step's scores do not
    monkeypatch.setattr(memory, "free_swap", lambda: 0)
    sgd = ["--model", "ffnn", "-b", "512", "--optimizer", "sgd", "--momentum", "0"]  # no optimiser state at all
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "r", *sgd), capsys)
    assert_one_line_error(code, err, "not enough memory for this run", tmp_path / "r")
    assert "output scores, at least" in err and "-b or --bptt" in err and "--objective nce" in err
    assert "optimiser" not in err  # SGD without momentum keeps none
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "n", *sgd, "--objective", "nce"), capsys)
    assert code == 0, err


def test_a_run_ended_by_max_steps_says_so_and_resume_will_not_add_one_step_epochs(tiny_corpus, tmp_path, capsys,
                                                                                  private_cache):
    """--resume --epochs 5 of a run that reached its --max-steps trained one step and recorded it as an epoch."""
    run = tmp_path / "ms"
    args = train_args(tiny_corpus, run, "--model", "ffnn", "-b", "4", "--max-steps", "3")
    args[args.index("--epochs") + 1] = "2"
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert "training ended at its --max-steps 3 (step 3), after epoch 1 of 2" in err
    before = (run / "metrics.jsonl").read_bytes()
    for more in ([], ["--epochs", "5"]):
        code, _, err = run_cli(["train", "--resume", str(run), *more], capsys)
        assert code == 1 and "training ended at its --max-steps 3 (step 3), which --resume does not change" in err
        assert "--init-from" in err
    assert (run / "metrics.jsonl").read_bytes() == before


def test_a_seed_past_64_bits_is_refused_and_a_default_sample_count_above_v_is_halved(tiny_corpus, tmp_path, capsys,
                                                                                     private_cache):
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "s", "--seed", str(2**64)), capsys)
    assert code != 0 and "--seed" in err and "Traceback" not in err and not (tmp_path / "s").exists()
    # V = 8 here: the objective's own default of 250 samples is not smaller than V, as a given 250 would not be
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "c", "--objective", "css-is", "--max-size", "8"), capsys)
    assert code == 0, err
    assert "--objective css-is: --samples 4 (half the vocabulary of 8 words: the default, 250, is not" in err
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "d", "--objective", "css-is", "--max-size", "8",
                                      "--samples", "250"), capsys)
    assert code == 1 and "must be smaller than the vocabulary size" in err


def test_resume_with_more_epochs_writes_them_into_config_toml(tiny_corpus, tmp_path, capsys, private_cache):
    run = tmp_path / "e"
    code, _, err = run_cli(train_args(tiny_corpus, run, "--model", "gru", "-b", "4", "--bptt", "5"), capsys)
    assert code == 0, err
    code, _, err = run_cli(["train", "--resume", str(run), "--epochs", "2"], capsys)
    assert code == 0, err
    assert "epochs = 2  # --resume --epochs 2" in (run / "config.toml").read_text()


def test_a_typed_flag_the_run_never_reads_is_warned_of(tiny_corpus, tmp_path, capsys, private_cache):
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "g", "--model", "gru", "-b", "4", "--bptt", "5",
                                      "--max-halvings", "2", "--time-clock", "cpu", "--input-factor", "2"), capsys)
    assert code == 0, err
    for words in ("--max-halvings has no effect without --lr-schedule plateau (this run: --lr-schedule cosine)",
                  "--time-clock has no effect without --max-time", "--input-factor has no effect without --adaptive"):
        assert f"warning: {words}" in err, err
    code, _, err = run_cli(train_args(tiny_corpus, tmp_path / "p", "--model", "gru", "-b", "4", "--bptt", "5",
                                      "--lr-schedule", "plateau", "--max-halvings", "2"), capsys)
    assert code == 0 and "no effect" not in err, err


def test_an_output_over_every_word_of_a_large_vocabulary_is_said_to_be_the_slow_choice(tiny_corpus, tmp_path,
                                                                                        capsys, monkeypatch):
    """At V = 485k the softmax trained at 43 words a second where IS and NCE trained at thousands, and nothing
    said so; the sampled outputs get no such note."""
    from sampledlm.neural import settings

    monkeypatch.setattr(settings, "LARGE_VOCABULARY", 5)  # the tiny corpus as a large vocabulary
    base = ["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]), "--epochs", "1",
            "--embed-dim", "8", "--hidden", "16"]
    code, _, err = run_cli([*base, "-o", str(tmp_path / "softmax")], capsys)
    assert code == 0, err
    assert "--objective softmax scores all" in err and "--objective is or nce" in err, err
    code, _, err = run_cli([*base, "--objective", "nce", "-o", str(tmp_path / "nce")], capsys)
    assert code == 0 and "scores all" not in err, err
