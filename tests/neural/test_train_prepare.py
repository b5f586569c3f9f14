"""The trainer calls ``objective.prepare`` on a fresh model, and only there (never on resume)."""

import numpy as np
from helpers import config_for

from sampledlm.neural.trainer import new_run, resume_run


def test_fresh_binary_run_starts_biases_at_log_unigram_minus_log_alpha(words_corpus):
    config, vocab = config_for(words_corpus, epochs=1)
    config["objective"] = {"name": "binary", "options": {"neg_rate": 0.5}}
    trainer = new_run(str(words_corpus / "b"), config, vocab)
    bias = trainer.model.output.bias.detach().squeeze(1).double().numpy()
    # prepare() set them: not the zero initialisation, and ordered like the unigram counts
    assert not np.allclose(bias, 0)
    counts = vocab.counts.astype(float)
    seen = counts > 0
    assert np.corrcoef(bias[seen], np.log(counts[seen]))[0, 1] > 0.99


def test_resume_does_not_prepare_again(words_corpus, monkeypatch):
    config, vocab = config_for(words_corpus, epochs=2)
    config["objective"] = {"name": "nce", "options": {"samples": 5}}
    new_run(str(words_corpus / "n"), config, vocab).train()
    calls = []
    from sampledlm.objectives.nce import NCE

    monkeypatch.setattr(NCE, "prepare", lambda self, scorer: calls.append(1))
    resume_run(str(words_corpus / "n"), overrides={"epochs": 3})
    assert calls == []
