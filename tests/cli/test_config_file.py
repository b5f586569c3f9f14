"""--config FILE (TOML) on the train commands and serve: flags override it, a run stores its resolved settings in
RUN/config.toml and --config RUN/config.toml repeats the run; a bad file is a one-line error naming file and line."""

from __future__ import annotations

import json
import re

import pytest
from helpers import run_cli

GRU = 'model = "gru"\nembed-dim = 8\nhidden = 16\nepochs = 2\nthreads = 1\n'


def valid_curve(run) -> list[float]:
    return [json.loads(line)["valid_ppl"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_run_repeated_from_its_stored_config_gives_the_same_metrics(tiny_corpus, tmp_path, capsys):
    (tmp_path / "gru.toml").write_text(GRU + 'objective = "nce"\n')
    code, _, err = run_cli(["train", "--config", str(tmp_path / "gru.toml"), "--train", str(tiny_corpus["train"]),
                            "--valid", str(tiny_corpus["valid"]), "-o", str(tmp_path / "a")], capsys)
    assert code == 0, err
    stored = (tmp_path / "a" / "config.toml").read_text()
    assert 'lr = 0.008' in stored and 'optimizer = "adamw"' in stored and 'lr-schedule = "cosine"' in stored
    assert 'samples = 26  # --objective nce on a gru' in stored  # 1,000 on a recurrent model, at most V - 1 = 26
    assert str(tiny_corpus["train"]) in stored  # absolute paths: repeatable from anywhere
    code, _, err = run_cli(["train", "--config", str(tmp_path / "a" / "config.toml"), "-o", str(tmp_path / "b")],
                           capsys)
    assert code == 0, err
    assert valid_curve(tmp_path / "b") == valid_curve(tmp_path / "a") and len(valid_curve(tmp_path / "a")) == 2
    a, b = (json.loads((tmp_path / r / "config.json").read_text()) for r in "ab")
    assert a == b


def test_the_stored_config_says_where_each_setting_came_from(tiny_corpus, tmp_path, capsys):
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "--model", "gru", "--objective", "nce", "--embed-dim", "8", "--hidden", "16", "--epochs",
                            "1", "-o", str(tmp_path / "a")], capsys)
    assert code == 0, err
    lines = dict(line.split(" = ", 1) for line in (tmp_path / "a" / "config.toml").read_text().splitlines()
                 if " = " in line and not line.startswith("#"))
    assert lines["hidden"] == "16  # given"
    assert re.fullmatch(r"0\.008  # --model gru over \d+ steps", lines["lr"])  # a short run's recipe (AdamW)
    assert re.fullmatch(r'"adamw"  # --model gru over \d+ steps', lines["optimizer"])
    assert lines["samples"] == "26  # --objective nce on a gru"  # 1,000, at most V - 1 = 26 on this corpus
    assert lines["sample-mode"] == '"shared"  # --objective nce'
    assert lines["noise-power"] == "1.0  # --objective nce"  # the objective's own default
    assert lines["batch-size"] == "32  # --model gru"  # the model kind's training default
    assert lines["seed"] == "1  # default"  # the training options' own
    (tmp_path / "b.toml").write_text("lr = 0.01\n")
    code, _, err = run_cli(["train", "--config", str(tmp_path / "b.toml"), "--train", str(tiny_corpus["train"]),
                            "--valid", str(tiny_corpus["valid"]), "--model", "gru", "--objective", "nce",
                            "--embed-dim", "8", "--hidden", "16", "--epochs", "1", "-o", str(tmp_path / "b")], capsys)
    assert code == 0, err
    stored = (tmp_path / "b" / "config.toml").read_text()
    assert "lr = 0.01  # --config\n" in stored and "hidden = 16  # given\n" in stored
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "--model", "gru", "--objective", "nce", "--embed-dim", "8", "--hidden", "16", "--epochs",
                            "1", "--optimizer", "adam", "-o", str(tmp_path / "c")], capsys)
    assert code == 0, err
    stored = (tmp_path / "c" / "config.toml").read_text()  # Adam chosen: the objective's Adam rate on this trunk
    assert "lr = 0.004  # --objective nce on a gru\n" in stored and "weight-decay = 0.0  # default\n" in stored


def test_flags_on_the_command_line_override_the_file(tiny_corpus, tmp_path, capsys):
    (tmp_path / "gru.toml").write_text(GRU)
    code, _, err = run_cli(["train", "--config", str(tmp_path / "gru.toml"), "--train", str(tiny_corpus["train"]),
                            "--valid", str(tiny_corpus["valid"]), "--epochs", "1", "-o", str(tmp_path / "r")], capsys)
    assert code == 0, err
    assert len(valid_curve(tmp_path / "r")) == 1
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["model"]["type"] == "gru" and config["model"]["hidden"] == 16


