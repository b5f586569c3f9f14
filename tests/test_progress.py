"""progress.py: a tqdm bar on a terminal; off one, a plain line (what, done/total, rate, ETA) at most every interval,
none for work that ends within it; SAMPLEDLM_NO_PROGRESS turns both off. A fake clock, no sleeps."""

from __future__ import annotations

import sys

import pytest
from helpers import run_cli, synthetic_sentences, write_corpus

from sampledlm import progress


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def off_terminal(monkeypatch):
    monkeypatch.delenv("SAMPLEDLM_NO_PROGRESS", raising=False)
    monkeypatch.delenv(progress.INTERVAL_ENV, raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)


def test_work_within_the_interval_prints_nothing(off_terminal, capsys):
    clock = Clock()
    with progress.bar(total=100, desc="count 2-grams", unit="pos", clock=clock) as b:
        for _ in range(10):
            clock.t += 2.9
            b.update(10)
    assert isinstance(b, progress.LineBar) and b.n == 100 and b.lines == 0
    assert capsys.readouterr().err == ""


def test_a_line_at_most_every_interval_with_rate_and_eta(off_terminal, capsys):
    clock = Clock()
    with progress.bar(total=4_000_000, desc="count 3-grams", unit="pos", clock=clock) as b:
        for _ in range(8):
            clock.t += 10
            b.update(250_000)  # 25k pos/s
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["count 3-grams: 750k/4.00M pos (19%), 25.0k pos/s, 00:30 elapsed, ETA 02:10",
                     "count 3-grams: 1.50M/4.00M pos (38%), 25.0k pos/s, 01:00 elapsed, ETA 01:40"]


def test_without_a_total_and_without_unit_scale(off_terminal, capsys):
    clock = Clock()
    b = progress.bar(desc="pad", unit="tok", unit_scale=False, every=5, clock=clock)
    clock.t += 5
    b.update(12345)
    b.set_postfix_str("epoch 1/2", refresh=False)
    clock.t += 5
    b.update(5)
    b.close()
    assert capsys.readouterr().err.splitlines() == ["pad: 12,345 tok, 2,469 tok/s, 00:05 elapsed",
                                                    "pad: 12,350 tok, 1,235 tok/s, 00:10 elapsed, epoch 1/2"]


def test_the_interval_from_the_environment(off_terminal, monkeypatch, capsys):
    assert progress.interval() == progress.DEFAULT_INTERVAL == 30
    for value, expected in (("2.5", 2.5), ("0", 30), ("-1", 30), ("soon", 30), ("inf", 30), ("", 30)):
        monkeypatch.setenv(progress.INTERVAL_ENV, value)
        assert progress.interval() == expected
    monkeypatch.setenv(progress.INTERVAL_ENV, "2.5")
    clock = Clock()
    with progress.bar(total=10, desc="x", clock=clock) as b:
        clock.t += 2.5
        b.update(1)
    assert capsys.readouterr().err.startswith("x: 1/10 it (10%), 0.40 it/s")


def test_no_progress_silences_the_lines_too(off_terminal, monkeypatch, capsys):
    monkeypatch.setenv("SAMPLEDLM_NO_PROGRESS", "1")
    clock = Clock()
    with progress.bar(total=10, desc="x", clock=clock) as b:
        for _ in range(10):
            clock.t += 100
            b.update(1)
    assert not isinstance(b, progress.LineBar) and capsys.readouterr().err == ""


def test_an_explicit_disable_is_a_plain_tqdm_bar_and_prints_nothing(off_terminal, capsys):
    """The neural training loop passes ``disable`` and logs off a terminal itself: no second stream of lines."""
    b = progress.bar(total=10, desc="epoch 1", disable=True)
    assert not isinstance(b, progress.LineBar) and b.disable
    b.update(5)
    b.close()
    assert capsys.readouterr().err == ""


