"""Regression tests for what an audit of the commands that use models found: the sample SRILM n-best files held
natural logs where the format's are log10; a lattice with two end nodes was cut to one in silence, and a node given
twice replaced the first; generate printed <unk> for the user's own prefix words; options that do nothing with the
other options given were accepted."""

from __future__ import annotations

import pytest

from helpers import run_cli

LATTICE = "VERSION=1.0\nUTTERANCE=u\nbase=10\nN=4 L=3\nI=0 W=!NULL\nI=1 W=the\nI=2 W=cat\nI=3 W=dog\n"


@pytest.fixture
def kn(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("the cat sat\nthe dog ran\na cat ran\n" * 10)
    assert run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "2", "-o",
                    str(tmp_path / "kn.arpa")], capsys)[0] == 0
    return tmp_path / "kn.arpa"


def test_a_lattice_with_two_end_nodes_is_refused_unless_its_header_names_one(kn, tmp_path, capsys):
    lat = tmp_path / "two.slf"
    lat.write_text(LATTICE + "J=0 S=0 E=1 a=-1 l=-1\nJ=1 S=1 E=2 a=-1 l=-1\nJ=2 S=1 E=3 a=-50 l=-50\n")
    code, _, err = run_cli(["rescore", str(kn), str(lat)], capsys)
    assert code == 1 and f"{lat}: lattice 'u': 2 nodes have no link out of them (2, 3)" in err and "end=N" in err
    lat.write_text(LATTICE.replace("base=10\n", "base=10\nend=2\n")
                   + "J=0 S=0 E=1 a=-1 l=-1\nJ=1 S=1 E=2 a=-1 l=-1\nJ=2 S=1 E=3 a=-50 l=-50\n")
    code, out, err = run_cli(["rescore", str(kn), str(lat)], capsys)
    assert code == 0 and out.split() == ["u", "the", "cat"], err


def test_a_node_given_twice_and_an_unreachable_end_name_the_file(kn, tmp_path, capsys):
    lat = tmp_path / "dup.slf"
    lat.write_text("VERSION=1.0\nUTTERANCE=u\nN=3 L=2\nI=0 W=!NULL\nI=1 W=the\nI=1 W=cat\n"
                   "J=0 S=0 E=1\nJ=1 S=1 E=2\n")
    code, _, err = run_cli(["rescore", str(kn), str(lat)], capsys)
    assert code == 1 and f"{lat}:6: node I=1 appears twice (first on line 5)" in err, err
    lat = tmp_path / "cut.slf"
    lat.write_text("VERSION=1.0\nUTTERANCE=u\nN=4 L=2\nJ=0 S=0 E=1 W=the\nJ=1 S=3 E=2 W=cat\nstart=0\nend=2\n")
    code, _, err = run_cli(["rescore", str(kn), str(lat)], capsys)
    assert code == 1 and f"{lat}: lattice 'u': the end node 2 is not reachable from the start node 0" in err, err


def test_generate_prints_the_prefix_as_given_and_says_what_it_read_as_unk(kn, capsys):
    code, out, err = run_cli(["generate", str(kn), "-n", "2", "--prefix", "the zzqq", "--seed", "1"], capsys)
    assert code == 0 and all(line.startswith("the zzqq") for line in out.splitlines()), out
    assert "--prefix: 1 word(s) outside the vocabulary (zzqq), read as <unk>" in err


@pytest.mark.parametrize("command", ["eval", "score"])
def test_interp_valid_beside_given_weights_is_refused(kn, tmp_path, capsys, command):
    (tmp_path / "t.txt").write_text("the cat ran\n")
    text = ["--test", str(tmp_path / "t.txt")] if command == "eval" else [str(tmp_path / "t.txt")]
    code, _, err = run_cli([command, str(kn), *text, "--mix", str(kn), "--weights", "0.5,0.5", "--interp-valid",
                            str(tmp_path / "nowhere.txt")], capsys)
    assert code == 1 and "--interp-valid" in err and "give one of the two" in err, err


def test_stats_checks_every_file_before_it_prints(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("the cat\n")
    code, out, err = run_cli(["stats", str(tmp_path / "a.txt"), str(tmp_path / "missing.txt")], capsys)
    assert code == 1 and out == "" and "missing.txt: no such file" in err, (out, err)


def test_rescore_one_best_into_a_directory_is_named_as_such(kn, tmp_path, capsys):
    (tmp_path / "n.jsonl").write_text('{"id": "u", "hyps": [{"words": "the cat", "am": -1.0, "lm": -1.0}]}\n')
    code, _, err = run_cli(["rescore", str(kn), str(tmp_path / "n.jsonl"), "--one-best", str(tmp_path)], capsys)
    assert code == 1 and "is a directory; --one-best names the file" in err, err


def test_sum_precision_is_refused_for_models_without_a_normaliser(kn, tmp_path, capsys):
    (tmp_path / "t.txt").write_text("the cat ran\n")
    code, _, err = run_cli(["eval", str(kn), "--test", str(tmp_path / "t.txt"), "--sum-precision", "bf16"], capsys)
    assert code == 1 and "--sum-precision bf16 applies to neural models" in err, err
    code, out, err = run_cli(["eval", str(kn), "--test", str(tmp_path / "t.txt")], capsys)
    assert code == 0, err
