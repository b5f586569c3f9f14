"""ARPA -> binary within a memory budget: the same arrays as the in-memory conversion, whatever the order of the
file's lines and however many sorted runs it takes; a bad file stops at its line with nothing written."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from helpers import run_cli, synthetic_sentences, write_corpus

from sampledlm.errors import UserError
from sampledlm.ngram import read_arpa, train_ngram, write_arpa
from sampledlm.ngram.build.arpa_convert import convert
from sampledlm.ngram.build.budget import current_rss
from sampledlm.ngram.mapped import open_binary, verify_binary, write_binary
from sampledlm.outputs import lock_directory

HEADROOM = 512 << 20  # bytes of budget above the test process (a pytest worker may hold a GB already)


@pytest.fixture(scope="module")
def kn5(tmp_path_factory, ngram_corpus):
    vocab, train, _ = ngram_corpus
    d = tmp_path_factory.mktemp("bounded")
    write_arpa(train_ngram(train, vocab, 5), str(d / "kn5.arpa"))
    return d, (d / "kn5.arpa").read_text().split("\n")


def shuffled(lines: list[str], seed: int) -> str:
    """The file with each section's lines in a random order (ARPA files list n-grams in any order)."""
    rng = np.random.default_rng(seed)
    out, body, inside = [], [], False
    for line in lines:
        if inside and line.strip() and not line.startswith("\\"):
            body.append(line)
            continue
        out += [body[i] for i in rng.permutation(len(body))]
        body = []
        if line.startswith("\\"):
            inside = line.endswith("-grams:")
        out.append(line)
    return "\n".join(out)


def bounded(path, out, **kw):
    with lock_directory(str(out)):
        return convert(str(path), str(out), current_rss() + HEADROOM, **kw)


def same_arrays(a_dir, b_dir) -> None:
    a, b = open_binary(str(a_dir)), open_binary(str(b_dir))
    assert a.words == b.words and a.counts() == b.counts()
    for ta, tb in zip(a.tables, b.tables):
        for name in ("keys", "logp", "bow"):
            assert np.array_equal(getattr(ta, name), getattr(tb, name)), name


@pytest.mark.parametrize("window, chunk, seed", [(None, None, 0), (100, 2048, 1), (100, 1 << 20, 2)])
def test_the_bounded_conversion_writes_the_arrays_of_the_in_memory_one(kn5, tmp_path, window, chunk, seed):
    d, lines = kn5
    arpa = tmp_path / "kn5.arpa"
    arpa.write_text(shuffled(lines, seed) if seed else "\n".join(lines))
    write_binary(read_arpa(str(arpa), cache=False), str(tmp_path / "memory"))
    got = bounded(arpa, tmp_path / "bounded", window=window, chunk_bytes=chunk)
    same_arrays(tmp_path / "memory", tmp_path / "bounded")
    assert got["counts"] == open_binary(str(tmp_path / "memory")).counts()
    assert verify_binary(str(tmp_path / "bounded")) == []


def test_a_file_without_unk_and_bos_gets_them_as_the_reader_adds_them(tmp_path):
    text = ("\\data\\\nngram 1=3\nngram 2=2\n\n\\1-grams:\n-0.5\ta\t-0.1\n-0.6\tb\t-0.2\n-0.4\t</s>\n\n"
            "\\2-grams:\n-0.3\ta b\n-0.2\tb </s>\n\n\\end\\\n")
    (tmp_path / "m.arpa").write_text(text)
    write_binary(read_arpa(str(tmp_path / "m.arpa"), cache=False), str(tmp_path / "memory"))
    bounded(tmp_path / "m.arpa", tmp_path / "bounded")
    same_arrays(tmp_path / "memory", tmp_path / "bounded")
    assert open_binary(str(tmp_path / "bounded")).words[-2:] == ["<unk>", "<s>"]


def _fails(tmp_path, text: str, **kw) -> str:
    (tmp_path / "bad.arpa").write_text(text)
    with pytest.raises(UserError) as e:
        bounded(tmp_path / "bad.arpa", tmp_path / "out", **kw)
    assert not os.path.exists(tmp_path / "out"), "nothing half-written stays"
    return str(e.value)


