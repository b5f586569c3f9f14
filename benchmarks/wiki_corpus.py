"""The large-vocabulary corpus of issue 56: English Wikipedia from three public repository snapshots, tokenised
the way WikiText-103 is (Merity et al. 2016), split by article, with a count >= 3 vocabulary (V = 485k) and a
100k-most-frequent one. Nothing is downloaded: the recipe reads a directory of snapshots.

    python -m benchmarks.wiki_corpus --source /work/.mirror --out /work/data/wiki

Input (``--source DIR``): for each snapshot of :data:`SNAPSHOTS`, DIR holds ``<owner>+<name>`` (the layout the
repository mirror uses) as either

- a bare git directory, at ``<owner>+<name>/repo`` or ``<owner>+<name>`` itself (it has ``HEAD`` and
  ``objects/``): its files are read at the recorded commit with ``git archive COMMIT PREFIX`` streamed through
  :mod:`tarfile` (nothing is written out), or
- a checked-out tree at ``<owner>+<name>`` (e.g. made with
  ``git --git-dir=.../repo archive COMMIT text | tar -x -C DIR/<owner>+<name>``): the files ``PREFIX/*/wiki_*``.

Each file holds WikiExtractor ``<doc id=".." url=".." title="..">`` blocks; the first body line repeats the title.

Output (``--out DIR``)::

    DIR/train.txt valid.txt test.txt    V = training tokens seen >= 3 times (+ <unk>)
    DIR/vocab.txt                       word<TAB>training count, most frequent first (<unk> not listed)
    DIR/100k/{train,valid,test}.txt     the 100,000 most frequent training tokens (+ <unk>)
    DIR/100k/vocab.txt
    DIR/stats.json                      tokens, lines, articles per split; V; OOV rates; time and peak RSS per step
    DIR/work/                           the tokenised splits before <unk> mapping, and the training counts

Decisions (written down here because WikiText-103's own script is not public; its text shows the conventions):

- Tokenisation as WikiText's (Moses-style, Koehn et al. 2007, aggressive hyphen splitting): case kept;
  punctuation split off words; a hyphen between two letters or digits becomes the token ``@-@``, a comma or a
  period between two digits ``@,@`` / ``@.@`` (``1 @,@ 000``, ``3 @.@ 5``); an apostrophe inside a word starts a
  token (``game 's``, ``didn 't``, as Moses, not the PTB's ``did n't``); dotted abbreviations stay whole
  (``U.S.``); runs of letters/digits of any script are one token (``formula_1`` included: the extractor's
  placeholder for a dropped formula).
- Lines: one paragraph per line (WikiExtractor's lines; empty ones dropped). The title becomes the line
  ``= Title =`` as WikiText's article headings. Section headings cannot be told apart from one-sentence
  paragraphs in this extractor's output (``Biography.``), so they stay ordinary lines (``Biography .``).
- De-duplication: an article is kept the first time its id and the first time its title is seen, reading the
  snapshots in the order of :data:`SNAPSHOTS` and each snapshot's files in sorted path order. WikiTasks holds
  ``text/Temp/`` as a second copy of ``text/AA/`` (the same ids, files not byte-identical): de-duplication by id
  drops it whole (about 96k articles). Articles whose text is nothing but the title (redirect and list pages the
  extractor emptied) are dropped too.
- Split: by ``sha1(title)`` as a number u in [0, 1): test when u < ``held_out``, valid when u < 2 ``held_out``,
  train otherwise; ``held_out`` = 0.00155 gives 280,740 valid and 222,487 test tokens (train 165.5M).
- Vocabulary: the training tokens seen at least ``min_count`` = 3 times (485,174 words, V = 485,175 with
  ``<unk>``; the issue's ~595k counted a split that keeps hyphenated words whole); every other token, in every
  split, becomes ``<unk>`` (0.61 % of training, 1.12 % of valid, 1.15 % of test tokens). The 100k setting: the 100,000 most frequent training tokens (ties by code point order).
  ``<unk>`` is an ordinary token of the text, predicted and counted as WikiText-103's papers count it.

Every step writes its outputs atomically and then a marker holding its settings; a step whose marker matches is
skipped, so an interrupted build resumes at the step it was in. Memory is bounded by the training vocabulary's
counts (about 1.9M types), not by the corpus size: the text is streamed.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import resource
import subprocess
import sys
import tarfile
import time
from collections import Counter
from typing import Iterator

#: (owner+name, commit, path prefix) of each snapshot, in reading order.
SNAPSHOTS = (
    ("jason-feng+wikiVisual", "1c0fac92f29f17c1603bfffbe864e0dfdff66897", "text"),
    ("ZhouYii+PatchedDistro", "41be8246a1a04efb094458b5fc179c4be0ac9686", "data"),
    ("Vibhas-hs-edu+WikiTasks", "52b1f163137bc40b0f67cbf129d5dab4f6fd5901", "text"),
)
UNK = "<unk>"
HELD_OUT = 0.00155
MIN_COUNT = 3
TOP = 100_000
VERSION = 1  # of the tokeniser and the split: a change here rebuilds every step

# --- tokenisation ------------------------------------------------------------------------------------------
_NUM_SEP = re.compile(r"(?<=\d)([,.])(?=\d)")
_HYPHEN = re.compile(r"(?<=[^\W_])-(?=[^\W_])")
_TOKEN = re.compile(r"@[-,.]@"                      # the markers put in above
                    r"|[^\W\d_]+(?:\.[^\W\d_]+)+\.?"  # dotted abbreviations: U.S. e.g.
                    r"|(?<=\w)'\w+"                  # 's 't 're ... after a word
                    r"|\w+"                          # letters, digits (any script), underscore
                    r"|\S")                          # any other character on its own
_SPACE = re.compile(r"\s+")


def tokenize(text: str) -> list[str]:
    """WikiText-103 style tokens of one paragraph (see the module's docstring)."""
    text = _SPACE.sub(" ", text).strip()
    if not text:
        return []
    text = _HYPHEN.sub(" @-@ ", _NUM_SEP.sub(r" @\1@ ", text))
    return _TOKEN.findall(text)


# --- reading the snapshots -----------------------------------------------------------------------------------
_DOC = re.compile(r'<doc id="([^"]*)" url="[^"]*" title="([^"]*)">')


def parse_docs(lines: Iterator[str]) -> Iterator[tuple[str, str, list[str]]]:
    """``(id, title, body lines)`` of each ``<doc ...>`` block of a WikiExtractor file (the body without the
    first line when it repeats the title)."""
    doc = None
    for line in lines:
        if doc is None:
            m = _DOC.match(line)
            if m:
                doc = (m.group(1), html.unescape(m.group(2)), [])
            continue
        if line.startswith("</doc>"):
            _id, title, body = doc
            if body and body[0].strip() == title.strip():
                body = body[1:]
            yield _id, title, body
            doc = None
        else:
            doc[2].append(line.rstrip("\n"))


def _bare_git(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "objects")) and os.path.isfile(os.path.join(path, "HEAD"))


