"""Every writer refuses to replace a user's file without --force (issue 21, item 11); --k is range-checked (item 9)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("args", [("ngram", "train", "--train", "train.txt", "--order", "2", "-o", "out.txt"),
                                  ("vocab", "train.txt", "-o", "out.txt")])
def test_an_existing_output_needs_force(args, tiny_corpus, run_in_process):
    d = tiny_corpus["train"].parent
    (d / "out.txt").write_text("my own file\n")
    r = run_in_process(*args, cwd=d)
    assert r.returncode == 1 and "already exists; give --force" in r.stderr and "Traceback" not in r.stderr
    assert (d / "out.txt").read_text() == "my own file\n"
    r = run_in_process(*args, "--force", cwd=d)
    assert r.returncode == 0, r.stderr
    assert (d / "out.txt").read_text() != "my own file\n"


@pytest.mark.parametrize("k", ["nan", "inf", "-1", "0"])
def test_add_k_must_be_finite_and_positive(k, tiny_corpus, run_in_process):
    d = tiny_corpus["train"].parent
    r = run_in_process("ngram", "train", "--train", "train.txt", "--smoothing", "addk", "--k", k, "-o", "k.arpa", cwd=d)
    if k in ("nan", "inf"):  # refused by the flag's type (FiniteFloat): click's usage error, before anything is read
        assert r.returncode == 2 and "Invalid value for '--k'" in r.stderr and "Traceback" not in r.stderr
    else:
        assert r.returncode == 1 and r.stderr.strip().startswith("sampledlm: error: --k") and "\n" not in r.stderr.strip()
    assert not (d / "k.arpa").exists()


def test_no_writer_writes_over_its_own_input(tmp_path, run_in_process):
    """One check for every writer: an output that is an input, or inside an input directory, is refused even with
    --force (embed export RUN -o RUN/model.safetensors --force had destroyed the run it read)."""
    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 20)
    before = (tmp_path / "t.txt").read_bytes()
    assert run_in_process("ngram", "train", "--train", "t.txt", "--order", "2", "-o", "k.arpa",
                          cwd=tmp_path).returncode == 0
    r = run_in_process("train", "--train", "t.txt", "--valid", "t.txt", "--epochs", "1", "-d", "4", "--hidden", "4",
                       "--threads", "1", "-o", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    run_files = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    cases = [["vocab", "t.txt", "-o", "t.txt", "--force"],
             ["ngram", "train", "--train", "t.txt", "--order", "2", "-o", "t.txt", "--force"],
             ["ngram", "prune", "k.arpa", "--keep", "0.5", "-o", "k.arpa", "--force"],
             ["embed", "export", "run", "-o", "run/model.safetensors", "--force"]]
    for args in cases:
        r = run_in_process(*args, cwd=tmp_path)
        assert r.returncode == 1 and "the input" in r.stderr, (args, r.stderr)
    assert (tmp_path / "t.txt").read_bytes() == before
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == run_files


def test_train_never_takes_another_familys_model_directory_for_a_stopped_run(tmp_path, run_in_process):
    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 20)
    r = run_in_process("maxent", "train", "--train", "t.txt", "--valid", "t.txt", "--epochs", "1", "-o", "m",
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    kept = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    r = run_in_process("train", "--train", "t.txt", "--valid", "t.txt", "--epochs", "1", "-o", "m", cwd=tmp_path)
    assert r.returncode == 1 and "holds a maxent model" in r.stderr
    assert {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()} == kept


@pytest.mark.parametrize("args", [["ngram", "train", "--train", "t.txt", "-o", ""], ["vocab", "t.txt", "-o", ""],
                                  ["classes", "t.txt", "-o", ""]])
def test_an_empty_output_path_is_a_one_line_error(tmp_path, run_in_process, args):
    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 20)
    r = run_in_process(*args, cwd=tmp_path)
    assert r.returncode == 1 and "the output path is empty" in r.stderr and "Traceback" not in r.stderr


def test_train_refuses_a_directory_that_holds_other_files_or_a_finished_model(tmp_path, run_in_process):
    """A new run's files would replace what a directory holds: only a new or empty directory, or a run of ours
    that stopped before its first checkpoint, is taken."""
    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 20)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "vocab.txt").write_text("the\t5\n")
    (mine / "notes.txt").write_text("# my notes\n")
    small = ["--epochs", "1", "-d", "4", "--hidden", "4", "--threads", "1"]
    r = run_in_process("train", "--train", "t.txt", "--valid", "t.txt", *small, "-o", "mine", cwd=tmp_path)
    assert r.returncode == 1 and "choose another -o" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "vocab.txt"]
    assert (mine / "vocab.txt").read_text() == "the\t5\n"

    assert run_in_process("train", "--train", "t.txt", "--valid", "t.txt", *small, "-o", "run",
                          cwd=tmp_path).returncode == 0
    import shutil

    shutil.rmtree(tmp_path / "run" / "checkpoints")
    (tmp_path / "run" / "checkpoint.json").unlink()
    model = (tmp_path / "run" / "model.safetensors").read_bytes()
    r = run_in_process("train", "--train", "t.txt", "--valid", "t.txt", *small, "--lr", "0.01", "-o", "run",
                       cwd=tmp_path)
    assert r.returncode == 1 and "holds a trained model" in r.stderr, r.stderr
    assert (tmp_path / "run" / "model.safetensors").read_bytes() == model

    (tmp_path / "run" / "model.safetensors").unlink()  # a run stopped before its first checkpoint: started again
    assert run_in_process("train", "--train", "t.txt", "--valid", "t.txt", *small, "-o", "run",
                          cwd=tmp_path).returncode == 0
    (tmp_path / "empty").mkdir()
    assert run_in_process("train", "--train", "t.txt", "--valid", "t.txt", *small, "-o", "empty",
                          cwd=tmp_path).returncode == 0


def test_samples_replaces_files_only_with_force_and_names_a_bad_directory(tmp_path, run_in_process):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "train.txt").write_text("my corpus\n")
    r = run_in_process("samples", "mine", cwd=tmp_path)
    assert r.returncode == 1 and "already exists; give --force" in r.stderr, r.stderr
    assert (tmp_path / "mine" / "train.txt").read_text() == "my corpus\n"
    assert run_in_process("samples", "mine", "--force", cwd=tmp_path).returncode == 0
    assert (tmp_path / "mine" / "train.txt").read_text() != "my corpus\n"
    for bad in ("mine/train.txt/sub", "/proc/sampledlm-samples"):
        r = run_in_process("samples", bad, cwd=tmp_path)
        assert r.returncode == 1 and "cannot create the directory" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_export_names_an_opset_torch_cannot_write_and_a_path_it_cannot_write(tmp_path, run_in_process):
    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 20)
    r = run_in_process("train", "--train", "t.txt", "--valid", "t.txt", "--epochs", "1", "-d", "4", "--hidden", "4",
                       "--threads", "1", "-o", "run", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    for args, needle in ((["--opset", "99", "-o", "m.onnx"], "--opset 99"), (["-o", "/proc/m.onnx"], "cannot write"),
                         (["-o", "nodir/m.onnx"], "cannot write")):
        r = run_in_process("export", "run", *args, cwd=tmp_path)
        assert r.returncode == 1 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "m.onnx").exists()
