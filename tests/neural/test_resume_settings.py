"""A half-set torchrun environment is said in one line, and a resume is refused the settings it cannot honour:
from a --config file as from flags, and a config.json whose training settings were edited since the checkpoint."""

from __future__ import annotations

import json

import pytest
from helpers import assert_one_line_error, run_cli, synthetic_sentences, write_corpus


GRU = ["--model", "gru", "-d", "8", "--hidden", "8", "--threads", "1"]


def trained_gru(tmp_path, corpus, capsys):
    """A finished one-epoch GRU run, ``tmp_path/g``."""
    run = tmp_path / "g"
    code, _, err = run_cli(["train", "--train", str(corpus[0]), "--valid", str(corpus[1]), *GRU, "--epochs", "1",
                            "-o", str(run)], capsys)
    assert code == 0, err
    return run

@pytest.fixture
def corpus(tmp_path, private_cache):
    sents = synthetic_sentences(300, seed=3)
    return write_corpus(tmp_path / "train.txt", sents[:250]), write_corpus(tmp_path / "valid.txt", sents[250:])


@pytest.mark.parametrize("env, words", [({"WORLD_SIZE": "2"}, "MASTER_ADDR"), ({"WORLD_SIZE": "abc"}, "WORLD_SIZE"),
                                        ({"WORLD_SIZE": "2", "RANK": "5", "MASTER_ADDR": "127.0.0.1",
                                          "MASTER_PORT": "1"}, "RANK")])
def test_a_half_set_torchrun_environment_is_said_in_one_line(tmp_path, corpus, capsys, monkeypatch, env, words):
    """A job wrapper's WORLD_SIZE gave torch's traceback, a silent wait, or (not a number) one process, silently."""
    for key in ("RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out = tmp_path / "g"
    code, _, err = run_cli(["train", "--train", str(corpus[0]), "--valid", str(corpus[1]), *GRU, "--epochs", "1",
                            "-o", str(out)], capsys)
    assert_one_line_error(code, err, words, out)


def test_a_resume_refuses_settings_from_a_config_file_as_it_refuses_the_flags(tmp_path, corpus, capsys):
    run = trained_gru(tmp_path, corpus, capsys)
    (tmp_path / "lr.toml").write_text("lr = 0.5\nepochs = 2\n")
    code, _, err = run_cli(["train", "--resume", str(run), "--config", str(tmp_path / "lr.toml")], capsys)
    assert code == 1 and "--lr from --config" in err
    (tmp_path / "epochs.toml").write_text("epochs = 2\n")
    code, _, err = run_cli(["train", "--resume", str(run), "--config", str(tmp_path / "epochs.toml")], capsys)
    assert code == 0, err
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 2


def test_a_resume_refuses_a_config_json_whose_training_settings_were_edited(tmp_path, corpus, capsys):
    """An edited batch size met the checkpoint's recurrent state in a torch traceback; an edited rate was ignored."""
    run = trained_gru(tmp_path, corpus, capsys)
    original = (run / "config.json").read_text()
    for key, value in (("batch_size", 8), ("lr", 0.5)):
        config = json.loads(original)
        config["train"][key] = value
        (run / "config.json").write_text(json.dumps(config))
        code, _, err = run_cli(["train", "--resume", str(run), "--epochs", "2"], capsys)
        assert code == 1 and f"train.{key} is {value}" in err and "config.json" in err, err
        assert len(err.strip().splitlines()) == 1, err
    (run / "config.json").write_text(original)
    code, _, err = run_cli(["train", "--resume", str(run), "--epochs", "2"], capsys)
    assert code == 0, err


def test_a_resume_names_config_json_when_its_model_section_was_edited(tmp_path, corpus, capsys):
    """eval named the file for such an edit; train --resume gave the bare message ("unknown model type None")."""
    run = trained_gru(tmp_path, corpus, capsys)
    original = (run / "config.json").read_text()
    config = json.loads(original)
    config["model"]["colour"] = "red"
    (run / "config.json").write_text(json.dumps(config))
    code, _, err = run_cli(["train", "--resume", str(run), "--epochs", "2"], capsys)
    assert code == 1 and str(run / "config.json") in err and "colour" in err, err
    for edit, words in ((lambda c: c["model"].pop("type"), "field 'type'"), (lambda c: c.pop("train"), "missing section")):
        config = json.loads(original)
        edit(config)  # "unknown model type None" and "unknown keys [] / missing keys ['train']" before
        (run / "config.json").write_text(json.dumps(config))
        code, _, err = run_cli(["train", "--resume", str(run), "--epochs", "2"], capsys)
        assert code == 1 and str(run / "config.json") in err and words in err and "[]" not in err, err


def test_a_resume_may_checkpoint_more_often(tmp_path, corpus, capsys):
    """A long epoch resumed with --checkpoint-every (refused before) checkpoints within it from then on, as the run's
    config.json then says; the API takes it too."""
    run = trained_gru(tmp_path, corpus, capsys)
    code, _, err = run_cli(["train", "--resume", str(run), "--epochs", "2", "--checkpoint-every", "2"], capsys)
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["train"]["checkpoint_every"] == 2
    import sampledlm

    sampledlm.resume_lm(str(run), epochs=3, checkpoint_every=3)
    assert json.loads((run / "config.json").read_text())["train"]["checkpoint_every"] == 3
    code, _, err = run_cli(["train", "--resume", str(run), "--epochs", "4", "--checkpoint-every", "-1"], capsys)
    assert code != 0 and "--checkpoint-every" in err
