"""Property-based tests of the model-file readers: a neural run or a maxent model whose config.json has a field
replaced by any JSON value, removed or added, or whose safetensors file has damaged header bytes, either loads
as a model that scores with finite log-probabilities or stops with a UserError naming a file of the model;
never another exception (and never a crash in a numba kernel: maxent index tensors are checked on load)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="property-based tests need hypothesis (the test extra)")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from helpers import write_word_corpus  # noqa: E402

from sampledlm.data.vocab import EOS_ID  # noqa: E402
from sampledlm.errors import UserError  # noqa: E402
from sampledlm.loader import load_model  # noqa: E402

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6)


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    import os

    from sampledlm.cli import main

    d = tmp_path_factory.mktemp("store")
    for name, n, seed in (("train", 50, 1), ("valid", 10, 2)):
        write_word_corpus(d / f"{name}.txt", n, seed)
    old = os.getcwd()
    os.chdir(d)
    try:
        for args in (["train", "--train", "train.txt", "--valid", "valid.txt", "--order", "3", "-d", "4", "--hidden",
                      "5", "--epochs", "1", "--threads", "1", "-o", "ffnn"],
                     ["train", "--train", "train.txt", "--valid", "valid.txt", "--model", "gru", "-d", "4", "--hidden",
                      "4", "--epochs", "1", "--threads", "1", "-o", "gru"],
                     ["maxent", "train", "--train", "train.txt", "--valid", "valid.txt", "--epochs", "1", "-o",
                      "melm"]):
            try:
                main(args)
            except SystemExit as e:
                assert e.code == 0, args
    finally:
        os.chdir(old)
    return {name: d / name for name in ("ffnn", "gru", "melm")}


def leaves(obj, path=()):
    """Every (path, value) of a JSON document, inner nodes included."""
    yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, path + (i,))


def set_at(doc, path, value):
    if not path:
        return value
    node = doc
    for k in path[:-1]:
        node = node[k]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


_DELETE = object()


def load_or_error(model_dir):
    try:
        lm = load_model(str(model_dir))
    except UserError as e:
        assert str(e).startswith(str(model_dir)), e
        return
    V = len(lm.vocab)
    ids = np.array([w % V for w in range(2, 2 + min(V, 9))] + [EOS_ID], dtype=np.int32)
    ids[ids == lm.vocab.bos_id] = EOS_ID
    lp = lm.logprobs(ids, independent=True)
    assert np.isfinite(lp).all() and (lp <= 1e-6).all()


@pytest.mark.parametrize("name", ["ffnn", "gru", "melm"])
@given(data=st.data())
def test_config_json_with_any_field_changed(saved_models, tmp_path_factory, name, data):
    src = saved_models[name]
    doc = json.loads((src / "config.json").read_text())
    paths = [p for p, _ in leaves(doc)]
    path = paths[data.draw(st.integers(0, len(paths) - 1))]
    action = data.draw(st.sampled_from(["replace", "delete", "add"]))
    if action == "replace":
        doc = set_at(doc, path, data.draw(JSON_VALUES))
    elif action == "delete" and path and not isinstance(path[-1], int):
        doc = set_at(doc, path, _DELETE)
    elif action == "add":
        target = dict(leaves(doc))[path]
        if isinstance(target, dict):
            target[data.draw(st.text(max_size=8))] = data.draw(JSON_VALUES)
    d = tmp_path_factory.mktemp("c") / name
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("checkpoints"))
    (d / "config.json").write_text(json.dumps(doc))
    load_or_error(d)


def weights_file(model_dir):
    return sorted(p for p in model_dir.iterdir() if p.suffix == ".safetensors")[0]


@pytest.mark.parametrize("name", ["ffnn", "melm"])
@given(offset=st.integers(0, 300), raw=st.binary(min_size=1, max_size=8), truncate=st.booleans())
def test_safetensors_with_damaged_header_bytes(saved_models, tmp_path_factory, name, offset, raw, truncate):
    d = tmp_path_factory.mktemp("s") / name
    shutil.copytree(saved_models[name], d, ignore=shutil.ignore_patterns("checkpoints"))
    f = weights_file(d)
    data = bytearray(f.read_bytes())
    k = offset % len(data)
    if truncate:
        data = data[:k]
    else:
        data[k:k + len(raw)] = raw
    f.write_bytes(bytes(data))
    load_or_error(d)


@pytest.mark.parametrize("value", [2**63, 192153584101141163, 10**12])
def test_absurd_sizes_in_config_json_are_one_line_errors(saved_models, tmp_path, value):
    """Found by the nightly profile: sizes past int64 or past any memory were an overflow TypeError/RuntimeError."""
    d = tmp_path / "gru"
    shutil.copytree(saved_models["gru"], d, ignore=shutil.ignore_patterns("checkpoints"))
    doc = json.loads((d / "config.json").read_text())
    doc["model"]["hidden"] = value
    (d / "config.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match=r"config\.json: .*(memory|hidden)"):
        load_model(str(d))
