"""N-best lists: the three common formats, rescoring with any LM or mixture, weight tuning for WER.

Every score is kept as a natural-log likelihood (higher is better), whatever the file's units:

========  =====================================================================  ====================
format    layout                                                                 scores in the file
========  =====================================================================  ====================
srilm     one file per utterance (a directory of them, or a file listing them),  log10 (SRILM's
          a line per hypothesis: ``am lm nwords w1 .. wn`` (``<s>``, ``</s>``    ``nbest-lattice``/
          dropped); the utterance id is the file name without ``.gz``/``.nbest`` ``-rescore`` format)
kaldi     a directory holding ``text`` (``utt-N w1 .. wn``), ``ac_cost`` and       costs: -ln
          ``lm_cost`` (``utt-N cost``), as Kaldi's lattice-to-nbest scripts
          write them; ``N`` is the rank, ``utt`` the utterance
jsonl     a line per utterance: ``{"id", "ref"?, "hyps": [{"words", "am", "lm"}]}``  ln
========  =====================================================================  ====================

Rescoring gives every hypothesis a new LM score ``lm_new = ln P(words </s>)`` under any model and
ranks the list by::

    score = am_scale * am + lm_weight * ((1 - b) * lm_new + b * lm_first) + word_penalty * words

``b = 0`` (the default) replaces the first-pass LM score, ``0 < b < 1`` keeps part of it (a log-linear
interpolation of the two LMs). :func:`tune` chooses ``lm_weight``, ``word_penalty`` (and ``b`` when
asked) on a development set by grid search for the lowest WER, ``am_scale`` fixed.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..data.textio import atomic_write, iter_lines
from ..errors import UserError
from ._nbest_types import MARKERS, Hypothesis, NBest, _words  # noqa: F401 - re-exported
from ._nbest_jsonl import read_jsonl  # noqa: F401 - re-exported
from .wer import Errors, align

LN10 = math.log(10.0)

@dataclass
class Weights:
    am_scale: float = 1.0
    lm_weight: float = 1.0
    word_penalty: float = 0.0
    first_pass_weight: float = 0.0  # b of the module docstring

    def score(self, feats: np.ndarray) -> np.ndarray:
        """``feats [..., 4]`` = (am, lm_new, lm_first, words) -> the combined scores ``[...]``."""
        b = self.first_pass_weight
        lm = (1 - b) * feats[..., 1] + b * feats[..., 2]
        return self.am_scale * feats[..., 0] + self.lm_weight * lm + self.word_penalty * feats[..., 3]


# --- reading -----------------------------------------------------------------------------------------------
def _float(path: str, line: int, text: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UserError(f"{path}:{line}: {what} {text!r} is not a number") from None
    if not math.isfinite(v):
        raise UserError(f"{path}:{line}: {what} {text!r} is not a finite number")
    return v


def _utterance_id(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (".gz", ".bz2", ".xz", ".nbest"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def read_srilm_file(path: str) -> NBest:
    """One utterance's SRILM n-best file (module docstring)."""
    hyps = []
    for n, line in enumerate(iter_lines(path), 1):
        f = line.split()
        if not f:
            continue
        if n == 1 and f[0].startswith("NBestList"):
            raise UserError(f"{path}:1: {f[0]} (Decipher) lists are not read; write them in SRILM's plain format "
                            "'am lm nwords words...' (nbest-lattice -write-nbest)")
        if "|||" in f:
            raise UserError(f"{path}:{n}: a Moses n-best line ('id ||| words ||| features ||| score') is not read; "
                            "convert the lists to JSONL (docs/formats.md: n-best lists)")
        if len(f) < 3:
            raise UserError(f"{path}:{n}: expected 'am_score lm_score nwords word...', got {line.strip()[:60]!r}")
        am, lm = _float(path, n, f[0], "acoustic score"), _float(path, n, f[1], "LM score")
        if not f[2].isdecimal():
            raise UserError(f"{path}:{n}: word count {f[2]!r} is not a whole number")
        if not (math.isfinite(am * LN10) and math.isfinite(lm * LN10)):
            raise UserError(f"{path}:{n}: a score does not fit in a float once converted from log10")
        words = _words(f[3:])
        if int(f[2]) not in (len(words), len(f) - 3):  # SRILM counts neither <s> nor </s>; some writers count both
            raise UserError(f"{path}:{n}: word count {f[2]}, but {len(words)} words follow")
        hyps.append(Hypothesis(words, am * LN10, lm * LN10))
    if not hyps:
        raise UserError(f"{path}: no hypotheses")
    return NBest(_utterance_id(path), hyps)


