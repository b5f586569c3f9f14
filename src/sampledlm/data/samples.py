"""Sample files for the examples: the built-in corpus, n-best lists and lattices of a simulated recogniser.

``write_samples(directory)`` writes ``train.txt``, ``valid.txt``, ``test.txt`` (the built-in corpus,
:mod:`sampledlm.data.builtin`), ``nbest.jsonl`` (the n-best lists of the first test sentences, with references),
``nbest-srilm/`` (the same lists in SRILM's ``am lm nwords words`` layout, one ``.nbest`` file per utterance),
``refs.txt`` (``id words`` references) and ``lattices/`` (HTK SLF lattices of the first sentences). They are made from the corpus itself, so
the words are the ones the examples' models are trained on, and are the same for a seed.

The recogniser is simulated: each hypothesis is the reference with a few errors (a word replaced by another of the
training text's frequent words, dropped, or an extra one inserted); its acoustic score is ``-4`` per word, ``-3``
per error and Gaussian noise (sd 3), its first-pass LM score ``-2.3`` per word plus noise, so that the first pass
ranks the reference first only sometimes and rescoring has something to do. A lattice is a chain of slots, each
holding the reference word and one or two confusions, every link carrying its acoustic and LM scores.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections import Counter

from .builtin import write_builtin_corpus
from .textio import atomic_write

UTTERANCES = 20
HYPOTHESES = 10
LATTICES = 3

LN10 = math.log(10)  # natural logs per log10 unit


def _confusions(train: str, top: int = 300) -> list[str]:
    counts: Counter = Counter()
    with open(train, encoding="utf-8") as f:
        for line in f:
            counts.update(line.split())
    return [w for w, _ in counts.most_common(top)]


def _corrupt(words: list[str], rng: random.Random, pool: list[str]) -> tuple[list[str], int]:
    out, errors = list(words), rng.choice([1, 1, 2, 2, 3])
    for _ in range(errors):
        kind = rng.random()
        if kind < 0.6 and out:
            out[rng.randrange(len(out))] = rng.choice(pool)
        elif kind < 0.8 and len(out) > 1:
            del out[rng.randrange(len(out))]
        else:
            out.insert(rng.randrange(len(out) + 1), rng.choice(pool))
    return out, errors


def nbest_lists(sentences: list[list[str]], pool: list[str], seed: int = 1) -> list[dict]:
    """``[{"id", "ref", "hyps": [{"words", "am", "lm"}, ...]}]``: each reference and its corrupted variants."""
    rng = random.Random(seed)
    lists = []
    for i, ref in enumerate(sentences):
        hyps, seen = [], set()
        for k in range(HYPOTHESES * 3):
            words, errors = (list(ref), 0) if k == 0 else _corrupt(ref, rng, pool)
            key = " ".join(words)
            if key in seen or not words:
                continue
            seen.add(key)
            am = -4.0 * len(words) - 3.0 * errors + rng.gauss(0, 3)
            lm = -2.3 * len(words) + rng.gauss(0, 2)
            hyps.append({"words": key, "am": round(am, 2), "lm": round(lm, 2)})
            if len(hyps) == HYPOTHESES:
                break
        hyps.sort(key=lambda h: -(h["am"] + 10 * h["lm"]))
        lists.append({"id": f"utt{i + 1}", "ref": " ".join(ref), "hyps": hyps})
    return lists


def slf_lattice(name: str, ref: list[str], pool: list[str], rng: random.Random) -> str:
    """An HTK SLF lattice (base 10 scores) of ``ref``: one slot per word, each the word and 1-2 confusions."""
    nodes, links = ["!NULL"], []
    prev = 0
    for w in ref:
        options = [w] + rng.sample([p for p in pool if p != w], rng.choice([1, 2]))
        join = len(nodes) + len(options)  # the slot's words are nodes, then a !NULL node joins them
        for j, word in enumerate(options):
            node = len(nodes)
            nodes.append(word)
            right = j == 0
            links.append((prev, node, 0.0, 0.0))
            links.append((node, join, round(-4.0 - (0 if right else 1.5) + rng.gauss(0, 1.2), 2),
                          round(-1.0 + rng.gauss(0, 0.4), 2)))
        nodes.append("!NULL")
        prev = join
    lines = ["VERSION=1.0", f"UTTERANCE={name}", "base=10", f"N={len(nodes)} L={len(links)}"]
    lines += [f"I={i} W={w}" for i, w in enumerate(nodes)]
    lines += [f"J={j} S={s} E={e} a={a} l={lm}" for j, (s, e, a, lm) in enumerate(links)]
    return "\n".join(lines) + "\n"


#: what :func:`write_samples` writes into its directory
NAMES = ("train.txt", "valid.txt", "test.txt", "nbest.jsonl", "nbest-srilm", "refs.txt", "lattices")


def write_samples(directory: str, seed: int = 1) -> dict[str, str]:
    """Write the sample files into ``directory`` (created); returns their paths by name. All or nothing: they are
    written into a folder inside it, then moved into place, the files they replace moved back where a move fails
    (a failure part-way left some replaced and lattices/ empty)."""
    import shutil
    import tempfile

    os.makedirs(directory, exist_ok=True)
    stage = tempfile.mkdtemp(prefix=".samples-", dir=directory)
    try:
        paths = _write_samples(stage, seed)
        _move_into_place(stage, directory)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {k: os.path.join(directory, os.path.relpath(v, stage)) for k, v in paths.items()}


def _move_into_place(stage: str, directory: str) -> None:
    """Move :data:`NAMES` from ``stage`` into ``directory``: the old ones aside first (into ``stage``), then the new
    ones in; an ``OSError`` on the way undoes what was done and is raised as a :class:`UserError`."""
    from ..errors import UserError

    aside, placed, name = [], [], ""
    try:
        for name in NAMES:
            if os.path.lexists(os.path.join(directory, name)):
                os.rename(os.path.join(directory, name), os.path.join(stage, ".old-" + name))
                aside.append(name)
        for name in NAMES:
            os.rename(os.path.join(stage, name), os.path.join(directory, name))
            placed.append(name)
    except OSError as e:
        for done in placed:
            os.rename(os.path.join(directory, done), os.path.join(stage, done))
        for done in aside:
            os.rename(os.path.join(stage, ".old-" + done), os.path.join(directory, done))
        raise UserError(f"{os.path.join(directory, name)}: cannot replace it ({e.strerror}); the sample files in "
                        f"{directory} are as they were") from None


def _write_samples(directory: str, seed: int) -> dict[str, str]:
    paths = write_builtin_corpus(directory)
    pool = _confusions(paths["train"])
    with open(paths["test"], encoding="utf-8") as f:
        sentences = [line.split() for line in f if 3 <= len(line.split()) <= 14][:UTTERANCES]
    lists = nbest_lists(sentences, pool, seed)
    paths["nbest"] = os.path.join(directory, "nbest.jsonl")
    with atomic_write(paths["nbest"]) as f:
        f.write("".join(json.dumps(u) + "\n" for u in lists))
    srilm = os.path.join(directory, "nbest-srilm")
    os.makedirs(srilm, exist_ok=True)
    for u in lists:
        with atomic_write(os.path.join(srilm, f"{u['id']}.nbest")) as f:
            # SRILM's scores are log10; the JSONL's natural logs (copied unchanged, the same lists rescored otherwise)
            f.write("".join(f"{h['am'] / LN10:.6g} {h['lm'] / LN10:.6g} {len(h['words'].split())} {h['words']}\n"
                            for h in u["hyps"]))
    paths["refs"] = os.path.join(directory, "refs.txt")
    with atomic_write(paths["refs"]) as f:
        f.write("".join(f"{u['id']} {u['ref']}\n" for u in lists))
    paths["nbest_srilm"] = srilm
    lattices = os.path.join(directory, "lattices")
    os.makedirs(lattices, exist_ok=True)
    rng = random.Random(seed)
    for i, ref in enumerate(sentences[:LATTICES]):
        with atomic_write(os.path.join(lattices, f"utt{i + 1}.slf")) as f:
            f.write(slf_lattice(f"utt{i + 1}", ref, pool, rng))
    paths["lattices"] = lattices
    return paths
