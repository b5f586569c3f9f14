"""``sampledlm embed``: train, eval, neighbors, plot and export through the command line, and its one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import run_cli


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A corpus of two topics and word vectors trained on it through the CLI."""
    from sampledlm.cli import main

    d = tmp_path_factory.mktemp("emb")
    rng = np.random.default_rng(0)
    groups = [[f"a{i}" for i in range(8)], [f"b{i}" for i in range(8)]]
    lines = [" ".join(groups[s % 2][j] for j in rng.integers(0, 8, size=8)) for s in range(800)]
    (d / "corpus.txt").write_text("\n".join(lines) + "\n")
    (d / "pairs.tsv").write_text("# w1\tw2\tscore\na0\ta1\t9\na0\tb1\t1\nb2\tb3\t8\na2\tzzz\t5\n")
    (d / "q.txt").write_text(": topics\na0 a1 b0 b1\n")
    with pytest.raises(SystemExit) as e:
        main(["embed", "train", str(d / "corpus.txt"), "-o", str(d / "vec"), "--model", "skipgram", "--dim", "12",
              "--min-count", "1", "--epochs", "3", "--sample", "0", "--threads", "1"])
    assert e.value.code == 0
    return d


def test_train_writes_the_directory_and_both_word2vec_files(trained):
    from sampledlm.embed.formats import load_vectors

    vec = trained / "vec"
    config = json.loads((vec / "config.json").read_text())
    assert (config["family"], config["word2vec"]["model"], config["word2vec"]["alpha"]) == ("embeddings", "skipgram", 0.025)
    a, b, c = (load_vectors(str(p)) for p in (vec, vec / "vectors.bin", vec / "vectors.txt"))
    assert a.words == b.words == c.words and len(a) == 16
    assert np.array_equal(a.vectors, b.vectors) and np.array_equal(a.vectors, c.vectors)
    assert load_vectors(str(vec), "output").vectors.shape == (16, 12)


def test_eval_reports_spearman_skips_and_analogy_coverage(trained, capsys):
    code, out, _ = run_cli(["embed", "eval", str(trained / "vec"), "--similarity", str(trained / "pairs.tsv"),
                            "--analogy", str(trained / "q.txt"), "--json"], capsys)
    assert code == 0
    res = json.loads(out)
    sim = res["similarity"][0]
    assert (sim["pairs"], sim["skipped"]) == (3, 1)
    assert sim["spearman"] > 0  # same-topic pairs are the close ones
    assert res["analogy"]["all"]["questions"] == 1 and res["analogy"]["all"]["answered"] == 1


def test_neighbors_are_of_the_same_topic(trained, capsys):
    code, out, _ = run_cli(["embed", "neighbors", str(trained / "vec" / "vectors.bin"), "a0", "-n", "5"], capsys)
    assert code == 0
    near = out.split("\t")[1].split()[::2]
    assert len(near) == 5 and sum(w.startswith("a") for w in near) >= 4


def test_plot_writes_a_png(trained, capsys):
    out = trained / "p.png"
    code, _, err = run_cli(["embed", "plot", str(trained / "vec"), "-w", "a0,a1,b0,b1,nope", "-o", str(out)], capsys)
    assert code == 0 and out.read_bytes()[:4] == b"\x89PNG"
    assert "nope" in err


