"""N-best lists: readers and writers of the three formats (round trips, file:line errors), rescoring with any
LM or mixture, weight tuning, and the ``sampledlm rescore`` command."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from sampledlm.errors import UserError
from sampledlm.loader import load_model
from sampledlm.use.nbest import (Grid, Hypothesis, NBest, Weights, add_lm_scores, evaluate, read_nbest, read_refs,
                                 rerank, tune, write_nbest)


def noisy_lists(sentences, n=6, seed=0, vocab=None):
    """Each sentence's list: the reference (not always first) and corrupted copies; am = -2 * errors + noise."""
    rng = random.Random(seed)
    vocab = vocab or sorted({w for s in sentences for w in s})
    out = []
    for i, ref in enumerate(sentences):
        hyps = []
        for k in range(n):
            words = list(ref)
            for _ in range(0 if k == 0 else rng.randint(1, 2)):
                j = rng.randrange(len(words))
                words[j] = rng.choice(vocab)
            hyps.append(Hypothesis(words, -2.0 * sum(a != b for a, b in zip(words, ref)) + rng.gauss(0, 3),
                                   -rng.uniform(10, 20)))
        hyps.sort(key=lambda h: -(h.am + h.lm))  # first-pass order
        out.append(NBest(f"utt{i:03d}", hyps, list(ref)))
    return out


def sample_lists():
    return [NBest("a1", [Hypothesis(["the", "cat"], -10.25, -3.5), Hypothesis(["a", "cat", "sat"], -11.0, -4.75)]),
            NBest("b2", [Hypothesis(["dog"], -1.5, -0.125)]),
            NBest("c3", [Hypothesis([], -2.0, -1.0), Hypothesis(["x"], -3.0, -2.0)])]


@pytest.mark.parametrize("fmt,name", [("srilm", "out"), ("kaldi", "out"), ("jsonl", "out.jsonl")])
def test_round_trip(tmp_path, fmt, name):
    lists = sample_lists()
    write_nbest(str(tmp_path / name), lists, fmt)
    back = read_nbest(str(tmp_path / name))  # the format is recognised
    assert sorted(nb.id for nb in back) == ["a1", "b2", "c3"]
    back = {nb.id: nb for nb in back}
    for nb in lists:
        got = back[nb.id].hyps
        assert [h.words for h in got] == [h.words for h in nb.hyps]
        np.testing.assert_allclose([(h.am, h.lm) for h in got], [(h.am, h.lm) for h in nb.hyps], rtol=1e-9)


def test_srilm_list_of_files_and_log10_units(tmp_path):
    (tmp_path / "u1.nbest").write_text("-100 -10 2 <s> hello world </s>\n-101 -9 1 hello\n")
    (tmp_path / "u2.nbest.gz").write_bytes(__import__("gzip").compress(b"-5 -1 1 yes\n"))
    (tmp_path / "list").write_text("u1.nbest\nu2.nbest.gz\n")
    lists = read_nbest(str(tmp_path / "list"), "srilm")
    assert [nb.id for nb in lists] == ["u1", "u2"]
    assert lists[0].hyps[0].words == ["hello", "world"]
    assert lists[0].hyps[0].am == pytest.approx(-100 * math.log(10))


def test_kaldi_costs_are_negated_logs(tmp_path):
    d = tmp_path / "k"
    d.mkdir()
    (d / "text").write_text("utt-1 a b\nutt-2 a\nother-1 c\n")
    (d / "ac_cost").write_text("utt-1 10\nutt-2 12\nother-1 3\n")
    (d / "lm_cost").write_text("utt-1 5\nutt-2 4.5\nother-1 1\n")
    lists = {nb.id: nb for nb in read_nbest(str(d))}
    assert [(h.words, h.am, h.lm) for h in lists["utt"].hyps] == [(["a", "b"], -10, -5), (["a"], -12, -4.5)]