def test_on_a_terminal_a_tqdm_bar_as_before(monkeypatch):
    monkeypatch.delenv("SAMPLEDLM_NO_PROGRESS", raising=False)
    monkeypatch.setattr(progress.sys.stderr, "isatty", lambda: True, raising=False)
    b = progress.bar(total=10, desc="reading")
    try:
        assert not isinstance(b, progress.LineBar) and not b.disable and b.leave is False
    finally:
        b.close()
    monkeypatch.setenv("SAMPLEDLM_NO_PROGRESS", "1")
    b = progress.bar(total=10, desc="reading")
    assert not isinstance(b, progress.LineBar) and b.disable


def test_iterating_a_line_bar_counts_the_items(off_terminal, capsys):
    clock = Clock()
    seen = []
    for x in progress.LineBar(iterable=range(3), desc="it", every=1, clock=clock):
        clock.t += 1
        seen.append(x)
    assert seen == [0, 1, 2] and len(capsys.readouterr().err.splitlines()) == 3


def test_a_long_ngram_train_shows_its_stages_in_a_log(off_terminal, tmp_path, capsys, monkeypatch, small_ngram_window):
    """``ngram train`` off a terminal with a tiny interval: a line for each stage that updates its bar; with the
    default interval (a short run) none at all."""
    train = write_corpus(tmp_path / "train.txt", synthetic_sentences(500, 60, seed=3))
    args = ["ngram", "train", "--train", str(train), "--order", "3", "--memory", "2K", "--temp-dir", str(tmp_path)]
    code, _, quiet = run_cli(args + ["-o", str(tmp_path / "a.arpa")], capsys)
    assert code == 0 and "ETA" not in quiet and "elapsed" not in quiet
    monkeypatch.setenv(progress.INTERVAL_ENV, "1e-9")
    code, _, err = run_cli(args + ["-o", str(tmp_path / "b.arpa")], capsys)
    assert code == 0
    for stage in ("reading train.txt: ", "pad: ", "count 2-grams: ", "count 3-grams: ", "adjust: ", "interpolate: "):
        assert any(line.startswith(stage) and "elapsed" in line for line in err.splitlines()), (stage, err)
    assert (tmp_path / "a.arpa").read_bytes() == (tmp_path / "b.arpa").read_bytes()
    assert err.replace("\n", "").count("ETA") >= 4


def test_eval_of_a_neural_model_shows_its_scoring_and_a_library_call_does_not(off_terminal, tmp_path, capsys,
                                                                              monkeypatch):
    """``eval`` off a terminal with a tiny interval: lines ``scoring test.txt: done/total tok`` while a neural
    model scores the text; the same model's ``logprobs`` called as a library prints nothing."""
    import numpy as np

    from sampledlm.loader import load_model

    for split, n, seed in (("train", 120, 1), ("valid", 20, 2), ("test", 40, 3)):
        write_corpus(tmp_path / f"{split}.txt", synthetic_sentences(n, 30, seed=seed))
    code, _, _ = run_cli(["train", "--train", str(tmp_path / "train.txt"), "--valid", str(tmp_path / "valid.txt"),
                          "-o", str(tmp_path / "run"), "--model", "gru", "--hidden", "8", "-d", "8", "--epochs", "1",
                          "--threads", "1"], capsys)
    assert code == 0
    monkeypatch.setenv(progress.INTERVAL_ENV, "1e-9")
    code, out, err = run_cli(["eval", str(tmp_path / "run"), "--test", str(tmp_path / "test.txt")], capsys)
    assert code == 0
    lines = [x for x in err.splitlines() if x.startswith("scoring test.txt: ")]
    assert lines and " tok " in lines[-1] and "100%" in lines[-1], err
    lm = load_model(str(tmp_path / "run"))
    lp = lm.logprobs(np.array([1, 2, 0, 3, 0]))
    assert np.isfinite(lp).all() and capsys.readouterr().err == ""
