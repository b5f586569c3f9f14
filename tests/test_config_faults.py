"""Regression test for a config.py defect found by `sampledlm bench faults`: a learning rate past the float32
range (``--lr 1e308``) passed the finite-number check and then stopped training with a RuntimeError
traceback ("value cannot be converted to type float without overflow")."""

from __future__ import annotations

import pytest

from sampledlm.config import FLOAT32_MAX, check_value
from sampledlm.errors import UserError


def test_a_float_beyond_float32_is_refused_naming_the_flag():
    meta = {"min": 0.0, "min_open": True}
    with pytest.raises(UserError, match=r"--lr 1e\+308: too large"):
        check_value("lr", 1e308, meta)
    check_value("lr", 1e30, meta)  # large, but a float32: training stops with its divergence message
    check_value("lr", FLOAT32_MAX, meta)


def test_train_refuses_a_huge_learning_rate_at_parse_time(tmp_path, capsys):
    from sampledlm.cli import main

    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 20)
    with pytest.raises(SystemExit) as e:
        main(["train", "--train", str(tmp_path / "t.txt"), "--valid", str(tmp_path / "t.txt"), "-o",
              str(tmp_path / "run"), "--optimizer", "sgd", "--lr", "1e308", "-d", "4", "--hidden", "4"])
    err = capsys.readouterr().err
    assert e.value.code == 1 and "--lr" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "config.json").exists()
