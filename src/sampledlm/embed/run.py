"""Training word vectors into a directory: the library's side of ``sampledlm embed train`` and of
:func:`sampledlm.train_embeddings` (the command line parses flags and prints; everything else is here)."""

from __future__ import annotations

import json
import os
import time
from typing import Callable

from ..errors import UserError


def train_directory(corpus: list[str], out_dir: str, settings: dict, text_options, *, force: bool = False,
                    no_text: bool = False, init_dir: str | None = None,
                    check_source: Callable[[str, str, dict], None] | None = None,
                    log: Callable[[str], None] = lambda line: None, corpus_label: str | None = None):
    """Train word2vec on the files ``corpus`` (read with ``text_options``, a
    :class:`~sampledlm.data.tokenizer.TextOptions`) and write the vectors to ``out_dir``; returns the
    :class:`~sampledlm.embed.vectors.WordVectors`.

    ``settings``: the fields of :class:`~sampledlm.embed.train.Word2VecConfig` that were given (the others take
    its defaults). ``init_dir``: start from those vectors (their kind, size and text options;
    ``check_source(init_dir, what, theirs)`` may refuse a given setting that differs from ``theirs``).
    ``out_dir`` must be new, empty, what a killed training left, or (with ``force``) word embeddings; it is locked
    while written. ``log`` receives the progress lines. ``corpus_label``: what the config and provenance record in
    place of the corpus's path (sentences given in Python reach here as a temporary file, gone once trained)."""
    from .. import provenance, store
    from ..config import check
    from ..outputs import writing_directory
    from .formats import write_directory
    from .train import Word2VecConfig, train as train_vectors
    from .vectors import WordVectors
    from .vocab import read_corpus

    given = dict(settings)
    source = None
    if init_dir:
        from .finetune import source_run

        source = source_run(init_dir)
        shape = {k: source.settings[k] for k in ("model", "objective", "dim")}
        if check_source is not None:
            check_source(init_dir, "the vectors' kind, size and how text is read", {**shape, **source.text.to_dict()})
        given, text_options = {**given, **shape}, source.text
    cfg = Word2VecConfig(**given)
    check(cfg)
    check_output(out_dir, force)
    with writing_directory(out_dir, store.lock_directory):  # held to the end: a second writer of out_dir stops at once
        check_output(out_dir, force)  # again, now that no other process can write here
        texts = provenance.data_records({"corpus": list(corpus)})  # hashed once, a block at a time
        paths = [os.path.abspath(p) for p in corpus]
        if corpus_label is not None:
            paths = [corpus_label] * len(corpus)
            texts["corpus"] = [{**r, "path": corpus_label} for r in texts["corpus"]]
        t0 = time.perf_counter()
        same_words = source is not None and "min_count" not in given
        vocab, data = read_corpus([(p, text_options) for p in corpus], min_count=cfg.min_count,
                                  words=source.vocab.words if same_words else None)
        log(f"corpus: {data.tokens_read:,} tokens, {data.words:,} of them in the vocabulary of "
            f"{len(vocab):,} words ({f'of {init_dir}' if same_words else f'min count {cfg.min_count}'}), "
            f"{data.sentences:,} sentences")
        init = init_out = origin = None
        if source is not None:
            from ..data.vocabmap import announce
            from .finetune import start_vectors

            init, init_out, origin = start_vectors(source, vocab, cfg)
            log(announce(init_dir, origin))
        result = train_vectors(vocab, data, cfg, init=init, init_out=init_out)
        wv = WordVectors(vocab.words, result.w_in, vocab.counts)
        settings_used = cfg.to_dict()
        if same_words:  # the source's words, no count applied here: its min count is the one that made them
            settings_used["min_count"] = source.settings.get("min_count", settings_used["min_count"])
        extra = {"word2vec": settings_used,
                 "data": {"corpus": paths, "text_options": text_options.to_dict(),
                          "tokens": data.tokens_read, "words": data.words, "sentences": data.sentences,
                          **({"init_from": origin} if origin else {})},
                 "training": {"seconds": round(result.seconds, 3),
                              "words_per_second": round(result.words_per_second), "words_kept": result.kept}}
        out_name = "output" if cfg.objective == "neg" else "nodes"
        prov = provenance.new("embeddings", f"Word vectors: word2vec {cfg.model} with {cfg.objective}, "
                              f"{len(vocab):,} words x {cfg.dim} dimensions", texts, "cpu",
                              figures={"words_per_second": round(result.words_per_second),
                                       "train_seconds": round(result.seconds, 1)})
        prov["finished"] = prov["created"]
        write_directory(out_dir, wv, extra, {out_name: result.w_out}, text=not no_text, locked=True,
                        before_config=lambda: provenance.write(out_dir, prov))
    log(f"trained {len(vocab):,} x {cfg.dim} vectors: {result.words_per_second:,.0f} words/s "
        f"({result.seconds:.1f} s training, {time.perf_counter() - t0:.1f} s in all) -> {out_dir}")
    return wv


def check_output(out_dir: str, force: bool) -> None:
    """``out_dir`` must be new, empty, what a killed ``embed train`` left (no config.json: written again), or -- with
    ``force`` -- word embeddings; never another model's directory or a directory of other files."""
    from .formats import FAMILY, interrupted_write

    if not os.path.exists(out_dir):
        return
    if not os.path.isdir(out_dir):
        raise UserError(f"{out_dir}: is a file; -o names a directory")
    config = os.path.join(out_dir, "config.json")
    if not os.path.exists(config):
        names = sorted(n for n in os.listdir(out_dir) if n != ".lock")
        if names and not interrupted_write(names):
            raise UserError(f"{out_dir}: is not empty (it holds {names[0]!r}{' and more' if len(names) > 1 else ''} "
                            "and no embeddings); choose another -o")
        return
    try:
        with open(config, encoding="utf-8") as f:
            family = json.load(f).get("family")
    except (OSError, ValueError, AttributeError):
        family = None
    if family != FAMILY:
        raise UserError(f"{out_dir}: holds {f'a {family} model' if isinstance(family, str) else 'a config.json'}, "
                        "not word embeddings; choose another -o")
    if not force:
        raise UserError(f"{out_dir}: already holds a model; give --force (in Python: "
                        "force=True) to replace it, or choose another -o")
