"""Regression tests for defects of the neural path found by a fault campaign (wrong numbers, lost files)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from sampledlm.cli import main
from sampledlm.data.corpus import build_vocab, load_ids
from sampledlm.data.tokenizer import TextOptions
from sampledlm.errors import UserError
from sampledlm.neural import rundir
from sampledlm.neural.lm import NeuralLM
from sampledlm.neural.registry import build_model, model_spec
from sampledlm.neural.trainer import TrainOptions, Trainer, new_run, resume_run
from sampledlm.objectives import make_objective
from sampledlm.store import lock_directory

WORDS = "the a cat dog sat ran on under mat rug and".split()


def write_corpus(path, n, seed):
    rng = np.random.default_rng(seed)
    path.write_text("".join(" ".join(rng.choice(WORDS, rng.integers(2, 8))) + "\n" for _ in range(n)))
    return path


@pytest.fixture
def corpus(tmp_path):
    write_corpus(tmp_path / "train.txt", 80, 1)
    write_corpus(tmp_path / "valid.txt", 20, 2)
    return tmp_path


def config_for(corpus, objective="softmax", options=None, **train):
    vocab = build_vocab(str(corpus / "train.txt"))
    t = dict(TrainOptions(batch_size=16, epochs=2, lr=0.5).__dict__)
    t.update(train)
    data = {"train": str(corpus / "train.txt"), "valid": str(corpus / "valid.txt"), "text_options": TextOptions().to_dict()}
    spec = model_spec("ffnn", order=3, embed_dim=6, hidden=[8])
    return rundir.make_config(spec, objective, options or {}, t, data, vocab), vocab


def run_cli(args, capsys):
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_gru_scores_each_sentence_from_a_fresh_state(tmp_path):
    """A sentence scores the same alone and as the 5th line of a file (independent sentences)."""
    torch.manual_seed(0)
    sents = [write_corpus(tmp_path / "t.txt", 5, 3).read_text().splitlines()]
    vocab = build_vocab(str(tmp_path / "t.txt"))
    model = build_model(model_spec("gru", embed_dim=8, hidden=8), len(vocab))
    lm = NeuralLM(model, make_objective("softmax"), vocab)
    (tmp_path / "one.txt").write_text(sents[0][4] + "\n")
    all5 = load_ids(str(tmp_path / "t.txt"), vocab, cache=False)
    one = load_ids(str(tmp_path / "one.txt"), vocab, cache=False)
    lp5 = lm.logprobs(all5, independent=True)
    assert lp5[-len(one):].sum() == pytest.approx(lm.logprobs(one, independent=True).sum(), abs=1e-5)
    running = lm.logprobs(all5)  # running text carries the state: a different number for that sentence
    assert abs(running[-len(one):].sum() - lp5[-len(one):].sum()) > 1e-4
    assert running[: np.flatnonzero(all5 == 0)[0] + 1].sum() == pytest.approx(
        lp5[: np.flatnonzero(all5 == 0)[0] + 1].sum(), abs=1e-5)  # the first sentence: the same either way


@pytest.mark.parametrize("how", ["lr", "nan", "huge"])
def test_a_run_that_diverged_before_its_first_checkpoint_can_be_started_again(corpus, monkeypatch, how):
    """``lr`` is the user's case: lr=1e30 gives nan on some CPUs and huge finite losses on others (AVX-512), so
    the certain divergences are injected too: a nan loss, and a finite one of 1.6e30."""
    from sampledlm.objectives.softmax import SoftmaxObjective

    config, vocab = config_for(corpus, lr=1e30 if how == "lr" else 0.5)
    if how != "lr":
        real = SoftmaxObjective.forward
        bad = float("nan") if how == "nan" else 1.6e30
        monkeypatch.setattr(SoftmaxObjective, "forward", lambda self, *a, **k: real(self, *a, **k) + bad)
    with pytest.raises(UserError, match="no checkpoint had been written yet") as e:
        new_run(str(corpus / "r"), config, vocab).train()
    monkeypatch.undo()
    assert "intact" not in str(e.value)
    with pytest.raises(UserError, match="start it again"):
        resume_run(str(corpus / "r"))
    config, vocab = config_for(corpus, lr=0.5)
    assert new_run(str(corpus / "r"), config, vocab).train().finalized  # the same -o works again


def test_final_model_is_one_file_and_a_kill_before_the_last_checkpoint_does_not_calibrate_twice(corpus, monkeypatch):
    config, vocab = config_for(corpus, "binary", {"neg_rate": 0.5})
    new_run(str(corpus / "clean"), config, vocab).train()
    clean = rundir.read_model_files(str(corpus / "clean" / "model.safetensors"))
    assert clean[1] is not None and clean[2]["finalized"] == "true"  # weights and calibrated objective together
    assert not os.path.exists(corpus / "clean" / "objective.safetensors")

    t = new_run(str(corpus / "killed"), config, vocab)
    real = Trainer.save_checkpoint

    def dies_after_final_model(self):
        if os.path.exists(os.path.join(self.run_dir, "model.safetensors")) and \
                rundir.load_tensors(os.path.join(self.run_dir, "model.safetensors"))[1]["finalized"] == "true":
            raise KeyboardInterrupt  # killed between the final model and the checkpoint that records it
        return real(self)

    monkeypatch.setattr(Trainer, "save_checkpoint", dies_after_final_model)
    with pytest.raises(KeyboardInterrupt):
        t.train()
    monkeypatch.setattr(Trainer, "save_checkpoint", real)
    resume_run(str(corpus / "killed")).train()
    killed = rundir.read_model_files(str(corpus / "killed" / "model.safetensors"))
    for k in clean[0]:
        torch.testing.assert_close(killed[0][k], clean[0][k])  # calibrated once, as the clean run


def test_a_refused_resume_leaves_config_untouched(corpus, capsys):
    config, vocab = config_for(corpus)
    new_run(str(corpus / "done"), config, vocab).train()
    before = (corpus / "done" / "config.json").read_bytes()
    # as many epochs as it ran: refused (a larger --epochs trains it further, tests/neural/test_finetune.py)
    code, _, err = run_cli(["train", "--resume", str(corpus / "done"), "--epochs", str(config["train"]["epochs"])],
                           capsys)
    assert code == 1 and "already finished" in err
    assert (corpus / "done" / "config.json").read_bytes() == before


def test_a_second_process_on_the_same_output_stops(corpus, capsys):
    with lock_directory(str(corpus / "busy")):  # another process holds the run directory
        code, _, err = run_cli(["train", "--train", str(corpus / "train.txt"), "--valid", str(corpus / "valid.txt"),
                                "-o", str(corpus / "busy"), "-d", "4", "--hidden", "4", "--epochs", "1"], capsys)
    assert code == 1 and "another sampledlm process" in err
    assert not os.path.exists(corpus / "busy" / "config.json")


@pytest.mark.parametrize("flags,named", [
    (["--clip", "-1"], "--clip"), (["--min-improvement", "nan"], "--min-improvement"),
    (["--lr", "inf"], "--lr"), (["--lr", "nan"], "--lr"), (["--objective", "is", "--samples", "500"], "--samples"),
    (["--dropout", "1.5"], "--dropout"), (["--neg-rate", "0", "--objective", "binary"], "--neg-rate"),
])
def test_nonsense_flags_are_refused_naming_the_flag(corpus, capsys, flags, named):
    code, _, err = run_cli(["train", "--train", str(corpus / "train.txt"), "--valid", str(corpus / "valid.txt"),
                            "-o", str(corpus / "x"), *flags], capsys)
    assert code != 0 and named in err and "Traceback" not in err
    assert not os.path.exists(corpus / "x" / "config.json")


def test_eval_opens_a_run_and_refuses_a_tampered_vocabulary(corpus, capsys):
    config, vocab = config_for(corpus)
    new_run(str(corpus / "m"), config, vocab).train()
    code, out, _ = run_cli(["eval", str(corpus / "m"), "--test", str(corpus / "valid.txt"), "--json"], capsys)
    assert code == 0 and json.loads(out)["ppl"] > 1
    lines = (corpus / "m" / "vocab.txt").read_text().splitlines()
    (corpus / "m" / "vocab.txt").write_text("\n".join(lines[:2] + lines[2:][::-1]) + "\n")
    code, _, err = run_cli(["eval", str(corpus / "m"), "--test", str(corpus / "valid.txt")], capsys)
    assert code == 1 and "does not match config.json" in err


def test_demo_refuses_a_users_non_empty_directory(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("my own data\n")
    code, _, err = run_cli(["demo", "-o", str(tmp_path)], capsys)
    assert code == 1 and "not empty" in err
    assert (tmp_path / "train.txt").read_text() == "my own data\n"


def test_weights_copied_in_from_a_run_with_another_vocabulary_are_refused(corpus, tmp_path):
    """A fault campaign's case: model.safetensors of another run (another vocabulary of the same size) scored
    without a word; its weights now carry their vocabulary's fingerprint."""
    import shutil

    config, vocab = config_for(corpus)
    new_run(str(corpus / "a"), config, vocab).train()
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.txt").write_text((corpus / "train.txt").read_text().replace("cat", "cow"))
    (other / "valid.txt").write_text((corpus / "valid.txt").read_text())
    config_b, vocab_b = config_for(other)
    assert len(vocab_b) == len(vocab) and vocab_b.fingerprint() != vocab.fingerprint()
    new_run(str(other / "b"), config_b, vocab_b).train()
    shutil.copy(other / "b" / "model.safetensors", corpus / "a" / "model.safetensors")
    with pytest.raises(UserError, match="trained with another vocabulary"):
        rundir.load_run(str(corpus / "a"))