def read_srilm(path: str) -> list[NBest]:
    """A directory of SRILM n-best files (sorted by name), a file listing them, or one n-best file."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        if not names:
            raise UserError(f"{path}: no n-best files in the directory")
        return [read_srilm_file(os.path.join(path, n)) for n in names]
    lines = [ln.strip() for ln in iter_lines(path) if ln.strip()]
    base = os.path.dirname(path)
    if lines and all(len(ln.split()) == 1 for ln in lines):  # a list of files (SRILM's -nbest-files)
        files = [ln if os.path.isabs(ln) else os.path.join(base, ln) for ln in lines]
        for n, f in enumerate(files, 1):
            if not os.path.isfile(f):
                raise UserError(f"{path}:{n}: {lines[n - 1]}: no such n-best file")
        return [read_srilm_file(f) for f in files]
    return [read_srilm_file(path)]


def _kaldi_table(path: str) -> dict[str, tuple[int, list[str]]]:
    out = {}
    for n, line in enumerate(iter_lines(path), 1):
        f = line.split()
        if not f:
            continue
        if f[0] in out:
            raise UserError(f"{path}:{n}: key {f[0]!r} appears twice")
        out[f[0]] = (n, f[1:])
    return out


def _kaldi_key(path: str, line: int, key: str) -> tuple[str, int]:
    utt, _, rank = key.rpartition("-")
    if not utt or not rank.isdigit():
        raise UserError(f"{path}:{line}: key {key!r} is not 'utterance-N' (N the hypothesis' rank)")
    return utt, int(rank)


def read_kaldi(directory: str) -> list[NBest]:
    """A directory with ``text`` (or ``words_text``), ``ac_cost`` and ``lm_cost`` (module docstring)."""
    text = next((os.path.join(directory, n) for n in ("text", "words_text") if os.path.isfile(os.path.join(directory, n))),
                None)
    if text is None:
        raise UserError(f"{directory}: no 'text' file (Kaldi n-best: text, ac_cost, lm_cost)")
    words = _kaldi_table(text)
    costs = {}
    for name in ("ac_cost", "lm_cost"):
        p = os.path.join(directory, name)
        if not os.path.isfile(p):
            raise UserError(f"{directory}: no '{name}' file (Kaldi n-best: text, ac_cost, lm_cost)")
        table = _kaldi_table(p)
        for key, (n, f) in table.items():
            if len(f) != 1:
                raise UserError(f"{p}:{n}: expected 'key cost'")
            if key not in words:
                raise UserError(f"{p}:{n}: key {key!r} is not in {text}")
        missing = next((k for k in words if k not in table), None)
        if missing:
            raise UserError(f"{p}: no cost for {missing!r} ({text}:{words[missing][0]})")
        costs[name] = {k: _float(p, n, f[0], "cost") for k, (n, f) in table.items()}
    by_utt: dict[str, list] = {}
    for key, (n, toks) in words.items():
        utt, rank = _kaldi_key(text, n, key)
        by_utt.setdefault(utt, []).append((rank, Hypothesis(_words(toks), -costs["ac_cost"][key], -costs["lm_cost"][key])))
    return [NBest(u, [h for _, h in sorted(hs, key=lambda x: x[0])]) for u, hs in by_utt.items()]


def detect_format(path: str) -> str:
    if os.path.isdir(path):
        # any of Kaldi's file names makes it a Kaldi directory, so a missing one is named as such
        kaldi = ("ac_cost", "lm_cost", "text", "words_text")
        return "kaldi" if any(os.path.isfile(os.path.join(path, n)) for n in kaldi) else "srilm"
    return "jsonl" if path.endswith((".jsonl", ".json", ".jsonl.gz")) else "srilm"


def read_nbest(path: str, fmt: str = "auto") -> list[NBest]:
    """Read ``path`` in ``fmt`` (``auto``: a directory with any of Kaldi's files is kaldi, other directories and files
    srilm, ``*.jsonl`` jsonl); utterance ids must be unique."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file or directory")
    fmt = detect_format(path) if fmt == "auto" else fmt
    lists = {"srilm": read_srilm, "kaldi": read_kaldi, "jsonl": read_jsonl}[fmt](path)
    seen = set()
    for nb in lists:
        if nb.id in seen:
            raise UserError(f"{path}: utterance {nb.id!r} appears twice")
        seen.add(nb.id)
    return lists


