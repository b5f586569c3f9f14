"""Progress bars that speak only to a person: silent when stderr is not a terminal (CI, pipes, logs)."""

from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm


def enabled() -> bool:
    return sys.stderr.isatty() and os.environ.get("SAMPLEDLM_NO_PROGRESS", "") == ""


def bar(total=None, desc: str = "", unit: str = "it", unit_scale: bool = True, disable: bool | None = None,
        **kw) -> tqdm:
    """A tqdm bar on stderr, disabled unless stderr is a terminal (or when ``disable``)."""
    return tqdm(
        total=total, desc=desc, unit=unit, unit_scale=unit_scale, disable=(not enabled()) if disable is None else disable,
        leave=False,
        file=sys.stderr, dynamic_ncols=True, **kw,
    )
