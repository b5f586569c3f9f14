"""Intrinsic evaluation of word vectors: word similarity and analogies.

**Similarity** (WS-353: Finkelstein et al. 2002; SimLex-999: Hill et al. 2015): a file of
``word1 word2 score`` lines (tab- or space-separated; ``#`` starts a comment). The cosine of each
pair is ranked against the human scores: Spearman's rho (Pearson's r of the ranks, ties given their
mean rank). Pairs with a word outside the vocabulary are skipped and counted; words are looked up
as given, then lower-cased. With n >= 4 pairs scored, rho comes with a 95 % confidence interval by
Fisher's z, ``tanh(atanh(rho) +- 1.96 sqrt(1.06 / (n - 3)))`` (Fieller, Hartley & Pearson 1957's
variance for Spearman's rho): on WS-353's 353 pairs at rho 0.6 it is about +-0.07: the sampling noise of one such
set, against which a small difference between two models' rho is to be read.

**Analogy** (Mikolov et al. 2013a, ``questions-words.txt``): ``a a* b b*`` asks for ``b*`` from
``a : a* :: b : ?``. The search runs over the ``restrict`` most frequent words (30,000, as is
customary: the first rows of a file sorted by count), excluding ``a``, ``a*`` and ``b``; words are
lower-cased; a question with a word outside the restricted vocabulary is skipped (coverage counts
them). With unit vectors:

- 3CosAdd: ``argmax_x cos(x, a* - a + b)`` (= ``argmax_x cos(x,a*) - cos(x,a) + cos(x,b)``);
- 3CosMul (Levy & Goldberg 2014): ``argmax_x cos'(x,a*) cos'(x,b) / (cos'(x,a) + 0.001)`` with
  ``cos' = (cos + 1) / 2``.

Sections whose name starts with ``gram`` are syntactic, the others semantic.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..data.textio import iter_lines
from ..errors import UserError
from .vectors import WordVectors

EPS_MUL = 1e-3


#: The public evaluation sets ``embed eval`` looks for in its folder, and where each comes from.
EVAL_SETS = {
    "wordsim353.tsv": "WordSim-353 (Finkelstein et al. 2002): word pairs with human similarity scores",
    "simlex999.txt": "SimLex-999 (Hill et al. 2015): word pairs scored for similarity, not relatedness",
    "questions-words.txt": "word2vec's analogy questions (Mikolov et al. 2013a), distributed with word2vec",
}


def default_eval_file(name: str, directory: str | None = None) -> str | None:
    """``DIRECTORY/NAME`` (``--eval-dir``), else ``$SAMPLEDLM_EVAL/NAME``, else ``../shared/data/eval/NAME`` beside
    the repository holding this package (a development checkout); None when absent."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    base = directory or os.environ.get("SAMPLEDLM_EVAL") or os.path.join(os.path.dirname(repo), "shared", "data",
                                                                          "eval")
    path = os.path.join(base, name)
    return path if os.path.isfile(path) else None


