"""Bounded estimation and the free space of its --temp-dir: refused up front, with one line, when the spill will
not fit (a small free space simulated: no disk is filled); a disk that fills up anyway (ENOSPC, EDQUOT) is the
same kind of line; nothing of the run stays behind either way."""

from __future__ import annotations

import collections
import errno
import os

import numpy as np
import pytest
from helpers import (
    assert_one_line_error,
    encode_sentences,
    run_cli,
    synthetic_sentences,
    write_corpus,
)

from sampledlm.data.vocab import Vocab
from sampledlm.errors import UserError
from sampledlm.ngram.build import external, spill
from sampledlm.ngram.build.budget import MIN_WINDOW, spill_need
from sampledlm.ngram.build.external import train_bounded
from sampledlm.ngram.build.id_stream import TokenMeter, array_chunks

Usage = collections.namedtuple("Usage", "total used free")


def spill_dirs(d):
    return [n for n in os.listdir(d) if n.startswith("sampledlm-ngram.")]


def never(*a, **k):
    raise AssertionError("the run went on past the free-space check")


def test_a_spill_that_will_not_fit_is_refused_before_counting(tmp_path, capsys, monkeypatch, small_ngram_window):
    """The CLI with a small budget (many runs, on disk): the text's first chunk gives the estimate, checked before the
    first byte is spilled, so the refusal comes while reading, before padding and counting."""
    train = write_corpus(tmp_path / "train.txt", synthetic_sentences(600, 80, seed=1))
    monkeypatch.setattr(spill.shutil, "disk_usage", lambda p: Usage(10 << 30, 10 << 30, 4096))
    monkeypatch.setattr(external, "pad", never)
    out = tmp_path / "x.arpa"
    code, _, err = run_cli(["ngram", "train", "--train", str(train), "--order", "4", "--memory", "2K",
                            "--temp-dir", str(tmp_path), "-o", str(out)], capsys)
    assert_one_line_error(code, err, f"--temp-dir {tmp_path}: not enough free space", out)
    assert "needs about" in err and "4 KB is free" in err and "give a --temp-dir" in err
    assert spill_dirs(tmp_path) == []


def test_enough_room_is_not_refused_and_the_estimate_covers_the_peak(tmp_path, monkeypatch):
    """Every file on disk (``ram=0``): the largest the spill directory grew stays within :func:`spill_need` of the
    stream's tokens, and the check passes with that much free."""
    sents = synthetic_sentences(1500, 400, seed=4)
    vocab = Vocab.from_sentences(sents)
    ids = encode_sentences(vocab, sents)
    peak = [0]
    real_write = spill.Spill._write

    def tracked(self, name, data):
        real_write(self, name, data)
        peak[0] = max(peak[0], self.on_disk())

    monkeypatch.setattr(spill.Spill, "_write", tracked)
    for order in (2, 3, 5):
        need = spill_need(len(ids), order)
        monkeypatch.setattr(spill, "disk_free", lambda p, need=need: need)
        peak[0] = 0
        info = train_bounded(array_chunks(ids, 777), vocab, order, str(tmp_path / f"{order}.arpa"), 1 << 10,
                             str(tmp_path), window=MIN_WINDOW, ram=0)
        assert info["spilled_bytes"] > 0 and 0 < peak[0] <= need, (order, peak[0], need)
    assert spill_dirs(tmp_path) == []


def test_a_stream_of_unknown_length_is_checked_once_its_length_is_known(tmp_path, monkeypatch):
    """An id stream (no text, no meter): the check waits for the padded stream's length, and refuses before the
    counting starts."""
    sents = synthetic_sentences(400, 50, seed=5)
    vocab = Vocab.from_sentences(sents)
    monkeypatch.setattr(spill, "disk_free", lambda p: 100)
    monkeypatch.setattr(external, "count_order", never)
    with pytest.raises(UserError, match="not enough free space") as e:
        train_bounded(array_chunks(encode_sentences(vocab, sents), 777), vocab, 3, str(tmp_path / "x.arpa"), 1 << 10,
                      str(tmp_path), window=MIN_WINDOW, ram=0)
    assert "\n" not in str(e.value) and str(tmp_path) in str(e.value)
    assert os.listdir(tmp_path) == []


def test_what_is_held_in_memory_needs_no_room_on_disk(tmp_path, monkeypatch):
    """A corpus whose files all fit in ``ram`` writes nothing to disk, and no free space is asked of it."""
    sents = synthetic_sentences(200, 30, seed=6)
    vocab = Vocab.from_sentences(sents)
    (tmp_path / "spill").mkdir()
    real = spill.disk_free
    monkeypatch.setattr(spill, "disk_free", lambda p: 0 if p == str(tmp_path / "spill") else real(p))
    info = train_bounded(array_chunks(encode_sentences(vocab, sents), 777), vocab, 3, str(tmp_path / "x.arpa"),
                         1 << 10, str(tmp_path / "spill"), window=1 << 20, ram=1 << 30)
    assert info["spilled_bytes"] == 0 and (tmp_path / "x.arpa").exists()


def test_the_token_meter_extrapolates_from_the_share_read():
    m = TokenMeter(1000)
    assert m.expected() is None
    m.add(50, 250)
    assert m.expected() == 200
    m.add(150, 750)
    assert m.expected() == 200
    unknown = TokenMeter(None)
    unknown.add(10, 100)
    assert unknown.expected() is None


