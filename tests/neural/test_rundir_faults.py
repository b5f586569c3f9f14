"""Regression tests for run-directory defects found by `sampledlm bench faults`: an absurd ``--hidden`` or
``--order`` was a RuntimeError traceback from the allocator; a mistyped model field of config.json was
reported without naming config.json; weights holding NaN evaluated to 'ppl nan' with exit 0."""

from __future__ import annotations

import json
import os

import pytest

from sampledlm.cli import main


def write_corpus(d):
    (d / "train.txt").write_text("the cat sat on the mat\nthe dog ran\na cat and a dog\n" * 20)
    (d / "valid.txt").write_text("the cat ran\na dog sat on the mat\n" * 5)


def run(args, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def one_line_error(code, err, *needles):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and lines[0].startswith("sampledlm: error:"), err
    for n in needles:
        assert n in lines[0], (n, err)


@pytest.mark.parametrize("flag, value", [("--hidden", 10 ** 12), ("--order", 10 ** 9)])
def test_a_model_too_large_to_allocate_is_a_one_line_error(tmp_path, capsys, private_cache, flag, value):
    write_corpus(tmp_path)
    code, _, err = run(["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o",
                        tmp_path / "run", "-d", "4", "--epochs", "1", flag, value], capsys)
    one_line_error(code, err, "does not fit in memory", "--hidden")
    assert not (tmp_path / "run" / "config.json").exists()


@pytest.fixture
def trained(tmp_path, capsys, private_cache):
    write_corpus(tmp_path)
    code, _, err = run(["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o",
                        tmp_path / "run", "-d", "4", "--hidden", "4", "--epochs", "1"], capsys)
    assert code == 0, err
    return tmp_path / "run"


def test_a_mistyped_model_field_names_config_json(trained, capsys):
    cfg = json.loads((trained / "config.json").read_text())
    cfg["model"]["hidden"] = "4"
    (trained / "config.json").write_text(json.dumps(cfg))
    code, _, err = run(["eval", trained, "--test", trained.parent / "valid.txt"], capsys)
    one_line_error(code, err, "config.json", "hidden")


def test_weights_holding_nan_are_refused(trained, capsys):
    from sampledlm import store

    path = str(trained / "model.safetensors")
    tensors, meta = store.load_tensors(path)
    name = next(k for k in tensors if k.endswith("output.bias"))
    tensors[name] = tensors[name].clone()
    tensors[name][2] = float("nan")
    store.save_tensors(path, tensors, meta)  # a valid checksum: only the finite-value check can catch it
    code, out, err = run(["eval", trained, "--test", trained.parent / "valid.txt", "--json"], capsys)
    one_line_error(code, err, "model.safetensors", name.split("/", 1)[1], "non-finite")
    assert out == ""


def test_a_kill_between_the_last_checkpoint_and_metrics_is_repaired_by_resume(tmp_path, capsys, private_cache,
                                                                             monkeypatch):
    """Found by `sampledlm bench crashes`: killed after the last epoch's checkpoint but before metrics.jsonl was
    rewritten, `--resume` finished the model and left metrics.jsonl without the last epoch."""
    from sampledlm.neural import trainer as trainer_mod

    write_corpus(tmp_path)
    real = trainer_mod.Trainer.write_metrics

    def killed_at_the_last_epoch(self):
        if len(self.state.metrics) == 2:
            raise KeyboardInterrupt("killed")  # as SIGKILL would: nothing after this point runs
        real(self)

    monkeypatch.setattr(trainer_mod.Trainer, "write_metrics", killed_at_the_last_epoch)
    args = ["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o", tmp_path / "run",
            "-d", "4", "--hidden", "5", "--epochs", "2", "--threads", "1"]
    code, _, _ = run(args, capsys)
    assert code != 0
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 1
    monkeypatch.setattr(trainer_mod.Trainer, "write_metrics", real)
    code, _, err = run(["train", "--resume", tmp_path / "run"], capsys)
    assert code == 0, err
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 2


def test_taking_a_run_directory_removes_a_killed_writers_temporary_files(tmp_path, capsys, private_cache):
    """Found by `sampledlm bench crashes`: a kill while the learning curve was written left
    `.learning_curve.png.HOST.PID.XXXX.tmp`, which a resume of the finished run never removed."""
    import subprocess
    import sys

    from sampledlm.data.textio import _temp_prefix

    write_corpus(tmp_path)
    code, _, err = run(["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o",
                        tmp_path / "run", "-d", "4", "--hidden", "5", "--epochs", "1", "--threads", "1"], capsys)
    assert code == 0, err
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    stale = tmp_path / "run" / f"{_temp_prefix(str(tmp_path / 'run' / 'learning_curve.png'))}{dead}.ab12.tmp"
    stale.write_bytes(b"half a png")
    code, _, err = run(["train", "--resume", tmp_path / "run"], capsys)
    assert "already finished" in err
    assert not stale.exists()


class _Killed(BaseException):
    """Stands for a SIGKILL: nothing of the command runs after it (no except clause of ours catches it)."""


def test_a_kill_while_the_finished_model_is_checkpointed_leaves_the_last_checkpoint_whole(tmp_path, capsys,
                                                                                          private_cache, monkeypatch):
    """Found by `sampledlm bench crashes`: the last epoch's checkpoint and the finalised model's have the same step,
    so the second one removed the first -- the one checkpoint.json pointed to -- before writing itself again; a
    kill in between left checkpoint.json pointing to half a checkpoint: `--resume` refused ('trainer_state.json: no
    such file') and so did the same command ('already holds a run')."""
    from sampledlm.neural import rundir

    write_corpus(tmp_path)
    real = rundir.write_json

    def killed_while_finalised_state_is_written(path, obj):
        if path.endswith("trainer_state.json") and obj.get("finalized"):
            raise _Killed
        real(path, obj)

    monkeypatch.setattr(rundir, "write_json", killed_while_finalised_state_is_written)
    args = ["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o", tmp_path / "run",
            "-d", "4", "--hidden", "5", "--epochs", "1", "--threads", "1"]
    with pytest.raises(_Killed):
        main([str(a) for a in args])
    monkeypatch.undo()
    live = rundir.latest_checkpoint(str(tmp_path / "run"))
    assert json.loads((tmp_path / "run" / live / "trainer_state.json").read_text())["done"]
    code, _, err = run(["train", "--resume", tmp_path / "run"], capsys)
    assert code == 0, err
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == [
        os.path.basename(rundir.latest_checkpoint(str(tmp_path / "run")))]


@pytest.mark.parametrize("spec", [
    {"type": "ffnn", "order": 3, "embed_dim": 8, "hidden": [16], "direct": True},
    {"type": "gru", "embed_dim": 8, "hidden": 16, "proj": 8},
    {"type": "lstm", "embed_dim": 8, "hidden": 16, "layers": 2},
    {"type": "transformer", "embed_dim": 16, "layers": 2, "heads": 2, "context": 8},
])
def test_the_memory_check_counts_the_parameters_the_model_has(spec):
    """The check builds the model on the meta device with its initialisers left out: the same parameters."""
    import torch

    from sampledlm.neural.registry import build_model
    from sampledlm.neural.rundir import _NoFillOnMeta

    real = build_model(spec, 50)
    with torch.device("meta"), _NoFillOnMeta():
        meta = build_model(spec, 50)
    assert [(k, p.shape) for k, p in meta.named_parameters()] == [(k, p.shape) for k, p in real.named_parameters()]
    assert all(p.is_meta for p in meta.parameters())


def test_scoring_with_a_run_does_not_import_the_compiler(tmp_path, capsys, private_cache):
    """torch's meta kernels for random fills import torch._dynamo (0.8 s a process); scoring never needs it."""
    import subprocess
    import sys

    write_corpus(tmp_path)
    code, _, _ = run(["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o",
                      tmp_path / "run", "--model", "gru", "-d", "4", "--hidden", "8", "--epochs", "1"], capsys)
    assert code in (0, None)
    probe = ("import sys; from sampledlm.cli import main\n"
             "try:\n    main(['eval', sys.argv[1], '--test', sys.argv[2]])\nexcept SystemExit as e:\n"
             "    assert not e.code, e.code\nprint('dynamo' if 'torch._dynamo' in sys.modules else 'no dynamo')")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "run"), str(tmp_path / "valid.txt")],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "no dynamo", out


