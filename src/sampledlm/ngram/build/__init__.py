"""Estimating n-gram models: counting, smoothing, pruning, the bounded (spilled) and Dask pipelines, the writers.

:func:`build` with a :class:`BuildConfig` is the entry point; the query side (ARPA reading, binary directories,
lookups, :class:`sampledlm.ngram.ArpaLM`) imports nothing from here (tests/shape/test_ngram_sides.py).
"""

from .config import BuildConfig
from .pipeline import BuildReport, build

__all__ = ["BuildConfig", "BuildReport", "build"]
