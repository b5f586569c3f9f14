"""The memory-mapped binary n-gram directory: ARPA -> binary gives the very same model, every loader takes it."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from helpers import run_cli, synthetic_sentences, write_corpus

from sampledlm.errors import UserError
from sampledlm.ngram import read_arpa, train_ngram, write_arpa
from sampledlm.ngram.mapped import open_binary, verify_binary, write_binary


@pytest.fixture(scope="module")
def model_files(tmp_path_factory, ngram_corpus):
    vocab, train, _ = ngram_corpus
    d = tmp_path_factory.mktemp("bin")
    write_arpa(train_ngram(train, vocab, 4), str(d / "kn4.arpa"))
    arpa = read_arpa(str(d / "kn4.arpa"), cache=False)
    write_binary(arpa, str(d / "kn4.bin"))
    return d, arpa


def test_round_trip_gives_every_ngram_and_random_queries_exactly(model_files):
    d, arpa = model_files
    lm = open_binary(str(d / "kn4.bin"))
    assert lm.words == arpa.words and lm.counts() == arpa.counts()
    for a, b in zip(arpa.tables, lm.tables):
        assert isinstance(b.keys, np.memmap), "the arrays are mapped, not read"
        for name in ("keys", "logp", "bow"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
    rng = np.random.default_rng(0)
    hist = rng.integers(0, arpa.width, size=(3000, 3))
    hist[rng.random(3000) < 0.2, 0] = arpa.bos
    words = rng.integers(0, arpa.width - 1, size=3000)
    words[words == arpa.bos] = arpa.eos
    assert np.array_equal(arpa.logprob10_ids(hist, words), lm.logprob10_ids(hist, words))


def test_every_loader_accepts_the_directory_and_scores_like_the_arpa(model_files, ngram_corpus):
    from sampledlm.loader import load_model
    from sampledlm.ngram.backoff import open_backoff

    d, _ = model_files
    vocab, _, valid = ngram_corpus
    a, b = load_model(str(d / "kn4.arpa")), load_model(str(d / "kn4.bin"))
    ids = np.array([a.vocab.index.get(vocab.words[i], 1) for i in valid])
    assert np.array_equal(a.logprobs(ids), b.logprobs(ids))
    assert open_backoff(str(d / "kn4.bin"), a.vocab).order == 4


def test_cli_build_eval_and_verify(tmp_path, capsys):
    write_corpus(tmp_path / "train.txt", synthetic_sentences(150, 30, seed=1))
    write_corpus(tmp_path / "test.txt", synthetic_sentences(30, 30, seed=2))
    arpa, out = str(tmp_path / "kn3.arpa"), str(tmp_path / "kn3.bin")
    assert run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "-o", arpa], capsys)[0] == 0
    assert run_cli(["ngram", "build-binary", arpa, "-o", out], capsys)[0] == 0
    ppl = []
    for m in (arpa, out):
        code, stdout, _ = run_cli(["ngram", "eval", m, "--test", str(tmp_path / "test.txt"), "--json"], capsys)
        assert code == 0
        ppl.append(json.loads(stdout)["ppl"])
    assert ppl[0] == ppl[1]
    code, _, err = run_cli(["ngram", "build-binary", arpa, "-o", out], capsys)
    assert code == 1 and "--force" in err and err.count("\n") == 1
    assert run_cli(["ngram", "build-binary", "--verify", out], capsys)[0] == 0
    with open(os.path.join(out, "logp_2.npy"), "r+b") as f:  # flip one byte of a probability
        f.seek(-3, 2)
        byte = f.read(1)
        f.seek(-3, 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    code, _, err = run_cli(["ngram", "build-binary", "--verify", out], capsys)
    assert code == 1 and "logp_2.npy" in err


def test_incomplete_or_inconsistent_directories_are_one_line_errors(model_files, tmp_path):
    import shutil

    d, _ = model_files
    bad = tmp_path / "bad.bin"
    shutil.copytree(d / "kn4.bin", bad)
    np.save(bad / "bow_3.npy", np.zeros(5))
    with pytest.raises(UserError, match="bow_3.npy: holds float64\\[5\\]"):
        open_binary(str(bad))
    words = (bad / "words.json").read_text()
    (bad / "words.json").write_text(words[:-3])
    with pytest.raises(UserError, match="words.json: not valid JSON"):
        open_binary(str(bad))
    os.remove(bad / "words.json")
    with pytest.raises(UserError, match="words.json: no such file \\(the binary model directory is incomplete\\)"):
        open_binary(str(bad))
    (bad / "words.json").write_text(words)
    os.remove(bad / "keys_2.npy")
    with pytest.raises(UserError, match="keys_2.npy: no such file"):
        open_binary(str(bad))
    os.remove(bad / "config.json")  # what a writer killed before its last file leaves
    with pytest.raises(UserError, match="config.json: no such file"):
        open_binary(str(bad))


class _Killed(BaseException):
    """Stands for a SIGKILL: nothing of the command runs after it (no except clause of ours catches it)."""


def test_the_same_command_finishes_a_directory_whose_writer_was_killed(model_files, tmp_path, capsys, monkeypatch):
    """Found by `sampledlm bench crashes`: build-binary killed while writing its arrays left a directory (arrays,
    no config.json) that the same command then refused as 'not empty', so the user had to delete it by hand."""
    from sampledlm.cli import main
    from sampledlm.ngram import mapped

    d, _ = model_files
    out = tmp_path / "kn4.bin"
    written = []
    real = mapped._write_npy

    def killed_after_four_files(path, *a):
        written.append(real(path, *a))
        if len(written) == 4:
            raise _Killed
        return written[-1]

    monkeypatch.setattr(mapped, "_write_npy", killed_after_four_files)
    with pytest.raises(_Killed):
        main(["ngram", "build-binary", str(d / "kn4.arpa"), "-o", str(out)])
    monkeypatch.undo()
    assert (out / "keys_2.npy").exists() and not (out / "config.json").exists()
    code, _, err = run_cli(["ngram", "build-binary", str(d / "kn4.arpa"), "-o", str(out)], capsys)  # no --force
    assert code == 0, err
    assert verify_binary(str(out)) == []
    assert [np.array_equal(a.logp, b.logp) for a, b in zip(open_binary(str(d / "kn4.bin")).tables,
                                                             open_binary(str(out)).tables)] == [True] * 4


def test_a_second_writer_stops_before_reading_the_model(model_files, tmp_path, capsys, monkeypatch):
    from sampledlm.ngram import arpa as arpa_module
    from sampledlm.ngram.mapped import lock_directory

    d, _ = model_files
    read = []
    monkeypatch.setattr(arpa_module, "read_arpa", lambda *a, **k: read.append(a) or pytest.fail("read the ARPA"))
    out = tmp_path / "kn4.bin"
    with lock_directory(str(out)):
        code, _, err = run_cli(["ngram", "build-binary", str(d / "kn4.arpa"), "-o", str(out)], capsys)
    assert code == 1 and not read
    assert err.count("\n") == 1 and "another sampledlm process" in err and str(out) in err


def test_replacing_a_model_of_a_higher_order_leaves_none_of_its_arrays(model_files, tmp_path, capsys, ngram_corpus):
    import shutil

    d, _ = model_files
    vocab, train, _ = ngram_corpus
    out = tmp_path / "m.bin"
    shutil.copytree(d / "kn4.bin", out)
    write_arpa(train_ngram(train, vocab, 2), str(tmp_path / "kn2.arpa"))
    code, _, err = run_cli(["ngram", "build-binary", str(tmp_path / "kn2.arpa"), "-o", str(out), "--force"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.glob("*_*.npy")) == [f"{a}_{k}.npy" for a in ("bow", "keys", "logp")
                                                            for k in (1, 2)]


def test_a_directory_of_someone_else_s_files_is_refused(model_files, tmp_path, capsys):
    d, _ = model_files
    out = tmp_path / "mine"
    out.mkdir()
    (out / "words.json").write_text('["mine"]')  # not what a killed build-binary leaves (it begins with keys_1.npy)
    code, _, err = run_cli(["ngram", "build-binary", str(d / "kn4.arpa"), "-o", str(out)], capsys)
    assert code == 1 and err.count("\n") == 1 and "not empty" in err and str(out) in err
    assert [p.name for p in out.iterdir()] == ["words.json"]


def test_a_binary_model_reads_text_as_its_training_text_was_read(tmp_path, run_in_process):
    """ngram train --binary recorded no text options: eval read "The Cat" as two words outside a --lowercase
    model's vocabulary (ppl 6090 against 221 on the audit's sentence), silently."""
    (tmp_path / "train.txt").write_text("the cat sat .\nthe dog sat .\n" * 20)
    (tmp_path / "test.txt").write_text("The Cat sat.\n")
    r = run_in_process("ngram", "train", "--train", "train.txt", "--tokenizer", "raw", "--lowercase", "--order", "2",
                       "--binary", "-o", "lc.bin", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("eval", "lc.bin", "--test", "test.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["oov"] == 0, r.stdout + r.stderr
    r = run_in_process("ngram", "train", "--train", "train.txt", "--order", "2", "--binary", "-o", "plain.bin",
                       cwd=tmp_path)
    assert "text_options" not in json.loads((tmp_path / "plain.bin" / "config.json").read_text())["ngram"]["info"]
    # an ARPA file records nothing: build-binary takes the text flags and records them
    r = run_in_process("ngram", "train", "--train", "train.txt", "--tokenizer", "raw", "--lowercase", "--order", "2",
                       "-o", "lc.arpa", cwd=tmp_path)
    r = run_in_process("ngram", "build-binary", "lc.arpa", "--tokenizer", "raw", "--lowercase", "-o", "lc2.bin",
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("eval", "lc2.bin", "--test", "test.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["oov"] == 0, r.stdout + r.stderr
