"""Faults of the binary n-gram directory found by an audit: unreadable arrays are one-line errors naming the
file, damaged values one-line errors pointing to --verify, --verify names a missing file as missing, a failed write leaves nothing half-written, and a
finished directory holds no lock file."""

from __future__ import annotations

import errno
import os
import shutil
import socket

import numpy as np
import pytest
from helpers import run_cli, synthetic_sentences, write_corpus

from sampledlm.errors import UserError
from sampledlm.ngram import read_arpa, train_ngram, write_arpa
from sampledlm.ngram import mapped
from sampledlm.ngram.mapped import lock_directory, open_binary, verify_binary, write_binary

MODEL_FILES = sorted(["config.json", "words.json", "README.md", "provenance.json"] + [f"{a}_{k}.npy" for a in ("keys", "logp", "bow") for k in (1, 2, 3)])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A trigram ARPA file and its binary directory (kn3.bin), a short and a long test text."""
    d = tmp_path_factory.mktemp("faults")
    write_corpus(d / "train.txt", synthetic_sentences(300, 40, seed=1))
    write_corpus(d / "test.txt", synthetic_sentences(40, 40, seed=2))
    write_corpus(d / "long.txt", synthetic_sentences(4000, 40, seed=3))  # past the compiled scorer's threshold
    from sampledlm.data.corpus import build_vocab, load_ids
    from sampledlm.data.tokenizer import TextOptions

    vocab = build_vocab(str(d / "train.txt"), TextOptions())
    write_arpa(train_ngram(load_ids(str(d / "train.txt"), vocab, TextOptions()), vocab, 3), str(d / "kn3.arpa"))
    write_binary(read_arpa(str(d / "kn3.arpa"), cache=False), str(d / "kn3.bin"))
    return d


def _copy(files, tmp_path, name="m.bin"):
    out = tmp_path / name
    shutil.copytree(files / "kn3.bin", out)
    return out


def _one_line_error(code, err, *parts):
    assert code == 1 and err.count("\n") == 1 and err.startswith("sampledlm: error: "), err
    for p in parts:
        assert p in err, (p, err)


# --- 1. unreadable .npy files -----------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["empty", "header cut", "data cut", "zip archive", "not npy"])
def test_an_unreadable_npy_file_is_a_one_line_error(files, tmp_path, capsys, how):
    """Before: an empty file gave numpy's EOFError, which click turns into 'interrupted' (exit 130)."""
    out = _copy(files, tmp_path)
    p = out / "bow_1.npy"
    data = p.read_bytes()
    if how == "empty":
        p.write_bytes(b"")
    elif how == "header cut":
        p.write_bytes(data[:40])
    elif how == "data cut":
        p.write_bytes(data[:-16])
    elif how == "zip archive":
        np.savez(tmp_path / "z.npz", a=np.zeros(3))
        p.write_bytes((tmp_path / "z.npz").read_bytes())
    else:
        p.write_bytes(b"this is not an array\n" * 10)
    # --no-verify: the checks that stand when the checksums are skipped (eval runs the checksums first by default)
    code, _, err = run_cli(["ngram", "eval", str(out), "--test", str(files / "test.txt"), "--no-verify"], capsys)
    _one_line_error(code, err, f"{p}: not a readable .npy array (")
    if how == "empty":
        assert "(an empty file)" in err
    with pytest.raises(UserError, match="bow_1.npy: not a readable .npy array"):
        open_binary(str(out))


# --- 2. damaged values, found by the queries that read them -----------------------------------------------------
def _damage(out, what):
    name, fill = {"logp nan": ("logp_2", np.nan), "logp positive": ("logp_3", None),
                  "logp inf": ("logp_1", np.inf), "bow inf": ("bow_2", np.inf), "bow nan": ("bow_1", np.nan)}[what]
    a = np.load(out / f"{name}.npy")
    if fill is None:
        a = -a  # every probability's sign flipped: > 0
    else:
        a[:] = fill
    np.save(out / f"{name}.npy", a)
    return f"{name}.npy"


DAMAGE = ["logp nan", "logp positive", "logp inf", "bow inf", "bow nan"]