def test_export_gives_a_neural_lm_s_projections(trained_ffnn, tmp_path, capsys):
    from sampledlm.embed.formats import load_vectors
    from sampledlm.loader import load_model

    out = tmp_path / "ffnn.bin"
    code, _, err = run_cli(["embed", "export", str(trained_ffnn / "run"), "-o", str(out)], capsys)
    assert code == 0, err
    wv = load_vectors(str(out))
    lm = load_model(str(trained_ffnn / "run"))
    assert wv.words == lm.vocab.words
    assert np.array_equal(wv.vectors, lm.model.embed.weight.detach().numpy()[: len(lm.vocab)])
    code, _, err = run_cli(["embed", "export", str(trained_ffnn / "run"), "-o", str(tmp_path / "o.txt"),
                            "--which", "output"], capsys)
    assert code == 0 and load_vectors(str(tmp_path / "o.txt")).dim == 8
    code, _, err = run_cli(["embed", "export", str(trained_ffnn / "run"), "-o", str(tmp_path / "s.txt"),
                            "--which", "sum"], capsys)  # 6-d projections, 8-d output vectors: no sum
    assert code == 1 and err.startswith("sampledlm: error:") and "not defined" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "s.txt").exists()


@pytest.mark.parametrize("args,message", [
    (["embed", "eval", "{d}/missing.bin"], "no such file"),
    (["embed", "neighbors", "{d}/vec", "notaword"], "not in the vocabulary"),
    (["embed", "train", "{d}/corpus.txt", "-o", "{d}/vec"], "already holds a model"),
    (["embed", "train", "{d}/corpus.txt", "-o", "{d}/x", "--min-count", "100000"], "--min-count 100000"),
    (["embed", "export", "{d}/vec", "-o", "{d}/e.bin"], "not a neural LM run"),
    (["embed", "export", "{d}", "-o", "{d}/e.bin"], "no such file"),
])
def test_errors_are_one_line(trained, capsys, args, message):
    code, _, err = run_cli([a.format(d=trained) for a in args], capsys)
    assert code == 1
    lines = [line for line in err.splitlines() if line.startswith("sampledlm:")]
    assert len(lines) == 1 and message in lines[0], err


# --- the output directory: written in an order a kill cannot tear, locked, never someone else's -------------------

class _Killed(BaseException):
    """Stands for a SIGKILL: nothing of the command runs after it (no except clause of ours catches it)."""


def _train_args(d, out, *extra):
    return ["embed", "train", str(d / "corpus.txt"), "-o", str(out), "--dim", "6", "--min-count", "1", "--epochs", "1",
            "--threads", "1", *extra]


def test_a_write_killed_before_its_last_file_leaves_no_config_and_the_same_command_finishes_it(trained, tmp_path,
                                                                                              capsys, monkeypatch):
    """Found by `sampledlm bench crashes`: config.json (what marks a directory complete, and what makes the next
    run refuse without --force) was written before vectors.bin and vectors.txt, so a kill between them left a
    directory that claimed to be complete, lacked its word2vec files, and refused the re-run."""
    from sampledlm.cli import main
    from sampledlm.embed import formats

    out = tmp_path / "vec"

    def killed(path, wv):
        raise _Killed

    monkeypatch.setattr(formats, "write_text", killed)
    with pytest.raises(_Killed):
        main(_train_args(trained, out))
    assert not (out / "config.json").exists()
    assert not out.exists() or all(p.name.startswith(".") for p in out.iterdir())  # its staged files removed
    monkeypatch.undo()
    # what a kill -9 within the write leaves (no clean-up runs then): staged files, no config.json
    import shutil

    out.mkdir(exist_ok=True)
    for name in ("vectors.safetensors", "vocab.txt", "vectors.bin"):
        shutil.copy(trained / "vec" / name, out / (formats.STAGED + name))
    code, _, err = run_cli(_train_args(trained, out), capsys)  # the same command, no --force
    assert code == 0, err
    a, b, c = (formats.load_vectors(str(p)) for p in (out, out / "vectors.bin", out / "vectors.txt"))
    assert a.words == b.words == c.words
    assert np.array_equal(a.vectors, b.vectors) and np.array_equal(a.vectors, c.vectors)


