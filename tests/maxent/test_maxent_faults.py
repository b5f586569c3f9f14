"""Regression test for a maxent defect found by `sampledlm bench faults` (kill point maxent-save): `maxent train`
killed while saving leaves its weights file but no config.json; the same command, and --force, were then both
refused ("is not empty"), a dead end. That directory holds no model, so the same command now starts it again."""

from __future__ import annotations

import os

import pytest

from helpers import synthetic_sentences, write_corpus
from sampledlm.cli import main


@pytest.fixture
def corpus(tmp_path, private_cache):
    sents = synthetic_sentences(200, seed=0)
    return write_corpus(tmp_path / "train.txt", sents[:160]), write_corpus(tmp_path / "valid.txt", sents[160:])


def train(corpus, out, capsys):
    with pytest.raises(SystemExit) as e:
        main(["maxent", "train", "--train", str(corpus[0]), "--valid", str(corpus[1]), "-o", str(out), "--epochs", "1"])
    return e.value.code, capsys.readouterr().err


def test_a_save_killed_before_config_json_is_started_again(tmp_path, corpus, capsys):
    out = tmp_path / "m"
    out.mkdir()
    (out / "model-0123456789ab.safetensors").write_bytes(b"half a file")
    (out / ".vocab.txt.k2j3h4.tmp").write_text("</s>\t1\n")
    (out / ".lock").write_text("")
    code, err = train(corpus, out, capsys)
    assert code == 0, err
    left = sorted(os.listdir(out))
    assert "config.json" in left and "vocab.txt" in left and "model-0123456789ab.safetensors" not in left
    assert [n for n in left if n.endswith(".safetensors")] and not [n for n in left if n.endswith(".tmp")]


@pytest.mark.parametrize("files", [["vocab.txt"], ["vocab.txt", "notes.txt"], ["model-0123456789ab.safetensors", "x"]])
def test_a_directory_of_other_files_is_still_refused(tmp_path, corpus, capsys, files):
    out = tmp_path / "m"
    out.mkdir()
    for f in files:
        (out / f).write_text("mine\n")
    code, err = train(corpus, out, capsys)
    assert code == 1 and "not empty" in err
    assert sorted(os.listdir(out)) == sorted(files) and all((out / f).read_text() == "mine\n" for f in files)
