"""A back-off weight that does not fit the file's probabilities (damaged or hand-edited) can make
bow(h) P(w|h') exceed 1; scoring with such a model stops with an error naming the file instead of
reporting a perplexity below the truth (found by `sampledlm bench fuzz`)."""

from __future__ import annotations

import numpy as np
import pytest

from sampledlm.errors import UserError
from sampledlm.loader import load_model

ARPA = """\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-0.5\t</s>\t0
-99\t<s>\t0
-0.6\ta\t{bow}
-0.7\tb\t0

\\2-grams:
-0.2\t<s> a
-0.3\ta </s>

\\end\\
"""


def test_a_probability_above_one_is_an_error_naming_the_file(tmp_path):
    good, bad = tmp_path / "good.arpa", tmp_path / "bad.arpa"
    good.write_text(ARPA.format(bow="-0.1"))
    bad.write_text(ARPA.format(bow="1.5"))  # a b: 10^1.5 * 10^-0.7 > 1
    lm = load_model(str(good))
    ids = np.array(lm.vocab.encode(["a", "b"]) + [0], dtype=np.int64)
    assert np.all(lm.logprobs(ids) <= 0)
    lm = load_model(str(bad))
    with pytest.raises(UserError, match=rf"^{bad}: gives a probability above 1"):
        lm.logprobs(ids)
    with pytest.raises(UserError, match="above 1"):
        lm.next_logprobs(lm.vocab.encode(["a"]))