def read_refs(path: str, lists: list[NBest]) -> None:
    """Attach references from a Kaldi-style ``utt w1 .. wn`` file; every utterance needs one."""
    refs, first = {}, {}
    for n, line in enumerate(iter_lines(path), 1):
        f = line.split()
        if f:
            if f[0] in refs:  # the last had won, and the WER reported and tuned on changed without a word
                raise UserError(f"{path}:{n}: utterance {f[0]!r} appears twice (first on line {first[f[0]]})")
            refs[f[0]], first[f[0]] = _words(f[1:]), n
    for nb in lists:
        if nb.id not in refs:
            raise UserError(f"{path}: no reference for utterance {nb.id!r}")
        nb.ref = refs[nb.id]


# --- writing -----------------------------------------------------------------------------------------------
def _lm_out(h: Hypothesis) -> float:
    return h.lm if h.lm_new is None else h.lm_new


def write_srilm(directory: str, lists: list[NBest]) -> None:
    """One ``ID.nbest`` file per utterance (log10 scores; the rescoring LM's score where there is one)."""
    os.makedirs(directory, exist_ok=True)
    for nb in lists:
        with atomic_write(os.path.join(directory, f"{nb.id}.nbest")) as f:
            for h in nb.hyps:
                f.write(f"{h.am / LN10:.10g} {_lm_out(h) / LN10:.10g} {len(h.words)} {' '.join(h.words)}\n")


def write_kaldi(directory: str, lists: list[NBest]) -> None:
    """``text``, ``ac_cost``, ``lm_cost`` with keys ``utt-N`` (N from 1, in list order)."""
    os.makedirs(directory, exist_ok=True)
    files = {name: [] for name in ("text", "ac_cost", "lm_cost")}
    for nb in lists:
        for r, h in enumerate(nb.hyps, 1):
            key = f"{nb.id}-{r}"
            files["text"].append(f"{key} {' '.join(h.words)}".rstrip() + "\n")
            files["ac_cost"].append(f"{key} {-h.am:.10g}\n")
            files["lm_cost"].append(f"{key} {-_lm_out(h):.10g}\n")
    for name, lines in files.items():
        with atomic_write(os.path.join(directory, name)) as f:
            f.writelines(lines)


def write_jsonl(path: str, lists: list[NBest], extra: list[list[dict]] | None = None) -> None:
    """A line per utterance; ``lm`` is the first-pass score, ``lm_new`` the rescoring LM's (when scored)."""
    with atomic_write(path) as f:
        for i, nb in enumerate(lists):
            hyps = []
            for j, h in enumerate(nb.hyps):
                d = {"words": " ".join(h.words), "am": h.am, "lm": h.lm}
                if h.lm_new is not None:
                    d["lm_new"] = h.lm_new
                if extra:
                    d.update(extra[i][j])
                hyps.append(d)
            rec = {"id": nb.id, **({"ref": " ".join(nb.ref)} if nb.ref is not None else {}), "hyps": hyps}
            f.write(json.dumps(rec) + "\n")


def write_nbest(path: str, lists: list[NBest], fmt: str) -> None:
    {"srilm": write_srilm, "kaldi": write_kaldi, "jsonl": write_jsonl}[fmt](path, lists)


