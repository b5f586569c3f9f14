"""Bounded-memory estimation: the same ARPA bytes as in memory under a budget that forces many spills;
temporary files gone on success, on error, and after a kill at the next run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import REPO, encode_sentences, run_cli, synthetic_sentences, write_corpus

from sampledlm.data.vocab import Vocab
from sampledlm.errors import UserError
from sampledlm.ngram import train_ngram, write_arpa
from sampledlm.ngram.build import budget, external, id_stream
from sampledlm.ngram.build.budget import MIN_WINDOW, current_rss, parse_memory
from sampledlm.ngram.build.external import train_bounded
from sampledlm.ngram.build.id_stream import array_chunks


def spill_dirs(d):
    return [n for n in os.listdir(d) if n.startswith("sampledlm-ngram.")]


@pytest.mark.parametrize("seed,order,smoothing,prune", [
    (1, 1, "mkn", None), (2, 2, "kn", None), (3, 3, "mkn", None), (4, 4, "kn", None), (5, 5, "mkn", None),
    (6, 4, "mkn", [0, 1, 2]), (7, 3, "kn", [0, 0, 1])])
def test_bounded_path_writes_the_in_memory_arpa_bytes(tmp_path, seed, order, smoothing, prune):
    rng = np.random.default_rng(seed)
    sents = synthetic_sentences(int(rng.integers(400, 1200)), vocab_size=int(rng.integers(20, 150)), seed=seed)
    vocab = Vocab.from_sentences(sents)
    ids = encode_sentences(vocab, sents)
    if seed % 2:
        ids = ids[:-1]  # a stream that does not end with </s>
    a, b = tmp_path / "mem.arpa", tmp_path / "bounded.arpa"
    write_arpa(train_ngram(ids, vocab, order, smoothing, prune=prune), str(a))
    info = train_bounded(array_chunks(ids, 777), vocab, order, str(b), parse_memory("1K"), str(tmp_path), smoothing, prune,
                         window=MIN_WINDOW)
    assert info["window"] == MIN_WINDOW and len(ids) > 4 * info["window"], "the budget forces many runs"
    assert a.read_bytes() == b.read_bytes()
    # files held in memory until 32 KiB are held, then moved to disk mid-write: the same bytes
    part = train_bounded(array_chunks(ids, 777), vocab, order, str(tmp_path / "part.arpa"), parse_memory("1K"),
                         str(tmp_path), smoothing, prune, window=MIN_WINDOW, ram=32 << 10)
    assert 0 < part["spilled_bytes"] < info["spilled_bytes"] or order == 1
    # a budget that holds the corpus in one window: nothing written to disk, the held model written by write_arpa
    whole = train_bounded(array_chunks(ids, 777), vocab, order, str(tmp_path / "whole.arpa"), parse_memory("2G"),
                          str(tmp_path), smoothing, prune)
    assert whole["spilled_bytes"] == 0 and whole["window"] <= max(len(ids) * 2, len(vocab) + 1, MIN_WINDOW)
    assert (tmp_path / "part.arpa").read_bytes() == (tmp_path / "whole.arpa").read_bytes() == a.read_bytes()
    assert spill_dirs(tmp_path) == []


def test_cli_memory_flag_and_refusals(tmp_path, capsys, request):
    """Without --memory: half the available memory, nothing spilled; with it (many runs): spilled; both the bytes
    of the in-memory estimator, the reference."""
    sents = synthetic_sentences(500, 60, seed=9)
    write_corpus(tmp_path / "train.txt", sents)
    vocab = Vocab.from_sentences(sents)
    write_arpa(train_ngram(encode_sentences(vocab, sents), vocab, 4), str(tmp_path / "mem.arpa"))
    base = ["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "4"]
    code, _, err = run_cli(base + ["-o", str(tmp_path / "a.arpa"), "--temp-dir", str(tmp_path)], capsys)
    assert code == 0 and "(half the available memory; nothing spilled)" in err
    request.getfixturevalue("small_ngram_window")  # from here on: many runs from a small corpus
    code, _, err = run_cli(base + ["-o", str(tmp_path / "b.arpa"), "--memory", "2K", "--temp-dir", str(tmp_path)], capsys)
    assert code == 0 and "bounded to" in err and "MiB spilled)" in err
    assert (tmp_path / "a.arpa").read_bytes() == (tmp_path / "b.arpa").read_bytes() == \
        (tmp_path / "mem.arpa").read_bytes()
    for extra, msg in ((["--memory", "lots"], "--memory 'lots'"), (["--memory", "8G", "--smoothing", "wb"], "needs the whole model"),
                       (["--memory", "8G", "--temp-dir", str(tmp_path / "nope")], "no such directory")):
        code, _, err = run_cli(base + ["-o", str(tmp_path / "c.arpa"), *extra], capsys)
        assert code == 1 and msg in err and err.count("\n") == 1
    assert not (tmp_path / "c.arpa").exists() and spill_dirs(tmp_path) == []


def test_an_error_midway_removes_the_spill_and_writes_nothing(tmp_path, monkeypatch):
    sents = synthetic_sentences(300, 30, seed=2)
    vocab = Vocab.from_sentences(sents)

    def boom(*a, **k):
        raise UserError("disk trouble")

    monkeypatch.setattr(external, "interpolate_order", boom)
    with pytest.raises(UserError, match="disk trouble"):
        train_bounded([encode_sentences(vocab, sents)], vocab, 3, str(tmp_path / "x.arpa"), 1 << 10, str(tmp_path),
                      window=MIN_WINDOW)
    assert os.listdir(tmp_path) == []


def test_an_error_in_the_arpa_writer_thread_reaches_the_caller_and_writes_nothing(tmp_path, monkeypatch):
    """The ARPA lines are written on a thread of their own (arpa_stream.BackgroundWriter): a failed write
    there (a full disk) stops the run with that error, and neither the ARPA file nor the spill remain."""
    from sampledlm.ngram.build import arpa_stream

    sents = synthetic_sentences(300, 30, seed=3)
    vocab = Vocab.from_sentences(sents)
    calls = []
    real = arpa_stream._lines

    def full_disk_on_the_third_window(*a, **k):
        calls.append(1)
        out = real(*a, **k)
        return out if len(calls) < 3 else None  # f.write(None) fails in the writer thread

    monkeypatch.setattr(arpa_stream, "_lines", full_disk_on_the_third_window)
    with pytest.raises(TypeError):
        train_bounded([encode_sentences(vocab, sents)], vocab, 3, str(tmp_path / "x.arpa"), 1 << 10, str(tmp_path),
                      window=MIN_WINDOW)
    assert len(calls) >= 3 and os.listdir(tmp_path) == []


def test_a_run_killed_during_a_spill_is_cleaned_up_by_the_next(tmp_path):
    write_corpus(tmp_path / "train.txt", synthetic_sentences(20000, 400, seed=4))
    spill = tmp_path / "spill"
    spill.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    # what `ngram train --order 5 --memory 1K --temp-dir SPILL` does, in windows of MIN_WINDOW (many runs)
    run = (f"from sampledlm.ngram.build import BuildConfig, build; "
           f"build(BuildConfig(order=5, memory='1K', temp_dir={str(spill)!r}), {str(tmp_path / 'train.txt')!r}, "
           f"{str(tmp_path / 'killed.arpa')!r}, window={MIN_WINDOW})")
    cmd = [sys.executable, "-c", run]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:  # wait until a run of 3-grams is on disk
            dirs = spill_dirs(spill)
            if dirs and any(n.startswith("run") for n in os.listdir(spill / dirs[0])) and \
                    os.path.exists(spill / dirs[0] / "keys_2"):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(spill_dirs(spill)) == 1, "a killed run leaves its spill behind"
    assert not (tmp_path / "killed.arpa").exists(), "and no partial model"
    sents = synthetic_sentences(50, 20, seed=1)
    vocab = Vocab.from_sentences(sents)
    train_bounded([encode_sentences(vocab, sents)], vocab, 2, str(tmp_path / "next.arpa"), 1 << 10, str(spill),
                  window=MIN_WINDOW)
    assert spill_dirs(spill) == []


def test_the_sweep_spares_a_live_run_that_has_not_locked_its_directory_yet(tmp_path):
    """Two bounded runs sharing a --temp-dir (the default one, say): the second one's sweep removed the first one's
    spill directory if it came between the first creating the directory and locking it (a directory without a
    lock counted as dead). Now it is removed only when the process named in it is gone."""
    import socket

    from sampledlm.ngram.build.spill import PREFIX, sweep

    host = socket.gethostname().replace(".", "_")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    live = tmp_path / f"{PREFIX}{host}.{os.getpid()}.abcd"
    dead = tmp_path / f"{PREFIX}{host}.{gone.pid}.efgh"
    for d in (live, dead):
        d.mkdir()
        (d / "counts_1").write_bytes(b"\0" * 8)
    assert sweep(str(tmp_path)) == [str(dead)]
    assert spill_dirs(tmp_path) == [live.name]


def test_one_pass_text_reading_gives_build_vocab_and_its_ids(tmp_path):
    """The bounded path reads a text once for vocabulary and ids (read_text): the same vocabulary as
    build_vocab (counts, order, literal <unk>/</s>/<s> handled alike) and the same ids as text_chunks."""
    from sampledlm.data.tokenizer import TextOptions

    text = tmp_path / "t.txt"
    lines = ["the cat <unk> sat", "", "a </s> b <s> the", "cat cat the end"] * 40 + ["rare word at the end"]
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_read_text_agrees(text, TextOptions(), tmp_path)
    assert not spill_dirs(tmp_path)


def assert_read_text_agrees(text, opts, tmp_path):
    """read_text's vocabulary and ids are build_vocab's and text_chunks'."""
    from sampledlm.data.corpus import build_vocab
    from sampledlm.ngram.build.spill import Spill

    want = build_vocab(str(text), opts)
    with Spill(str(tmp_path), 64) as sp:
        got, chunks = id_stream.read_text(sp, str(text), opts)
        ids = np.concatenate(list(chunks))
    assert got.words == want.words and got.counts.tolist() == want.counts.tolist()
    assert ids.tolist() == np.concatenate(list(id_stream.text_chunks(str(text), want, opts))).tolist()