def locate(source: str, name: str) -> tuple[str, str]:
    """``("git", git dir)`` or ``("tree", folder)`` of snapshot ``name`` under ``source``."""
    for cand in (os.path.join(source, name, "repo"), os.path.join(source, name)):
        if _bare_git(cand):
            return "git", cand
    tree = os.path.join(source, name)
    if os.path.isdir(tree):
        return "tree", tree
    raise SystemExit(f"{source}: no snapshot {name} (neither a bare git directory {name}/repo or {name}, "
                     f"nor a checked-out folder {name})")


def _wanted(path: str, prefix: str) -> bool:
    parts = path.split("/")
    return len(parts) == 3 and parts[0] == prefix and parts[2].startswith("wiki_")


def snapshot_files(source: str) -> list[tuple[str, str, str, str, int]]:
    """``(snapshot, kind, where, path, bytes)`` of every file to read, in reading order."""
    out = []
    for name, commit, prefix in SNAPSHOTS:
        kind, where = locate(source, name)
        if kind == "git":
            ls = subprocess.run(["git", "--git-dir", where, "ls-tree", "-r", "-l", commit, prefix], check=True,
                                capture_output=True, text=True).stdout
            files = []
            for line in ls.splitlines():
                meta, path = line.split("\t", 1)
                if _wanted(path, prefix):
                    files.append((path, int(meta.split()[3])))
        else:
            files = []
            root = os.path.join(where, prefix)
            for sub in sorted(os.listdir(root)) if os.path.isdir(root) else []:
                d = os.path.join(root, sub)
                if os.path.isdir(d):
                    files += [(f"{prefix}/{sub}/{f}", os.path.getsize(os.path.join(d, f)))
                              for f in os.listdir(d) if f.startswith("wiki_")]
        if not files:
            raise SystemExit(f"{where}: no {prefix}/*/wiki_* files")
        out += [(name, kind, where, p, n) for p, n in sorted(files)]
    return out