def test_an_ngram_listed_twice_in_two_runs_is_named_by_its_second_line(kn5, tmp_path):
    _, lines = kn5
    first = next(i for i, ln in enumerate(lines) if ln == "\\3-grams:") + 1
    last = next(i for i in range(first, len(lines)) if not lines[i].strip())  # the blank line ending the section
    assert last - first > 3 * 100, "the repeat should land in another run than its first listing"
    dup = lines[:last] + [lines[first]] + lines[last:]
    head = next(i for i, ln in enumerate(dup) if ln.startswith("ngram 3="))
    dup[head] = f"ngram 3={int(dup[head].split('=')[1]) + 1}"
    msg = _fails(tmp_path, "\n".join(dup), window=100, chunk_bytes=2048)
    with pytest.raises(UserError) as in_memory:
        read_arpa(str(tmp_path / "bad.arpa"), cache=False)
    assert msg == str(in_memory.value) and msg.endswith(f"this 3-gram was already listed at line {first + 1}")
    assert f":{last + 1}:" in msg  # 1-based: the repeat's own line


def test_a_missing_prefix_and_a_wrong_count_stop_at_their_line(tmp_path):
    head = "\\data\\\nngram 1=3\nngram 2={n2}\nngram 3=1\n\n\\1-grams:\n-0.5\ta\t-0.1\n-0.6\tb\t-0.2\n-0.4\t</s>\n\n"
    body = "\\2-grams:\n-0.3\ta b\t-0.1\n\n\\3-grams:\n-0.2\tb a b\n\n\\end\\\n"
    msg = _fails(tmp_path, head.format(n2=1) + body)
    assert msg.startswith(f"{tmp_path / 'bad.arpa'}:15: ") and "prefix 'b a' is not among the 2-grams" in msg
    assert re.search(r"reading the file in memory adds the missing ones \(give --memory [\d,]+M or more", msg), msg
    msg = _fails(tmp_path, head.format(n2=2) + body)
    assert msg == f"{tmp_path / 'bad.arpa'}:11: the header says ngram 2=2 but the section has 1 entries"


def test_cli_converts_within_a_budget_and_scores_as_the_arpa_file(tmp_path, capsys, monkeypatch):
    from sampledlm.ngram.build import arpa_convert

    monkeypatch.setattr(arpa_convert, "IN_MEMORY_PER_BYTE", 1 << 40)  # as if too large to read in memory
    write_corpus(tmp_path / "train.txt", synthetic_sentences(150, 30, seed=1))
    write_corpus(tmp_path / "test.txt", synthetic_sentences(30, 30, seed=2))
    arpa = str(tmp_path / "kn4.arpa")
    assert run_cli(["ngram", "train", "--train", str(tmp_path / "train.txt"), "--order", "4", "-o", arpa],
                   capsys)[0] == 0
    memory = (current_rss() + HEADROOM) >> 20
    rc, _, err = run_cli(["ngram", "build-binary", arpa, "--memory", f"{memory}M", "--temp-dir", str(tmp_path),
                          "-o", str(tmp_path / "kn4.bin")], capsys)
    assert rc == 0 and f"converting within --memory {memory:,}M" in err and f"(within --memory {memory:,}M" in err, err
    ppl = [run_cli(["ngram", "eval", m, "--test", str(tmp_path / "test.txt")], capsys)[1]
           for m in (arpa, str(tmp_path / "kn4.bin"))]
    assert ppl[0] == ppl[1] and ", ppl " in ppl[0]
    assert [n for n in os.listdir(tmp_path) if n.startswith("sampledlm-ngram.")] == [], "the spill is removed"
    rc, _, err = run_cli(["ngram", "build-binary", arpa, "--memory", "lots", "-o", str(tmp_path / "x")], capsys)
    assert rc != 0 and "--memory 'lots'" in err