def test_bounded_training_reads_standard_input(tmp_path):
    sents = synthetic_sentences(300, vocab_size=40, seed=11)
    write_corpus(tmp_path / "train.txt", sents)
    vocab = Vocab.from_sentences(sents)
    write_arpa(train_ngram(encode_sentences(vocab, sents), vocab, 3, "mkn"), str(tmp_path / "mem.arpa"))
    p = subprocess.run([sys.executable, "-m", "sampledlm", "ngram", "train", "--train", "-", "--order", "3",
                        "--memory", "1G", "-o", str(tmp_path / "stdin.arpa")], cwd=REPO, capture_output=True,
                       stdin=open(tmp_path / "train.txt", "rb"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "stdin.arpa").read_bytes() == (tmp_path / "mem.arpa").read_bytes()


_WORDS = ["a", "b", "cat", "<s>", "</s>", "<unk>", "\u00e9t\u00e9", "x\x00y", "\x00"]
_GAPS = [" ", "  ", "\t", "\u2028", "\x85", " \u3000 "]


@pytest.mark.filterwarnings("ignore::sampledlm.errors.InputWarning")  # its NULs are meant
@pytest.mark.parametrize("seed", range(6))
def test_read_text_fast_path_agrees_with_line_by_line_reading(tmp_path, seed):
    """read_text splits a plain chunk at once, line ends marked (the fast path), and line by line when the
    chunk holds <s>/</s> or a NUL: either way the vocabulary and ids of build_vocab and text_chunks.
    Blank and whitespace-only lines give no sentence; a NUL inside a token, or alone, is a word."""
    from sampledlm.data.tokenizer import TextOptions

    rng = np.random.default_rng(seed)
    plain = [w for w in _WORDS if "s>" not in w and "\x00" not in w]
    words = _WORDS if seed % 2 else plain  # odd seeds: the slow path's chunks too
    lines = []
    for _ in range(int(rng.integers(1, 400))):
        n = int(rng.integers(0, 6))
        toks = [words[int(i)] for i in rng.integers(0, len(words), n)]
        gap = _GAPS[int(rng.integers(0, len(_GAPS)))]
        lines.append(gap.join(toks) + (gap if rng.random() < 0.2 else ""))
    head = "\n \n" + "w x y\n" * 12000  # blank lines first; past the first 64 KB a NUL is no binary file
    text = tmp_path / "t.txt"
    text.write_text(head + "\n".join(lines) + ("\n" if seed % 3 else ""), encoding="utf-8")
    for opts in (TextOptions(), TextOptions(lowercase=True)):
        assert_read_text_agrees(text, opts, tmp_path)


@pytest.mark.parametrize("seed,order,smoothing,prune", [
    (21, 1, "mkn", None), (22, 3, "kn", None), (23, 5, "mkn", None), (24, 4, "mkn", [0, 1, 2]), (25, 3, "kn", [0, 0, 1]),
    (26, 5, "mkn", [0, 1])])
def test_bounded_binary_directory_holds_the_in_memory_models_arrays(tmp_path, seed, order, smoothing, prune):
    """--memory with --binary writes the model directory from the spill (no ARPA text, nothing parsed): the same
    keys, log-probabilities and back-off weights as write_binary of the in-memory model, count pruning included
    (keys renumbered past the pruned contexts), under a budget that forces many runs; checksums verify."""
    from sampledlm.ngram.mapped import open_binary, verify_binary, write_binary

    rng = np.random.default_rng(seed)
    sents = synthetic_sentences(int(rng.integers(400, 1200)), vocab_size=int(rng.integers(20, 150)), seed=seed)
    vocab = Vocab.from_sentences(sents)
    ids = encode_sentences(vocab, sents)
    write_binary(train_ngram(ids, vocab, order, smoothing, prune=prune), str(tmp_path / "mem"))
    train_bounded(array_chunks(ids, 777), vocab, order, str(tmp_path / "bounded"), parse_memory("1K"), str(tmp_path),
                  smoothing, prune, binary=True, window=MIN_WINDOW)
    a, b = open_binary(str(tmp_path / "mem")), open_binary(str(tmp_path / "bounded"))
    assert a.words == b.words and a.counts() == b.counts()
    for ta, tb in zip(a.tables, b.tables):
        for name in ("keys", "logp", "bow"):
            assert np.array_equal(getattr(ta, name), getattr(tb, name)), name
    assert verify_binary(str(tmp_path / "bounded")) == []
    assert spill_dirs(tmp_path) == []


def test_cli_binary_output(tmp_path, capsys, small_ngram_window):
    """ngram train --binary: a model directory that ngram eval reads, in memory and bounded alike; '-' refused;
    an existing model kept without --force; a failed run leaves no directory behind."""
    write_corpus(tmp_path / "train.txt", synthetic_sentences(400, 50, seed=4))
    base = ["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "3", "--binary"]
    ppl = []
    for name, extra in (("mem.bin", []), ("bounded.bin", ["--memory", "2K", "--temp-dir", str(tmp_path)])):
        code, _, err = run_cli(base + ["-o", str(tmp_path / name), *extra], capsys)
        assert code == 0, err
        code, out, err = run_cli(["ngram", "eval", str(tmp_path / name), "--test", str(tmp_path / "train.txt")], capsys)
        assert code == 0, err
        ppl.append((out + err).split("ppl ")[1].split()[0])
    assert ppl[0] == ppl[1]
    for args, msg in ((["-o", "-"], "give -o DIR"), (["-o", str(tmp_path / "mem.bin")], "--force")):
        code, _, err = run_cli(base + args, capsys)
        assert code == 1 and msg in err
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "nope.txt"), "--binary", "-o",
                            str(tmp_path / "never.bin")], capsys)
    assert code == 1 and not (tmp_path / "never.bin").exists()