def test_errors_name_the_flags_typed_and_a_file_given_for_a_run(tmp_path, capsys, private_cache):
    write_corpus(tmp_path)
    corpus = ["--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt"]
    code, _, _ = run(["train", *corpus, "-o", tmp_path / "run", "-d", "4", "--hidden", "5", "--epochs", "1"], capsys)
    assert code in (0, None)
    code, _, err = run(["train", "--valid", tmp_path / "valid.txt", "--resume", tmp_path / "run"], capsys)
    one_line_error(code, err, "(got --valid)")
    code, _, err = run(["train", *corpus, "--init-from", tmp_path / "run", "--model", "gru", "-o", tmp_path / "b"],
                       capsys)
    one_line_error(code, err, "(got --model)")
    for args in (["train", "--resume", tmp_path / "train.txt"], ["export", tmp_path / "train.txt", "-o", tmp_path / "m.onnx"],
                 ["train", *corpus, "--init-from", tmp_path / "train.txt", "-o", tmp_path / "c"]):
        code, _, err = run(args, capsys)
        one_line_error(code, err, "train.txt: is a file, not a run directory")


def test_a_disk_too_small_for_the_checkpoints_is_refused_before_training(tmp_path, capsys, private_cache,
                                                                         monkeypatch):
    """At V = 485k a checkpoint is GBs; a full disk had been found only when the first epoch's checkpoint failed."""
    from collections import namedtuple

    import sampledlm.neural.rundir as rundir

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(rundir.shutil, "disk_usage", lambda path: usage(10 ** 6, 10 ** 6 - 1000, 1000))
    write_corpus(tmp_path)
    code, _, err = run(["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o",
                        tmp_path / "run", "-d", "4", "--epochs", "1"], capsys)
    assert code == 1 and "not enough free disk space" in err and "1 KB are free there" in err, err
    assert "0.00" not in err  # sizes in the unit that shows them (it read "0.00 GB needed, 0.00 GB free")
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()  # nothing half-written


