"""``sampledlm generate``: reproducible with a seed, top-k and temperature do what they say, for n-gram
and neural models and mixtures."""

from __future__ import annotations

import numpy as np
import pytest

from sampledlm.data.vocab import EOS_ID, UNK_ID
from sampledlm.loader import load_model
from sampledlm.use.generate import generate, next_word_distribution


def test_distribution_temperature_and_top_k():
    lp = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    np.testing.assert_allclose(next_word_distribution(lp), [0.5, 0.3, 0.15, 0.05])
    q = next_word_distribution(lp, top_k=2)
    np.testing.assert_allclose(q, [0.5 / 0.8, 0.3 / 0.8, 0, 0])
    sharp = next_word_distribution(lp, temperature=0.5)
    np.testing.assert_allclose(sharp, np.array([0.25, 0.09, 0.0225, 0.0025]) / 0.365)
    assert next_word_distribution(lp, allow_unk=False)[UNK_ID] == 0


@pytest.mark.parametrize("name", ["kn3.arpa", "ffnn3", "gru"])
def test_same_seed_same_sentences(four_models, name):
    lm = load_model(str(four_models / name))
    a = generate(lm, ["w1"], n=4, seed=5, max_words=12)
    assert a == generate(lm, ["w1"], n=4, seed=5, max_words=12)
    assert a != generate(lm, ["w1"], n=4, seed=6, max_words=12)
    assert all(s[0] == "w1" and 1 <= len(s) <= 12 for s in a)


def test_top_1_is_greedy(four_models):
    lm = load_model(str(four_models / "kn3.arpa"))
    got = generate(lm, [], n=2, seed=1, top_k=1, max_words=8)
    ids = []
    while len(ids) < 8:
        w = int(np.argmax(lm.next_logprobs(ids)))
        if w == EOS_ID:
            break
        ids.append(w)
    assert got == [lm.vocab.decode(ids)] * 2


def test_cli_generate_is_reproducible_and_checks_its_flags(four_models, run_in_process):
    args = ("generate", "gru", "--mix", "kn3.arpa", "--weights", "0.5", "-n", "3", "--seed", "9", "--prefix", "w2 w3",
            "--no-unk")
    a = run_in_process(*args, cwd=four_models)
    b = run_in_process(*args, cwd=four_models)
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout and len(a.stdout.splitlines()) == 3
    assert all(line.startswith("w2 w3") and "<unk>" not in line for line in a.stdout.splitlines())
    r = run_in_process("generate", "kn3.arpa", "--temperature", "0", cwd=four_models)
    assert r.returncode == 2 and "temperature" in r.stderr
    r = run_in_process("generate", "kn3.arpa", "--device", "gpu", cwd=four_models)  # unused by an n-gram model
    assert r.returncode == 1 and "--device gpu: choose auto, cpu, cuda or cuda:N" in r.stderr


def test_cli_generate_prints_each_sentence_as_it_is_drawn(four_models):
    """``-n`` a hundred million: the first sentences show at once (they were all sampled before any was printed,
    held in memory, and lost to Ctrl-C)."""
    import os
    import subprocess
    import sys

    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")
    p = subprocess.Popen([sys.executable, "-m", "sampledlm", "generate", "kn3.arpa", "-n", "100000000", "--seed", "3"],
                         cwd=four_models, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=src))
    try:
        first = [p.stdout.readline() for _ in range(3)]
    finally:
        p.kill()
        p.communicate()
    lm = load_model(str(four_models / "kn3.arpa"))
    assert [line.split() for line in first] == generate(lm, [], n=3, seed=3)