def test_a_budget_below_the_process_footprint_is_refused_before_any_work(tmp_path, capsys):
    write_corpus(tmp_path / "train.txt", synthetic_sentences(200, 30, seed=3))
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--memory", "50M",
                            "--temp-dir", str(tmp_path), "-o", str(tmp_path / "x.arpa")], capsys)
    assert code == 1 and "--memory 50M is less than this process needs" in err and "give at least --memory" in err
    assert not (tmp_path / "x.arpa").exists() and spill_dirs(tmp_path) == []
    need = int(err.split("give at least --memory ")[1].split("M")[0])
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--memory", f"{need}M",
                            "--temp-dir", str(tmp_path), "-o", str(tmp_path / "x.arpa")], capsys)
    assert code == 0, err


def test_text_is_read_in_chunks_sized_to_the_budget(tmp_path, monkeypatch):
    """The text's chunks (held as Python strings, ~30x their bytes) shrink with the budget, so reading
    a corpus stays within a small budget; the vocabulary and ids are the same whatever the chunk size."""
    sents = synthetic_sentences(6000, 300, seed=8)
    write_corpus(tmp_path / "train.txt", sents)
    assert budget.text_chunk_bytes(1 << 40) == budget.CHUNK_BYTES
    small = budget.text_chunk_bytes(current_rss() + (64 << 20))
    assert (1 << 20) <= small < budget.CHUNK_BYTES
    from sampledlm.data.tokenizer import TextOptions
    from sampledlm.ngram.build.spill import Spill

    got = []
    for size in (1 << 10, 1 << 23):  # a chunk of whole lines at least: 1 KiB still reads every line
        with Spill(str(tmp_path), MIN_WINDOW) as sp:
            vocab, chunks = id_stream.read_text(sp, str(tmp_path / "train.txt"), TextOptions(), chunk_bytes=size)
            got.append((vocab.words, np.concatenate(list(chunks)).tolist()))
    assert got[0] == got[1]