@pytest.mark.parametrize("what", DAMAGE)
@pytest.mark.parametrize("text", ["test.txt", "long.txt"])
def test_a_query_that_meets_a_damaged_value_names_the_file(files, tmp_path, capsys, what, text):
    """Before: logp_2.npy full of NaN gave 'perplexity nan' and exit 0. long.txt runs the compiled stream
    scorer (when numba is there), whose kernels read the arrays themselves."""
    out = _copy(files, tmp_path)
    _damage(out, what)
    open_binary(str(out))  # loading reads no values: it still opens
    code, stdout, err = run_cli(["ngram", "eval", str(out), "--test", str(files / text), "--no-verify"], capsys)
    _one_line_error(code, err, f"{out}: damaged: a query gave", f"sampledlm ngram build-binary --verify {out}")
    assert "perplexity" not in stdout + err


@pytest.mark.parametrize("what", DAMAGE)
def test_every_query_path_checks_what_it_reads(files, tmp_path, what):
    from sampledlm.ngram.backoff import VocabBackoff
    from sampledlm.ngram.lm import ArpaLM

    out = _copy(files, tmp_path)
    _damage(out, what)
    lm = open_binary(str(out))
    rng = np.random.default_rng(0)
    hist = rng.integers(0, lm.width, size=(2000, 2))
    words = rng.integers(0, lm.width, size=2000)
    words[words == lm.bos] = lm.eos
    with pytest.raises(UserError, match="damaged: a query gave"):
        lm.logprob10_ids(hist, words)
    with pytest.raises(UserError, match="damaged: a query gave"):
        lm.score(" ".join(lm.words[i] for i in words[:50]))
    from sampledlm.data.corpus import load_ids
    from sampledlm.data.tokenizer import TextOptions
    from sampledlm.ngram.model import HAVE_NUMBA

    arpa_lm = ArpaLM(lm, str(out))
    ids = load_ids(str(files / "long.txt"), arpa_lm.vocab, TextOptions())
    assert len(ids) >= lm.COMPILED_MIN
    with pytest.raises(UserError, match="damaged: a query gave"):
        arpa_lm.logprobs(ids)
    assert ("_ranges" in lm.__dict__) == HAVE_NUMBA  # the compiled kernels ran (with numba)
    vocab = ArpaLM(lm).vocab  # the short-list's back-off: its subset masses
    member = np.zeros(len(vocab), dtype=bool)
    member[: len(vocab) // 2] = True
    backoff = VocabBackoff(open_binary(str(out)), vocab)
    with pytest.raises(UserError, match="damaged: a query gave"):
        backoff.log_mass(rng.integers(0, len(vocab), size=(500, 2)), member)


def test_an_intact_model_scores_exactly_as_its_arpa_file_on_both_scorers(files, capsys):
    """The checks change no number: the long text (the compiled scorer, with numba) and the short one (numpy)
    give the ARPA file's."""
    import json

    from sampledlm.ngram.backoff import open_backoff
    from sampledlm.ngram.lm import ArpaLM

    for text in ("test.txt", "long.txt"):
        ppl = []
        for m in ("kn3.arpa", "kn3.bin"):
            code, stdout, err = run_cli(["ngram", "eval", str(files / m), "--test", str(files / text), "--json"], capsys)
            assert code == 0, err
            ppl.append(json.loads(stdout)["log10_prob"])
        assert ppl[0] == ppl[1]
    vocab = ArpaLM.open(str(files / "kn3.arpa")).vocab
    a, b = open_backoff(str(files / "kn3.arpa"), vocab), open_backoff(str(files / "kn3.bin"), vocab)
    hist = np.random.default_rng(1).integers(0, len(vocab), size=(300, 2))
    member = np.arange(len(vocab)) % 3 == 0
    assert np.array_equal(a.log_mass(hist, member), b.log_mass(hist, member))


# --- 3. --verify names a missing file as missing ----------------------------------------------------------------
def test_verify_says_a_missing_file_is_missing(files, tmp_path, capsys):
    out = _copy(files, tmp_path)
    os.remove(out / "keys_2.npy")
    assert verify_binary(str(out)) == ["keys_2.npy (missing)"]
    code, _, err = run_cli(["ngram", "build-binary", "--verify", str(out)], capsys)
    _one_line_error(code, err, "keys_2.npy (missing)")
    with open(out / "logp_3.npy", "r+b") as f:
        f.seek(-1, 2)
        f.write(b"\x01")
    assert verify_binary(str(out)) == ["keys_2.npy (missing)", "logp_3.npy"]
    code, _, err = run_cli(["ngram", "build-binary", "--verify", str(out)], capsys)
    _one_line_error(code, err, "damaged: keys_2.npy (missing); logp_3.npy differs from the checksums")


# --- 4. a failed write leaves nothing half-written --------------------------------------------------------------
def _full_disk_after(monkeypatch, n, exc=None):
    """``mapped._write_npy`` whose n-th file fails midway as a full disk does (or raises ``exc``)."""
    real, calls = mapped._write_npy, []

    def write(path, parts, length, dtype):
        calls.append(path)
        if len(calls) == n:
            def failing():
                yield from parts
                raise exc or OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(path, failing(), length, dtype)
        return real(path, parts, length, dtype)

    monkeypatch.setattr(mapped, "_write_npy", write)
    return calls


@pytest.mark.parametrize("command", ["build-binary", "train --binary", "train --binary --memory"])
def test_a_full_disk_leaves_no_directory(files, tmp_path, capsys, monkeypatch, command):
    """Before: the directory stayed with the arrays written so far and the lock file, no config.json."""
    out = tmp_path / "o.bin"
    if command == "build-binary":
        args = ["ngram", "build-binary", str(files / "kn3.arpa"), "-o", str(out)]
    else:
        args = ["ngram", "train", "--train", str(files / "train.txt"), "-o", str(out), "--binary"]
        args += ["--memory", "8G"] if "memory" in command else []
    calls = _full_disk_after(monkeypatch, 5)
    code, _, err = run_cli(args, capsys)
    assert len(calls) == 5
    _one_line_error(code, err, "No space left on device")
    assert not out.exists(), sorted(os.listdir(out))
    assert os.listdir(tmp_path) == []


def test_a_failed_replacement_leaves_the_old_model_as_it_was(files, tmp_path, capsys, monkeypatch):
    """--force that fails (a full disk) puts the model it was replacing back, as an ARPA file's --force keeps
    the old file: no half model, no empty directory."""
    out = _copy(files, tmp_path)
    (out / "notes.txt").write_text("the user's own file")
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    _full_disk_after(monkeypatch, 4)
    code, _, err = run_cli(["ngram", "build-binary", str(files / "kn3.arpa"), "-o", str(out), "--force"], capsys)
    _one_line_error(code, err, "No space left on device")
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before  # no .lock, no .replaced
    open_binary(str(out))


def test_leftovers_of_a_killed_replacement_or_write_are_written_over(files, tmp_path, capsys):
    """A kill while the old model waits in .replaced, or one that left only a temporary config.json, leaves
    a directory the same command writes again (without --force: it holds no model)."""
    out = _copy(files, tmp_path)
    (out / ".replaced").mkdir()
    for name in [n for n in os.listdir(out) if n != ".replaced"]:
        os.replace(out / name, out / ".replaced" / name)
    (out / "keys_1.npy").write_bytes(b"half")
    other = tmp_path / "other.bin"
    other.mkdir()
    host = socket.gethostname().replace(".", "_")
    (other / f".config.json.{host}.4000000.x.tmp").write_text("{")  # atomic_write's name; a pid that cannot be alive
    for d in (out, other):
        code, _, err = run_cli(["ngram", "build-binary", str(files / "kn3.arpa"), "-o", str(d)], capsys)
        assert code == 0, err
        assert not [n for n in os.listdir(d) if n.startswith(".")]  # no .replaced, .lock or temporary
        open_binary(str(d))


def test_an_interrupted_write_cleans_up_too_and_the_api_removes_the_directory_it_made(files, tmp_path, monkeypatch):
    lm = read_arpa(str(files / "kn3.arpa"), cache=False)
    _full_disk_after(monkeypatch, 3, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        write_binary(lm, str(tmp_path / "k.bin"))
    _full_disk_after(monkeypatch, 2)
    with pytest.raises(UserError, match="No space left on device"):
        write_binary(lm, str(tmp_path / "u.bin"))
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    existing = tmp_path / "kept"
    existing.mkdir()
    _full_disk_after(monkeypatch, 7)
    with pytest.raises(UserError):
        write_binary(lm, str(existing))
    assert existing.is_dir() and os.listdir(existing) == []  # not made by the write: stays, empty


# --- 5. a finished directory holds no lock file -----------------------------------------------------------------
@pytest.mark.parametrize("command", ["build-binary", "train --binary", "train --binary --memory", "prune --binary"])
def test_a_finished_directory_holds_the_model_only(files, tmp_path, capsys, command):
    out = tmp_path / "o.bin"
    if command == "build-binary":
        args = ["ngram", "build-binary", str(files / "kn3.arpa"), "-o", str(out)]
    elif command == "prune --binary":
        args = ["ngram", "prune", str(files / "kn3.bin"), "--keep", "0.5", "-o", str(out), "--binary"]
    else:
        args = ["ngram", "train", "--train", str(files / "train.txt"), "-o", str(out), "--binary"]
        args += ["--memory", "8G"] if "memory" in command else []
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert sorted(os.listdir(out)) == MODEL_FILES
    assert verify_binary(str(out)) == []


def test_a_lock_on_a_removed_lock_file_is_no_lock(tmp_path, monkeypatch):
    """The lock file is removed when its writer is done: a writer that opened it just before, and locked it
    just after, holds a lock on a file no longer there, while a third has made and locked a new one."""
    import fcntl

    d = tmp_path / "d"
    d.mkdir()
    real, held = fcntl.flock, []

    def flock(fd, op):
        if not held:  # between our open and our lock: the holder finishes, a third writer comes in
            os.remove(d / ".lock")
            held.append(os.open(d / ".lock", os.O_RDWR | os.O_CREAT))
            real(held[0], fcntl.LOCK_EX | fcntl.LOCK_NB)
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    (d / ".lock").touch()
    try:
        with pytest.raises(UserError, match="another sampledlm process"):
            with lock_directory(str(d)):
                pytest.fail("took a lock while another writer holds the directory's")
    finally:
        os.close(held[0])
    assert (d / ".lock").exists()  # the third writer's, untouched by the one refused
    with lock_directory(str(d)):
        assert os.listdir(d) == [".lock"]
    assert os.listdir(d) == []


@pytest.mark.parametrize("name,damage,msg", [
    ("bow_1", lambda a: np.full_like(a, np.nan), "bow_1.npy: damaged: entry 0 is nan"),
    ("bow_2", lambda a: np.full_like(a, np.inf), "bow_2.npy: damaged: entry 0 is inf"),
    ("keys_2", lambda a: a[::-1].copy(), "keys_2.npy: damaged: keys out of order"),
])
def test_pruning_reads_every_value_so_it_checks_them_all(files, tmp_path, capsys, name, damage, msg):
    """Pruning a damaged directory once gave a different model, exit 0 (NaN or infinite back-off weights), or
    a traceback (keys out of order): it reads the whole model, so it checks it as an ARPA file is checked."""
    out = _copy(files, tmp_path)
    np.save(out / f"{name}.npy", damage(np.load(out / f"{name}.npy")))
    for extra in ([], ["--history-lm", str(out)]):
        model = str(out) if not extra else str(files / "kn3.arpa")
        code, _, err = run_cli(["ngram", "prune", model, "--threshold", "1e-7", *extra,
                                "-o", str(tmp_path / "p.arpa")], capsys)
        _one_line_error(code, err, msg)
        assert not (tmp_path / "p.arpa").exists()


def test_eval_checks_a_binary_directory_by_default(files, tmp_path, run_in_process):
    """Fault campaign cases: shifted log probabilities (a plausible 70.4 against 49.1) and a renamed word scored
    without a word. eval and ngram eval now check the files against config.json's checksums first."""
    d = _copy(files, tmp_path)
    good = run_in_process("eval", str(d), "--test", str(files / "test.txt"), "--json", cwd=tmp_path)
    assert good.returncode == 0, good.stderr
    logp = np.load(d / "logp_2.npy")
    np.save(d / "logp_2.npy", logp - 0.1)  # every bigram a little less likely: still valid-looking numbers
    for cmd in (["eval"], ["ngram", "eval"]):
        r = run_in_process(*cmd, str(d), "--test", str(files / "test.txt"), cwd=tmp_path)
        assert r.returncode == 1 and "logp_2.npy" in r.stderr and "checksums" in r.stderr, r.stderr
    r = run_in_process("eval", str(d), "--test", str(files / "test.txt"), "--no-verify", "--json", cwd=tmp_path)
    assert r.returncode == 0  # asked for: used as it is


def test_a_renamed_word_is_refused_at_open(files, tmp_path):
    import json

    d = _copy(files, tmp_path)
    words = json.loads((d / "words.json").read_text())
    words[5] = words[5] + "x"
    (d / "words.json").write_text(json.dumps(words))
    with pytest.raises(UserError, match="words.json: differs from the checksum"):
        open_binary(str(d))
