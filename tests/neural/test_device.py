"""Devices and precisions: --device resolution, objectives on an explicit device, bf16/fp16 training with
exact float32 evaluation, runs that move between devices, configurations written before --precision."""

import json

import numpy as np
import pytest
import torch
from helpers import config_for

from sampledlm.errors import UserError
from sampledlm.neural import rundir as runs
from sampledlm.neural.device import autocast, resolve_device, to_device
from sampledlm.neural.ffnn import FFNN
from sampledlm.neural.lm import perplexity
from sampledlm.neural.trainer import TrainOptions, new_run, resume_run
from sampledlm.objectives import make_objective

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
NEEDS_NOTHING_MORE = ["softmax", "binary", "is", "css-is", "css-bernoulli", "nce", "neg", "blackout", "ranking",
                      "class", "hsm", "adaptive", "selfnorm"]  # shortlist needs an ARPA file (its own tests)


def test_device_names(monkeypatch):
    monkeypatch.delenv("SAMPLEDLM_DEVICE", raising=False)
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("CPU") == torch.device("cpu")
    assert resolve_device("auto") == (torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu"))
    for bad in ("gpu", "cuda:x", "tpu"):
        with pytest.raises(UserError, match="--device"):
            resolve_device(bad)


def test_auto_is_the_device_the_environment_names(monkeypatch):
    monkeypatch.setenv("SAMPLEDLM_DEVICE", "CPU")
    assert resolve_device("auto") == torch.device("cpu") and resolve_device(None) == torch.device("cpu")
    monkeypatch.setenv("SAMPLEDLM_DEVICE", "gpu")
    with pytest.raises(UserError, match=r"^\$SAMPLEDLM_DEVICE=gpu: --device gpu: choose auto, cpu"):
        resolve_device("auto")
    assert resolve_device("cpu") == torch.device("cpu")  # a device named on the command line wins
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("SAMPLEDLM_DEVICE", "cuda")
    with pytest.raises(UserError, match="no CUDA GPU"):
        resolve_device("auto")


def test_a_missing_gpu_is_a_one_line_error(monkeypatch):
    monkeypatch.delenv("SAMPLEDLM_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(UserError, match="no CUDA GPU"):
        resolve_device("cuda:0")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NEEDS_NOTHING_MORE)
def test_every_objective_trains_and_normalises_on_a_given_device(name, device):
    torch.manual_seed(0)
    V = 60
    counts = np.arange(V, 0, -1, dtype=np.int64) * 3
    sampled = name not in ("softmax", "class", "hsm", "adaptive", "selfnorm")
    opts = {"samples": 20} if name in ("is", "css-is", "css-bernoulli", "nce", "neg", "blackout", "ranking") else {}
    objective = make_objective(name, counts=counts, **opts)
    model = FFNN.build(V, order=3, embed_dim=8, hidden=[16], dropout=0.0, sparse_output=sampled)
    if hasattr(objective, "bind"):  # structured layers size their own weights from the model's
        objective.bind(model)
    objective.prepare(model)
    model, objective = model.to(device), objective.to(device)
    hist = torch.randint(0, V, (32, 2))  # made on the host, as callers do: the model moves it
    targets = torch.randint(0, V, (32,), device=device)
    ctx = model(hist)
    assert ctx.device.type == device
    kw = {"positions": torch.arange(32, device=device)} if objective.uses_positions else {}
    loss = objective(model, ctx, targets, **kw)
    assert torch.isfinite(loss) and loss.device.type == device
    loss.backward()
    model.eval()
    with torch.no_grad():
        total = objective.log_prob(model, model(hist)).exp().sum(-1)
    assert torch.allclose(total.double().cpu(), torch.ones(32, dtype=torch.float64), atol=1e-5)


def test_batches_reach_the_device_and_cpu_batches_stay_as_they_are():
    b = (torch.zeros(3, 2, dtype=torch.int64), torch.ones(3, dtype=torch.int64))
    assert to_device(b, torch.device("cpu")) is b
    if torch.cuda.is_available():
        assert all(t.is_cuda for t in to_device(b, torch.device("cuda")))


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_low_precision_trains_and_evaluation_stays_exact_fp32(words_corpus, precision):
    config, vocab = config_for(words_corpus, epochs=2, precision=precision, lr=0.05, optimizer="adam")
    state = new_run(str(words_corpus / precision), config, vocab).train()
    assert all(np.isfinite(m["train_loss"]) for m in state.metrics)
    model, objective, vocab, config = runs.load_run(str(words_corpus / precision))
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay float32
    from sampledlm.data.corpus import load_ids

    valid = load_ids(str(words_corpus / "valid.txt"), vocab)
    assert perplexity(model, objective, valid) == pytest.approx(state.best_valid, rel=1e-12)


def test_scores_under_autocast_are_float32():
    model = FFNN.build(50, order=3, embed_dim=8, hidden=[16], dropout=0.0)
    with autocast(torch.device("cpu"), "bf16"):
        scores = model.score_all(model(torch.randint(0, 50, (4, 2))))
    assert scores.dtype == torch.float32


def test_runs_written_before_precision_read_bf16_as_precision():
    assert TrainOptions.from_dict({"bf16": True}).precision == "bf16"
    assert TrainOptions.from_dict({"bf16": False}).precision == "fp32"
    assert TrainOptions.from_dict({}).precision == "fp32"


def test_resume_may_name_another_device(words_corpus):
    config, vocab = config_for(words_corpus, epochs=1)
    new_run(str(words_corpus / "r"), config, vocab).train()
    t = resume_run(str(words_corpus / "r"), {"epochs": 2, "device": "cpu"})
    assert t.device == torch.device("cpu")
    t.train()
    saved = json.loads((words_corpus / "r" / "config.json").read_text())
    assert saved["train"]["device"] == "cpu" and saved["train"]["epochs"] == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (a run trained there resumes on the CPU)")
def test_a_run_trained_on_a_gpu_resumes_and_evaluates_on_the_cpu(words_corpus):
    from sampledlm.loader import load_model

    config, vocab = config_for(words_corpus, epochs=1, device="cuda")
    new_run(str(words_corpus / "g"), config, vocab).train()
    t = resume_run(str(words_corpus / "g"), {"epochs": 2, "device": "cpu"})
    t.train()
    assert all(p.device.type == "cpu" for p in t.model.parameters())
    assert np.isfinite(load_model(str(words_corpus / "g"), device="cpu").logprobs(np.array([3, 4, 2])).sum())


@pytest.mark.parametrize("device", DEVICES)
def test_sampled_output_takes_a_device(device):
    from sampledlm.objectives import SampledOutput

    counts = np.arange(500, 0, -1)
    out = SampledOutput(16, 500, objective="css-is", counts=counts, samples=30, device=device)
    assert out.weight.device.type == device and out.objective.noise.device.type == device
    hidden = torch.randn(8, 16, device=device)
    out(hidden, torch.randint(500, (8,), device=device)).backward()
    assert out.weight.grad.is_sparse and out.weight.grad.device.type == device


@pytest.mark.parametrize("command", [["eval", "{run}", "--test", "{valid}"], ["score", "{run}", "{valid}"],
                                     ["generate", "{run}", "-n", "1", "--seed", "1"]])
def test_commands_that_run_a_neural_model_take_a_device(trained_ffnn, tmp_path, capsys, command):
    from helpers import run_cli

    args = [a.format(run=trained_ffnn / "run", valid=trained_ffnn / "valid.txt") for a in command]
    code, out, err = run_cli([*args, "--device", "cpu"], capsys)
    assert code == 0, err
    if not torch.cuda.is_available():
        code, out, err = run_cli([*args, "--device", "cuda"], capsys)
        assert code != 0 and "no CUDA GPU" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_compile_leaves_the_file_format_alone(words_corpus):
    """--compile wraps the forward method only (compiled lazily, at the first step): the weights keep their names."""
    config, vocab = config_for(words_corpus, epochs=1)
    plain = new_run(str(words_corpus / "plain"), config, vocab)
    config["train"]["compile"] = True
    compiled = new_run(str(words_corpus / "compiled"), config, vocab)
    assert list(compiled.model.state_dict()) == list(plain.model.state_dict())
    assert "forward" in vars(compiled.model) and "forward" not in vars(plain.model)  # the compiled wrapper
    plain.release_lock(), compiled.release_lock()


def test_the_allocator_keeps_freed_blocks_where_glibc_allows_it():
    import platform
    import resource
    import sys

    import torch

    from sampledlm.neural.device import keep_freed_memory

    kept = keep_freed_memory()
    assert isinstance(kept, int)
    if not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"):
        return
    assert kept >= 32 << 20
    if kept < 64 << 20:
        pytest.skip("this glibc keeps blocks of at most 32 MiB; the 48 MiB block below would be mapped afresh")

    def faults_filling():  # minor page faults while a fresh 48 MiB tensor (a softmax's [1120, 10000] is 45) is written
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.empty(12 << 20).fill_(1.0)
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    faults = [faults_filling() for _ in range(30)]  # glibc's default: 12,288 every time (mmap, then munmap)
    assert sum(faults[-10:]) < (48 << 20) // 4096, faults  # a freed block served again, not fresh pages