def read_snapshot(name: str, kind: str, where: str, paths: list[str]) -> Iterator[tuple[str, str]]:
    """``(path, text)`` of each of ``paths`` (sorted) of one snapshot, streamed."""
    if kind == "tree":
        for p in paths:
            with open(os.path.join(where, p), encoding="utf-8", errors="replace") as f:
                yield p, f.read()
        return
    commit, prefix = next((c, pre) for n, c, pre in SNAPSHOTS if n == name)
    want = set(paths)
    proc = subprocess.Popen(["git", "--git-dir", where, "archive", "--format=tar", commit, prefix],
                            stdout=subprocess.PIPE)
    got = {}
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                if member.isfile() and member.name in want:
                    got[member.name] = True
                    yield member.name, tar.extractfile(member).read().decode("utf-8", errors="replace")
    finally:
        proc.stdout.close()
        if proc.wait() != 0:
            raise SystemExit(f"git archive of {where} at {commit} failed")
    missing = want - set(got)
    if missing:
        raise SystemExit(f"{where}: {len(missing)} files missing from the archive, e.g. {sorted(missing)[0]}")


def split_of(title: str, held_out: float) -> str:
    u = int.from_bytes(hashlib.sha1(title.encode("utf-8")).digest()[:8], "big") / 2**64
    return "test" if u < held_out else "valid" if u < 2 * held_out else "train"


# --- steps ---------------------------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _marker(path: str) -> dict | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_json(path: str, obj) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


class _Outputs:
    """Text files written to temporaries and renamed over their names together at :meth:`commit`."""

    def __init__(self, paths: dict[str, str]):
        self.paths = paths
        self.files = {k: open(f"{p}.{os.getpid()}.tmp", "w", encoding="utf-8") for k, p in paths.items()}

    def commit(self):
        for k, f in self.files.items():
            f.close()
            os.replace(f.name, self.paths[k])

    def abort(self):
        for f in self.files.values():
            f.close()
            try:
                os.remove(f.name)
            except OSError:
                pass


def _bar(total, desc, unit, quiet):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=quiet, mininterval=2, file=sys.stderr)