def test_ngram_train_reads_the_same_settings_from_a_file(tiny_corpus, tmp_path, capsys):
    (tmp_path / "kn.toml").write_text(f'train = "{tiny_corpus["train"]}"\norder = 2\nsmoothing = "kn"\n')  # mkn is the default
    assert run_cli(["ngram", "train", "--config", str(tmp_path / "kn.toml"), "-o", str(tmp_path / "f.arpa")],
                   capsys)[0] == 0
    assert run_cli(["ngram", "train", "--train", str(tiny_corpus["train"]), "--order", "2", "--smoothing", "kn", "-o",
                    str(tmp_path / "g.arpa")], capsys)[0] == 0
    assert (tmp_path / "f.arpa").read_bytes() == (tmp_path / "g.arpa").read_bytes()


@pytest.mark.parametrize("text, message", [
    ('order = 2\nordr = 3\n', "line 2: unknown setting 'ordr'"),
    ('order = "two"\n', 'line 1: order = "two": expected integer'),
    ('order = "3"\n', 'line 1: order = "3": expected integer'),  # click alone took the string, and 1.5 as 1
    ('order = 2.5\n', "line 1: order = 2.5: expected integer"),
    ('order = true\n', "line 1: order = true: expected integer"),
    ('order = 0\n', "line 1: order = 0"),
    ('order = 2\n\n[model]\norder = 2\n', "line 3: [model] is a table"),
    ('order = 2\norder = 3\n', "line 2: not TOML: Cannot overwrite a value"),
    ('order = \n', "line 1: not TOML"),
])
def test_a_bad_file_is_one_line_naming_file_and_line(tiny_corpus, tmp_path, capsys, text, message):
    (tmp_path / "bad.toml").write_text(text)
    code, out, err = run_cli(["ngram", "train", "--config", str(tmp_path / "bad.toml"), "--train",
                              str(tiny_corpus["train"]), "-o", str(tmp_path / "x.arpa")], capsys)
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"sampledlm: error: {tmp_path / 'bad.toml'}") and message in err, err
    assert not (tmp_path / "x.arpa").exists()


def test_a_scalar_for_a_list_setting_is_quoted_back_as_the_file_wrote_it(tiny_corpus, tmp_path, capsys):
    """`hidden = "abc"` was quoted back as `hidden = ["abc"]`, which is not what the file says."""
    (tmp_path / "bad.toml").write_text('hidden = "abc"\n')
    code, _, err = run_cli(["train", "--config", str(tmp_path / "bad.toml"), "--train", str(tiny_corpus["train"]),
                            "--valid", str(tiny_corpus["valid"]), "-o", str(tmp_path / "r")], capsys)
    assert code == 1 and 'line 1: hidden = "abc": expected integer' in err and "[" not in err.split("hidden =")[1][:3]



@pytest.mark.parametrize("command", [["train"], ["maxent", "train"], ["embed", "train", "x.txt"], ["serve", "m"]])
def test_every_train_command_and_serve_take_a_config_file(tmp_path, capsys, command):
    (tmp_path / "c.toml").write_text("no-such-setting = 1\n")
    code, _, err = run_cli([*command, "--config", str(tmp_path / "c.toml")], capsys)
    assert code == 1 and "unknown setting 'no-such-setting'" in err, err
    code, _, err = run_cli([*command, "--config", str(tmp_path / "missing.toml")], capsys)
    assert code == 1 and "no such file" in err, err



def test_a_recurrent_default_replaced_on_a_long_run_says_so(tiny_corpus, tmp_path, capsys, monkeypatch):
    import re

    from sampledlm.objectives.sampled import ImportanceSampling

    monkeypatch.setattr(ImportanceSampling, "sequence_train_long",
                        ((2, {"lr": 0.003}, "measured over 2 steps"), (10**9, {"lr": 0.001}, "not this run")))
    base = ["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]), "--model", "gru",
            "--objective", "is", "--embed-dim", "8", "--hidden", "16", "-b", "2", "--bptt", "5"]
    code, _, err = run_cli([*base, "--epochs", "2", "-o", str(tmp_path / "a")], capsys)
    assert code == 0, err
    short = ImportanceSampling.sequence_train["lr"]
    steps = int(re.search(rf"--objective is on a gru over (\d+) steps: --lr 0.003 \(not {short}\) "
                          r"\(measured over 2 steps\)", err).group(1))
    stored = (tmp_path / "a" / "config.toml").read_text()
    assert f"lr = 0.003  # --objective is on a gru over {steps} steps\n" in stored
    assert 'optimizer = "adam"  # --model gru\n' in stored  # the long-run rate replaces the short run's AdamW
    # the steps planned are the steps the run took: epochs x BPTT segments an epoch
    with open(tmp_path / "a" / "metrics.jsonl") as f:
        assert [json.loads(line) for line in f][-1]["step"] == steps
    code, _, err = run_cli([*base, "--epochs", "2", "--lr", "0.02", "-o", str(tmp_path / "b")], capsys)
    assert code == 0, err  # the user's rate stays
    assert "lr = 0.02  # given\n" in (tmp_path / "b" / "config.toml").read_text() and " steps: --lr" not in err
    code, _, err = run_cli([*base, "--epochs", "2", "--max-steps", "2", "-o", str(tmp_path / "c")], capsys)
    assert code == 0, err  # two steps are not above two
    assert "lr = 0.008  # --model gru over 2 steps\n" in (tmp_path / "c" / "config.toml").read_text()  # short


