"""A GRU run of under SHORT_RUN_STEPS planned steps trains with AdamW (decoupled weight decay 0.1) at 0.008 where the
user chose no optimiser; a longer run, a run given another optimiser and the other models keep Adam's defaults."""

from __future__ import annotations

import json

import pytest
from helpers import run_cli

from sampledlm.neural import settings

SMALL = ["--embed-dim", "8", "--hidden", "16", "--epochs", "1", "--threads", "1"]


def trained(tiny_corpus, tmp_path, capsys, *flags: str, name: str = "a") -> tuple[dict, str]:
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            *SMALL, *flags, "-o", str(tmp_path / name)], capsys)
    assert code == 0, err
    train = json.loads((tmp_path / name / "config.json").read_text())["train"]
    return {k: train[k] for k in ("optimizer", "weight_decay", "lr")}, err


@pytest.mark.parametrize("objective", ["softmax", "nce", "hsm"])
def test_a_short_gru_run_takes_adamw_at_0_008_whatever_its_output(tiny_corpus, tmp_path, capsys, objective):
    got, err = trained(tiny_corpus, tmp_path, capsys, "--model", "gru", "--objective", objective)
    assert got == {"optimizer": "adamw", "weight_decay": 0.1, "lr": 0.008}
    assert "--model gru over " in err and "--optimizer adamw (not adam)" in err  # said, with what it replaced


def test_adam_chosen_keeps_the_objectives_adam_rate_and_no_decay(tiny_corpus, tmp_path, capsys):
    got, err = trained(tiny_corpus, tmp_path, capsys, "--model", "gru", "--objective", "nce", "--optimizer", "adam")
    assert got == {"optimizer": "adam", "weight_decay": 0.0, "lr": 0.004}
    assert "--model gru over " not in err


def test_each_setting_given_stays_and_the_others_follow_the_recipe(tiny_corpus, tmp_path, capsys):
    got, _ = trained(tiny_corpus, tmp_path, capsys, "--model", "gru", "--lr", "0.002")
    assert got == {"optimizer": "adamw", "weight_decay": 0.1, "lr": 0.002}
    got, _ = trained(tiny_corpus, tmp_path, capsys, "--model", "gru", "--optimizer", "adamw", "--weight-decay",
                     "0.05", name="b")
    assert got == {"optimizer": "adamw", "weight_decay": 0.05, "lr": 0.008}


def test_a_long_run_and_the_other_models_keep_adam(tiny_corpus, tmp_path, capsys, monkeypatch):
    got, _ = trained(tiny_corpus, tmp_path, capsys, "--model", "lstm")
    assert got["optimizer"] == "adam" and got["weight_decay"] == 0.0  # measured on the GRU only
    monkeypatch.setattr(settings, "SHORT_RUN_STEPS", 1)  # every run is long now
    got, err = trained(tiny_corpus, tmp_path, capsys, "--model", "gru", name="b")
    assert got == {"optimizer": "adam", "weight_decay": 0.0, "lr": 0.004} and "--model gru over " not in err


def test_the_help_says_when_adamw_applies(capsys):
    code, out, _ = run_cli(["train", "--help"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert f"--model gru under {settings.SHORT_RUN_STEPS:,} planned steps" in flat and "adamw" in flat
