"""Regression tests for what an audit of `sampledlm embed` as a new user found: `--which output` on a word2vec file
gave the input vectors; a NaN similarity score was ranked (rho turned from 0.40 to -0.30); a failed `embed train
--force` left the model it replaced without its config.json, and a failed one into a new folder left megabytes
behind; `embed export -o DIR` was a traceback; other kinds of file were met with unclear messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import assert_one_line_error, run_cli

TRAIN = ["--model", "skipgram", "--dim", "8", "--min-count", "1", "--epochs", "1", "--sample", "0", "--threads", "1"]


@pytest.fixture(scope="module")
def vec(tmp_path_factory):
    from sampledlm.cli import main

    d = tmp_path_factory.mktemp("emb")
    rng = np.random.default_rng(0)
    lines = [" ".join(f"w{j}" for j in rng.integers(0, 30, size=8)) for _ in range(300)]
    (d / "corpus.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as e:
        main(["embed", "train", str(d / "corpus.txt"), "-o", str(d / "vec"), *TRAIN])
    assert e.value.code == 0
    return d


@pytest.mark.parametrize("which", ["output", "sum"])
def test_which_output_on_a_word2vec_file_is_refused(vec, capsys, which):
    code, _, err = run_cli(["embed", "neighbors", str(vec / "vec" / "vectors.bin"), "w1", "--which", which], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and f"--which {which} needs an embedding directory" in err, err


@pytest.mark.parametrize("line, words", [("w1 w2 nan", "not a finite number"), ("w1 w2 inf", "not a finite number"),
                                          ("w1 w2 7 8", "found 4 columns")])
def test_a_similarity_line_that_cannot_be_ranked_is_refused(vec, tmp_path, capsys, line, words):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text(f"w1 w3 5\n{line}\nw4 w5 2\n")
    code, _, err = run_cli(["embed", "eval", str(vec / "vec"), "--similarity", str(pairs)], capsys)
    assert code == 1 and f"{pairs}:2: " in err and words in err, err


def test_a_failed_forced_write_keeps_the_model_it_was_to_replace(vec, tmp_path, capsys, monkeypatch):
    import shutil

    from sampledlm.embed import formats
    from sampledlm.errors import UserError

    target = tmp_path / "v"
    shutil.copytree(vec / "vec", target)
    before = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}

    def full_disk(path, wv):
        raise UserError(f"{path}: cannot write: No space left on device")

    monkeypatch.setattr(formats, "write_binary", full_disk)  # after vectors.safetensors and vocab.txt are staged
    code, _, err = run_cli(["embed", "train", str(vec / "corpus.txt"), "-o", str(target), *TRAIN, "--dim", "6",
                            "--force"], capsys)
    assert code == 1 and "No space left on device" in err, err
    after = {p.name: p.read_bytes() for p in target.iterdir() if p.is_file()}
    assert after == before  # every file of the old model as it was: config.json, card, vectors; nothing staged left
    code, out, err = run_cli(["embed", "neighbors", str(target), "w1"], capsys)
    assert code == 0, err
    new = tmp_path / "new"
    code, _, err = run_cli(["embed", "train", str(vec / "corpus.txt"), "-o", str(new), *TRAIN], capsys)
    assert code == 1 and not new.exists(), err  # a folder this command made: removed, nothing half-written


def test_a_forced_write_replaces_every_file(vec, tmp_path, capsys):
    import shutil

    from sampledlm.embed.formats import load_vectors

    target = tmp_path / "v"
    shutil.copytree(vec / "vec", target)
    code, _, err = run_cli(["embed", "train", str(vec / "corpus.txt"), "-o", str(target), *TRAIN, "--dim", "6",
                            "--force"], capsys)
    assert code == 0, err
    assert {p.name for p in target.iterdir()} >= {"config.json", "vectors.bin", "vectors.txt", "vocab.txt"}
    assert not [p for p in target.iterdir() if p.name.startswith(".staged.")]
    assert all(load_vectors(str(p)).dim == 6 for p in (target, target / "vectors.bin", target / "vectors.txt"))
    prov = json.loads((target / "provenance.json").read_text())
    assert prov["family"] == "embeddings" and "x 6 dimensions" in prov["model"]


def test_export_and_plot_into_a_directory_are_one_line(vec, tmp_path, capsys):
    (tmp_path / "d").mkdir()
    code, _, err = run_cli(["embed", "plot", str(vec / "vec"), "-w", "w1,w2", "-o", str(tmp_path / "d")], capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 1 and len(lines) == 1 and "is a directory" in err and "Traceback" not in err, err


def test_other_kinds_of_file_are_named(vec, tmp_path, capsys, monkeypatch):
    arpa = tmp_path / "kn.arpa"
    arpa.write_text("\n\\data\\\nngram 1=2\n\n\\1-grams:\n-1 </s>\n-1 <s> 0\n\n\\end\\\n")
    code, _, err = run_cli(["embed", "eval", str(arpa), "--similarity", str(arpa)], capsys)
    assert code == 1 and "an ARPA n-gram model, not word vectors" in err, err
    code, _, err = run_cli(["embed", "eval", str(vec / "vec" / "vectors.safetensors"), "--similarity", str(arpa)],
                           capsys)
    assert code == 1 and "a safetensors file" in err and "\\x" not in err, err
    (tmp_path / "t.txt").write_text("w1 w2\n")
    code, _, err = run_cli(["eval", str(vec / "vec"), "--test", str(tmp_path / "t.txt")], capsys)
    assert code == 1 and "word embeddings, not a language model" in err, err
    monkeypatch.setenv("SAMPLEDLM_EVAL", str(tmp_path / "nowhere"))
    code, _, err = run_cli(["embed", "eval", str(vec / "vec")], capsys)
    assert code == 1 and f"$SAMPLEDLM_EVAL ({tmp_path / 'nowhere'}: no such directory)" in err, err
    assert_one_line_error(code, err, "no evaluation data", tmp_path / "never-written")


def test_maxent_texts_given_both_ways_name_what_was_given(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("a b\n")
    code, _, err = run_cli(["maxent", "train", str(tmp_path / "t.txt"), "--valid", str(tmp_path / "t.txt"),
                            "-o", str(tmp_path / "m")], capsys)
    assert_one_line_error(code, err, f"(got --valid {tmp_path / 't.txt'} and '{tmp_path / 't.txt'}')", tmp_path / "m")