def test_a_file_too_large_to_read_in_memory_is_converted_within_half_the_available_memory(kn5, tmp_path, capsys,
                                                                                          monkeypatch):
    from sampledlm.ngram.build import arpa_convert, budget

    d, _ = kn5
    arpa = str(d / "kn5.arpa")
    rc, _, err = run_cli(["ngram", "build-binary", arpa, "-o", str(tmp_path / "memory")], capsys)
    assert rc == 0 and "(read in memory)" in err, err  # a small file
    # as if reading it took more than half the available memory
    monkeypatch.setattr(arpa_convert, "IN_MEMORY_PER_BYTE", budget.auto_budget() // os.path.getsize(arpa) + 1)
    rc, _, err = run_cli(["ngram", "build-binary", arpa, "-o", str(tmp_path / "bounded")], capsys)
    assert rc == 0 and "converting within --memory" in err, err
    same_arrays(tmp_path / "memory", tmp_path / "bounded")


def test_standard_input_is_converted_within_the_budget_its_size_calls_for(kn5, tmp_path, capsys, monkeypatch):
    """``-`` is read from its copy, whose size chooses the path as a file's does (it was always read in memory)."""
    import gzip
    import io
    import sys

    from sampledlm.data import textio
    from sampledlm.ngram.build import arpa_convert

    d, _ = kn5
    data = gzip.compress((d / "kn5.arpa").read_bytes())
    rc, _, err = run_cli(["ngram", "build-binary", str(d / "kn5.arpa"), "-o", str(tmp_path / "file")], capsys)
    assert rc == 0, err
    monkeypatch.setattr(arpa_convert, "IN_MEMORY_PER_BYTE", 1 << 40)  # as if too large to read in memory
    monkeypatch.setattr(textio, "_stdin_spool", None)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    memory = (current_rss() + HEADROOM) >> 20
    (tmp_path / "spill").mkdir()
    rc, _, err = run_cli(["ngram", "build-binary", "-", "--memory", f"{memory}M", "--temp-dir", str(tmp_path / "spill"),
                          "-o", str(tmp_path / "stdin")], capsys)
    assert rc == 0 and "converting within --memory" in err, err
    same_arrays(tmp_path / "file", tmp_path / "stdin")
    # the copy of standard input went to --temp-dir (a whole ARPA file, maybe many GB), removed at the process's exit
    assert [n for n in os.listdir(tmp_path / "spill") if n.startswith("sampledlm-stdin-")] != []


def test_empty_standard_input_is_named_as_empty_not_as_a_wrong_format(tmp_path, capsys, monkeypatch):
    import io
    import sys

    from sampledlm.data import textio

    monkeypatch.setattr(textio, "_stdin_spool", None)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    rc, _, err = run_cli(["ngram", "build-binary", "-", "-o", str(tmp_path / "bin")], capsys)
    assert rc == 1 and err == "sampledlm: error: -: standard input is empty: expected an ARPA file\n", err
    (tmp_path / "empty.arpa").write_bytes(b"")
    rc, _, err = run_cli(["ngram", "build-binary", str(tmp_path / "empty.arpa"), "-o", str(tmp_path / "bin")], capsys)
    assert rc == 1 and f"{tmp_path / 'empty.arpa'}: the file is empty: expected an ARPA file" in err, err
    assert not (tmp_path / "bin").exists()


def test_a_budget_too_small_says_the_least_that_works_before_anything_is_written(kn5, tmp_path, capsys,
                                                                                monkeypatch):
    from sampledlm.ngram.build import arpa_convert

    monkeypatch.setattr(arpa_convert, "IN_MEMORY_PER_BYTE", 1 << 40)
    arpa = str(kn5[0] / "kn5.arpa")
    rc, _, err = run_cli(["ngram", "build-binary", arpa, "--memory", "60M", "-o", str(tmp_path / "a")], capsys)
    assert rc != 0 and "converting" not in err and not os.path.exists(tmp_path / "a"), err
    least = re.search(r"give at least --memory ([\d,]+)M", err).group(1).replace(",", "")
    rc, _, err = run_cli(["ngram", "build-binary", arpa, "--memory", f"{least}M", "-o", str(tmp_path / "b")], capsys)
    assert rc == 0, err  # the least it asked for is enough


def test_a_missing_temp_dir_is_refused_whichever_way_the_file_is_read(kn5, tmp_path, capsys):
    arpa = str(kn5[0] / "kn5.arpa")
    rc, _, err = run_cli(["ngram", "build-binary", arpa, "--temp-dir", str(tmp_path / "nope"), "-o",
                          str(tmp_path / "a")], capsys)
    assert rc != 0 and "no such directory" in err and not os.path.exists(tmp_path / "a"), err


def test_a_temp_dir_without_room_is_refused_before_the_first_spill_and_nothing_stays(kn5, tmp_path, monkeypatch):
    from sampledlm.ngram.build import arpa_convert, spill

    d, _ = kn5
    monkeypatch.setattr(arpa_convert, "HELD_SHARE", 0.0)  # every run to disk
    monkeypatch.setattr(spill, "disk_free", lambda path: 1000)
    (tmp_path / "tmp").mkdir()
    with pytest.raises(UserError, match="--temp-dir .*: not enough free space"):
        bounded(d / "kn5.arpa", tmp_path / "out", temp_dir=str(tmp_path / "tmp"), window=100)
    assert not os.path.exists(tmp_path / "out") and os.listdir(tmp_path / "tmp") == []
