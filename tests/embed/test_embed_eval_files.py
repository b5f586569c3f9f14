"""``embed eval``: its evaluation files are read as every other text (one-line errors naming file and line), and a
score with nothing to score is null in JSON and n/a in text, never NaN."""

from __future__ import annotations

import json

import pytest

from helpers import run_cli

from sampledlm.embed.formats import load_vectors


@pytest.fixture
def vectors(tmp_path):
    path = tmp_path / "vec.txt"
    path.write_text("4 2\nking 1 0\nqueen 0.9 0.1\nman 0.1 0.9\nwoman 0 1\n")
    return path


@pytest.mark.parametrize("flag", ["--similarity", "--analogy"])
def test_an_evaluation_file_that_is_not_utf8_is_a_one_line_error_naming_its_line(vectors, tmp_path, capsys, flag):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b": family\nking queen man woman\n\xff\xfe a b\n" if flag == "--analogy" else
                    b"king queen 5\nman \xff 3\n")
    code, _, err = run_cli(["embed", "eval", str(vectors), flag, str(bad)], capsys)
    line = 3 if flag == "--analogy" else 2
    assert code == 1 and err.strip().splitlines() == [f"sampledlm: error: {bad}:{line}: invalid UTF-8 (byte 0xff); "
                                                      "fix the file (UTF-8 text expected)"]


@pytest.mark.parametrize("flag", ["--similarity", "--analogy"])
def test_a_directory_given_as_evaluation_file_is_called_a_directory(vectors, tmp_path, capsys, flag):
    code, _, err = run_cli(["embed", "eval", str(vectors), flag, str(tmp_path)], capsys)
    assert code == 1 and err.strip() == f"sampledlm: error: {tmp_path}: is a directory, expected a text file"


def test_scores_with_nothing_to_score_are_null_in_json_and_na_in_text(vectors, tmp_path, capsys):
    (tmp_path / "q.txt").write_text(": family\nking queen man woman\n")  # semantic questions only
    (tmp_path / "pairs.tsv").write_text("king zzz 5\n")  # no pair known
    args = ["embed", "eval", str(vectors), "--similarity", str(tmp_path / "pairs.tsv"), "--analogy",
            str(tmp_path / "q.txt"), "--sections"]
    code, out, _ = run_cli(args + ["--json"], capsys)
    assert code == 0
    res = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the JSON output"))
    assert res["similarity"][0]["spearman"] is None
    assert res["analogy"]["syntactic"] == {"questions": 0, "answered": 0, "coverage": None, "add": None, "mul": None}
    assert res["analogy"]["semantic"]["answered"] == 1
    code, out, _ = run_cli(args, capsys)
    assert code == 0 and "nan" not in out.lower()
    assert "Spearman rho n/a (fewer than 2 pairs known)" in out
    top = f"top {min(30_000, len(load_vectors(str(vectors)))):,} words"  # never more than the vocabulary holds
    assert f"analogy syntactic  n/a (no question covered)  (0/0 questions, {top})" in out
