"""One entry point for estimating an n-gram model: :func:`build` chooses the path from a :class:`BuildConfig`.

Paths (each writes the same ARPA bytes for ``mkn``/``kn``, tested):

* in memory (:func:`.estimate.train_ngram`): the corpus as an id stream, every smoothing;
* bounded (:func:`.external.train_bounded`): sorted runs spilled to ``temp_dir`` so the process stays within
  ``memory``, the model streamed to its file (``mkn``/``kn``; chosen by ``memory``, or when the corpus would
  not fit in half the available memory);
* Dask: the counting of either path done by the workers of a Dask cluster (``engine="dask"``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ...data.corpus import build_vocab, load_ids
from ...data.tokenizer import TextOptions
from ...data.vocab import Vocab
from ...errors import UserError
from ...lm import perplexity_of
from .config import BuildConfig


@dataclass
class BuildReport:
    """What :func:`build` did: the path, the n-gram counts per order, the vocabulary size, seconds; for the
    bounded path the budget and the bytes spilled; for Dask its shards and workers; the validation perplexity
    when ``valid`` was given (``None`` otherwise)."""

    path: str
    ngrams: list[int]
    vocabulary: int
    seconds: float
    budget: int | None = None
    spilled_bytes: int = 0
    stages: dict = field(default_factory=dict)
    dask: dict | None = None
    valid_ppl: float | None = None


def build(config: BuildConfig, train: str, output: str, *, binary: bool = False, vocab: str | None = None,
          valid: str | None = None, text_options=None, locked: bool = False) -> BuildReport:
    """Estimate a model from the text file ``train`` and write it to ``output`` (an ARPA file, or with
    ``binary`` a binary model directory, ``locked`` when the caller holds its lock).

    ``vocab``: a vocabulary file (word<TAB>count) [default: every word of ``train``]. ``valid``: held-out text
    (tunes ``jm``'s weights; its perplexity is reported). ``text_options``: how lines become words
    (:class:`sampledlm.data.tokenizer.TextOptions`; default: whitespace tokens as they are).
    """
    from .external import auto_budget, check_streaming, parse_memory
    from .spill import check_temp_dir

    if text_options is None or isinstance(text_options, dict):
        text_options = TextOptions.from_dict(text_options or {}, "text_options")
    if config.memory is not None:  # first: the other checks would send the user round
        check_streaming(config.smoothing)
    if config.temp_dir is not None:  # whichever path runs (in memory it may go unused)
        check_temp_dir(config.temp_dir)
    if config.smoothing == "jm" and not valid:
        raise UserError("--smoothing jm tunes its interpolation weights on held-out text: give --valid FILE")
    if config.scheduler is not None:
        from .distributed import scheduler_address

        scheduler_address(config.scheduler)  # a malformed address is refused before the corpus is read
    budget = parse_memory(config.memory) if config.memory is not None else \
        auto_budget(train, config.order, config.smoothing)
    t0 = time.perf_counter()
    if budget is not None:
        return _bounded(config, budget, train, output, binary, vocab, valid, text_options, locked, t0)
    return _in_memory(config, train, output, binary, vocab, valid, text_options, locked, t0)


def _bounded(config, budget, train, output, binary, vocab_path, valid, opts, locked, t0) -> BuildReport:
    from .external import text_chunks, train_bounded

    if valid and not binary:
        raise UserError(f"--valid {valid}: bounded estimation"
                        + ("" if config.memory is not None else
                           " (this corpus would not fit in half the available memory)")
                        + " writes the model without holding it, so it cannot report a validation perplexity "
                        "of an ARPA file; add --binary (the directory is then evaluated at once) or run "
                        f"sampledlm ngram eval MODEL --test {valid} afterwards")
    if valid:
        from collections import Counter

        load_ids(valid, Vocab.from_counts(Counter(), 1), opts)  # readable: before the long work, not after
    dask = (config.scheduler, config.workers) if config.engine == "dask" else None
    # tests force many sorted runs from a small corpus with a fixed window (the budget is then not checked)
    window = int(os.environ["SAMPLEDLM_NGRAM_WINDOW"]) if os.environ.get("SAMPLEDLM_NGRAM_WINDOW") else None
    common = dict(binary=binary, locked=locked, dask=dask, window=window)
    if vocab_path:
        vocab = Vocab.load(vocab_path)
        info = train_bounded(text_chunks(train, vocab, opts), vocab, config.order, output, budget, config.temp_dir,
                             config.smoothing, config.thresholds, **common)
    else:  # one pass over the text for the vocabulary and the ids
        info = train_bounded(None, None, config.order, output, budget, config.temp_dir, config.smoothing,
                             config.thresholds, text=(train, opts), **common)
    report = BuildReport("bounded", list(info["ngrams"]), info["vocabulary"], 0.0, budget=budget,
                         spilled_bytes=info["spilled_bytes"], stages=dict(info["seconds"]), dask=info.get("dask"))
    if valid:  # the directory just written, memory-mapped: evaluated as ngram eval would
        from ..lm import ArpaLM

        mapped = ArpaLM.open(output)
        valid_ids = load_ids(valid, mapped.vocab, opts)
        if len(valid_ids):
            report.valid_ppl = perplexity_of(mapped.logprobs(valid_ids))
    report.seconds = time.perf_counter() - t0
    return report


def _in_memory(config, train, output, binary, vocab_path, valid, opts, locked, t0) -> BuildReport:
    from ..arpa import write_arpa
    from .estimate import estimate, train_ngram

    vocab = Vocab.load(vocab_path) if vocab_path else build_vocab(train, opts)
    train_ids = load_ids(train, vocab, opts)
    valid_ids = load_ids(valid, vocab, opts) if valid else None
    dask = None
    if config.engine == "dask":
        from .distributed import count_with_dask

        if len(train_ids) == 0:
            raise UserError("cannot train an n-gram model on an empty corpus")
        if config.smoothing not in ("mkn", "kn") and any(config.thresholds):
            raise UserError("count pruning (--prune) is defined for Kneser-Ney models (mkn, kn)")
        counts, dask = count_with_dask(train_ids, len(vocab) + 1, config.order, vocab.bos_id, config.scheduler,
                                       config.workers, temp_dir=config.temp_dir)
        lm = estimate(counts, vocab, config.smoothing, valid_ids, config.thresholds, k=config.k)
    else:
        lm = train_ngram(train_ids, vocab, config.order, config.smoothing, valid_ids=valid_ids,
                         prune=config.thresholds, k=config.k)
    if binary:
        from ..mapped import write_binary

        write_binary(lm, output, locked=locked)
    else:
        write_arpa(lm, output)
    report = BuildReport("memory", list(lm.counts()), len(vocab), time.perf_counter() - t0, dask=dask)
    if valid_ids is not None and len(valid_ids):
        report.valid_ppl = lm.perplexity(valid_ids, vocab)
    return report

