"""The end-to-end training-speed script: its Zipf corpora and one measured run."""

import os

import sampledlm
from sampledlm.bench.train_speed import compare, jobs_for, summary, zipf_corpus
from sampledlm.data.vocab import Vocab

SRC = os.path.dirname(os.path.dirname(os.path.abspath(sampledlm.__file__)))


def test_zipf_corpus_has_v_words_and_is_reproducible(tmp_path):
    f = zipf_corpus(str(tmp_path / "a"), 60, tokens=500, valid_tokens=50)
    vocab = Vocab.load(f["vocab"])
    assert len(vocab) == 60 and list(vocab.counts[2:]) == sorted(vocab.counts[2:], reverse=True)
    train = open(f["train"]).read()
    n = len(train.split()) + train.count("\n")  # words and the </s> of each sentence
    assert 500 <= n < 541
    assert all(w in vocab for w in train.split())
    again = zipf_corpus(str(tmp_path / "b"), 60, tokens=500, valid_tokens=50)
    assert open(again["train"]).read() == train
    words = train.split()
    assert words.count("w0") > words.count("w9") > 0  # Zipf: rank 0 about ten times rank 9


def test_compare_reads_the_trainers_tokens_per_second(tmp_path):
    f = zipf_corpus(str(tmp_path / "z"), 40, tokens=400, valid_tokens=40)
    jobs = jobs_for({"ffnn": ["--model", "ffnn", "-d", "4", "--hidden", "8", "--objective", "css-is",
                              "--samples", "5"]}, {"zipf": f})
    rows = compare({"here": SRC}, jobs, rounds=1, work=str(tmp_path / "w"), log=lambda msg: None)
    assert len(rows) == 1 and rows[0]["tokens_per_s"] > 0 and rows[0]["valid_ppl"] > 1
    (s,) = summary(rows)
    assert s["side"] == "here" and s["tokens_per_s"] == rows[0]["tokens_per_s"]
