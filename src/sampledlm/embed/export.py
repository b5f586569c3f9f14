"""A neural LM's word representations as word vectors: are its projections embeddings?

A feed-forward or recurrent LM (:mod:`sampledlm.neural`) holds two tables indexed by word:

- ``input``: the projection (lookup) table ``C [V, d]`` that turns the history's words into the
  hidden layer's input (Bengio et al. 2003); row ``V`` (``<s>``) is left out;
- ``output``: the output layer's word vectors ``W' [V, h]``, the rows the softmax (or a sampled
  objective) scores against the hidden state;
- ``sum``: ``C + W'`` when ``d == h`` (the combination word2vec's users take, ``W^T + W'``);
  with tied embeddings the two are one table and the sum is twice it (same cosines).

The vectors come out in the LM's vocabulary order (``</s>``, ``<unk>``, then by count), so the
analogy evaluation's "most frequent N words" means the same as for word2vec.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .vectors import WordVectors

WHICH = ("input", "output", "sum")


def lm_vectors(run_dir: str, which: str = "input") -> WordVectors:
    """Word vectors of the neural LM in ``run_dir`` (``which``: input, output or sum)."""
    from ..neural.lm import load_neural
    from ..store import read_config

    if which not in WHICH:
        raise UserError(f"--which {which!r}: choose from {', '.join(WHICH)}")
    import os

    from ..store import read_json
    from .formats import FAMILY

    cpath = os.path.join(run_dir, "config.json")
    if os.path.isfile(cpath) and isinstance(read_json(cpath), dict) and read_json(cpath).get("family") == FAMILY:
        raise UserError(f"{run_dir}: word embeddings already, not a neural LM run (eval, neighbors and plot read it "
                        "as it is)")
    config, family = read_config(run_dir)
    if family != "neural":
        raise UserError(f"{run_dir}: a {family} model, not a neural LM run (export takes the projections of a "
                        "feed-forward or recurrent model)")
    lm = load_neural(run_dir, config, device="cpu")
    model = getattr(lm, "model", None)
    vocab = getattr(lm, "vocab", None)
    if model is None or vocab is None or not hasattr(model, "output"):
        raise UserError(f"{run_dir}: not a neural LM run (export takes the projections of a feed-forward or "
                        "recurrent model)")
    V = len(vocab)
    out = model.output.weight.detach().float().cpu().numpy()[:V]
    if getattr(model, "tie", False):
        inp = out
    elif hasattr(model, "embed"):
        inp = model.embed.weight.detach().float().cpu().numpy()[:V]
    else:
        raise UserError(f"{run_dir}: the model has no input projection table")
    if which == "input":
        vec = inp
    elif which == "output":
        vec = out
    else:
        if inp.shape != out.shape:
            raise UserError(f"{run_dir}: input projections are {inp.shape[1]}-d, output vectors {out.shape[1]}-d: "
                            "their sum is not defined (export input or output)")
        vec = inp + out
    return WordVectors(list(vocab.words), np.ascontiguousarray(vec, dtype=np.float32), vocab.counts)
