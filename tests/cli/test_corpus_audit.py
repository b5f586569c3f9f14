"""What an audit of the corpus and export commands found: `classes --vocab` wrote the vocabulary file's counts (another
text's, or 0 for a plain word list) where TRAIN's belong; `stats` of an empty file gave coverage figures of no token;
a folder that is not a run was answered "config.json: no such file"."""

from __future__ import annotations


def test_classes_counts_come_from_train_with_a_given_vocabulary(tmp_path, run_in_process):
    (tmp_path / "tiny.txt").write_text("a b a\nc a\n\nb\n")
    (tmp_path / "words.txt").write_text("a\nb\nq\n")  # a plain word list: no counts
    r = run_in_process("classes", "tiny.txt", "--vocab", "words.txt", "--classes", "2", "-o", "cls.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    counts = {line.split("\t")[1]: int(line.split("\t")[2]) for line in (tmp_path / "cls.txt").read_text().splitlines()}
    assert counts == {"a": 3, "b": 2, "q": 0, "<unk>": 1, "</s>": 3}  # c is <unk>; three sentences
    r = run_in_process("classes", "tiny.txt", "--classes", "2", "-o", "own.txt", cwd=tmp_path)
    own = {line.split("\t")[1]: int(line.split("\t")[2]) for line in (tmp_path / "own.txt").read_text().splitlines()}
    assert all(own[w] == counts[w] for w in ("a", "b", "</s>"))  # the same counting as without --vocab


def test_stats_of_an_empty_text_has_no_coverage_figures(tmp_path, run_in_process):
    import json

    (tmp_path / "empty.txt").write_text("")
    r = run_in_process("stats", "empty.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0 and set(json.loads(r.stdout)["coverage"].values()) == {None}
    r = run_in_process("stats", "empty.txt", cwd=tmp_path)
    assert "n/a (no tokens)" in r.stdout and "0.00%" not in r.stdout


def test_a_folder_that_is_not_a_run_is_named_as_such(tmp_path, run_in_process):
    (tmp_path / "notes").mkdir()
    (tmp_path / "t.txt").write_text("a b\n")
    for args in (("export", "notes", "-o", "m.onnx"), ("calibrate", "notes", "--text", "t.txt")):
        r = run_in_process(*args, cwd=tmp_path)
        assert r.returncode == 1 and "notes: a directory, but no model in it (no config.json)" in r.stderr, r.stderr


def test_stats_prints_nothing_when_a_later_file_is_bad(tmp_path, run_in_process):
    (tmp_path / "ok.txt").write_text("a b\n")
    (tmp_path / "bad.txt").write_bytes(b"a\xff\n")
    r = run_in_process("stats", "ok.txt", "bad.txt", "--json", cwd=tmp_path)
    assert r.returncode == 1 and "bad.txt:1: invalid UTF-8" in r.stderr and r.stdout == ""


def test_export_refuses_a_compressed_name(tmp_path, run_in_process):
    r = run_in_process("export", "run", "-o", "m.onnx.gz", cwd=tmp_path)
    assert r.returncode == 1 and "does not read" in r.stderr and not (tmp_path / "m.onnx.gz").exists()
