"""`demo -o DIR` given an earlier demo's directory replaces what that demo wrote and nothing else (it had emptied
the directory, the user's own files with it)."""

from __future__ import annotations

import pytest

from sampledlm.demo import MARKER, _mark, _remove_earlier_demo, run_demo
from sampledlm.errors import UserError


def test_only_the_files_an_earlier_demo_wrote_are_removed(tmp_path):
    (tmp_path / "my-notes.txt").write_text("mine\n")
    theirs = {"my-notes.txt"}
    (tmp_path / "train.txt").write_text("demo\n")
    (tmp_path / "kn3.bin").mkdir()
    (tmp_path / "kn3.bin" / "x").write_text("demo\n")
    _mark(str(tmp_path), theirs)
    assert (tmp_path / MARKER).read_text().split() == ["kn3.bin", "train.txt"]
    (tmp_path / "added-later.txt").write_text("mine too\n")  # written by the user after the demo ran
    _remove_earlier_demo(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [MARKER, "added-later.txt", "my-notes.txt"]


def test_a_marker_without_its_list_is_refused_rather_than_emptied(tmp_path):
    (tmp_path / MARKER).write_text("")
    (tmp_path / "my-notes.txt").write_text("mine\n")
    with pytest.raises(UserError, match="did not record which files are its own"):
        run_demo(str(tmp_path))
    assert (tmp_path / "my-notes.txt").read_text() == "mine\n"
