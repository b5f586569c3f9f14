"""The trainer calls ``objective.prepare`` on a fresh model, and only there (never on resume)."""

import math

import numpy as np
import pytest
import torch

from sampledlm.neural import rundir as runs
from sampledlm.neural.trainer import new_run, resume_run
from test_train import config_for, corpus  # noqa: F401  (fixture)


def test_fresh_binary_run_starts_biases_at_log_unigram_minus_log_alpha(corpus):  # noqa: F811
    config, vocab = config_for(corpus, epochs=1)
    config["objective"] = {"name": "binary", "options": {"neg_rate": 0.5}}
    trainer = new_run(str(corpus / "b"), config, vocab)
    bias = trainer.model.output.bias.detach().squeeze(1).double().numpy()
    # prepare() set them: not the zero initialisation, and ordered like the unigram counts
    assert not np.allclose(bias, 0)
    counts = vocab.counts.astype(float)
    seen = counts > 0
    assert np.corrcoef(bias[seen], np.log(counts[seen]))[0, 1] > 0.99


def test_resume_does_not_prepare_again(corpus, monkeypatch):  # noqa: F811
    config, vocab = config_for(corpus, epochs=2)
    config["objective"] = {"name": "nce", "options": {"samples": 5}}
    new_run(str(corpus / "n"), config, vocab).train()
    calls = []
    from sampledlm.objectives.nce import NCE

    monkeypatch.setattr(NCE, "prepare", lambda self, scorer: calls.append(1))
    resume_run(str(corpus / "n"), overrides={"epochs": 3})
    assert calls == []
