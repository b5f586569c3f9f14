"""A parsed ARPA file, cached as safetensors: the second read of the same file takes a fraction of a second.

Parsing text costs seconds for a large model (a PTB 5-gram is 2.3 M lines). Like
:func:`sampledlm.data.corpus.load_ids` for corpora, :func:`cached_read` keeps the parsed tables in
``$SAMPLEDLM_CACHE`` (default ``~/.cache/sampledlm``), keyed by a hash of the file's bytes
(:func:`~sampledlm.data.textio.content_hash`), so an edited file is parsed again -- even one
rewritten within the same second with the same size, which a key of size and modification
time would miss. The cache entry is one safetensors
file (``keys_k``, ``logp_k``, ``bow_k`` per order; the word list and info as JSON metadata),
written atomically; a cache that cannot be written or read is skipped silently.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Callable

import numpy as np

from ..data.corpus import cache_dir
from ..errors import UserError
from ..data.textio import atomic_write, content_hash
from .model import NgramLM, NgramTable

FORMAT = "sampledlm-ngram-1"


def to_bytes(lm: NgramLM) -> bytes:
    """The model as safetensors bytes: tables as tensors, words and info as JSON metadata."""
    from safetensors.numpy import save

    tensors: dict[str, np.ndarray] = {}
    for k, t in enumerate(lm.tables, 1):
        tensors.update({f"keys_{k}": t.keys, f"logp_{k}": t.logp, f"bow_{k}": t.bow})
    meta = {"format": FORMAT, "order": str(lm.order), "words": json.dumps(lm.words), "info": json.dumps(lm.info)}
    return save({name: np.ascontiguousarray(a) for name, a in tensors.items()}, metadata=meta)


def load(path: str) -> NgramLM:
    """Read a model written with :func:`to_bytes`."""
    from safetensors import safe_open

    with safe_open(path, framework="np") as f:
        meta = f.metadata() or {}
        if meta.get("format") != FORMAT:
            raise UserError(f"{path}: not a sampledlm n-gram file")
        order = int(meta["order"])
        tables = [NgramTable(f.get_tensor(f"keys_{k}"), f.get_tensor(f"logp_{k}"), f.get_tensor(f"bow_{k}"))
                  for k in range(1, order + 1)]
        return NgramLM(json.loads(meta["words"]), tables, json.loads(meta["info"]))


def _cache_path(path: str) -> str | None:
    if path == "-" or not os.path.isfile(path):
        return None  # stdin is not cached; a missing file is reported by the parser
    key = json.dumps([FORMAT, "sha1", content_hash(path)])
    # keyed by the bytes alone: the same model under several names (copies, links) is parsed and kept once
    return os.path.join(cache_dir(), f"arpa.{hashlib.sha1(key.encode()).hexdigest()[:20]}.safetensors")


def cached_read(path: str, parse: Callable[[str], NgramLM]) -> NgramLM:
    """``parse(path)``, or its cached result when the file has not changed since."""
    cpath = _cache_path(path)
    if cpath and os.path.exists(cpath):
        try:
            lm = load(cpath)
            lm.info["source"] = path  # the same bytes may have been cached under another name
            return lm
        except Exception:  # a damaged or foreign cache entry: parse again and overwrite it
            pass
    lm = parse(path)
    if cpath and _cache_path(path) == cpath:  # not rewritten while we parsed it
        try:
            os.makedirs(os.path.dirname(cpath), exist_ok=True)
            with atomic_write(cpath, "wb") as f:
                f.write(to_bytes(lm))
        except (OSError, UserError):
            pass
    return lm