@pytest.mark.parametrize("fmt,files,message", [
    ("srilm", {"u.nbest": "-1 -2 1 a\n-1 x 1 b\n"}, "u.nbest:2: LM score 'x' is not a number"),
    ("srilm", {"u.nbest": "-1 -2 1 a\n-1 -2\n"}, "u.nbest:2: expected 'am_score lm_score nwords word...'"),
    ("srilm", {"u.nbest": "NBestList1.0\n(-5) a b\n"}, "u.nbest:1: NBestList1.0 (Decipher)"),
    ("srilm", {"u.nbest": "0 ||| a b ||| LM0= -1.5 TM0= -2 ||| -3\n"}, "u.nbest:1: a Moses n-best line"),
    ("srilm", {"u.nbest": "-1 -2 one a\n"}, "u.nbest:1: word count 'one'"),
    ("jsonl", {"l.jsonl": '{"id": "a", "hyps": [{"words": "x", "am": 1, "lm": 2}]}\n{"id": "b", "hyps": [{"words": "x"}]}\n'},
     'l.jsonl:2: hyps[0]: missing "am"'),
    ("jsonl", {"l.jsonl": '{"id": "a", "hyps": []}\n'}, "l.jsonl:1: utterance 'a' has no hypotheses"),
    ("jsonl", {"l.jsonl": "{oops\n"}, "l.jsonl:1: not JSON"),
    ("jsonl", {"l.jsonl": '{"id": "a", "hyps": ' + "[" * 150 + "]" * 150 + "}\n"}, "l.jsonl:1: JSON nested too deeply"),
    ("jsonl", {"l.jsonl": '{"id": "a", "hyps": [{"words": "x", "am": "nan", "lm": 2}]}\n'}, "l.jsonl:1: hyps[0].am: \"nan\" is not a finite number"),
    ("kaldi", {"text": "u-1 a\nu-2 b\n", "ac_cost": "u-1 1\n", "lm_cost": "u-1 1\nu-2 2\n"}, "ac_cost: no cost for 'u-2'"),
    ("kaldi", {"text": "u-1 a\n", "ac_cost": "u-1 1\nu-3 2\n", "lm_cost": "u-1 1\n"}, "ac_cost:2: key 'u-3' is not in"),
    ("kaldi", {"text": "u-1 a\n", "ac_cost": "u-1 z\n", "lm_cost": "u-1 1\n"}, "ac_cost:1: cost 'z' is not a number"),
    ("kaldi", {"text": "u1 a\n", "ac_cost": "u1 1\n", "lm_cost": "u1 1\n"}, "text:1: key 'u1' is not 'utterance-N'"),
])
def test_malformed_input_names_file_and_line(tmp_path, fmt, files, message):
    d = tmp_path / "in"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    path = d / next(iter(files)) if fmt != "kaldi" else d
    with pytest.raises(UserError, match=None) as e:
        read_nbest(str(path), fmt)
    assert message in str(e.value)


def test_missing_reference_is_an_error(tmp_path):
    (tmp_path / "ref").write_text("a1 the cat\n")
    with pytest.raises(UserError, match="no reference for utterance 'b2'"):
        read_refs(str(tmp_path / "ref"), sample_lists())


def test_lm_scores_are_sentence_log_probs(four_models):
    lm = load_model(str(four_models / "gru"))
    lists = noisy_lists([s.split() for s in (four_models / "test.txt").read_text().splitlines()[:5]])
    add_lm_scores(lm, lists)
    ids = np.array([i for h in lists[2].hyps for i in lm.vocab.encode(h.words) + [0]])
    lp = lm.logprobs(ids, independent=True)
    ends = np.flatnonzero(ids == 0)
    sums = [lp[s:e + 1].sum() for s, e in zip(np.r_[0, ends[:-1] + 1], ends)]
    np.testing.assert_allclose([h.lm_new for h in lists[2].hyps], sums, rtol=1e-6)


def test_rescoring_with_a_good_lm_lowers_wer_and_tuning_finds_the_grid_minimum(four_models):
    sents = [s.split() for s in (four_models / "test.txt").read_text().splitlines()]
    lists = noisy_lists(sents, seed=1, vocab=[f"w{i}" for i in range(50)])
    add_lm_scores(load_model(str(four_models / "kn3.arpa")), lists)
    dev, test = lists[:20], lists[20:]
    grid = Grid(lm_weight=[0.0, 0.5, 1.0, 2.0, 4.0], word_penalty=[-1.0, 0.0, 1.0])
    w = tune(dev, 1.0, grid)
    brute = min(evaluate(dev, Weights(1.0, lw, wp)).rescored.errors for lw in grid.lm_weight for wp in grid.word_penalty)
    assert evaluate(dev, w).rescored.errors == brute
    r = evaluate(test, w)
    assert r.oracle.errors <= r.rescored.errors < r.first_pass.errors
    best = rerank(test[0], w)
    assert best.hyps[0] is max(test[0].hyps, key=lambda h: w.score(np.array([h.am, h.lm_new, h.lm, len(h.words)])))