def test_the_disk_check_counts_a_new_checkpoint_beside_the_live_one(tmp_path, monkeypatch):
    from collections import namedtuple

    import sampledlm.neural.rundir as rundir
    from sampledlm.errors import UserError

    usage = namedtuple("usage", "total used free")
    free = {"n": 0}
    monkeypatch.setattr(rundir.shutil, "disk_usage", lambda path: usage(10 ** 12, 0, free["n"]))
    model, state = 100, 200  # bytes: a checkpoint is 300, the model file 100
    free["n"] = 2 * 300 + 100  # a fresh run: two checkpoints at once, then the model beside them
    rundir.check_disk_room(str(tmp_path), model, state)
    free["n"] -= 1
    with pytest.raises(UserError, match="1 KB more are needed, 1 KB are free there"):
        rundir.check_disk_room(str(tmp_path), model, state)
    monkeypatch.setattr(rundir, "latest_checkpoint", lambda d: "checkpoints/ckpt-1")
    free["n"] = 300 + 100  # resumed: the live checkpoint is already on disk
    rundir.check_disk_room(str(tmp_path), model, state)
    free["n"] -= 1
    with pytest.raises(UserError):
        rundir.check_disk_room(str(tmp_path), model, state)


def test_the_optimiser_state_counts_adams_two_moments_and_sgds_momentum():
    import torch

    import sampledlm.neural.rundir as rundir

    w = torch.nn.Parameter(torch.zeros(10, 3))  # 120 bytes
    assert rundir.optimizer_state_bytes([torch.optim.Adam([w])]) == 240
    assert rundir.optimizer_state_bytes([torch.optim.SGD([w], lr=0.1)]) == 0
    assert rundir.optimizer_state_bytes([torch.optim.SGD([w], lr=0.1, momentum=0.9)]) == 120
    assert rundir.tensor_bytes(torch.nn.Linear(3, 10)) == 4 * (30 + 10)


