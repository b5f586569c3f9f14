"""Regression tests for store.py defects found by `sampledlm bench faults`: weights holding NaN or inf
printed 'ppl nan' with exit 0 (and NaN in --json, which is not JSON); a directory that cannot be created or
locked was a Python traceback."""

from __future__ import annotations

import pytest
import torch

from sampledlm import store
from sampledlm.errors import UserError


def test_non_finite_weights_are_refused_naming_the_tensor():
    layer = torch.nn.Linear(3, 2)
    tensors = {k: v.clone() for k, v in layer.state_dict().items()}
    tensors["bias"][1] = float("nan")
    with pytest.raises(UserError, match=r"m\.safetensors: tensor 'bias' holds non-finite values"):
        store.load_state_into(layer, tensors, "m.safetensors")
    tensors["bias"][1] = float("inf")
    with pytest.raises(UserError, match="non-finite"):
        store.load_state_into(layer, tensors, "m.safetensors")


def test_finite_and_integer_tensors_still_load():
    module = torch.nn.Module()
    module.register_buffer("count", torch.tensor(3))
    module.register_buffer("flags", torch.zeros(2, dtype=torch.bool))
    module.lin = torch.nn.Linear(2, 2)
    state = {k: v.clone() for k, v in module.state_dict().items()}
    state["lin.weight"].fill_(0.5)
    store.load_state_into(module, state, "m.safetensors")
    assert float(module.lin.weight.detach()[0, 0]) == 0.5


def test_a_directory_that_cannot_be_created_is_a_one_line_error(tmp_path):
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UserError, match="a-file/out: cannot create or lock this directory"):
        with store.lock_directory(str(tmp_path / "a-file" / "out")):
            pass


def test_a_path_without_a_model_says_what_it_is(tmp_path):
    """A model file given where a directory is read, and a directory a killed command left (only its .lock): the
    message said "no such model directory" for an existing file and "config.json: no such file" for the rest."""
    (tmp_path / "kn3.arpa").write_text("\\data\\\n")
    with pytest.raises(UserError, match="kn3.arpa: a file, not a model directory"):
        store.read_config(str(tmp_path / "kn3.arpa"))
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / ".lock").write_text("")
    with pytest.raises(UserError, match="holds no model, only what an interrupted command left"):
        store.read_config(str(tmp_path / "killed"))
    with pytest.raises(UserError, match="no such model directory"):
        store.read_config(str(tmp_path / "nope"))