def test_first_pass_weight_one_keeps_the_first_pass_lm():
    nb = NBest("u", [Hypothesis(["a"], -1.0, -5.0, lm_new=-1.0), Hypothesis(["b"], -2.0, -1.0, lm_new=-9.0)])
    assert rerank(nb, Weights(first_pass_weight=1.0)).hyps[0].words == ["b"]
    assert rerank(nb, Weights(first_pass_weight=0.0)).hyps[0].words == ["a"]


def test_cli_rescore(four_models, run_in_process, tmp_path):
    sents = [s.split() for s in (four_models / "test.txt").read_text().splitlines()]
    lists = noisy_lists(sents, seed=2, vocab=[f"w{i}" for i in range(50)])
    write_nbest(str(tmp_path / "dev.jsonl"), lists[:20], "jsonl")
    write_nbest(str(tmp_path / "test-nbest"), lists[20:], "srilm")
    (tmp_path / "test.ref").write_text("".join(f"{nb.id} {' '.join(nb.ref)}\n" for nb in lists[20:]))
    args = ["rescore", str(four_models / "ffnn3"), "test-nbest", "--mix", str(four_models / "kn3.arpa"),
            "--weights", "0.3", "--tune-on", "dev.jsonl", "--refs", "test.ref", "--one-best", "best.txt",
            "-o", "rescored", "--json"]
    r = run_in_process(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["utterances"] == 20 and doc["oracle_wer"] <= doc["rescored_wer"] <= doc["first_pass_wer"]
    best = (tmp_path / "best.txt").read_text().splitlines()
    assert len(best) == 20 and best[0].split()[0] == "utt020"
    again = read_nbest(str(tmp_path / "rescored"))
    assert len(again) == 20 and again[0].hyps[0].words == best[0].split()[1:]
    r = run_in_process(*args, cwd=tmp_path)
    assert r.returncode == 1 and "already exists" in r.stderr
    r = run_in_process("rescore", str(four_models / "kn3.arpa"), "test-nbest", "--tune-on", "test-nbest", cwd=tmp_path)
    assert r.returncode == 1 and "tuning needs references" in r.stderr


def test_rescore_writes_the_1_best_and_reports_wer_from_the_lists_own_references(four_models, run_in_process,
                                                                                  tmp_path):
    """No --one-best, no -o: the new 1-best on standard output, the summary on standard error, with the WER of
    references the JSONL lists hold (no --refs needed)."""
    sents = [s.split() for s in (four_models / "test.txt").read_text().splitlines()]
    lists = noisy_lists(sents, seed=4, vocab=[f"w{i}" for i in range(50)])[:10]
    write_nbest(str(tmp_path / "l.jsonl"), lists, "jsonl")
    r = run_in_process("rescore", str(four_models / "kn3.arpa"), "l.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [ln.split()[0] for ln in r.stdout.splitlines()] == [nb.id for nb in lists]
    assert "10 utterances" in r.stderr and "WER: first pass" in r.stderr


def test_a_tuned_weight_on_the_edge_of_its_grid_is_searched_further(four_models, run_in_process, tmp_path):
    """Each reference is the longer hypothesis, 10 more words with an acoustic score 10 t worse: a word penalty
    above t picks it. With t up to 18 the grid's best point is its edge, 10; rescore says so and searches on."""
    ref = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12".split()
    lists = [NBest(f"u{i}", [Hypothesis(ref[:2], am=0.0, lm=0.0), Hypothesis(ref, am=-10.0 * t, lm=0.0)], ref=ref)
             for i, t in enumerate([2, 6, 9.7, 14, 18])]
    write_nbest(str(tmp_path / "dev.jsonl"), lists, "jsonl")
    r = run_in_process("rescore", str(four_models / "kn3.arpa"), "dev.jsonl", "--tune-on", "dev.jsonl", "--json",
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert "sat on the edge of its grid" in r.stderr and doc["grid_widened"]
    assert doc["weights"]["word_penalty"] > 18 and doc["dev"]["rescored_wer"] == 0.0