def test_a_write_killed_in_its_first_file_leaves_a_temporary_the_same_command_sweeps(trained, tmp_path, capsys):
    """Found by `sampledlm bench crashes` (2026-11-30): a kill a few ms into the write left only the temporary of
    the staged vectors.safetensors, and the same command refused the directory as someone else's."""
    import socket

    from sampledlm.embed import formats

    out = tmp_path / "vec"
    out.mkdir()
    host = socket.gethostname().replace(".", "_")
    (out / f".{formats.STAGED}vectors.safetensors.{host}.999999999.abcd1234.tmp").write_bytes(b"half a tensor")
    code, _, err = run_cli(_train_args(trained, out), capsys)  # the same command, no --force
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == []
    assert (out / "config.json").exists()


def test_a_second_writer_of_the_directory_stops_before_reading_the_corpus(trained, tmp_path, capsys, monkeypatch):
    """The output directory is locked for the whole command: a second `embed train -o DIR` stops at once with a
    clear message (it used to train to the end and only then meet the lock, or write vectors.bin and vectors.txt
    beside the other process's files, outside the lock)."""
    from sampledlm import store
    from sampledlm.embed import vocab

    read = []
    monkeypatch.setattr(vocab, "read_corpus", lambda *a, **k: read.append(a) or pytest.fail("read the corpus"))
    out = tmp_path / "vec"
    with store.lock_directory(str(out)):
        code, _, err = run_cli(_train_args(trained, out), capsys)
    assert code == 1 and not read
    lines = [ln for ln in err.splitlines() if ln.startswith("sampledlm:")]
    assert len(lines) == 1 and "another sampledlm process" in lines[0] and str(out) in lines[0], err


def test_force_without_text_leaves_no_vectors_txt_of_the_old_model(trained, tmp_path, capsys):
    out = tmp_path / "vec"
    assert run_cli(_train_args(trained, out), capsys)[0] == 0
    assert (out / "vectors.txt").exists()
    code, _, err = run_cli(_train_args(trained, out, "--force", "--no-text", "--seed", "2"), capsys)
    assert code == 0, err
    assert not (out / "vectors.txt").exists()  # it held the vectors of the replaced model


@pytest.mark.parametrize("files,force,message", [
    ({"notes.txt": "mine"}, False, "is not empty"),
    ({"vocab.txt": "mine\t1\n"}, False, "is not empty"),  # a vocab.txt alone is someone's file, not a killed write
    ({"config.json": '{"family": "neural"}', "model.safetensors": ""}, True, "holds a neural model"),
])
def test_never_writes_into_other_files_or_another_model(trained, tmp_path, capsys, files, force, message):
    out = tmp_path / "dir"
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    code, _, err = run_cli(_train_args(trained, out, *(["--force"] if force else [])), capsys)
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("sampledlm:")]
    assert len(lines) == 1 and message in lines[0] and str(out) in lines[0], err
    assert {p.name: p.read_text() for p in out.iterdir() if p.name != ".lock"} == files


def test_eval_reads_its_sets_from_a_folder_and_says_where_they_come_from(tmp_path, monkeypatch, run_in_process):
    (tmp_path / "c.txt").write_text("king queen man woman paris france rome italy\n" * 50)
    r = run_in_process("embed", "train", "c.txt", "--min-count", "1", "--epochs", "1", "--dim", "8", "--threads", "1",
                       "-o", "vec", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    monkeypatch.setenv("SAMPLEDLM_EVAL", str(tmp_path / "nowhere"))
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_in_process("embed", "eval", "vec", "--eval-dir", str(empty), cwd=tmp_path)
    assert r.returncode == 1 and "WordSim-353" in r.stderr and "--eval-dir" in r.stderr and "SAMPLEDLM_EVAL" in r.stderr
    sets = tmp_path / "sets"
    sets.mkdir()
    (sets / "wordsim353.tsv").write_text("king\tqueen\t8.5\nman\twoman\t8.3\nparis\trome\t5.0\nking\tparis\t1.0\n")
    r = run_in_process("embed", "eval", "vec", "--eval-dir", str(sets), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"wordsim353.tsv"' in r.stdout or "wordsim353" in r.stdout