def step_tokenize(source: str, work: str, held_out: float, quiet: bool) -> dict:
    """Read every snapshot, de-duplicate, tokenise, split; count the training tokens."""
    files = snapshot_files(source)
    settings = {"step": "tokenize", "version": VERSION, "held_out": held_out,
                "files": len(files), "bytes": sum(f[4] for f in files)}
    mark = os.path.join(work, "tokenize.done.json")
    old = _marker(mark)
    if old and old.get("settings") == settings:
        return old
    t0, c0 = time.time(), time.process_time()
    out = _Outputs({s: os.path.join(work, f"tok.{s}.txt") for s in ("train", "valid", "test")})
    counts: Counter = Counter()
    seen_ids, seen_titles = set(), set()
    stats = {s: {"articles": 0, "lines": 0, "tokens": 0} for s in ("train", "valid", "test")}
    dropped = {"duplicate_id": 0, "duplicate_title": 0, "empty": 0}
    bar = _bar(settings["bytes"], "tokenise", "B", quiet)
    try:
        for name, _c, _p in SNAPSHOTS:
            mine = [f for f in files if f[0] == name]
            if not mine:
                continue
            sizes = {f[3]: f[4] for f in mine}
            for path, text in read_snapshot(name, mine[0][1], mine[0][2], [f[3] for f in mine]):
                for _id, title, body in parse_docs(iter(text.splitlines())):
                    if _id in seen_ids:
                        dropped["duplicate_id"] += 1
                        continue
                    if title in seen_titles:
                        dropped["duplicate_title"] += 1
                        continue
                    seen_ids.add(_id)
                    seen_titles.add(title)
                    lines = [tokenize("= " + title + " =")] + [tokenize(b) for b in body]
                    lines = [t for t in lines if t]
                    if len(lines) < 2:
                        dropped["empty"] += 1
                        continue
                    split = split_of(title, held_out)
                    st = stats[split]
                    st["articles"] += 1
                    st["lines"] += len(lines)
                    st["tokens"] += sum(len(t) for t in lines)
                    if split == "train":
                        for t in lines:
                            counts.update(t)
                    out.files[split].write("".join(" ".join(t) + "\n" for t in lines))
                bar.update(sizes[path])
        bar.close()
        # the counts, most frequent first (ties by code point), then the split files
        vocab_tmp = os.path.join(work, f"counts.txt.{os.getpid()}.tmp")
        with open(vocab_tmp, "w", encoding="utf-8") as f:
            for w, n in sorted(counts.items(), key=lambda x: (-x[1], x[0])):
                f.write(f"{w}\t{n}\n")
        os.replace(vocab_tmp, os.path.join(work, "counts.txt"))
        out.commit()
    except BaseException:
        out.abort()
        raise
    res = {"settings": settings, "splits": stats, "dropped": dropped, "types_train": len(counts),
           "wall_s": round(time.time() - t0, 1), "cpu_s": round(time.process_time() - c0, 1),
           "peak_rss_mb": peak_rss_mb()}
    _write_json(mark, res)
    return res


def read_counts(work: str) -> Iterator[tuple[str, int]]:
    with open(os.path.join(work, "counts.txt"), encoding="utf-8") as f:
        for line in f:
            w, n = line.rstrip("\n").split("\t")
            yield w, int(n)


def step_map(work: str, out: str, label: str, min_count: int, top: int | None, tok: dict, quiet: bool) -> dict:
    """The vocabulary of one setting and the three splits with every other token as ``<unk>``."""
    settings = {"step": "map", "version": VERSION, "min_count": min_count, "top": top,
                "tokenize": tok["settings"], "tokens": {s: v["tokens"] for s, v in tok["splits"].items()}}
    os.makedirs(out, exist_ok=True)
    mark = os.path.join(out, "map.done.json")
    old = _marker(mark)
    if old and old.get("settings") == settings:
        return old
    t0, c0 = time.time(), time.process_time()
    vocab = {}
    for w, n in read_counts(work):
        if n < min_count or (top is not None and len(vocab) >= top):
            break
        vocab[w] = n
    vtmp = os.path.join(out, f"vocab.txt.{os.getpid()}.tmp")
    with open(vtmp, "w", encoding="utf-8") as f:
        f.writelines(f"{w}\t{n}\n" for w, n in vocab.items())
    res = {"settings": settings, "label": label, "V": len(vocab) + 1, "splits": {}}
    files = _Outputs({s: os.path.join(out, f"{s}.txt") for s in ("train", "valid", "test")})
    try:
        for split in ("train", "valid", "test"):
            n = unk = 0
            dst = files.files[split]
            bar = _bar(tok["splits"][split]["tokens"], f"{label} {split}", "tok", quiet)
            with open(os.path.join(work, f"tok.{split}.txt"), encoding="utf-8") as f:
                for line in f:
                    words = line.split()
                    mapped = [w if w in vocab else UNK for w in words]
                    k = mapped.count(UNK)
                    unk += k
                    n += len(words)
                    dst.write(" ".join(mapped) + "\n")
                    bar.update(len(words))
            bar.close()
            res["splits"][split] = {"tokens": n, "unk": unk, "oov_rate": round(unk / max(n, 1), 6)}
        files.commit()
        os.replace(vtmp, os.path.join(out, "vocab.txt"))
    except BaseException:
        files.abort()
        raise
    res.update(wall_s=round(time.time() - t0, 1), cpu_s=round(time.process_time() - c0, 1), peak_rss_mb=peak_rss_mb())
    _write_json(mark, res)
    return res


