"""Starting word vectors from a trained embeddings run (``sampledlm embed train --init-from RUN``).

The new run has the source's model kind (``--model``), output side (``--objective``) and vector size (``--dim``),
and reads its text as the source's was; its other settings (window, negatives, epochs, learning rate, seed ...)
and its corpus are its own. The corpus is read with the source's words (in the source's order; their counts,
which drive subsampling, the noise distribution and the Huffman tree, are the new corpus's, 0 for a word it
lacks; its other words are dropped, as word2vec drops rare ones) unless ``--min-count`` is given: then the
vocabulary is the new corpus's, and the two meet by word (:class:`~sampledlm.data.vocabmap.VocabMap`).

* word vectors (``input``): a shared word's row is the source's; a new word's is what a fresh run with this seed
  gives it;
* output side, negative sampling (``output``, a vector per word): a shared word's row is the source's, a new
  word's starts at zero, as in a fresh run;
* output side, hierarchical softmax (``nodes``, a vector per inner node of the Huffman tree): a node means a set
  of words, fixed by the counts, so the source's node vectors are kept only when the new counts make the very same
  tree; otherwise every node starts at zero as in a fresh run (the word vectors are still the source's).

``config.json`` records the origin under ``data.init_from`` (its ``output`` field: ``copied`` or ``restarted``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..data.tokenizer import TextOptions
from ..data.vocabmap import VocabMap
from ..errors import UserError
from .vocab import EmbedVocab


@dataclass
class Source:
    """A trained embeddings run: its settings, vocabulary and vectors."""

    path: str
    settings: dict  # config.json's "word2vec"
    text: TextOptions
    vocab: EmbedVocab
    tensors: dict  # "input" [V, dim] and "output" [V, dim] or "nodes" [V - 1, dim]


def source_run(path: str) -> Source:
    """The embeddings run in ``path`` (a one-line error naming ``--init-from`` and the path otherwise)."""
    from ..store import check_source
    from .formats import FAMILY, read_model

    check_source(path, FAMILY, "word embeddings")
    config, vocab, tensors = read_model(path)
    settings = config.get("word2vec")
    out_name = "output" if isinstance(settings, dict) and settings.get("objective") == "neg" else "nodes"
    if not isinstance(settings, dict) or not {"model", "objective", "dim"} <= set(settings) \
            or out_name not in tensors or tensors["input"].shape[1] != settings["dim"]:
        raise UserError(f"--init-from {path}: config.json and vectors.safetensors do not describe a word2vec run "
                        "(written by another version?)")
    text = TextOptions.from_dict((config.get("data") or {}).get("text_options"), os.path.join(path, "config.json"))
    return Source(path, settings, text, vocab, tensors)


def start_vectors(source: Source, vocab: EmbedVocab, cfg) -> tuple[np.ndarray, np.ndarray, dict]:
    """``(input, output side, origin)``: where a run over ``vocab`` with ``cfg`` starts (module docstring)."""
    from .huffman import huffman_codes
    from .train import initial_vectors, output_shape

    mapping = VocabMap.between(source.vocab, vocab)
    w_in = initial_vectors(len(vocab), cfg)
    w_in[mapping.target] = source.tensors["input"][mapping.source]
    w_out = np.zeros(output_shape(len(vocab), cfg), dtype=np.float32)
    if cfg.objective == "neg":
        w_out[mapping.target] = source.tensors["output"][mapping.source]
        kept = True
    else:
        kept = mapping.same and all(np.array_equal(a, b) for a, b in zip(huffman_codes(source.vocab.counts),
                                                                          huffman_codes(vocab.counts)))
        if kept:
            w_out[:] = source.tensors["nodes"]
    origin = {**mapping.origin(source.path), "output": "copied" if kept else "restarted"}
    return w_in, w_out, origin
