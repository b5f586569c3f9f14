"""Regression test for an eval defect found by `sampledlm bench faults`: a test file holding blank lines only
printed "0 predictions, ppl nan" with exit 0 (and NaN, which is not JSON, with --json); it is a one-line error
like ngram eval's."""

from __future__ import annotations

import pytest

from sampledlm.cli import main


def test_nothing_to_score_is_a_one_line_error(tmp_path, capsys, private_cache):
    (tmp_path / "train.txt").write_text("the cat sat\nthe dog ran\n" * 30)
    with pytest.raises(SystemExit) as e:
        main(["train", "--train", str(tmp_path / "train.txt"), "--valid", str(tmp_path / "train.txt"), "-o",
              str(tmp_path / "run"), "-d", "4", "--hidden", "4", "--epochs", "1"])
    assert e.value.code == 0
    capsys.readouterr()
    (tmp_path / "blank.txt").write_text("\n\n  \n")
    with pytest.raises(SystemExit) as e:
        main(["eval", str(tmp_path / "run"), "--test", str(tmp_path / "blank.txt"), "--json"])
    out = capsys.readouterr()
    assert e.value.code == 1 and out.out == ""
    assert out.err.strip().splitlines() == [f"sampledlm: error: {tmp_path / 'blank.txt'}: no sentences to score"]