def build(source: str, out: str, held_out: float = HELD_OUT, min_count: int = MIN_COUNT, top: int = TOP,
          quiet: bool = False) -> dict:
    """Run every step (skipping the finished ones) and write ``<out>/stats.json``; returns it."""
    work = os.path.join(out, "work")
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    tok = step_tokenize(source, work, held_out, quiet)
    full = step_map(work, out, f"count>={min_count}", min_count, None, tok, quiet)
    sub = f"{top // 1000}k" if top % 1000 == 0 else f"top{top}"
    small = step_map(work, os.path.join(out, sub), f"top {sub if top % 1000 == 0 else top}", 1, top, tok, quiet)
    stats = {"source": [dict(zip(("snapshot", "commit", "prefix"), s)) for s in SNAPSHOTS],
             "tokenize": tok, "settings": {full["label"]: full, small["label"]: small},
             "this_call_wall_s": round(time.time() - t0, 1), "this_call_peak_rss_mb": peak_rss_mb()}
    _write_json(os.path.join(out, "stats.json"), stats)
    return stats


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--source", required=True, help="folder holding the snapshots (bare git dirs or checked out)")
    ap.add_argument("--out", required=True, help="output folder (outside the repository)")
    ap.add_argument("--held-out", type=float, default=HELD_OUT, help="fraction of articles in each of valid, test")
    ap.add_argument("--min-count", type=int, default=MIN_COUNT)
    ap.add_argument("--top", type=int, default=TOP)
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    a = ap.parse_args(argv)
    stats = build(a.source, a.out, a.held_out, a.min_count, a.top, a.quiet)
    print(json.dumps({k: {"V": v["V"], **{s: v["splits"][s]["oov_rate"] for s in v["splits"]}}
                      for k, v in stats["settings"].items()}))


# --- a tiny stand-in for the snapshots (tests, --quick) -----------------------------------------------------
def fake_snapshots(source: str, articles: int = 300, seed: int = 0) -> None:
    """Checked-out folders of :data:`SNAPSHOTS` under ``source`` holding ``articles`` generated
    WikiExtractor-style articles (Zipf-like words, numbers, hyphens, apostrophes), plus duplicates: the first
    article of snapshot 1 again in snapshot 2 (same id), and an article with a new id but a repeated title."""
    import random

    rng = random.Random(seed)
    words = [f"w{i}" for i in range(2000)] + ["first-person", "1,000", "3.5", "game's", "U.S.", "(born", "1942)"]
    weights = [1 / (i + 1) for i in range(len(words))]
    docs = []
    for i in range(articles):
        title = f"Article {i} {rng.choice(words[:50])}"
        paras = [" ".join(rng.choices(words, weights, k=rng.randint(8, 60))) + "." for _ in range(rng.randint(1, 5))]
        docs.append((str(1000 + i), title, paras))
    per = (articles + len(SNAPSHOTS) - 1) // len(SNAPSHOTS)
    for k, (name, _commit, prefix) in enumerate(SNAPSHOTS):
        mine = docs[k * per:(k + 1) * per]
        if k == 1:
            mine = [docs[0]] + mine + [("999999", docs[2][1], ["A copy under another id."])]
        d = os.path.join(source, name, prefix, "AA")
        os.makedirs(d, exist_ok=True)
        for j in range(0, len(mine), 40):
            with open(os.path.join(d, f"wiki_{j // 40:02d}"), "w", encoding="utf-8") as f:
                for _id, title, paras in mine[j:j + 40]:
                    f.write(f'<doc id="{_id}" url="http://en.wikipedia.org/wiki?curid={_id}" title="{title}">\n'
                            f"{title}\n\n" + "\n".join(paras) + "\n</doc>\n")


if __name__ == "__main__":
    main()
