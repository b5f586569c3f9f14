"""The short-list objective (Schwenk 2007): exact normalisation with a real back-off ARPA and real models, the
training loss (out-of-short-list targets skipped), and train / eval / resume / faults through the tool."""

import json

import numpy as np
import pytest
import torch
from helpers import config_for, synthetic_sentences, write_corpus

from sampledlm.data.corpus import build_vocab, load_ids
from sampledlm.errors import UserError
from sampledlm.neural import rundir as runs
from sampledlm.neural.ffnn import FFNN
from sampledlm.neural.lm import batch_log_probs, perplexity, stream_logprobs
from sampledlm.neural.rnn import GRULM
from sampledlm.neural.trainer import TrainingInterrupted, new_run, resume_run
from sampledlm.ngram import train_ngram, write_arpa
from sampledlm.ngram.backoff import open_backoff
from sampledlm.objectives import make_objective
from sampledlm.objectives.output import OutputLayer


@pytest.fixture
def corpus_and_arpa(tmp_path, private_cache):
    """(dir, vocab, test ids): train/valid/test texts over 30 words and kn3.arpa, a KN trigram of train.txt."""
    sents = synthetic_sentences(260, vocab_size=30, seed=4)
    for name, part in (("train", sents[:200]), ("valid", sents[200:230]), ("test", sents[230:])):
        write_corpus(tmp_path / f"{name}.txt", part)
    vocab = build_vocab(str(tmp_path / "train.txt"))
    write_arpa(train_ngram(load_ids(str(tmp_path / "train.txt"), vocab), vocab, order=3), str(tmp_path / "kn3.arpa"))
    return tmp_path, vocab, load_ids(str(tmp_path / "test.txt"), vocab)


def model_of(kind, v):
    torch.manual_seed(0)
    if kind == "ffnn":
        return FFNN.build(v, order=3, embed_dim=8, hidden=[12], dropout=0.0, sparse_output=True)
    return GRULM.build(v, embed_dim=8, hidden=12, dropout=0.0, tie=False, sparse_output=True)


@pytest.mark.parametrize("kind", ["ffnn", "gru"])
def test_sums_to_one_over_v_with_a_back_off_arpa(corpus_and_arpa, kind):
    d, vocab, ids = corpus_and_arpa
    v = len(vocab)
    model = model_of(kind, v)
    obj = make_objective("shortlist", vocab.counts, shortlist=8)
    obj.bind(model)
    obj.set_backoff(open_backoff(str(d / "kn3.arpa"), vocab))
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)  # far from uniform
    ids = ids[:300]
    lp = batch_log_probs(model, obj, ids).double()
    assert lp.shape == (len(ids), v)
    assert torch.allclose(lp.exp().sum(1), torch.ones(len(ids), dtype=torch.float64), atol=1e-5)
    direct = stream_logprobs(model, obj, ids, batch_size=64 if kind == "ffnn" else 1)
    assert np.allclose(direct, lp.gather(1, torch.from_numpy(ids.astype(np.int64)).unsqueeze(1)).squeeze(1).numpy(),
                       atol=1e-5)
    outside = obj.index[torch.from_numpy(ids.astype(np.int64))] < 0
    assert outside.any() and not outside.all()
    # words outside the short-list get the n-gram's own probability
    ngram = open_backoff(str(d / "kn3.arpa"), vocab).ngram.stream_logprobs(ids, vocab)
    assert np.allclose(direct[outside.numpy()], ngram[outside.numpy()], atol=1e-5)


def test_short_list_mass_equals_the_sum_of_the_queries(corpus_and_arpa):
    d, vocab, ids = corpus_and_arpa
    backoff = open_backoff(str(d / "kn3.arpa"), vocab)
    rng = np.random.default_rng(0)
    member = rng.random(len(vocab)) < 0.4
    hist = rng.integers(0, len(vocab) + 1, (40, 2))  # <s> (= V) included
    hist[:5, 0] = len(vocab)
    words = np.flatnonzero(member)
    brute = [np.logaddexp.reduce(backoff.log_probs(np.repeat(h[None], len(words), 0), words)) for h in hist]
    assert np.allclose(backoff.log_mass(hist, member), brute, atol=1e-10)


