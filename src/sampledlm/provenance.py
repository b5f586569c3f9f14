"""Provenance of a model directory: ``provenance.json`` and a generated model card, ``README.md``.

Every model directory sampledlm writes (a neural run, a binary n-gram model, a maximum-entropy model, word
embeddings) gets, beside its ``config.json``, two files a colleague can read::

    provenance.json   {"provenance": 1, "family": ..., "model": "<one line>", "created": "<UTC date>",
                       "sampledlm": "0.2.0", "python": ..., "torch": ..., "numpy": ..., "platform": ...,
                       "device": "cpu" | "cuda:0 (NVIDIA ...)",
                       "data": {"train": {"path": ..., "bytes": ..., "sha256": ...}, "valid": {...}},
                       "figures": {"valid_ppl": ..., "test_ppl": ...},   (when training has finished)
                       "finished": "<UTC date>", "sessions": [...]}     (resumed runs: one entry per session)
    README.md         the model card: what model, trained on what, its figures, how to load and score it

Both are written atomically (:func:`sampledlm.data.textio.atomic_write`), after ``config.json`` or, where
``config.json`` marks a directory complete for a command that does not resume (the binary n-gram directory, word
embeddings),
just before it, so that a killed write never leaves a complete model beside a stray temporary file; both are
*informative only*: no reader of a model directory needs them, loading never opens them, and a directory written
before they existed (or one whose files were removed) loads exactly as before. ``config.json``'s keys are not
touched. The data files are hashed once, when the model directory is created, a block at a time (a file of any
size, in bounded memory).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import stat
from typing import Iterable

from .data.textio import atomic_write

#: the file names this module writes into a model directory
FILE, CARD = "provenance.json", "README.md"
NAMES = frozenset({FILE, CARD})
#: provenance.json's own version (its "provenance" field)
VERSION = 1
_BLOCK = 1 << 22  # 4 MiB: hashing reads a file a block at a time, never whole


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (``2026-11-28T14:03:11Z``)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def environment() -> dict:
    """The toolkit's, Python's, torch's and numpy's versions and the platform (read from the installed
    distributions' metadata: nothing is imported)."""
    from . import __version__

    return {"sampledlm": __version__, "python": platform.python_version(), "torch": _version("torch"),
            "numpy": _version("numpy"), "platform": platform.platform()}


def file_record(path: str) -> dict:
    """``{"path", "bytes", "sha256"}`` of a file, hashed a block at a time (bounded memory for any size); a
    path that cannot be read (a pipe, a file gone) is recorded with its error instead."""
    record: dict = {"path": os.path.abspath(path) if path != "-" else "standard input"}
    try:
        if path == "-" or not stat.S_ISREG(os.stat(path).st_mode):
            # a pipe, a FIFO or standard input is read once, by training: hashing it here would consume it
            record["error"] = "not a regular file: not hashed"
            return record
        h = hashlib.sha256()
        size = 0
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(_BLOCK), b""):
                h.update(block)
                size += len(block)
    except OSError as e:
        record["error"] = e.strerror or str(e)
        return record
    record.update(bytes=size, sha256=h.hexdigest())
    return record


def change_of(was: dict, path: str) -> str | None:
    """How the file at ``path`` differs from its record ``was`` (:func:`file_record`), hashed again: None when the
    same (or when ``was`` holds no hash), else what it is now (``now 1,234 bytes, sha256 ...``, or why unreadable)."""
    if not isinstance(was, dict) or "sha256" not in was:
        return None
    now = file_record(path)
    if now.get("sha256") == was["sha256"]:
        return None
    return now.get("error") or f"now {now['bytes']:,} bytes, sha256 {now['sha256'][:12]}"


def data_records(files: dict[str, str | Iterable[str] | None]) -> dict:
    """``{role: record}`` (or a list of records for a role given several files, e.g. a word2vec corpus); roles
    given None are left out."""
    out: dict = {}
    for role, paths in files.items():
        if paths is None:
            continue
        if isinstance(paths, (str, os.PathLike)):
            out[role] = file_record(os.fspath(paths))
        else:
            out[role] = [file_record(os.fspath(p)) for p in paths]
    return out


def new(family: str, model: str, data: dict, device: str = "cpu", **more) -> dict:
    """A new directory's provenance: ``model`` is one line saying what it is; ``data`` the records of
    :func:`data_records`; ``device`` the device actually used (never "auto"); ``more``: other fields."""
    return {"provenance": VERSION, "family": family, "model": model, "created": utc_now(), **environment(),
            "device": device, "data": data, **more}


def read(directory: str) -> dict | None:
    """A directory's provenance, or None when it has none or it cannot be read (it is informative only)."""
    try:
        with open(os.path.join(directory, FILE), encoding="utf-8") as f:
            prov = json.load(f)
    except (OSError, ValueError):
        return None
    return prov if isinstance(prov, dict) else None


