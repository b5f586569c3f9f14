"""sampledlm samples DIR: a corpus, n-best lists (JSONL, SRILM) and SLF lattices that every rescoring example reads,
the same for a seed."""

from __future__ import annotations

import json

from helpers import run_cli

from sampledlm.data.samples import write_samples
from sampledlm.use.slf import read_slf
from sampledlm.use.nbest import read_nbest


def test_the_samples_read_back_and_rescore_with_a_wer(tmp_path, capsys):
    paths = write_samples(str(tmp_path / "a"))
    lists = read_nbest(paths["nbest"])
    assert len(lists) == 20 and all(len(u.hyps) > 1 for u in lists)
    jsonl = [json.loads(line) for line in open(paths["nbest"])]
    assert all(u["ref"] in [h["words"] for h in u["hyps"]] for u in jsonl)  # the reference is among them
    assert len(read_nbest(paths["nbest_srilm"])) == 20
    for name in sorted((tmp_path / "a" / "lattices").iterdir()):
        assert read_slf(str(name)).num_nodes > 3
    write_samples(str(tmp_path / "b"))
    assert open(paths["nbest"]).read() == (tmp_path / "b" / "nbest.jsonl").read_text()  # one seed, one set
    d = tmp_path / "a"
    assert run_cli(["ngram", "train", "--train", str(d / "train.txt"), "--order", "3", "-o", str(d / "kn3.arpa")],
                   capsys)[0] == 0
    code, out, err = run_cli(["rescore", str(d / "kn3.arpa"), str(d / "nbest-srilm"), "--refs", str(d / "refs.txt"),
                              "--lm-weight", "10"], capsys)
    assert code == 0 and "WER: first pass" in err, err
    assert len(out.splitlines()) == 20
    srilm_best = out
    # the same lists in both formats (SRILM's log10, the JSONL's natural logs) give the same one-best at any weights
    code, out, err = run_cli(["rescore", str(d / "kn3.arpa"), str(d / "nbest.jsonl"), "--lm-weight", "10"], capsys)
    assert code == 0 and sorted(out.splitlines()) == sorted(srilm_best.splitlines()), err
    code, out, err = run_cli(["rescore", str(d / "kn3.arpa"), str(d / "lattices"), "--lm-weight", "10"], capsys)
    assert code == 0 and len(out.splitlines()) == 3, err


def test_the_command_writes_into_a_directory_and_refuses_a_file(tmp_path, capsys):
    code, _, err = run_cli(["samples", str(tmp_path / "s")], capsys)
    assert code == 0 and (tmp_path / "s" / "nbest.jsonl").exists(), err
    (tmp_path / "f").write_text("x")
    code, _, err = run_cli(["samples", str(tmp_path / "f")], capsys)
    assert code == 1 and "is a file" in err


def test_a_failed_replacement_leaves_the_sample_files_as_they_were(tmp_path, monkeypatch, capsys):
    """``samples --force`` that fails part-way (a lattices/ folder it may not replace) had replaced the texts and
    lists and left lattices/ empty; now every file is the old one and nothing of the attempt is left."""
    import errno
    import os

    import pytest

    from sampledlm.errors import UserError

    d = tmp_path / "s"
    write_samples(str(d))
    (d / "train.txt").write_text("the user's own edit\n")
    before = {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file()}
    rename = os.rename

    def refuse_lattices(src, dst):
        if os.path.basename(src) == "lattices" and os.path.dirname(src) == str(d):
            raise OSError(errno.EPERM, "Operation not permitted", src)
        rename(src, dst)

    monkeypatch.setattr(os, "rename", refuse_lattices)
    with pytest.raises(UserError, match=f"{d / 'lattices'}: cannot replace it .*as they were"):
        write_samples(str(d), seed=2)
    monkeypatch.undo()
    assert {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".")) == []
    code, _, err = run_cli(["samples", "-"], capsys)
    assert code == 1 and "'-' (standard output) is not one" in err