def test_valid_with_bounded_estimation(tmp_path, capsys):
    """--valid is checked before the long work; its perplexity is that of the model written, read back: the
    figure `ngram eval` prints for the ARPA file (to stdout too) and for the --binary directory, under any budget,
    and the in-memory estimator's."""
    import json

    from sampledlm.data.corpus import build_vocab, load_ids
    from sampledlm.data.tokenizer import TextOptions

    train, valid = tmp_path / "train.txt", tmp_path / "valid.txt"
    write_corpus(train, synthetic_sentences(400, 50, seed=4))
    write_corpus(valid, synthetic_sentences(50, 50, seed=5))
    # the budget counts the whole process: this test process's own footprint (a CUDA build of torch alone can
    # take 1.5 GiB) plus room to work in
    memory = f"{(current_rss() >> 20) + 512}M"
    base = ["ngram", "train", "--train", str(train), "--order", "4", "--temp-dir", str(tmp_path)]
    code, _, err = run_cli(base + ["--valid", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "a.arpa")], capsys)
    assert code == 1 and "nope.txt: no such file" in err and not (tmp_path / "a.arpa").exists()
    printed = {}
    for name, extra in (("a.arpa", []), ("b.arpa", ["--memory", memory]), ("c.bin", ["--binary"]), ("-", [])):
        code, out, err = run_cli(base + ["--valid", str(valid), *extra, "-o",
                                         name if name == "-" else str(tmp_path / name)], capsys)
        assert code == 0, err
        printed[name] = err.split("valid perplexity ")[1].split()[0]
        if name == "-":
            assert out.encode() == (tmp_path / "a.arpa").read_bytes() and not spill_dirs(tmp_path)
    code, out, _ = run_cli(["ngram", "eval", str(tmp_path / "a.arpa"), "--test", str(valid), "--json"], capsys)
    assert code == 0
    evaluated = json.loads(out)["ppl"]
    assert set(printed.values()) == {f"{evaluated:.2f}"}, printed
    vocab = build_vocab(str(train), TextOptions())
    lm = train_ngram(load_ids(str(train), vocab), vocab, 4)  # the reference estimator, in memory
    assert lm.perplexity(load_ids(str(valid), vocab), vocab) == pytest.approx(evaluated, rel=1e-12)


