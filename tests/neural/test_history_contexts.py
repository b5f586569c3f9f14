"""A model's context after each of many histories, in one call: the recurrent models' packed pass and the
feed-forward model's (n-1)-word keys give what reading each history as a sentence gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sampledlm.neural.base import NeuralScorer
from sampledlm.neural.ffnn import FFNN
from sampledlm.neural.rnn import GRULM, LSTMLM, RNNLM

V = 30
HISTORIES = [np.array([], dtype=np.int64), np.array([3]), np.array([4, 5, 6, 7, 8, 9, 1]), np.array([2, 2]),
             np.array([29, 1, 5])]  # no 0: </s> never sits inside a history


@pytest.mark.parametrize("model", [
    GRULM.build(V, embed_dim=8, hidden=12, layers=2, dropout=0.3, tie=False),
    LSTMLM.build(V, embed_dim=8, hidden=12, proj=8, tie=True, dropout=0.3),
    FFNN.build(V, order=3, embed_dim=4, hidden=[6], direct=True, dropout=0.3),
], ids=["gru-2-layers", "lstm-tied-projected", "ffnn3-direct"])
def test_history_contexts_equal_reading_each_history_as_a_sentence(model):
    torch.manual_seed(0)
    model.eval()
    with torch.no_grad():
        got = model.history_contexts(HISTORIES)
        want = NeuralScorer.history_contexts(model, HISTORIES)  # the generic rule: a stream read by eval_contexts
    assert got.shape == (len(HISTORIES), model.hidden_size)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert model.history_contexts([]).shape == (0, model.hidden_size)


def test_ffnn_key_is_the_last_words_padded_with_bos():
    m = FFNN.build(V, order=4)
    assert m.history_key([]) == (V, V, V)
    assert m.history_key([7]) == (V, V, 7)
    assert m.history_key([1, 2, 3, 4, 5]) == (3, 4, 5)
    assert RNNLM.build(V).history_key([1, 2]) is None