def test_an_objective_option_replaced_on_a_long_run_says_so_and_a_given_one_stays(tiny_corpus, tmp_path, capsys,
                                                                                   monkeypatch):
    """CSS-IS's samples: 3,000 on PTB's short run, 1,000 over 20,000 steps (where the CPU budget ends the run)."""
    from sampledlm.objectives.sampled import CSSImportance

    monkeypatch.setattr(CSSImportance, "sequence_train_long", ((2, {"samples": 7}, "measured over 2 steps"),))
    base = ["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]), "--model", "gru",
            "--objective", "css-is", "--embed-dim", "8", "--hidden", "16", "-b", "2", "--bptt", "5", "--max-steps", "3"]
    code, _, err = run_cli([*base, "-o", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert re.search(r"--objective css-is on a gru over \d+ steps: --samples 7 \(not 3000\) \(measured over 2 steps\)",
                     err), err
    assert json.loads((tmp_path / "a" / "config.json").read_text())["objective"]["options"]["samples"] == 7
    assert re.search(r"samples = 7  # --objective css-is on a gru over \d+ steps\n",
                     (tmp_path / "a" / "config.toml").read_text())
    code, _, err = run_cli([*base, "--samples", "5", "-o", str(tmp_path / "b")], capsys)
    assert code == 0 and "--samples 7" not in err, err
    assert json.loads((tmp_path / "b" / "config.json").read_text())["objective"]["options"]["samples"] == 5


def test_a_recurrent_run_reading_a_long_text_once_drops_dropout_and_says_so(tiny_corpus, tmp_path, capsys,
                                                                             monkeypatch):
    """One epoch over at least ONE_PASS_STEPS planned steps: dropout 0 (no sentence is seen twice); more epochs, a
    given rate, fewer steps or a Transformer keep the model's default."""
    from sampledlm.neural import settings

    monkeypatch.setattr(settings, "ONE_PASS_STEPS", 3)
    base = ["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]), "--model", "gru",
            "--objective", "nce", "--embed-dim", "8", "--hidden", "16", "-b", "2", "--bptt", "5"]

    def dropout(run: str, *flags: str) -> tuple[float, str, str]:
        code, _, err = run_cli([*base, *flags, "-o", str(tmp_path / run)], capsys)
        assert code == 0, err
        cfg = json.loads((tmp_path / run / "config.json").read_text())
        return cfg["model"]["dropout"], (tmp_path / run / "config.toml").read_text(), err

    rate, stored, err = dropout("once", "--epochs", "1")
    steps = int(re.search(r"--model gru reading its text once over (\d+) steps: --dropout 0.0 \(not 0.25;", err)
                .group(1))
    assert rate == 0.0 and steps >= 3
    assert f"dropout = 0.0  # --model gru reading its text once over {steps} steps\n" in stored
    assert dropout("twice", "--epochs", "2")[0] == 0.25  # a sentence seen twice: the default stays
    rate, stored, err = dropout("given", "--epochs", "1", "--dropout", "0.1")
    assert rate == 0.1 and "reading its text once" not in err and "dropout = 0.1  # given" in stored
    assert dropout("short", "--epochs", "1", "--max-steps", "2")[0] == 0.25  # under ONE_PASS_STEPS
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "--model", "transformer", "--embed-dim", "8", "--layers", "1", "--heads", "2",
                            "--ff-dim", "16", "--bptt", "5", "-b", "2", "--epochs", "1", "-o", str(tmp_path / "tf")],
                           capsys)
    assert code == 0 and "reading its text once" not in err, err  # measured on the GRU only


def test_a_relative_path_in_a_config_file_that_does_not_exist_is_named_with_its_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "c.toml").write_text('epochs = 1\ntrain = "tr.txt"\n')
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    code, _, err = run_cli(["train", "--config", "../c.toml", "-o", "r"], capsys)
    assert code == 1 and '../c.toml: line 2: train = "tr.txt": no such file or directory' in err, err
    assert "read from the current directory" in err and not (tmp_path / "sub" / "r").exists()
