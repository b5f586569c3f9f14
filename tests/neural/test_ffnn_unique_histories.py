"""A feed-forward model computes each distinct history once (Schwenk 2007) and gives the same numbers as
computing every position on its own."""

from __future__ import annotations

import numpy as np
import torch

from sampledlm.neural.ffnn import FFNN
from sampledlm.neural.lm import stream_logprobs
from sampledlm.objectives.softmax import SoftmaxObjective as Softmax
from sampledlm.data.batches import ngram_histories, sentence_positions


def test_unique_histories_give_each_position_its_own_probability():
    torch.manual_seed(0)
    model = FFNN.build(12, order=3, embed_dim=4, hidden=[8], dropout=0.0).eval()
    objective = Softmax()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 4, size=300)  # few words: many repeated histories; id 0 ends sentences
    got = stream_logprobs(model, objective, ids, batch_size=7)
    hist = torch.from_numpy(ngram_histories(ids, sentence_positions(ids), 3, 12))
    with torch.no_grad():
        want = objective.log_prob(model, model(hist))[torch.arange(len(ids)), torch.from_numpy(ids)].double().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    contexts = list(model.eval_contexts(ids, batch_size=7))
    assert sum(len(c[0]) for c in contexts) == len(np.unique(hist.numpy(), axis=0)) < len(ids)
    assert sorted(np.concatenate([c[2] for c in contexts]).tolist()) == list(range(len(ids)))