def rank(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given their average rank."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(a, b) -> float:
    """Spearman's rank correlation (nan for fewer than 2 pairs or a constant side)."""
    if len(a) < 2:
        return float("nan")
    ra, rb = rank(a), rank(b)
    ra -= ra.mean()
    rb -= rb.mean()
    den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


def read_pairs(path: str) -> list[tuple[str, str, float]]:
    """``(word1, word2, score)`` of a similarity file; one-line errors naming the line."""
    pairs = []
    for n, line in enumerate(iter_lines(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) != 3:  # four columns (two scores?) would be read as the first: refused, as two are
            raise UserError(f"{path}:{n}: expected 'word1 word2 score', found {len(parts)} columns: {line[:60]!r}")
        try:
            score = float(parts[2])
        except ValueError:
            raise UserError(f"{path}:{n}: score {parts[2]!r} is not a number") from None
        if not math.isfinite(score):  # a NaN ranks as the largest score and turns rho around
            raise UserError(f"{path}:{n}: score {parts[2]!r} is not a finite number")
        pairs.append((parts[0].strip(), parts[1].strip(), score))
    if not pairs:
        raise UserError(f"{path}: no word pairs")
    return pairs


@dataclass
class SimilarityResult:
    name: str
    rho: float
    pairs: int  # pairs scored
    skipped: int  # pairs with a word outside the vocabulary

    @property
    def ci95(self) -> tuple[float, float] | None:
        """The 95 % interval of rho (Fisher's z, Fieller et al. 1957's variance); None under 4 pairs or at |rho| = 1."""
        if self.pairs < 4 or not math.isfinite(self.rho) or abs(self.rho) >= 1.0:
            return None
        z, half = math.atanh(self.rho), 1.96 * math.sqrt(1.06 / (self.pairs - 3))
        return math.tanh(z - half), math.tanh(z + half)

    def to_dict(self) -> dict:
        return {"name": self.name, "spearman": self.rho, "ci95": list(self.ci95) if self.ci95 else None,
                "pairs": self.pairs, "skipped": self.skipped}


def similarity(wv: WordVectors, pairs: list[tuple[str, str, float]], name: str = "") -> SimilarityResult:
    """Spearman rho between cosine and human scores over the pairs whose words are known."""
    u = wv.unit()
    cos, gold = [], []
    for a, b, s in pairs:
        ia, ib = wv.lookup(a, True), wv.lookup(b, True)
        if ia is None or ib is None:
            continue
        cos.append(float(u[ia] @ u[ib]))
        gold.append(s)
    return SimilarityResult(name, spearman(cos, gold), len(cos), len(pairs) - len(cos))


def read_analogies(path: str) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """``[(section, [(a, a*, b, b*), ...]), ...]`` of a questions-words file, lower-cased."""
    sections: list[tuple[str, list]] = []
    for n, line in enumerate(iter_lines(path), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith(":"):
            sections.append((line[1:].strip(), []))
            continue
        parts = line.lower().split()
        if len(parts) != 4:
            raise UserError(f"{path}:{n}: expected four words, found {len(parts)}")
        if not sections:
            raise UserError(f"{path}:{n}: a question before the first ': section' line")
        sections[-1][1].append(tuple(parts))
    if not any(q for _, q in sections):
        raise UserError(f"{path}: no analogy questions")
    return sections


@dataclass
class AnalogyResult:
    sections: list[dict] = field(default_factory=list)  # name, kind, questions, answered, add, mul (correct)
    restrict: int = 30_000

    def total(self, kind: str | None = None) -> dict:
        rows = [s for s in self.sections if kind is None or s["kind"] == kind]
        q = sum(s["questions"] for s in rows)
        n = sum(s["answered"] for s in rows)
        add = sum(s["add"] for s in rows)
        mul = sum(s["mul"] for s in rows)
        return {"questions": q, "answered": n, "coverage": n / q if q else float("nan"),
                "add": add / n if n else float("nan"), "mul": mul / n if n else float("nan")}

    def to_dict(self) -> dict:
        return {"restrict": self.restrict, "sections": self.sections, "semantic": self.total("semantic"),
                "syntactic": self.total("syntactic"), "all": self.total()}


def predict(u: np.ndarray, q: np.ndarray, batch: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """3CosAdd and 3CosMul answers ``([Q], [Q])`` (row numbers of ``u [R, dim]``, unit rows) to questions
    ``q [Q, 3]`` (rows of a, a*, b), the three question words excluded."""
    add = np.empty(len(q), dtype=np.int64)
    mul = np.empty(len(q), dtype=np.int64)
    for s in range(0, len(q), batch):
        qb = q[s : s + batch]
        ca, cas, cb = (u[qb[:, j]] @ u.T for j in range(3))  # [B, R] each
        rows = np.arange(len(qb))
        score = cas - ca + cb
        m = ((cas + 1) / 2) * ((cb + 1) / 2) / ((ca + 1) / 2 + EPS_MUL)
        for j in range(3):
            score[rows, qb[:, j]] = -np.inf
            m[rows, qb[:, j]] = -np.inf
        add[s : s + batch] = score.argmax(1)
        mul[s : s + batch] = m.argmax(1)
    return add, mul


def analogy(wv: WordVectors, sections, restrict: int = 30_000) -> AnalogyResult:
    """3CosAdd and 3CosMul accuracy per section over the ``restrict`` most frequent words (module docstring)."""
    r = min(restrict, len(wv))
    u = wv.unit()[:r]
    index: dict[str, int] = {}
    for i in range(r):
        index.setdefault(wv.words[i].lower(), i)
    result = AnalogyResult(restrict=restrict)
    for name, questions in sections:
        kind = "syntactic" if name.startswith("gram") else "semantic"
        known = [tuple(index[w] for w in q) for q in questions if all(w in index for w in q)]
        add = mul = 0
        if known:
            q = np.asarray(known, dtype=np.int64)
            pa, pm = predict(u, q[:, :3])
            add, mul = int((pa == q[:, 3]).sum()), int((pm == q[:, 3]).sum())
        result.sections.append({"name": name, "kind": kind, "questions": len(questions), "answered": len(known),
                                "add": add, "mul": mul})
    return result