def test_training_skips_targets_outside_the_short_list_and_reads_only_its_rows():
    v, s = 50, 10
    counts = np.arange(v, 0, -1)  # word 0 most frequent: the short-list is words 0..9
    obj = make_objective("shortlist", counts, shortlist=s)
    out = OutputLayer(v, 6, sparse=obj.sparse_output)
    obj.bind(out)
    assert obj.words.tolist() == list(range(s))
    torch.manual_seed(0)
    x, y = torch.randn(5, 6), torch.tensor([1, 30, 4, 49, 9])
    loss = obj(out, x, y)
    lp = torch.log_softmax(out.score_all(x)[:, :s], 1)
    assert loss.item() == pytest.approx(-(lp[0, 1] + lp[2, 4] + lp[4, 9]).item() / 3, rel=1e-5)
    loss.backward()
    assert set(out.weight.grad.coalesce().indices()[0].tolist()) <= set(range(s))
    assert obj(out, x, torch.tensor([20, 30, 40, 41, 42, 43])[:5]).item() == 0.0  # nothing inside: no signal


def test_train_eval_reload_and_faults_through_the_tool(corpus_and_arpa, run_in_process):
    d, vocab, ids = corpus_and_arpa
    r = run_in_process("train", "--train", "train.txt", "--valid", "valid.txt", "-o", "run", "--objective", "shortlist",
                       "--shortlist", "8", "--backoff", "kn3.arpa", "--order", "3", "-d", "6", "--hidden", "8",
                       "--epochs", "2", "--batch-size", "16", "--threads", "1", cwd=d)
    assert r.returncode == 0, r.stderr
    config = json.loads((d / "run" / "config.json").read_text())
    assert config["objective"] == {"name": "shortlist", "options": {"shortlist": 8, "backoff": str(d / "kn3.arpa")}}
    r = run_in_process("eval", "run", "--test", "test.txt", "--json", cwd=d)
    assert r.returncode == 0, r.stderr
    ppl = json.loads(r.stdout)["ppl"]
    model, objective, vocab2, _ = runs.load_run(str(d / "run"))
    assert objective.backoff.order == 3
    assert perplexity(model, objective, ids) == pytest.approx(ppl, rel=1e-6)
    assert 1 < ppl < len(vocab)

    # another vocabulary, then no file: one line naming the back-off file
    other = d / "other.txt"
    write_corpus(other, synthetic_sentences(30, vocab_size=12, seed=9))
    v_other = build_vocab(str(other))
    write_arpa(train_ngram(load_ids(str(other), v_other), v_other, order=2), str(d / "kn3.arpa"))
    r = run_in_process("eval", "run", "--test", "test.txt", cwd=d)
    assert r.returncode != 0 and "kn3.arpa" in r.stderr and "vocabulary" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    (d / "kn3.arpa").unlink()
    r = run_in_process("eval", "run", "--test", "test.txt", cwd=d)
    assert r.returncode != 0 and "kn3.arpa" in r.stderr and "not found" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    with pytest.raises(UserError, match="kn3.arpa"):
        runs.load_run(str(d / "run"))


def test_resume_gives_the_same_numbers(corpus_and_arpa):
    d, vocab, _ = corpus_and_arpa
    config, vocab = config_for(d, "gru", optimizer="adam", lr=0.01, clip=1.0, epochs=2)
    config["objective"] = {"name": "shortlist", "options": {"shortlist": 8, "backoff": str(d / "kn3.arpa")}}
    new_run(str(d / "a"), config, vocab).train()
    t = new_run(str(d / "b"), config, vocab)
    t.stop_when = lambda st, n=t.data.num_batches() + 2: st.step >= n
    with pytest.raises(TrainingInterrupted):
        t.train()
    resume_run(str(d / "b")).train()
    a, b = runs.load_run(str(d / "a")), runs.load_run(str(d / "b"))
    for x, y in ((a[0], b[0]), (a[1], b[1])):
        for k, v in x.state_dict().items():
            assert torch.equal(v, y.state_dict()[k]), k
    assert [json.loads(line)["valid_ppl"] for line in open(d / "a" / "metrics.jsonl")] == \
        [json.loads(line)["valid_ppl"] for line in open(d / "b" / "metrics.jsonl")]


def test_without_a_back_off_file_the_unigram_covers_the_rest():
    v = 30
    counts = np.arange(v, 0, -1) * 3
    obj = make_objective("shortlist", counts, shortlist=5)
    out = OutputLayer(v, 4)
    obj.bind(out)
    with torch.no_grad():
        lp = obj.log_prob(out, torch.randn(3, 4)).double()
    assert torch.allclose(lp.exp().sum(1), torch.ones(3, dtype=torch.float64), atol=1e-6)
    q = (counts + 1.0) / (counts + 1.0).sum()
    assert np.allclose(lp[:, 5:].exp().numpy(), np.broadcast_to(q[5:], (3, v - 5)), atol=1e-6)
