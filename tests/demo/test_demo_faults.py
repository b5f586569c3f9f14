"""Regression test for a demo defect found by `sampledlm bench faults`: ``sampledlm demo -o FILE`` where FILE is
an existing file was a FileExistsError traceback; it is a one-line error and the file is left as it was."""

from __future__ import annotations

import pytest

from sampledlm.demo import run_demo
from sampledlm.errors import UserError


def test_demo_output_that_is_a_file_is_refused(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("keep\n")
    with pytest.raises(UserError, match="notes.txt: exists and is not a directory"):
        run_demo(str(notes))
    assert notes.read_text() == "keep\n"


def test_demo_output_below_a_file_is_a_user_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="cannot write the demo there"):
        run_demo(str(tmp_path / "f" / "demo"))