def test_memory_too_small_for_the_optimiser_state_is_refused_before_training(tmp_path, capsys, private_cache,
                                                                             monkeypatch):
    """Adam's moments are allocated at the first step; where they cannot fit, the kernel would kill that step with
    no message."""
    import sampledlm.memory as memory

    monkeypatch.setattr(memory, "available_memory", lambda: 20_000)  # the weights' 16 KB, not Adam's 32 KB more
    monkeypatch.setattr(memory, "free_swap", lambda: 0)
    write_corpus(tmp_path)
    code, _, err = run(["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o",
                        tmp_path / "run", "-d", "4", "--epochs", "1"], capsys)
    assert code == 1 and "not enough memory for this run" in err and "KB are available (RAM not in use" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()  # nothing half-written
    # weights larger than the memory available now (not the machine's physical memory: the kernel would let the
    # allocation through and kill the process while filling it) are refused before anything is built
    monkeypatch.setattr(memory, "available_memory", lambda: 100)
    code, _, err = run(["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o",
                        tmp_path / "run", "-d", "4", "--epochs", "1", "--optimizer", "sgd"], capsys)
    assert code == 1 and "does not fit in memory" in err and "0 KB are available" in err, err
    assert not (tmp_path / "run").exists()
    monkeypatch.setattr(memory, "available_memory", lambda: 30_000)  # a softmax step's two [256, 11] arrays: 23 KB
    # SGD without momentum keeps no state: only the step's scores to allocate, and they fit
    code, _, err = run(["train", "--train", tmp_path / "train.txt", "--valid", tmp_path / "valid.txt", "-o",
                        tmp_path / "sgd", "-d", "4", "--epochs", "1", "--optimizer", "sgd", "--momentum", "0"],
                       capsys)
    assert code == 0, err


def test_the_memory_check_counts_only_state_not_yet_allocated(monkeypatch):
    import torch

    import sampledlm.memory as memory
    import sampledlm.neural.rundir as rundir
    from sampledlm.errors import UserError

    w = torch.nn.Parameter(torch.zeros(10, 3))  # 120 bytes: Adam's state is 240
    opt = torch.optim.Adam([w])
    monkeypatch.setattr(memory, "free_swap", lambda: 0)
    monkeypatch.setattr(memory, "available_memory", lambda: 240)
    rundir.check_memory_room([opt], 120, torch.device("cpu"))
    monkeypatch.setattr(memory, "available_memory", lambda: 239)
    with pytest.raises(UserError, match="not enough memory"):
        rundir.check_memory_room([opt], 120, torch.device("cpu"))
    monkeypatch.setattr(memory, "free_swap", lambda: 1)  # swap counts
    rundir.check_memory_room([opt], 120, torch.device("cpu"))
    monkeypatch.setattr(memory, "free_swap", lambda: 0)
    w.grad = torch.ones_like(w)
    opt.step()  # the state now exists (as after a resume): nothing more to allocate
    assert rundir.allocated_optimizer_bytes([opt]) == 240
    monkeypatch.setattr(memory, "available_memory", lambda: 0)
    rundir.check_memory_room([opt], 120, torch.device("cpu"))
