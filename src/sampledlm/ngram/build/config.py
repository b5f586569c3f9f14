"""What an n-gram estimation decides: one :class:`BuildConfig`, the one place of each default.

``sampledlm ngram train`` fills it from its flags (each flag's default is read from here) and hands it to
:func:`sampledlm.ngram.build.build`, which chooses the path: the bounded pipeline for ``mkn``/``kn`` (sorted
runs within ``memory``, spilled to ``temp_dir`` beyond it), the in-memory estimator for the other smoothings,
either with its counts made on a Dask cluster.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass

from ...errors import UserError

ENGINES = ("local", "dask")


@dataclass(frozen=True)
class BuildConfig:
    """An n-gram estimation's settings.

    order: n (KenLM's ``-o``). smoothing: a key of :data:`.estimate.SMOOTHINGS` (``mkn``, interpolated modified
    Kneser-Ney, is lmplz's only method and the best of the family in Chen & Goodman 1998). k: add-k's k (1 is
    add-one). prune: lmplz's count thresholds per order (``(0, 0, 1)`` drops singleton trigrams; the last
    value repeats; empty: none). memory: the budget of ``mkn``/``kn`` estimation, always the bounded pipeline
    (``2G``, ``500M``, ``40%``; ``None``: half the available memory, so that its window is as large as memory
    allows and a corpus that fits writes nothing to disk); the other smoothings are estimated in memory and
    take none. temp_dir: where the pipeline spills what does not fit and a local Dask cluster keeps its
    scratch (``None``: ``$TMPDIR`` or ``/tmp``). engine: ``local`` or ``dask`` (counts from a Dask cluster: the
    same model). scheduler: the Dask scheduler's address (``None``: a local cluster of ``workers``
    processes; 2 keeps a laptop usable and shows the merge working, more only pays on more cores).
    """

    order: int = 3
    smoothing: str = "mkn"
    k: float = 1.0
    prune: tuple[int, ...] = ()
    memory: str | None = None
    temp_dir: str | None = None
    engine: str = "local"
    scheduler: str | None = None
    workers: int = 2

    def __post_init__(self):
        from .estimate import SMOOTHINGS
        from .prune import parse_thresholds

        if not isinstance(self.order, int) or isinstance(self.order, bool) or self.order < 1:
            raise UserError(f"order {self.order!r}: must be an integer >= 1")
        if self.smoothing not in SMOOTHINGS:
            raise UserError(f"unknown smoothing {self.smoothing!r}: use one of {', '.join(SMOOTHINGS)}")
        if not (isinstance(self.k, (int, float)) and math.isfinite(self.k) and self.k > 0):
            raise UserError(f"--k {self.k}: must be a finite number > 0")
        if self.engine not in ENGINES:
            raise UserError(f"--engine {self.engine!r}: choose {' or '.join(ENGINES)}")
        if self.scheduler is not None and self.engine != "dask":
            raise UserError("--scheduler is the Dask scheduler's address: give it with --engine dask")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise UserError(f"--workers {self.workers!r}: must be an integer >= 1")
        prune = self.prune
        if isinstance(prune, str):  # the flag's own form, "0,0,1" (a string read one character at a time would not be)
            prune = parse_prune(prune, self.order)
        elif prune and (not isinstance(prune, (list, tuple)) or not all(
                isinstance(p, numbers.Integral) and not isinstance(p, bool) for p in prune)):
            raise UserError(f"prune {prune!r}: give one count threshold per order, e.g. (0, 0, 1) or '0,0,1'")
        object.__setattr__(self, "prune", tuple(parse_thresholds(prune, self.order)) if prune else ())

    @property
    def thresholds(self) -> list[int]:
        """One count threshold per order (zeros: nothing pruned)."""
        return list(self.prune) if self.prune else [0] * self.order

    def replace(self, **changes) -> BuildConfig:
        return dataclasses.replace(self, **changes)


def default(name: str):
    """The default of one :class:`BuildConfig` field (for the CLI's flags)."""
    return BuildConfig.__dataclass_fields__[name].default


def parse_prune(text: str | None, order: int) -> tuple[int, ...]:
    """``--prune 0,0,1`` (or "0 0 1") -> one threshold per order; ``None`` -> ``()`` (nothing pruned)."""
    from .prune import parse_thresholds

    if text is None:
        return ()
    parts = text.replace(",", " ").split() if "," not in text else [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):  # an empty field ("0,,1") too: no silent shift
        raise UserError(f"--prune {text!r}: expected counts separated by commas, e.g. 0,0,1")
    return tuple(parse_thresholds(parts, order))
