"""Progress on standard error: a tqdm bar on a terminal; elsewhere (a log, ``nohup``, a pipe) a plain line at most
every :func:`interval` seconds -- what, done/total, rate, ETA -- so that long work shows in a log too, and work
that ends within the interval prints nothing. ``SAMPLEDLM_NO_PROGRESS`` (any non-empty value) turns both off;
``SAMPLEDLM_PROGRESS_SECONDS`` sets the interval of the plain lines (default 30).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import time

from tqdm.auto import tqdm

INTERVAL_ENV = "SAMPLEDLM_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 30.0


def silenced() -> bool:
    """Whether ``SAMPLEDLM_NO_PROGRESS`` turns every progress output off."""
    return os.environ.get("SAMPLEDLM_NO_PROGRESS", "") != ""


def enabled() -> bool:
    """Whether bars are drawn: stderr is a terminal and progress is not silenced."""
    return sys.stderr.isatty() and not silenced()


def interval() -> float:
    """Seconds between the plain progress lines off a terminal: ``$SAMPLEDLM_PROGRESS_SECONDS`` when it is a
    positive number, else :data:`DEFAULT_INTERVAL`."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value > 0 and value != float("inf") else DEFAULT_INTERVAL


_TASK: contextvars.ContextVar[str | None] = contextvars.ContextVar("sampledlm_progress_task", default=None)


@contextlib.contextmanager
def announced(desc: str):
    """Within the block, loops that report only when asked (:func:`task_bar`: the exact scoring of a text by a
    neural model) draw a bar named ``desc``; elsewhere (a library call, a server's request, a validation pass
    inside training) they stay silent."""
    token = _TASK.set(desc)
    try:
        yield
    finally:
        _TASK.reset(token)


def task_bar(total=None, unit: str = "it", **kw) -> tqdm:
    """:func:`bar` named by the enclosing :func:`announced` block, or a bar that shows nothing outside one."""
    desc = _TASK.get()
    if desc is None:
        return tqdm(total=total, disable=True)
    return bar(total=total, desc=desc, unit=unit, **kw)


def say(line: str) -> None:
    """One line on stderr (what a long step is about to do), unless ``SAMPLEDLM_NO_PROGRESS`` is set."""
    if not silenced():
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def bar(total=None, desc: str = "", unit: str = "it", unit_scale: bool = True, disable: bool | None = None,
        *, every: float | None = None, clock=time.monotonic, **kw) -> tqdm:
    """A tqdm bar on stderr when stderr is a terminal; off a terminal a :class:`LineBar` (plain lines at most
    every ``every`` seconds, default :func:`interval`; ``clock``: its time source); nothing at all when
    ``SAMPLEDLM_NO_PROGRESS`` is set. ``disable`` given: a tqdm bar, drawn unless ``disable`` (the caller reports
    progress off a terminal itself, as the neural training loop does)."""
    if disable is None and not enabled() and not silenced():
        return LineBar(total=total, desc=desc, unit=unit, unit_scale=unit_scale, every=every, clock=clock, **kw)
    return tqdm(
        total=total, desc=desc, unit=unit, unit_scale=unit_scale, disable=(not enabled()) if disable is None else disable,
        leave=False,
        file=sys.stderr, dynamic_ncols=True, **kw,
    )


class LineBar(tqdm):
    """A bar that draws nothing: off a terminal it prints ``desc: done/total unit (pct), rate, elapsed, ETA`` as a
    line of its own on stderr once ``every`` seconds have passed since the last (or since it started), at an
    :meth:`update`; never for work that ends within ``every`` seconds. Counts, ``total`` and ``set_postfix``
    behave as a tqdm bar's (the postfix ends the line)."""

    def __init__(self, total=None, desc: str = "", unit: str = "it", unit_scale: bool = True,
                 every: float | None = None, clock=time.monotonic, **kw):
        kw.pop("file", None)
        super().__init__(total=total, desc=desc, unit=unit, unit_scale=unit_scale, disable=True, **kw)
        self.desc, self.unit, self.unit_scale = desc, unit, unit_scale
        self.postfix = ""
        self.every = interval() if every is None else float(every)
        self.clock = clock
        self.started = self.last_line = clock()
        self.initial = self.n
        self.out = sys.stderr
        self.lines = 0  # printed so far

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)

    def update(self, n=1):
        self.n += n
        now = self.clock()
        if now - self.last_line >= self.every:
            self.last_line = now
            self.out.write(self.line(now) + "\n")
            self.out.flush()
            self.lines += 1
            return True
        return None

    def _size(self, x: float) -> str:
        whole = float(x).is_integer() and abs(x) < 1000  # 12, not 12.0
        return self.format_sizeof(x) if self.unit_scale and not whole else f"{x:,.0f}"

    def line(self, now: float) -> str:
        """The progress line at time ``now``."""
        elapsed = max(now - self.started, 1e-9)
        rate = (self.n - self.initial) / elapsed
        unit = f" {self.unit}" if self.unit else ""
        head = f"{self.desc}: " if self.desc else ""
        if self.total:
            pct = 100 * self.n / self.total
            done = f"{self._size(self.n)}/{self._size(self.total)}{unit} ({pct:.0f}%)"
            eta = (f"ETA {self.format_interval((self.total - self.n) / rate)}" if rate > 0 and self.n < self.total
                   else "ETA ?" if self.n < self.total else "ETA 00:00")
            text = f"{head}{done}, {self._size(rate)}{unit}/s, {self.format_interval(elapsed)} elapsed, {eta}"
        else:
            text = f"{head}{self._size(self.n)}{unit}, {self._size(rate)}{unit}/s, {self.format_interval(elapsed)} elapsed"
        return f"{text}, {self.postfix}" if self.postfix else text
