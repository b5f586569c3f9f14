"""Lattices: SLF read/write, n-best extraction, exact expansion (equal to enumerating every path), and the
recurrent approximation (exact once k covers the longest path)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from sampledlm.errors import UserError
from sampledlm.lm import Mixture
from sampledlm.loader import load_model
from sampledlm.use.lattice import all_paths, best_path, expand, expansion_lattice, nbest, rescore, rescore_all
from sampledlm.use.nbest import Weights
from sampledlm.use.score import score_sentences
from sampledlm.use.slf import Lattice, Link, read_lattices, read_slf, write_slf


def random_lattice(seed, words, nodes=7, extra=6):
    """A random DAG: a chain 0 -> 1 -> ... -> nodes-1 plus forward links; some links are epsilon."""
    rng = random.Random(seed)
    links = [Link(i, i + 1, rng.choice(words), -rng.uniform(1, 5), -rng.uniform(1, 3)) for i in range(nodes - 1)]
    for _ in range(extra):
        a = rng.randrange(nodes - 1)
        b = rng.randrange(a + 1, nodes)
        links.append(Link(a, b, None if rng.random() < 0.2 else rng.choice(words), -rng.uniform(1, 5), -rng.uniform(1, 3)))
    for i in range(nodes - 1):  # parallel alternatives
        links.append(Link(i, i + 1, rng.choice(words), -rng.uniform(1, 5), -rng.uniform(1, 3)))
    return Lattice(f"lat{seed}", nodes, links)


WORDS = [f"w{i}" for i in range(12)] + ["oov-word"]


def path_scores(lat, lm, w):
    """Brute force: every path scored as a whole sentence."""
    paths = all_paths(lat)
    lm_new = [s.ln_prob for s in score_sentences(lm, [p.words for p in paths])]
    return [(tuple(p.words), w.am_scale * p.am + w.lm_weight * ((1 - w.first_pass_weight) * n + w.first_pass_weight * p.lm)
             + w.word_penalty * len(p.words)) for p, n in zip(paths, lm_new)]


def test_slf_round_trip_and_node_words(tmp_path):
    lat = random_lattice(0, WORDS)
    write_slf(str(tmp_path / "a.slf"), lat)
    back = read_slf(str(tmp_path / "a.slf"))
    assert (back.id, back.num_nodes, back.start, back.end) == ("lat0", lat.num_nodes, 0, lat.num_nodes - 1)
    assert [(x.start, x.end, x.word) for x in back.links] == [(x.start, x.end, x.word) for x in lat.links]
    np.testing.assert_allclose([(x.am, x.lm) for x in back.links], [(x.am, x.lm) for x in lat.links], rtol=1e-9)
    (tmp_path / "b.lat").write_text("VERSION=1.0\nbase=10\nN=4 L=4\nI=0 W=!NULL\nI=1 W=the\nI=2 W=a\nI=3 W=!NULL\n"
                                    "J=0 S=0 E=1 a=-1 l=-2\nJ=1 S=0 E=2 a=-2\nJ=2 S=1 E=3\nJ=3 S=2 E=3\n")
    lat = read_slf(str(tmp_path / "b.lat"))
    assert sorted(tuple(p.words) for p in all_paths(lat)) == [("a",), ("the",)]
    assert lat.links[0].am == pytest.approx(-math.log(10)) and lat.links[0].lm == pytest.approx(-2 * math.log(10))
    assert [x.id for x in read_lattices(str(tmp_path))] == ["lat0", "b"]


@pytest.mark.parametrize("text,message", [
    ("N=2 L=1\nJ=0 S=0 E=5\n", "x.slf:2: node 5 is outside 0..1"),
    ("N=2 L=2\nJ=0 S=0 E=1\n", "x.slf:1: L=2 but the file has 1 link lines"),
    ("N=2 L=1\nJ=0 S=0 E=1 a=abc\n", "x.slf:2: a='abc' is not a number"),
    ("N=2 L=1\nJ=0 S=zero E=1\n", "x.slf:2: S='zero' is not an integer"),
    ("VERSION=1.0\nJ=0 S=0 E=1\n", "x.slf: no 'N=... L=...' line"),
    ("N=2 L=2\nJ=0 S=0 E=1\nJ=1 S=1 E=0\n", "the links form a cycle"),
    ("N=2 L=1\nJ=0 S=0 E=1 bogus\n", "x.slf:2: 'bogus' is not NAME=VALUE"),
])
def test_malformed_slf(tmp_path, text, message):
    (tmp_path / "x.slf").write_text(text)
    with pytest.raises(UserError) as e:
        read_slf(str(tmp_path / "x.slf"))
    assert message in str(e.value)


def test_nbest_from_a_lattice_is_the_top_of_all_paths():
    lat = random_lattice(3, WORDS)
    w = Weights(1.0, 0.7, 0.3)
    best = {}
    for p in all_paths(lat):
        s = p.am + 0.7 * p.lm + 0.3 * len(p.words)
        best[tuple(p.words)] = max(best.get(tuple(p.words), -math.inf), s)
    want = sorted(best.values(), reverse=True)[:10]
    got = nbest(lat, 10, w)
    np.testing.assert_allclose([h.am + 0.7 * h.lm + 0.3 * len(h.words) for h in got.hyps], want)


@pytest.mark.parametrize("name", ["kn3.arpa", "ffnn3", "mix", "melm"])  # melm: Feat-I, trigrams and no triggers
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exact_expansion_equals_enumerating_paths(four_models, name, seed):
    lm = (Mixture([load_model(str(four_models / "ffnn3")), load_model(str(four_models / "kn3.arpa"))], [0.4, 0.6])
          if name == "mix" else load_model(str(four_models / name)))
    assert lm.context_length == 2
    lat = random_lattice(seed, WORDS)
    w = Weights(1.0, 1.5, -0.2, first_pass_weight=0.25)
    want = path_scores(lat, lm, w)
    big = expand(lat, lm, first_pass_weight=0.25)
    got = [(tuple(p.words), p.am + 1.5 * p.lm - 0.2 * len(p.words)) for p in all_paths(big)]
    assert sorted(x[0] for x in got) == sorted(x[0] for x in want)  # every path once, no path added
    np.testing.assert_allclose(sorted(x[1] for x in got), sorted(x[1] for x in want), rtol=1e-6)
    assert big.num_nodes >= lat.num_nodes
    top_words, top = max(want, key=lambda x: x[1])
    words, score = best_path(big, Weights(1.0, 1.5, -0.2))
    assert score == pytest.approx(top, rel=1e-6)
    hyp = rescore(lat, lm, w)  # the on-the-fly search finds the same best path
    assert (1.0 * hyp.am + 1.5 * (0.75 * hyp.lm_new + 0.25 * hyp.lm) - 0.2 * len(hyp.words)) == pytest.approx(top, rel=1e-6)


def test_recurrent_approximation_is_exact_when_k_covers_the_paths(four_models):
    lm = load_model(str(four_models / "gru"))
    assert lm.context_length is None
    lat = random_lattice(5, WORDS)
    w = Weights(1.0, 2.0, 0.0)
    top = max(s for _, s in path_scores(lat, lm, w))
    exact = rescore(lat, lm, w, k=lat.num_nodes)
    assert exact.am + 2.0 * exact.lm_new == pytest.approx(top, rel=1e-5)
    lats = [random_lattice(seed, WORDS) for seed in (5, 6, 7)]
    together = rescore_all(lats, lm, w, k=1)  # the lattices advance together, their queries in one call each level
    alone = [rescore(x, lm, w, k=1) for x in lats]
    assert [h.words for h in together] == [h.words for h in alone]
    np.testing.assert_allclose([h.lm_new for h in together], [h.lm_new for h in alone], rtol=1e-5)
    approx = rescore(lat, lm, w, k=1)
    assert approx.am + 2.0 * approx.lm_new <= top + 1e-6  # merging histories can only miss the best path
    with pytest.raises(UserError, match="give the approximation's k"):
        rescore(lat, lm, w)


def test_expanded_lattice_round_trips_through_slf(four_models, tmp_path):
    lm = load_model(str(four_models / "kn3.arpa"))
    big = expand(random_lattice(4, WORDS), lm)
    write_slf(str(tmp_path / "big.slf"), big)
    back = read_slf(str(tmp_path / "big.slf"))
    assert best_path(back)[0] == best_path(big)[0]


def test_cli_rescores_lattices(four_models, run_in_process, tmp_path):
    import json

    (tmp_path / "lats").mkdir()
    (tmp_path / "dev").mkdir()
    refs = []
    for seed in range(8):
        lat = random_lattice(seed, WORDS)
        write_slf(str(tmp_path / ("dev" if seed < 4 else "lats") / f"u{seed}.slf"), lat)
        refs.append(f"{lat.id} {' '.join(all_paths(lat)[0].words)}\n")
    (tmp_path / "refs").write_text("".join(refs))
    r = run_in_process("rescore", str(four_models / "kn3.arpa"), "lats", "--refs", "refs", "--tune-on", "dev",
                       "--tune-refs", "refs", "--one-best", "best.txt", "-o", "expanded", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["exact"] and doc["k"] == 2 and doc["utterances"] == 4 and 0 <= doc["rescored_wer"]
    assert doc["dev"]["lattices"] and doc["dev"]["utterances"] == 4  # tuned on the dev lattices themselves
    best = dict(line.split(" ", 1) for line in (tmp_path / "best.txt").read_text().splitlines())
    assert sorted(best) == ["lat4", "lat5", "lat6", "lat7"]
    w = doc["weights"]
    big = read_slf(str(tmp_path / "expanded" / "lat5.slf"))
    assert " ".join(best_path(big, Weights(w["am_scale"], w["lm_weight"], w["word_penalty"]))[0]) == best["lat5"]
    r = run_in_process("rescore", str(four_models / "kn3.arpa"), "lats", "--tune-on", "dev", "--tune-refs", "refs",
                       "--tune-nbest", "5", "--tune-first-pass", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert "lattices" not in doc["dev"] and doc["dev"]["hypotheses"] <= 20  # on the dev lattices' 5 best paths
    r = run_in_process("rescore", str(four_models / "gru"), "lats", "--k", "1", "--tune-on", "dev", "--tune-refs",
                       "refs", "--tune-first-pass", "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["dev"]["lattices"], r.stderr
    r = run_in_process("rescore", str(four_models / "gru"), "lats", cwd=tmp_path)
    assert r.returncode == 1 and "give --k" in r.stderr
    r = run_in_process("rescore", str(four_models / "gru"), "lats", "--k", "2", "--refs", "refs", cwd=tmp_path)
    assert r.returncode == 0 and "WER: first pass" in r.stderr, r.stderr
    assert [ln.split()[0] for ln in r.stdout.splitlines()] == ["lat4", "lat5", "lat6", "lat7"]  # the new 1-best
    r = run_in_process("rescore", str(four_models / "gru"), "lats", "--k", "2", "-o", "x", "--json", "--one-best",
                       "gru-best.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # a recurrent model: the search's expansion, merged by the last 2 words
    doc = json.loads(r.stdout)
    assert not doc["exact"] and doc["k"] == 2
    gru_best = dict((line.split(" ", 1) + [""])[:2] for line in (tmp_path / "gru-best.txt").read_text().splitlines())
    for name in ("lat4", "lat5", "lat6", "lat7"):  # the written lattice's best path is the search's 1-best
        written = read_slf(str(tmp_path / "x" / f"{name}.slf"))
        assert " ".join(best_path(written, Weights())[0]) == gru_best[name]


def test_recorded_expansion_gives_the_search_and_tuning_uses_it(four_models):
    """The expansion a search records reproduces that search; an exact model's record gives the exact best path
    under any weights (brute force), and tune_lattices' choice and error count agree with direct searches."""
    from sampledlm.use.lattice import tune_lattices
    from sampledlm.use.nbest import Grid
    from sampledlm.use.wer import align

    lm = load_model(str(four_models / "kn3.arpa"))
    lats = [random_lattice(seed, WORDS, nodes=5, extra=4) for seed in range(6)]
    for lat in lats:
        lat.ref = list(all_paths(lat)[-1].words)
    w0 = Weights(1.0, 2.0, 0.5, 0.3)
    hyps, exps = rescore_all(lats, lm, w0, record=True)
    assert [e.best_words(w0) for e in exps] == [h.words for h in hyps]
    for w in (Weights(1.0, 0.5, -1.0, 0.0), Weights(1.0, 4.0, 2.0, 0.6)):
        for lat, e in zip(lats, exps):
            best = max(path_scores(lat, lm, w), key=lambda x: x[1])
            assert tuple(e.best_words(w)) == best[0]
    grid = Grid(lm_weight=[0.0, 0.5, 2.0, 8.0], word_penalty=[-2.0, 0.0, 2.0], first_pass_weight=[0.0, 0.5])
    tuned, errors = tune_lattices(exps, grid=grid)
    counts = {}
    for b in grid.first_pass_weight:
        for lw in grid.lm_weight:
            for wp in grid.word_penalty:
                w = Weights(1.0, lw, wp, b)
                counts[(lw, wp, b)] = sum(align(lat.ref, h.words).errors for lat, h in zip(lats, rescore_all(lats, lm, w)))
    assert errors == min(counts.values())
    assert counts[(tuned.lm_weight, tuned.word_penalty, tuned.first_pass_weight)] == errors
    # ties: the first grid point (tune's order) inside the grid, an edge only when nothing inside ties (Grid.best)
    ties = [key for key, v in counts.items() if v == errors]
    inside = [k for k in ties if not (k[0] == max(grid.lm_weight) or k[1] in (min(grid.word_penalty),
                                                                            max(grid.word_penalty)))]
    assert (inside or ties)[0] == (tuned.lm_weight, tuned.word_penalty, tuned.first_pass_weight)
    # a recurrent model: the record holds the scores given the histories its search kept
    gru = load_model(str(four_models / "gru"))
    hyps, exps = rescore_all(lats, gru, w0, k=1, record=True)
    assert [e.best_words(w0) for e in exps] == [h.words for h in hyps]


