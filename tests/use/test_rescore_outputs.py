"""``sampledlm rescore -o``: a directory output replaces the old one whole (an earlier run's lists stayed beside the
new ones), a file or a directory in the way is said in one line (tracebacks before), and the inputs that made the
1-best or the WER ambiguous are refused: an utterance id holding white space, a reference given twice; a JSONL
line's error names the field."""

from __future__ import annotations

import json

import pytest

from sampledlm.errors import UserError
from sampledlm.use.nbest import read_jsonl


@pytest.fixture(scope="module")
def samples(samples_kn3):
    return samples_kn3


def test_force_replaces_a_directory_output_whole(samples, run_in_process, tmp_path):
    lines = (samples / "nbest.jsonl").read_text().splitlines()
    (tmp_path / "two.jsonl").write_text("\n".join(lines[:2]) + "\n")
    model = str(samples / "kn3.arpa")
    for inputs, fmt in ((str(samples / "nbest.jsonl"), ["--output-format", "srilm"]), (str(samples / "lattices"), [])):
        out = tmp_path / "out"
        r = run_in_process("rescore", model, inputs, *fmt, "-o", "out", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert len(list(out.iterdir())) > 2
        small = str(tmp_path / "two.jsonl") if fmt else str(samples / "lattices" / sorted(
            p.name for p in (samples / "lattices").iterdir())[0])
        r = run_in_process("rescore", model, small, *fmt, "-o", "out", "--force", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert len(list(out.iterdir())) == (2 if fmt else 1)  # nothing of the first run stays
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        (tmp_path / "afile").write_text("in the way\n")
        r = run_in_process("rescore", model, small, *fmt, "-o", "afile", "--force", cwd=tmp_path)
        assert r.returncode == 0 and (tmp_path / "afile").is_dir(), r.stderr  # FileExistsError before
        for p in (tmp_path / "afile").iterdir():
            p.unlink()
        (tmp_path / "afile").rmdir()
        import shutil

        shutil.rmtree(out)


def test_jsonl_output_to_a_directory_is_refused_in_one_line(samples, run_in_process, tmp_path):
    (tmp_path / "outdir").mkdir()
    r = run_in_process("rescore", "kn3.arpa", "nbest.jsonl", "--output-format", "jsonl", "-o", str(tmp_path / "outdir"),
                       cwd=samples)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "is a directory" in r.stderr, r.stderr


def test_a_reference_given_twice_is_refused_naming_both_lines(samples, run_in_process, tmp_path):
    refs = (samples / "refs.txt").read_text()
    first = refs.splitlines()[0].split()[0]
    (tmp_path / "refs.txt").write_text(refs + f"{first} something else\n")
    r = run_in_process("rescore", "kn3.arpa", "nbest-srilm", "--refs", str(tmp_path / "refs.txt"), cwd=samples)
    n = len(refs.splitlines()) + 1
    assert r.returncode == 1 and f"refs.txt:{n}: utterance {first!r} appears twice (first on line 1)" in r.stderr


@pytest.mark.parametrize("line, message", [
    ({"id": "u 1", "hyps": [{"words": "a", "am": -1, "lm": -2}]}, "id: 'u 1' is not one token"),
    ({"id": "u1", "hyps": [{"words": "a", "am": -1}]}, 'hyps[0]: missing "lm"'),
    ({"id": "u1", "hyps": [{"words": "a", "am": "x", "lm": -2}]}, 'hyps[0].am: "x" is not a number'),
    ({"id": "u1", "hyps": [{"words": "a", "am": -1, "lm": -2}, {"words": "b", "am": -1, "lm": "Infinity"}]},
     'hyps[1].lm: "Infinity" is not a finite number'),
    ({"id": "u1", "hyps": {"words": "a"}}, "hyps: a list of hypotheses"),
    (["u1"], "expected an object"),
])
def test_a_jsonl_line_that_is_wrong_names_its_field(tmp_path, line, message):
    (tmp_path / "n.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(UserError) as e:
        read_jsonl(str(tmp_path / "n.jsonl"))
    assert str(e.value).startswith(f"{tmp_path / 'n.jsonl'}:1: {message}")