# --- rescoring ---------------------------------------------------------------------------------------------
def add_lm_scores(lm, lists: list[NBest]) -> None:
    """Set every hypothesis' ``lm_new`` = ln P(words </s>) under ``lm`` (what :func:`sampledlm.load` returns, or its
    ``lm``; bunched: one call per chunk)."""
    from .score import CHUNK_TOKENS, score_sentences

    from ..data.tokenizer import token_normaliser
    from ..lm import language_model

    lm = language_model(lm)

    norm = token_normaliser(lm.text_options)  # the hypotheses' words as the model reads text (e.g. lower-cased)
    hyps = [h for nb in lists for h in nb.hyps]
    lo = 0
    while lo < len(hyps):
        hi, size = lo, 0
        while hi < len(hyps) and size < CHUNK_TOKENS:
            size += len(hyps[hi].words) + 1
            hi += 1
        for h, s in zip(hyps[lo:hi], score_sentences(lm, [[norm(w) for w in h.words] for h in hyps[lo:hi]])):
            h.lm_new = s.ln_prob
        lo = hi


def features(nb: NBest) -> np.ndarray:
    """``[H, 4]``: (am, lm_new (lm_first when unscored), lm_first, words) of each hypothesis."""
    return np.array([[h.am, _lm_out(h), h.lm, len(h.words)] for h in nb.hyps], dtype=np.float64)


def best_index(nb: NBest, w: Weights) -> int:
    return int(np.argmax(w.score(features(nb))))


def rerank(nb: NBest, w: Weights) -> NBest:
    """The list ordered by the combined score, best first (stable for ties)."""
    order = np.argsort(-w.score(features(nb)), kind="stable")
    return replace(nb, hyps=[nb.hyps[i] for i in order])


def errors_of(nb: NBest) -> list[Errors]:
    if nb.ref is None:
        raise UserError(f"utterance {nb.id!r} has no reference")
    return [align(nb.ref, h.words) for h in nb.hyps]


@dataclass
class Report:
    """Corpus errors of the first-pass 1-best, the rescored 1-best and the oracle (fewest errors in each list)."""

    first_pass: Errors
    rescored: Errors
    oracle: Errors
    weights: Weights
    utterances: int = 0
    hypotheses: int = 0

    def to_dict(self) -> dict:
        return {"first_pass_wer": self.first_pass.wer, "rescored_wer": self.rescored.wer, "oracle_wer": self.oracle.wer,
                "reference_words": self.first_pass.ref_words, "utterances": self.utterances,
                "hypotheses": self.hypotheses, "weights": asdict(self.weights)}


def evaluate(lists: list[NBest], w: Weights) -> Report:
    first, resc, orac = Errors(), Errors(), Errors()
    for nb in lists:
        errs = errors_of(nb)
        first = first + errs[0]
        resc = resc + errs[best_index(nb, w)]
        orac = orac + min(errs, key=lambda e: e.errors)
    return Report(first, resc, orac, w, len(lists), sum(len(nb.hyps) for nb in lists))


