"""benchmarks/notes/README.md indexes the lab notes by results page: every file of the folder is listed, every file
listed exists, and every page a heading names is a page of docs/results/."""

from __future__ import annotations

import re

from helpers import REPO

NOTES = REPO / "benchmarks" / "notes"
INDEX = NOTES / "README.md"
ENTRY = re.compile(r"^- ((?:`[^`]+`)(?:, `[^`]+`)*):")  # an entry starts with its files' names, then a colon


def bullets() -> list[str]:
    """The index's bullets, each with its continuation lines joined."""
    out: list[str] = []
    for line in INDEX.read_text(encoding="utf-8").splitlines():
        if line.startswith("- "):
            out.append(line)
        elif line.startswith("  ") and out:
            out[-1] += " " + line.strip()
    return out


def listed() -> list[str]:
    names = []
    for bullet in bullets():
        m = ENTRY.match(bullet)
        if m:
            names += re.findall(r"`([^`]+)`", m.group(1))
    return names


def note_files() -> set[str]:
    return {p.relative_to(NOTES).as_posix() for p in NOTES.rglob("*") if p.is_file() and p != INDEX
            and "__pycache__" not in p.parts}


def covered(name: str, entries: set[str]) -> bool:
    """``name`` (a path inside notes/) is listed itself, or a folder above it is (``pairs-2026-11-27/``)."""
    parts = name.split("/")
    return name in entries or any("/".join(parts[:i]) + "/" in entries for i in range(1, len(parts)))


def test_every_note_is_in_the_index():
    entries = set(listed())
    assert entries, "no entries found in benchmarks/notes/README.md"
    assert sorted(n for n in note_files() if not covered(n, entries)) == []


def test_every_file_the_index_lists_exists():
    missing = [n for n in listed() if not ((NOTES / n).is_dir() if n.endswith("/") else (NOTES / n).is_file())]
    assert missing == []


def test_the_pages_the_index_names_exist():
    pages = re.findall(r"^## (\S+\.md)\b", INDEX.read_text(encoding="utf-8"), flags=re.M)
    assert "quality-cpu.md" in pages
    results = REPO / "docs" / "results"
    assert [p for p in pages if not (results / p).is_file() and not (REPO / p).is_file()] == []


def test_the_index_names_each_page_it_says_has_no_note():
    """"The other pages" names every page of docs/results/ that has no heading of its own."""
    text = INDEX.read_text(encoding="utf-8")
    headed = {p.removesuffix(".md") for p in re.findall(r"^## (\S+\.md)\b", text, flags=re.M)}
    others = text.split("## The other pages", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"[a-z0-9_-]+", others.split("(", 1)[1].split(")", 1)[0]))
    pages = {p.stem for p in (REPO / "docs" / "results").glob("*.md")} - {"index"}
    assert pages - headed - named == set() and named <= pages