@pytest.mark.parametrize("edit,message", [({"lowercase": "yes"}, "lowercase: expected true or false"),
                                          ({"shout": True}, "unknown text option"),
                                          ("lines", "text_options should be an object")])
def test_a_damaged_text_options_field_is_refused_naming_the_file(corpus, edit, message):
    config, vocab = config_for(corpus)
    new_run(str(corpus / "r"), config, vocab).train()
    path = corpus / "r" / "config.json"
    cfg = json.loads(path.read_text())
    cfg["data"]["text_options"] = {**cfg["data"]["text_options"], **edit} if isinstance(edit, dict) else edit
    path.write_text(json.dumps(cfg))
    with pytest.raises(UserError, match=message) as e:
        rundir.load_run(str(corpus / "r"))
    assert "config.json" in str(e.value)


def test_a_checkpoint_pointer_that_is_not_an_object_is_a_one_line_error(corpus):
    config, vocab = config_for(corpus)
    new_run(str(corpus / "r"), config, vocab).train()
    (corpus / "r" / "checkpoint.json").write_text("[]")
    with pytest.raises(UserError, match=r"checkpoint.json: expected a JSON object"):
        resume_run(str(corpus / "r"), {"epochs": 5})


def test_a_failed_training_leaves_no_run_directory_it_created(corpus, run_in_process):
    """A fault campaign's case: a training stopped by a full disk (ulimit -f) left run/ with config.json and
    vocab.txt. A run directory the command made and that holds no checkpoint is removed when training fails."""
    r = run_in_process("train", "--train", "train.txt", "--valid", "valid.txt", "--lr", "1e30", "-o", "gone",
                       cwd=corpus)
    assert r.returncode == 1 and "diverged" in r.stderr
    assert not (corpus / "gone").exists()
    (corpus / "mine").mkdir()  # a directory the user made is left in place
    r = run_in_process("train", "--train", "train.txt", "--valid", "valid.txt", "--lr", "1e30", "-o", "mine",
                       cwd=corpus)
    assert r.returncode == 1 and (corpus / "mine").is_dir()


@pytest.mark.skipif(not hasattr(__import__("resource"), "RLIMIT_FSIZE"), reason="needs RLIMIT_FSIZE")
def test_a_training_stopped_by_a_file_size_limit_leaves_nothing(corpus):
    import subprocess
    import sys

    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000)); "
            "from sampledlm.cli import main; main(sys.argv[1:])")
    r = subprocess.run([sys.executable, "-c", code, "train", "--train", "train.txt", "--valid", "valid.txt", "-d",
                        "64", "--hidden", "64", "--epochs", "1", "-o", "big"], cwd=corpus, capture_output=True,
                       text=True)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert not (corpus / "big").exists()