@dataclass
class Grid:
    """The values :func:`tune` tries (every combination)."""

    lm_weight: list[float] = field(default_factory=lambda: [0.0] + list(np.geomspace(0.05, 50, 40)))
    word_penalty: list[float] = field(default_factory=lambda: list(np.linspace(-10, 10, 41)))
    first_pass_weight: list[float] = field(default_factory=lambda: [0.0])

    def on_edge(self, cand: np.ndarray) -> np.ndarray:
        """Whether each candidate ``[G, 4]`` (am, lm, penalty, first pass) sits on an edge :meth:`widened_at`
        would search past: the largest LM weight (above 0), the word penalty's smallest or largest."""
        lm_w, wp = self.lm_weight, self.word_penalty
        top = (cand[:, 1] == max(lm_w)) & (max(lm_w) > 0) if len(lm_w) > 1 else np.zeros(len(cand), bool)
        ends = np.isin(cand[:, 2], [min(wp), max(wp)]) if len(wp) > 1 else np.zeros(len(cand), bool)
        return top | ends

    def best(self, cand: np.ndarray, errors: np.ndarray) -> int:
        """The index of the fewest ``errors``; among ties the first inside the grid, so that an edge is taken
        (and searched past) only when it does better than everything inside."""
        ties = np.flatnonzero(errors == errors.min())
        inside = ties[~self.on_edge(cand[ties])]
        return int(inside[0] if len(inside) else ties[0])

    def widened_at(self, w: "Weights") -> tuple["Grid | None", list[str]]:
        """A grid reaching past the edge that tuned weights ``w`` sit on, and what was widened; ``(None, [])`` when
        they lie inside. The LM weight grows tenfold past its largest value (0, no LM, is a true end); the word
        penalty extends by its span past either end."""
        notes, lm_w, wp = [], list(self.lm_weight), list(self.word_penalty)
        if len(lm_w) > 1 and w.lm_weight == max(lm_w) > 0:
            top = max(lm_w)
            lm_w = sorted(set(lm_w) | set(np.geomspace(top, 10 * top, 21).tolist()))
            notes.append(f"the LM weight {w.lm_weight:.4g} sat on the top of its grid: searched up to {10 * top:.4g}")
        if len(wp) > 1 and w.word_penalty in (min(wp), max(wp)):
            lo, hi = min(wp), max(wp)
            span = hi - lo
            ext = np.linspace(hi, hi + span, 41) if w.word_penalty == hi else np.linspace(lo - span, lo, 41)
            wp = sorted(set(wp) | set(ext.tolist()))
            notes.append(f"the word penalty {w.word_penalty:.4g} sat on the edge of its grid ({lo:.4g} .. {hi:.4g}): "
                         f"searched to {min(wp):.4g} .. {max(wp):.4g}")
        return (Grid(lm_w, wp, list(self.first_pass_weight)) if notes else None), notes


def tune(lists: list[NBest], am_scale: float = 1.0, grid: Grid | None = None) -> Weights:
    """The grid point with the fewest errors on ``lists`` (which need references); ties: the first found inside
    the grid (:meth:`Grid.best`)."""
    grid = grid or Grid()
    cand = np.array([(am_scale, lw, wp, b) for b in grid.first_pass_weight for lw in grid.lm_weight
                     for wp in grid.word_penalty], dtype=np.float64)  # [G, 4]
    total = np.zeros(len(cand), dtype=np.int64)
    for nb in lists:
        f = features(nb)  # [H, 4]
        errs = np.array([e.errors for e in errors_of(nb)])
        lm = (1 - cand[:, 3:4]) * f[None, :, 1] + cand[:, 3:4] * f[None, :, 2]  # [G, H]
        s = cand[:, 0:1] * f[None, :, 0] + cand[:, 1:2] * lm + cand[:, 2:3] * f[None, :, 3]
        total += errs[np.argmax(s, axis=1)]
    best = cand[grid.best(cand, total)]
    return Weights(*map(float, best))


# --- what the model will see of the hypotheses -------------------------------------------------------------
def fold_case(items) -> None:
    """``rescore --lowercase``: lower-case every hypothesis word, lattice word and reference, in place (a recogniser
    that writes upper case, a model trained on lower-case text)."""
    for it in items:
        for h in getattr(it, "hyps", ()):
            h.words = [w.lower() for w in h.words]
        for link in getattr(it, "links", ()):
            if link.word is not None:
                link.word = link.word.lower()
        if it.ref is not None:
            it.ref = [w.lower() for w in it.ref]


def oov_share(items, lm, folded: bool = False) -> tuple[int, ...]:
    """``(words outside the model's vocabulary, words)`` over every hypothesis (n-best) or link (lattice) word,
    read as the model reads text (its own lower-casing and numbers); ``folded``: a third count, of those outside
    words that are in the vocabulary lower-cased (whether ``--lowercase`` would help)."""
    from ..data.tokenizer import token_normaliser

    norm, index = token_normaliser(lm.text_options), lm.vocab.index
    words = [w for it in items for h in getattr(it, "hyps", ()) for w in h.words]
    words += [link.word for it in items for link in getattr(it, "links", ()) if link.word is not None]
    out = [norm(w) for w in words if norm(w) not in index]
    return (len(out), len(words)) + ((sum(w.lower() in index for w in out),) if folded else ())

