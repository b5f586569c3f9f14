"""Sampling sentences from any model or mixture: temperature, top-k, one seed.

At each step the model's exact next-word distribution ``ln P(w | <s> prefix ...)``
(:meth:`sampledlm.lm.LanguageModel.next_logprobs`) is sharpened or flattened by the temperature T
and cut to the k most probable words::

    q(w) ∝ exp(ln P(w | h) / T)   for the top-k words of P(.|h) (every word when k = 0), 0 otherwise

and the next word is drawn from q; a sentence ends at ``</s>`` or after ``max_words`` words. All
draws come from one ``numpy`` generator seeded with ``seed``, so a seed gives the same sentences
every time on one machine. ``allow_unk=False`` never draws ``<unk>``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..data.vocab import EOS_ID, UNK_ID
from ..errors import UserError
from ..lm import LanguageModel


def next_word_distribution(logprobs: np.ndarray, temperature: float = 1.0, top_k: int = 0,
                           allow_unk: bool = True) -> np.ndarray:
    """``q`` of the module docstring, float64 ``[V]`` summing to 1."""
    if temperature <= 0:
        raise UserError(f"--temperature {temperature:g}: give a positive number")
    z = np.asarray(logprobs, dtype=np.float64) / temperature
    if not allow_unk:
        z[UNK_ID] = -np.inf
    if 0 < top_k < len(z):
        cut = np.partition(z, len(z) - top_k)[len(z) - top_k]
        z = np.where(z >= cut, z, -np.inf)
    z = z - z.max()
    q = np.exp(z)
    return q / q.sum()


def sample_sentence(lm: LanguageModel, prefix: list[int], rng: np.random.Generator, temperature: float = 1.0,
                    top_k: int = 0, max_words: int = 50, allow_unk: bool = True) -> list[int]:
    """One sentence's ids after ``prefix`` (the prefix included, ``</s>`` not); ``lm``: a model as
    :func:`sampledlm.load` returns it, or its ``lm``."""
    from ..lm import language_model

    lm = language_model(lm)
    ids = list(prefix)
    while len(ids) < max_words:
        q = next_word_distribution(lm.next_logprobs(ids), temperature, top_k, allow_unk)
        w = int(rng.choice(len(q), p=q))
        if w == EOS_ID:
            break
        ids.append(w)
    return ids


def generate(lm: LanguageModel, prefix: list[str], n: int = 1, seed: int = 1, **kw) -> list[list[str]]:
    """``n`` sentences sampled after the words ``prefix`` (each returned with its prefix as given: a word outside
    the vocabulary is conditioned on as ``<unk>`` but printed as the user wrote it); ``lm``: a model as
    :func:`sampledlm.load` returns it, or its ``lm``."""
    return list(iter_generate(lm, prefix, n, seed, **kw))


def iter_generate(lm: LanguageModel, prefix: list[str], n: int = 1, seed: int = 1, **kw) -> Iterator[list[str]]:
    """:func:`generate`'s sentences one at a time, each as soon as it is drawn (the same sentences for a seed):
    ``sampledlm generate -n 1000000`` prints as it goes and holds one sentence, not all of them."""
    from ..lm import language_model

    lm = language_model(lm)
    rng = np.random.default_rng(seed)
    start = lm.vocab.encode(prefix)
    for _ in range(n):
        yield list(prefix) + lm.vocab.decode(sample_sentence(lm, start, rng, **kw))[len(start):]
