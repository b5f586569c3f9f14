"""Directory outputs: a writer's lock file is gone once it ends, and no command writes a model directory named
"-" (``-o -`` is standard output for files, which a directory cannot be)."""

from __future__ import annotations

import os

import pytest

from sampledlm import store
from sampledlm.errors import UserError
from sampledlm.ngram import mapped
from sampledlm.outputs import lock_directory


@pytest.mark.parametrize("lock", [lock_directory, store.lock_directory, mapped.lock_directory])
def test_the_lock_file_is_gone_when_the_writer_ends_and_a_second_writer_stops(tmp_path, lock):
    out = tmp_path / "run"
    with lock(str(out)):
        assert (out / ".lock").exists()
        with pytest.raises(UserError, match="another sampledlm process is writing into this directory"):
            with lock(str(out)):
                pass
        (out / "model.txt").write_text("x")
    assert os.listdir(out) == ["model.txt"]  # every finished run directory kept an empty .lock
    (out / ".lock").write_text("")  # a killed writer's: the next one takes it over
    with lock(str(out)):
        pass
    assert os.listdir(out) == ["model.txt"]


def test_a_directory_is_never_named_dash(tmp_path):
    with pytest.raises(UserError, match="give -o DIR"):
        with lock_directory("-"):
            pass


@pytest.mark.parametrize("args", [["ngram", "build-binary", "kn3.arpa", "-o", "-"],
                                  ["ngram", "prune", "kn3.arpa", "--threshold", "1e-7", "--binary", "-o", "-"],
                                  ["embed", "train", "train.txt", "--epochs", "1", "-o", "-"],
                                  ["train", "--train", "train.txt", "--valid", "valid.txt", "--max-steps", "1",
                                   "-o", "-"]])
def test_commands_that_write_a_directory_refuse_dash(samples_kn3, run_in_process, args):
    """build-binary, prune --binary, embed train and train wrote a model directory named "-" (ngram train --binary
    refused)."""
    r = run_in_process(*args, cwd=samples_kn3)
    assert r.returncode in (1, 2) and "-o" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (samples_kn3 / "-").exists()