class FullDisk:
    """A file whose writes (or its close, the buffered bytes' flush) fail with ``err`` once it has taken
    ``room`` bytes."""

    def __init__(self, f, err, at_close, left):
        self.f, self.err, self.at_close, self.left = f, err, at_close, left

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()
        if self.at_close and self.left[0] < 0 and exc[0] is None:
            raise OSError(self.err, os.strerror(self.err))

    def write(self, data):
        self.left[0] -= memoryview(data).nbytes
        if self.left[0] < 0 and not self.at_close:
            raise OSError(self.err, os.strerror(self.err))
        return self.f.write(data)

    def __getattr__(self, name):
        return getattr(self.f, name)


@pytest.mark.parametrize("err,at_close", [(errno.ENOSPC, False), (errno.EDQUOT, False), (errno.ENOSPC, True)])
def test_a_disk_that_fills_up_during_the_spill_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch, err,
                                                                               at_close, small_ngram_window):
    train = write_corpus(tmp_path / "train.txt", synthetic_sentences(600, 80, seed=7))
    left = [200_000]  # bytes the disk takes before it is full: in the middle of counting

    def opener(path, mode="r", *a, **k):
        f = open(path, mode, *a, **k)  # noqa: SIM115 (handed to the caller, which closes it)
        writing = any(c in mode for c in "wa+")
        return FullDisk(f, err, at_close, left) if "sampledlm-ngram." in str(path) and writing else f

    monkeypatch.setattr(spill, "open", opener, raising=False)
    out = tmp_path / "x.arpa"
    code, _, text = run_cli(["ngram", "train", "--train", str(train), "--order", "4", "--memory", "2K",
                             "--temp-dir", str(tmp_path), "-o", str(out)], capsys)
    assert_one_line_error(code, text, f"--temp-dir {tmp_path}: cannot write bounded estimation's temporary files "
                                      f"({os.strerror(err)}) after", out)
    assert "give a --temp-dir" in text and left[0] < 0
    assert sorted(os.listdir(tmp_path)) == ["train.txt"]


def test_the_refusal_names_sizes_a_person_reads():
    e = spill.no_room("/scratch", int(24.5e9), int(3.2e9))
    assert str(e) == ("--temp-dir /scratch: not enough free space for bounded estimation's temporary files: it needs "
                      "about 24.5 GB there and 3.2 GB is free; give a --temp-dir on a disk with more room")
    assert [spill.gigabytes(x) for x in (0, 999, 1.5e6, 250e9)] == ["0 KB", "1 KB", "1.5 MB", "250 GB"]
    assert np.all(np.diff([spill_need(1000, k) for k in range(1, 6)]) > 0)


@pytest.mark.parametrize("extra, when", [((), "found after counting"), (("--binary",), "found after counting"),
                                         (("--prune", "0,1,1"), "found before writing it")])
def test_a_model_that_will_not_fit_where_it_goes_is_refused_before_it_is_written(tmp_path, capsys, monkeypatch,
                                                                                   extra, when):
    """The disk of -o, not the spill's: a full one was found only while the model was written, after the whole
    estimation (hours at 160M tokens). Refused once the n-grams are counted (pruned: once they are kept), naming the
    file, with nothing written; with room, the same run goes on."""
    train = write_corpus(tmp_path / "train.txt", synthetic_sentences(600, 80, seed=1))
    (tmp_path / "spill").mkdir()
    (tmp_path / "out").mkdir()
    roomy = spill.shutil.disk_usage
    monkeypatch.setattr(spill.shutil, "disk_usage", lambda p: Usage(10 << 30, 10 << 30, 4096)
                        if str(p).startswith(str(tmp_path / "out")) else roomy(p))
    out = tmp_path / "out" / ("m" if "--binary" in extra else "m.arpa")
    args = ["ngram", "train", "--train", str(train), "--order", "4", "--memory", "8G", "--temp-dir",
            str(tmp_path / "spill"), "-o", str(out), *extra]
    code, _, err = run_cli(args, capsys)
    assert_one_line_error(code, err, f"{out}: not enough free space for the model ({when})", out)
    assert "4 KB is free" in err and os.listdir(tmp_path / "out") == [] and spill_dirs(tmp_path / "spill") == []
    monkeypatch.setattr(spill.shutil, "disk_usage", roomy)
    code, _, err = run_cli(args, capsys)
    assert code == 0, err


def test_the_output_estimate_is_near_the_file_it_sizes(tmp_path, capsys):
    """output_need against the ARPA file and binary directory actually written (it was 0.97-1.09x on PTB)."""
    from sampledlm.ngram.build.budget import output_need
    from sampledlm.ngram.arpa import read_arpa

    sents = synthetic_sentences(2000, 300, seed=2)
    train = write_corpus(tmp_path / "train.txt", sents)
    words = collections.Counter(w for s in sents for w in s)
    for binary in (False, True):
        out = tmp_path / ("m" if binary else "m.arpa")
        run = ["--binary"] if binary else []
        assert run_cli(["ngram", "train", "--train", str(train), "--order", "3", "--memory", "8G", "-o", str(out),
                        *run], capsys)[0] == 0
        counts = [len(t.keys) for t in read_arpa(str(tmp_path / "m.arpa")).tables] if binary else \
            [len(t.keys) for t in read_arpa(str(out)).tables]
        size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) if binary else out.stat().st_size
        vocab = list(words) + ["</s>", "<s>"]
        need = output_need(vocab, [words[w] for w in words] + [len(sents), 0], counts, binary)
        assert 0.75 * size < need < 1.3 * size, (binary, need, size)
