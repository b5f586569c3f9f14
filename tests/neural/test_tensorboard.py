"""train --tensorboard DIR: the epoch scalars are the run's metrics; without the package, a one-line error."""

from __future__ import annotations

import json
import sys

import pytest
from helpers import run_cli


def test_tensorboard_scalars_are_the_runs_metrics(tiny_corpus, tmp_path, capsys):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "--model", "gru", "-d", "8", "--hidden", "16", "--epochs", "2", "--batch-size", "4", "--bptt", "5",
                            "--tensorboard", str(tmp_path / "tb"), "-o", str(tmp_path / "run")], capsys)
    assert code == 0, err
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    valid = [(e.step, e.value) for e in events.Scalars("epoch/valid_ppl")]
    assert valid == [(m["step"], pytest.approx(m["valid_ppl"], rel=1e-6)) for m in metrics]
    assert [e.value for e in events.Scalars("epoch/lr")] == pytest.approx([m["lr"] for m in metrics])
    assert len(events.Scalars("train/loss")) == metrics[-1]["step"] // 50 > 0


def test_without_the_package_it_is_a_one_line_error(tiny_corpus, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as when it is not installed
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "--epochs", "1", "--tensorboard", str(tmp_path / "tb"), "-o", str(tmp_path / "run")],
                           capsys)
    assert code == 1 and "pip install 'sampledlm[tensorboard]'" in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()