@pytest.mark.parametrize("args,msg", [
    (["--prune", "0,,1"], "expected counts separated by commas"),
    (["--prune", ",0,1"], "expected counts separated by commas"),
    (["--prune", "0,1,0"], "--prune 0,1,0: thresholds must not decrease"),
    (["--binary", "-o", "{d}/kn.arpa.gz"], "a binary model is a directory"),
    (["--binary", "-o", "{d}/missing/kn.bin"], "does not exist"),
    (["--memory", "8G", "--temp-dir", "{d}/train.txt"], "not a directory"),
    (["--smoothing", "wb", "--valid", "{d}/train.txt", "--memory", "8G"], "leave out --memory for wb"),
    (["--smoothing", "jm", "--memory", "8G"], "leave out --memory for jm"),
    (["--memory", "1K"], "--memory 1K is less than this process needs"),
    (["--memory", "1M"], "--memory 1M is less than this process needs"),  # as given (it read 1024K)
    (["--binary", "-o", "{d}/train.txt/kn.bin"], "train.txt is a file, not a directory"),
])
def test_cli_refusals_name_the_problem(tmp_path, capsys, args, msg):
    write_corpus(tmp_path / "train.txt", synthetic_sentences(100, 20, seed=1))
    args = [a.format(d=tmp_path) for a in args]
    out = [] if "-o" in args else ["-o", str(tmp_path / "x.arpa")]
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "3", *args, *out],
                           capsys)
    assert code == 1 and msg in err and err.count("\n") == 1, err
    assert sorted(os.listdir(tmp_path)) == ["train.txt"]


