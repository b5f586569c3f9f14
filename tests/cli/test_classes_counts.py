"""`classes --vocab`: the file's count column (and the clustering's starting order) are TRAIN's counts; they were the
vocabulary file's (another text's, or 0 for a plain word list)."""

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