def write(directory: str, prov: dict) -> None:
    """Write ``provenance.json`` and the model card ``README.md`` (each atomically)."""
    with atomic_write(os.path.join(directory, FILE)) as f:
        json.dump(prov, f, indent=2)
        f.write("\n")
    with atomic_write(os.path.join(directory, CARD)) as f:
        f.write(card(directory, prov))


def remove(directory: str) -> None:
    """Remove a directory's provenance files (before a model is written over another: never a stale card)."""
    for name in NAMES:
        try:
            os.remove(os.path.join(directory, name))
        except FileNotFoundError:
            pass


def finish(directory: str, figures: dict, **more) -> None:
    """Record a finished training's final figures (``valid_ppl``, ``test_ppl``, ... : None values left out) and
    the date; a directory without provenance (written before it existed) is left as it is."""
    prov = read(directory)
    if prov is None:
        return
    prov["figures"] = {**prov.get("figures", {}), **{k: v for k, v in figures.items() if v is not None}}
    prov.update(more)
    prov["finished"] = utc_now()
    write(directory, prov)


def resumed(directory: str, device: str) -> None:
    """Record that training went on in a new session (its date, device and versions)."""
    prov = read(directory)
    if prov is None:
        return
    env = environment()
    session = {"date": utc_now(), "device": device, "sampledlm": env["sampledlm"], "torch": env["torch"]}
    prov["sessions"] = [*prov.get("sessions", []), session]
    prov.pop("finished", None)  # until it finishes again
    write(directory, prov)


# --- the model card ------------------------------------------------------------------------------------------
_USE = {
    "neural": ("sampledlm eval {d} --test test.txt\nsampledlm score {d} sentences.txt\n"
               "sampledlm generate {d} -n 3 --seed 7"),
    "ngram": "sampledlm eval {d} --test test.txt\nsampledlm score {d} sentences.txt\nsampledlm ngram eval {d} --test test.txt",
    "maxent": "sampledlm eval {d} --test test.txt\nsampledlm score {d} sentences.txt",
    "embeddings": "sampledlm embed neighbors {d} WORD\nsampledlm embed eval {d}",
}
_FIGURES = {"valid_ppl": "validation perplexity", "test_ppl": "test perplexity", "epochs": "epochs",
            "steps": "training steps", "best_epoch": "best epoch", "best_step": "best validation's step", "words_per_second": "words per second",
            "train_seconds": "training seconds"}


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def card(directory: str, prov: dict) -> str:
    """The model card: a short Markdown page generated from the provenance."""
    name = os.path.basename(os.path.normpath(directory)) or directory
    family = prov.get("family", "")
    d = json.dumps(name) if any(c.isspace() for c in name) else name
    lines = [f"# {name}", "", f"{prov.get('model') or family + ' model'}.", "",
             f"Written by sampledlm {prov.get('sampledlm')} on {prov.get('created')} (UTC). This page is generated; "
             f"`{FILE}` holds the same facts as data, and `config.json` every setting.", ""]
    data = prov.get("data") or {}
    if data:
        lines += ["## Trained on", "", "| role | file | bytes | sha256 |", "|---|---|---|---|"]
        for role, recs in data.items():
            for rec in recs if isinstance(recs, list) else [recs]:
                size = _fmt(rec["bytes"]) if "bytes" in rec else rec.get("error", "")
                digest = f"`{rec['sha256'][:16]}…`" if "sha256" in rec else ""
                lines.append(f"| {role} | `{rec.get('path')}` | {size} | {digest} |")
        lines.append("")
    figures = prov.get("figures") or {}
    lines += ["## Figures", ""]
    if figures:
        lines += ["| | |", "|---|---|"]
        lines += [f"| {_FIGURES.get(k, k.replace('_', ' '))} | {_fmt(v)} |" for k, v in figures.items()]
        if prov.get("finished"):
            lines += ["", f"Recorded when training finished, {prov['finished']} (UTC)."]
    else:
        lines.append("None recorded: training has not finished, or this model has no held-out text of its own. "
                     "`sampledlm eval` gives its exact perplexity on any text." if family != "embeddings" else
                     "None recorded: `sampledlm embed eval` scores the vectors on similarity and analogy sets.")
    lines += ["", "## Use", "", "```sh", _USE.get(family, "sampledlm eval {d} --test test.txt").format(d=d), "```", ""]
    if family != "embeddings":
        lines += ["```python", "import sampledlm", "", f"lm = sampledlm.load({json.dumps(name)})",
                  "print(lm.perplexity(open(\"test.txt\").read().splitlines()))", "```", ""]
    env = [f"sampledlm {prov.get('sampledlm')}", f"Python {prov.get('python')}"]
    env += [f"{k} {prov[k]}" for k in ("torch", "numpy") if prov.get(k)]
    lines += ["## Made with", "", f"{', '.join(env)}; {prov.get('platform')}; device {prov.get('device')}."]
    for s in prov.get("sessions", []):
        lines.append(f"Resumed {s.get('date')} on {s.get('device')} (sampledlm {s.get('sampledlm')}).")
    return "\n".join(lines) + "\n"