def test_a_nul_word_past_the_first_64k_round_trips_through_the_arpa_file(tmp_path, capsys):
    """Training keeps a NUL inside the text as a word (past the head, no binary file), saying so with its line; the
    ARPA file it writes must then read back, while a NUL before \\data\\ still marks a binary file."""
    (tmp_path / "train.txt").write_text("w x y\n" * 12000 + "v1 \x00 v2\n", encoding="utf-8")
    (tmp_path / "test.txt").write_text("w x y\nv1 v2\n", encoding="utf-8")
    code, _, err = run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "2",
                            "-o", str(tmp_path / "m.arpa")], capsys)
    assert code == 0 and f"sampledlm: warning: {tmp_path / 'train.txt'}:12001: a NUL byte" in err, err
    assert b"\tv1 \x00\n" in (tmp_path / "m.arpa").read_bytes()
    code, out, err = run_cli(["ngram", "eval", str(tmp_path / "m.arpa"), "--test", str(tmp_path / "test.txt")], capsys)
    assert code == 0 and "ppl" in out + err, err
    (tmp_path / "bin.arpa").write_bytes(b"junk\x00\n")
    code, _, err = run_cli(["ngram", "eval", str(tmp_path / "bin.arpa"), "--test", str(tmp_path / "test.txt")], capsys)
    assert code == 1 and "looks like a binary file" in err
