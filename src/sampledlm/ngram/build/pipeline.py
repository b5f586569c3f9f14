"""One entry point for estimating an n-gram model: :func:`build` chooses the path from a :class:`BuildConfig`.

* ``mkn`` and ``kn``: always the bounded pipeline (:func:`.external.train_bounded`), as lmplz is one pipeline
  whatever its ``-S``: sorted runs within the budget ``memory`` (default: half the available memory, so the
  window is as large as memory allows), held in memory while they fit beside the window and spilled to
  ``temp_dir`` otherwise, the model streamed to its file. ``valid``'s perplexity is that of the model written,
  read back as ``ngram eval`` reads it.
* the smoothings it cannot stream (``wb``, ``jm``, ``katz``, ``addk``): the in-memory estimator
  (:func:`.estimate.train_ngram`), which holds the whole model (and stays the reference the pipeline's bytes
  are tested against for ``mkn``/``kn``).
* ``engine="dask"``: the counting of either done by the workers of a Dask cluster.
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
from .counts import check_order_supported


@dataclass
class BuildReport:
    """What :func:`build` did: the path (``bounded`` or ``memory``), the n-gram counts per order, the vocabulary
    size, seconds; for the bounded path the budget (``auto_budget``: chosen, not given) and the bytes spilled to
    disk; for Dask its shards and workers; the validation perplexity when ``valid`` was given (``None``
    otherwise)."""

    path: str
    ngrams: list[int]
    vocabulary: int
    seconds: float
    budget: int | None = None
    auto_budget: bool = False
    spilled_bytes: int = 0
    stages: dict = field(default_factory=dict)
    dask: dict | None = None
    valid_ppl: float | None = None
    #: Kneser-Ney orders whose discounts could not be estimated from the counts of counts, so KenLM's
    #: ``--discount_fallback`` values (0.5, 1, 1.5) were used (lmplz refuses such text without that flag)
    fallback_orders: list[int] = field(default_factory=list)


def build(config: BuildConfig, train: str, output: str, *, binary: bool = False, vocab: str | None = None,
          valid: str | None = None, text_options=None, locked: bool = False, window: int | None = None) -> BuildReport:
    """Estimate a model from the text file ``train`` and write it to ``output`` (an ARPA file, or with
    ``binary`` a binary model directory, ``locked`` when the caller holds its lock).

    ``vocab``: a vocabulary file (word<TAB>count) [default: every word of ``train``]. ``valid``: held-out text
    (tunes ``jm``'s weights; its perplexity is reported). ``text_options``: how lines become words
    (:class:`sampledlm.data.tokenizer.TextOptions`; default: whitespace tokens as they are). ``window``: the
    bounded path's elements per window instead of what ``config.memory`` leaves, the budget then unchecked
    (many sorted runs from a small corpus; :func:`.external.train_bounded`).
    """
    from .budget import auto_budget, parse_memory
    from .external import STREAMING, check_streaming
    from .spill import check_temp_dir

    if text_options is None or isinstance(text_options, dict):
        text_options = TextOptions.from_dict(text_options or {}, "text_options")
    if config.memory is not None:  # first: the other checks would send the user round
        check_streaming(config.smoothing)
    if config.temp_dir is not None:  # on the bounded path (it may go unused when everything fits)
        if config.smoothing not in STREAMING:
            raise UserError(f"--temp-dir holds the spilled runs of bounded-memory estimation, which --smoothing "
                            f"{config.smoothing} does not use (it counts in memory; {'/'.join(STREAMING)} stream)")
        check_temp_dir(config.temp_dir)
    if config.smoothing == "jm" and not valid:
        raise UserError("--smoothing jm tunes its interpolation weights on held-out text: give --valid FILE")
    if config.scheduler is not None:
        from .distributed import scheduler_address

        scheduler_address(config.scheduler)  # a malformed address is refused before the corpus is read
    t0 = time.perf_counter()
    if config.smoothing in STREAMING:
        budget = parse_memory(config.memory) if config.memory is not None else auto_budget()
        return _bounded(config, budget, train, output, binary, vocab, valid, text_options, locked, window, t0)
    return _in_memory(config, train, output, binary, vocab, valid, text_options, locked, t0)


def _bounded(config, budget, train, output, binary, vocab_path, valid, opts, locked, window, t0) -> BuildReport:
    if valid:
        from collections import Counter

        load_ids(valid, Vocab.from_counts(Counter(), 1), opts)  # readable: before the long work, not after
    dask = (config.scheduler, config.workers) if config.engine == "dask" else None
    common = dict(binary=binary, locked=locked, dask=dask, window=window)
    to_stdout = bool(valid) and output == "-"  # read back below: written to a file first
    if to_stdout:
        import tempfile

        fd, output = tempfile.mkstemp(prefix="sampledlm-ngram-valid.", suffix=".arpa", dir=config.temp_dir)
        os.close(fd)
    try:
        info = _run_bounded(config, budget, train, output, vocab_path, opts, common)
        report = BuildReport("bounded", list(info["ngrams"]), info["vocabulary"], 0.0, budget=budget,
                             auto_budget=config.memory is None, spilled_bytes=info["spilled_bytes"],
                             stages=dict(info["seconds"]), dask=info.get("dask"),
                             fallback_orders=list(info.get("fallback_orders", [])))
        if valid:  # the model just written, read back as ngram eval reads it (a directory: memory-mapped)
            report.valid_ppl = _perplexity_of_written(output, valid, opts)
        if to_stdout:
            _copy_to_stdout(output)
    finally:
        if to_stdout:
            os.remove(output)
    report.seconds = time.perf_counter() - t0
    return report


def _run_bounded(config, budget, train, output, vocab_path, opts, common) -> dict:
    from .external import text_size, train_bounded
    from .id_stream import TokenMeter, text_chunks

    if vocab_path:
        vocab = Vocab.load(vocab_path)
        meter = TokenMeter(text_size(train))
        info = train_bounded(text_chunks(train, vocab, opts, meter), vocab, config.order, output, budget,
                             config.temp_dir, config.smoothing, config.thresholds, meter=meter, **common)
    else:  # one pass over the text for the vocabulary and the ids
        info = train_bounded(None, None, config.order, output, budget, config.temp_dir, config.smoothing,
                             config.thresholds, text=(train, opts), **common)
    return info


def _perplexity_of_written(output: str, valid: str, opts) -> float | None:
    """The perplexity of the text ``valid`` under the model just written to ``output`` (an ARPA file, parsed
    without leaving a cache; or a binary directory, memory-mapped), computed as ``ngram eval`` computes it."""
    from ..arpa import read_arpa
    from ..lm import ArpaLM

    lm = ArpaLM.open(output, warn=False) if os.path.isdir(output) else ArpaLM(read_arpa(output, cache=False), output)
    valid_ids = load_ids(valid, lm.vocab, opts)
    return perplexity_of(lm.logprobs(valid_ids)) if len(valid_ids) else None


def _copy_to_stdout(path: str) -> None:
    import shutil
    import sys

    with open(path, "rb") as f:
        shutil.copyfileobj(f, sys.stdout.buffer)
    sys.stdout.buffer.flush()


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
    check_order_supported(list(lm.counts()), config.order)
    if binary:
        from ..mapped import write_binary

        write_binary(lm, output, locked=locked)
    else:
        write_arpa(lm, output)
    report = BuildReport("memory", list(lm.counts()), len(vocab), time.perf_counter() - t0, dask=dask,
                         fallback_orders=list(lm.info.get("fallback_orders", [])))
    if valid_ids is not None and len(valid_ids):
        report.valid_ppl = lm.perplexity(valid_ids, vocab)
    return report

