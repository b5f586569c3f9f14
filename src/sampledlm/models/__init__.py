"""Scorers: models that give a score a_w(h) for any word after any history (see objectives.base)."""

from .output import OutputLayer  # noqa: F401
