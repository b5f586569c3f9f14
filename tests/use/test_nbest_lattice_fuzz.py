"""Property-based tests of the n-best readers (SRILM, Kaldi, JSONL) and the HTK SLF lattice reader.

Well-formed files written by the toolkit read back to what was written. Mutations of them (truncation,
lost, repeated, swapped or inserted lines, bad numbers, huge counts, invalid UTF-8, NUL bytes; see
:mod:`tests.campaigns.mutate`) either read as usable lists/lattices (finite scores, nodes in range, acyclic,
so that n-best extraction and rescoring run) or stop with a UserError naming the file; never another exception.

The number of examples comes from the hypothesis profile (tests/conftest.py)."""

from __future__ import annotations

import math
import os
import random

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="property-based tests need hypothesis (the test extra)")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.campaigns.mutate import BAD_TOKENS, KINDS, RAW, Op, mutate  # noqa: E402
from sampledlm.errors import UserError  # noqa: E402
from sampledlm.use.lattice import best_path, nbest  # noqa: E402
from sampledlm.use.nbest import Hypothesis, NBest, read_nbest, write_nbest  # noqa: E402
from sampledlm.use.slf import Lattice, Link, read_lattices, write_slf  # noqa: E402

WORDS = ["a", "b", "the", "café", "中文", "x1"]

ops = st.lists(st.builds(Op, st.sampled_from(KINDS), st.integers(0, 1 << 30), st.integers(0, 1 << 30),
                         st.sampled_from(BAD_TOKENS) | st.text(max_size=8),
                         st.sampled_from(RAW) | st.binary(max_size=12)), min_size=1, max_size=3)


def random_lists(seed: int) -> list[NBest]:
    rng = random.Random(seed)
    return [NBest(f"utt{u}", [Hypothesis([rng.choice(WORDS) for _ in range(rng.randint(0, 5))],
                                         round(-rng.uniform(1, 50), 4), round(-rng.uniform(1, 20), 4))
                              for _ in range(rng.randint(1, 4))])
            for u in range(rng.randint(1, 3))]


def random_lattice(seed: int) -> Lattice:
    rng = random.Random(seed)
    nodes = rng.randint(2, 6)
    links = [Link(i, i + 1, rng.choice(WORDS), -round(rng.uniform(1, 5), 3), -round(rng.uniform(1, 3), 3))
             for i in range(nodes - 1)]
    for _ in range(rng.randint(0, 4)):
        a = rng.randrange(nodes - 1)
        links.append(Link(a, rng.randrange(a + 1, nodes), None if rng.random() < 0.2 else rng.choice(WORDS),
                          -round(rng.uniform(1, 5), 3), -round(rng.uniform(1, 3), 3)))
    return Lattice(f"lat{seed}", nodes, links)


def names_the_input(e: UserError, path: str) -> bool:
    return str(e).startswith(path)


def check_lists(lists: list[NBest]) -> None:
    assert lists
    for nb in lists:
        assert nb.hyps and isinstance(nb.id, str)
        for h in nb.hyps:
            assert math.isfinite(h.am) and math.isfinite(h.lm)
            assert all(isinstance(w, str) and w for w in h.words)


def check_lattice(lat: Lattice) -> None:
    assert 0 <= lat.start < lat.num_nodes and 0 <= lat.end < lat.num_nodes
    for link in lat.links:
        assert 0 <= link.start < lat.num_nodes and 0 <= link.end < lat.num_nodes
        assert math.isfinite(link.am) and math.isfinite(link.lm)
    try:  # what a user does next: the best path and a 3-best list (no path from start to end is a clean error)
        best_path(lat)
        nbest(lat, 3)
    except UserError:
        pass


def written(tmp, fmt: str, lists: list[NBest]) -> str:
    path = os.path.join(tmp, "in.jsonl" if fmt == "jsonl" else fmt)
    write_nbest(path, lists, fmt)
    return path


@pytest.mark.parametrize("fmt", ["srilm", "kaldi", "jsonl"])
@given(seed=st.integers(0, 10**6))
def test_nbest_round_trip(tmp_path_factory, fmt, seed):
    lists = random_lists(seed)
    back = read_nbest(written(str(tmp_path_factory.mktemp("nb")), fmt, lists), fmt)
    assert [nb.id for nb in back] == [nb.id for nb in lists]
    for a, b in zip(back, lists):
        assert [h.words for h in a.hyps] == [h.words for h in b.hyps]
        assert all(math.isclose(x.am, y.am, rel_tol=1e-9) and math.isclose(x.lm, y.lm, rel_tol=1e-9)
                   for x, y in zip(a.hyps, b.hyps))


@pytest.mark.parametrize("fmt", ["srilm", "kaldi", "jsonl"])
@given(seed=st.integers(0, 10**6), ops=ops, which=st.integers(0, 2))
def test_mutated_nbest_reads_or_stops_with_an_error_naming_the_file(tmp_path_factory, fmt, seed, ops, which):
    path = written(str(tmp_path_factory.mktemp("nb")), fmt, random_lists(seed))
    if os.path.isdir(path):  # srilm and kaldi write a directory: mutate one of its files
        victim = os.path.join(path, sorted(os.listdir(path))[which % len(os.listdir(path))])
    else:
        victim = path
    with open(victim, "rb") as f:
        data = f.read()
    with open(victim, "wb") as f:
        f.write(mutate(data, ops))
    try:
        lists = read_nbest(path, fmt)
    except UserError as e:
        assert names_the_input(e, path), str(e)
        return
    check_lists(lists)


@given(seed=st.integers(0, 10**6))
def test_lattice_round_trip(tmp_path_factory, seed):
    lat = random_lattice(seed)
    path = str(tmp_path_factory.mktemp("lat") / "a.slf")
    write_slf(path, lat)
    back, = read_lattices(path)
    assert (back.num_nodes, back.start, back.end) == (lat.num_nodes, 0, lat.num_nodes - 1)
    assert [(k.start, k.end, k.word) for k in back.links] == [(k.start, k.end, k.word) for k in lat.links]
    assert all(math.isclose(a.am, b.am) and math.isclose(a.lm, b.lm) for a, b in zip(back.links, lat.links))


@given(seed=st.integers(0, 10**6), ops=ops)
def test_mutated_lattice_reads_or_stops_with_an_error_naming_the_file(tmp_path_factory, seed, ops):
    path = str(tmp_path_factory.mktemp("lat") / "a.slf")
    write_slf(path, random_lattice(seed))
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(mutate(data, ops))
    try:
        lats = read_lattices(path)
    except UserError as e:
        assert names_the_input(e, path), str(e)
        return
    for lat in lats:
        check_lattice(lat)
