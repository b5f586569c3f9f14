"""The compiled ARPA line writer: the same bytes as Python's ``%.8f`` formatting, texts joined right,
prefix lines read forward in blocks."""

from __future__ import annotations

import numpy as np

from sampledlm.ngram.arpa_lines import ByteLines, WordBytes, formattable, join_texts, lines


def _python_lines(logp, texts, bow=None, keep=None):
    out = []
    for i, t in enumerate(texts):
        if keep is not None and not keep[i]:
            continue
        out.append(f"{logp[i]:.8f}\t{t}" + (f"\t{bow[i]:.8f}" if bow is not None else "") + "\n")
    return "".join(out).encode()


def _texts(words):
    wb = WordBytes(words)
    none = np.zeros(0, np.int64)
    return join_texts(wb.buf, none, none, wb.buf, wb.start, np.arange(len(words), dtype=np.int64), False)


def test_numbers_are_written_as_percent_8f():
    rng = np.random.default_rng(0)
    edge = [0.0, -0.0, -99.0, 1e-8, -1e-8, -5e-9, 0.5, -0.123456785, 123456.12345678, -1048575.99999999, 7.0]
    vals = np.round(np.concatenate([edge, -rng.exponential(2.0, 5000), rng.normal(0, 1e4, 5000),
                                    rng.uniform(-1e-6, 1e-6, 500)]), 8)
    assert formattable(vals)
    words = [f"w{i}" for i in range(len(vals))]
    got = lines(vals, vals[::-1].copy(), True, *_texts(words), np.zeros(0, np.bool_), False).tobytes()
    assert got == _python_lines(vals, words, vals[::-1])


def test_values_it_cannot_write_are_refused():
    assert not formattable(np.array([-np.inf, 0.5]))
    assert not formattable(np.array([0.123456789]))  # not rounded to 8 decimals
    assert not formattable(np.array([-999999999.9]))  # %.8f shows its binary digits: -999999999.89999998
    assert formattable(np.zeros(0))


def test_joined_texts_and_kept_lines():
    words = ["a", "bé", "<s>", "ccc"]
    wb = WordBytes(words)
    pbuf, pstart = _texts(words)
    assert pbuf.tobytes().decode() == "a\nbé\n<s>\nccc\n"
    ctx, last = np.array([2, 2, 1, 3]), np.array([0, 3, 1, 2])
    tbuf, tstart = join_texts(pbuf, pstart, ctx, wb.buf, wb.start, last, True)
    texts = ["<s> a", "<s> ccc", "bé bé", "ccc <s>"]
    assert tbuf.tobytes().decode() == "".join(t + "\n" for t in texts)
    logp = np.array([-1.5, -0.25, -2.0, -0.0])
    keep = np.array([True, False, True, True])
    got = lines(logp, logp, False, tbuf, tstart, keep, True).tobytes()
    assert got == _python_lines(logp, texts, keep=keep)


def test_byte_lines_reads_forward_across_blocks(tmp_path):
    path = tmp_path / "lines.txt"
    text = [f"line {i} " + "x" * (i % 7) for i in range(5000)]
    path.write_text("".join(t + "\n" for t in text), encoding="utf-8")
    reader = ByteLines(str(path))
    reader.BLOCK = 97  # many small blocks: lines cut across block boundaries
    for i, j in [(0, 3), (2, 10), (10, 10), (500, 900), (4000, 4999)]:
        buf, start, base = reader.span(i, j)
        for m in range(i, j + 1):
            a, b = start[m - base], start[m - base + 1] - 1
            assert buf[a:b].tobytes().decode() == text[m]
    reader.close()


def test_group_keys_equals_numpy_unique():
    from sampledlm.ngram.build.counts import group_keys

    rng = np.random.default_rng(3)
    for n, hi in [(0, 5), (1, 5), (1000, 3), (20000, 500), (50000, 10**12)]:
        keys = rng.integers(0, hi, n).astype(np.int64)
        want = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
        got = group_keys(keys)
        for a, b in zip(got, want):
            assert np.array_equal(a, b.reshape(-1))
