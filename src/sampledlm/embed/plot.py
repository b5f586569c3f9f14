"""A 2-D picture of chosen words: their vectors projected on the first two principal components.

PCA of the chosen words' unit vectors ``X [n, dim]`` (centred): the top two right singular vectors
of ``X - mean`` give the axes; each word is drawn at its coordinates, labelled.
"""

from __future__ import annotations

import numpy as np

from ..errors import UserError
from .vectors import WordVectors


def pca_2d(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(coords [n, 2], explained variance ratio [2])`` of rows ``x [n, dim]``."""
    xc = x - x.mean(axis=0, keepdims=True)
    _, s, vt = np.linalg.svd(xc.astype(np.float64), full_matrices=False)
    var = s**2
    ratio = var[:2] / var.sum() if var.sum() > 0 else np.zeros(2)
    coords = xc @ vt[:2].T
    if coords.shape[1] < 2:
        coords = np.pad(coords, ((0, 0), (0, 2 - coords.shape[1])))
        ratio = np.pad(ratio, (0, 2 - len(ratio)))
    return coords, ratio


def plot_words(ax, wv: WordVectors, words: list[str], title: str = "") -> list[str]:
    """Draw ``words`` (those in the vocabulary) on matplotlib axes ``ax``; returns the words missing."""
    rows, shown, missing = [], [], []
    for w in words:
        i = wv.lookup(w, lowercase=True)
        (missing.append(w) if i is None else (rows.append(i), shown.append(w)))
    if len(rows) < 2:
        raise UserError(f"a plot needs at least 2 words of the vocabulary (missing: {', '.join(missing) or 'none'})")
    coords, ratio = pca_2d(wv.unit()[rows])
    ax.scatter(coords[:, 0], coords[:, 1], s=12)
    for (x, y), w in zip(coords, shown):
        ax.annotate(w, (x, y), fontsize=8, xytext=(3, 2), textcoords="offset points")
    ax.set_xlabel(f"PC1 ({100 * ratio[0]:.0f}% of variance)")
    ax.set_ylabel(f"PC2 ({100 * ratio[1]:.0f}%)")
    if title:
        ax.set_title(title, fontsize=10)
    return missing


def write_plot(path: str, panels: list[tuple[str, WordVectors]], words: list[str]) -> list[str]:
    """One PNG with one PCA panel per ``(title, vectors)``; written atomically. Returns the words missing anywhere."""
    from matplotlib.figure import Figure  # drawn off-screen: the user's pyplot backend is never switched

    from ..data.textio import atomic_write

    n = len(panels)
    fig = Figure(figsize=(5.5 * n, 5))
    axes = fig.subplots(1, n, squeeze=False)
    missing: set[str] = set()
    for ax, (title, wv) in zip(axes[0], panels):
        missing.update(plot_words(ax, wv, words, title))
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=110)
    return sorted(missing)
