import gzip
import io
import lzma
import sys

import pytest

from sampledlm.errors import UserError
from sampledlm.data.textio import atomic_write, check_writable, iter_chunks, iter_lines


def test_plain_gz_xz_read_the_same(tmp_path):
    text = "a b c\nd é\n\nlast line without newline"
    (tmp_path / "p.txt").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "p.txt.gz", "wt", encoding="utf-8") as f:
        f.write(text)
    with lzma.open(tmp_path / "p.txt.xz", "wt", encoding="utf-8") as f:
        f.write(text)
    want = ["a b c", "d é", "", "last line without newline"]
    for name in ("p.txt", "p.txt.gz", "p.txt.xz"):
        assert list(iter_lines(str(tmp_path / name))) == want


def test_crlf_lines_lose_their_carriage_return(tmp_path):
    (tmp_path / "c.txt").write_bytes(b"a b\r\nc\r\n")
    assert list(iter_lines(str(tmp_path / "c.txt"))) == ["a b", "c"]


def test_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x y\nz\n")))
    assert list(iter_lines("-")) == ["x y", "z"]


def test_invalid_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(UserError, match=r"bad\.txt:3: invalid UTF-8"):
        list(iter_lines(str(p)))
    assert list(iter_lines(str(p), encoding_errors="replace"))[2] == "bad \ufffd byte"


def test_invalid_utf8_line_number_across_chunks(tmp_path, monkeypatch):
    import sampledlm.data.textio as textio

    monkeypatch.setattr(textio, "CHUNK_BYTES", 16)
    p = tmp_path / "bad.txt"
    p.write_bytes(b"".join(b"line %d\n" % i for i in range(1, 40)) + b"\xc3(\n")
    with pytest.raises(UserError, match=r"bad\.txt:40:"):
        list(iter_lines(str(p)))
    assert len(list(iter_chunks(str(tmp_path / "bad.txt"), "replace"))) > 3


def test_binary_and_missing_files(tmp_path):
    p = tmp_path / "bin.dat"
    p.write_bytes(b"\x7fELF\x00\x01\x02")
    with pytest.raises(UserError, match="binary"):
        list(iter_lines(str(p)))
    stray = tmp_path / "stray.txt"  # text with one NUL in its head: the line to fix is named
    stray.write_bytes(b"a b\nc d\na\x00b c\n")
    with pytest.raises(UserError, match=f"^{stray}:3: a NUL byte .* binary file"):
        list(iter_lines(str(stray)))
    with pytest.raises(UserError, match="no such file"):
        list(iter_lines(str(tmp_path / "absent.txt")))
    with pytest.raises(UserError, match="directory"):
        list(iter_lines(str(tmp_path)))


def test_a_nul_byte_past_the_head_is_kept_and_said_once_with_its_line(tmp_path, monkeypatch):
    """Past the first 64 KiB a NUL is a character of its word (a binary file is told by its head), but text has
    none: a file zero-filled by a crash read silently. One warning a reading, naming the line, across chunks."""
    import warnings

    import sampledlm.data.textio as textio
    from sampledlm.errors import InputWarning

    monkeypatch.setattr(textio, "CHUNK_BYTES", 4096)
    p = tmp_path / "zeroed.txt"
    p.write_bytes(b"w x y\n" * 12000 + b"a\x00b c\n" + b"\x00\x00\n" * 3 + b"z\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lines = list(iter_lines(str(p)))
    assert lines[12000] == "a\x00b c" and len(lines) == 12005
    assert [type(w.message) for w in seen] == [InputWarning] and f"{p}:12001: a NUL byte" in str(seen[0].message)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        list(iter_lines(str(tmp_path / "zeroed.txt")))
        (tmp_path / "clean.txt").write_bytes(b"w x y\n" * 12000)
        list(iter_lines(str(tmp_path / "clean.txt")))
    assert len(seen) == 1  # each reading of the damaged file says it; a clean file says nothing


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(str(p)) as f:
            f.write("partial")
            raise RuntimeError("interrupted")
    assert p.read_text() == "old"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.txt"]  # no temp file left
    with atomic_write(str(p)) as f:
        f.write("new")
    assert p.read_text() == "new"


def test_unwritable_destinations(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        check_writable(str(tmp_path / "no" / "such" / "dir.txt"))
    with pytest.raises(UserError, match="does not exist"):
        with atomic_write(str(tmp_path / "missing-dir" / "x.txt")):
            pass
    (tmp_path / "notes.txt").write_text("a file\n")
    for where in ("v.txt", "sub/v.txt"):  # a file on the way: said as such, not as a missing directory
        with pytest.raises(UserError, match=f"{tmp_path / 'notes.txt'} is a file, not a directory"):
            check_writable(str(tmp_path / "notes.txt" / where))
        with pytest.raises(UserError, match="is a file, not a directory"):
            with atomic_write(str(tmp_path / "notes.txt" / where)):
                pass


def test_check_writable_probes_by_creating_a_file(tmp_path, monkeypatch):
    """Permission bits pass (as for root on /proc) but the file system refuses the file: found before the work."""
    import errno
    import tempfile

    def refuse(*args, **kwargs):
        raise OSError(errno.ENOENT, "No such file or directory")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(UserError, match="refuses new files"):
        check_writable(str(tmp_path / "out.txt"))


def test_check_writable_leaves_nothing_behind(tmp_path):
    check_writable(str(tmp_path / "out.txt"))
    assert list(tmp_path.iterdir()) == []


def test_a_named_pipe_is_written_in_place_not_replaced(tmp_path):
    """A temporary file renamed over a FIFO (or /dev/null, as root) destroyed it; such outputs are written into."""
    import os
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    check_writable(str(fifo))
    with atomic_write(str(fifo)) as f:
        f.write("through the pipe\n")
    reader.join(10)
    assert got == ["through the pipe\n"]
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_a_symbolic_link_keeps_pointing_at_the_replaced_file(tmp_path):
    target, link = tmp_path / "target.txt", tmp_path / "link.txt"
    target.write_text("old\n")
    link.symlink_to(target.name)
    with atomic_write(str(link)) as f:
        f.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "target.txt"]