def test_continuation_queries_grouped_by_history_give_score_numbers(four_models):
    """Queries sharing a history are read once; the numbers are the stream scorer's (one sentence per query)."""
    from sampledlm.data.vocab import EOS_ID
    from sampledlm.use.lattice import continuation_logprobs

    for name in ("kn3.arpa", "gru"):
        lm = load_model(str(four_models / name))
        ids = [lm.vocab.index.get(w, 1) for w in WORDS]
        queries = [((), ids[0]), ((ids[1], ids[2]), ids[3]), ((), ids[4]), ((ids[1], ids[2]), EOS_ID),
                   ((ids[1], ids[2]), ids[5]), ((ids[6],), ids[0])]
        got = continuation_logprobs(lm, queries)
        want = []
        for hist, word in queries:
            stream = np.array(list(hist) + [word] + ([] if word == EOS_ID else [EOS_ID]), dtype=np.int64)
            want.append(lm.logprobs(stream, independent=True)[len(hist)])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_exact_expansion_keeps_the_node_times(four_models, tmp_path):
    """Each node's copies keep its time (t=), which ASR pipelines need for CTMs and alignment; they were dropped."""
    lm = load_model(str(four_models / "kn3.arpa"))
    lat = random_lattice(4, WORDS)
    lat.times = {i: 0.25 * i for i in range(lat.num_nodes)}
    big = expand(lat, lm)
    assert big.num_nodes > lat.num_nodes and set(big.times) == set(range(big.num_nodes))
    assert big.times[big.start] == 0.0 and big.times[big.end] == 0.25 * (lat.num_nodes - 1)
    assert all(big.times[lk.end] > big.times[lk.start] for lk in big.links)  # every link goes forward in time
    write_slf(str(tmp_path / "big.slf"), big)
    assert read_slf(str(tmp_path / "big.slf")).times == big.times


def test_a_merged_expansion_keeps_the_node_times(four_models, tmp_path):
    """A recurrent model's merged lattice (its search's states) keeps each node's time too; it had none."""
    lm = load_model(str(four_models / "gru"))
    lat = random_lattice(5, WORDS)
    lat.times = {i: 0.25 * i for i in range(lat.num_nodes)}
    _, (exp,) = rescore_all([lat], lm, k=1, record=True)
    merged = expansion_lattice(exp, lat)
    assert set(merged.times) == set(range(merged.num_nodes))
    assert merged.times[merged.start] == 0.0 and merged.times[merged.end] == 0.25 * (lat.num_nodes - 1)
    for lk in merged.links:  # a word's link goes forward in time; only the closing </s> link stays at the end node
        assert merged.times[lk.end] > merged.times[lk.start] or (lk.word is None and lk.end == merged.end)
    write_slf(str(tmp_path / "merged.slf"), merged)
    assert read_slf(str(tmp_path / "merged.slf")).times == merged.times
