"""The Wikipedia corpus recipe of issue 56 (benchmarks/wiki_corpus.py) on generated <doc> files."""

import json
import os
import subprocess

import pytest

from benchmarks import wiki_corpus as wc


@pytest.mark.parametrize("text, tokens", [
    ("The game's battle system, the BliTZ system, is carried over.",
     "The game 's battle system , the BliTZ system , is carried over ."),
    ("In 1,000 B.C. the U.S. had 3.5 m (11 ft) of first-person \"shooter\" games didn't.",
     "In 1 @,@ 000 B.C. the U.S. had 3 @.@ 5 m ( 11 ft ) of first @-@ person \" shooter \" games didn 't ."),
    ("Chen Zhili (; born November 1942) is a formula_1 state-of-the-art x-1.",
     "Chen Zhili ( ; born November 1942 ) is a formula_1 state @-@ of @-@ the @-@ art x @-@ 1 ."),
    ("  spaces\tand — dashes – 2–3 ", "spaces and — dashes – 2 – 3"),
    ("", ""),
])
def test_tokenize_as_wikitext(text, tokens):
    assert " ".join(wc.tokenize(text)) == tokens


def test_split_is_deterministic_and_by_title():
    titles = [f"Title {i}" for i in range(20000)]
    a = [wc.split_of(t, 0.05) for t in titles]
    assert a == [wc.split_of(t, 0.05) for t in titles]
    share = {s: a.count(s) / len(a) for s in ("train", "valid", "test")}
    assert abs(share["test"] - 0.05) < 0.01 and abs(share["valid"] - 0.05) < 0.01


def _build(tmp_path, **kw):
    src = tmp_path / "src"
    wc.fake_snapshots(str(src), articles=240, seed=3)
    out = tmp_path / "out"
    return src, out, wc.build(str(src), str(out), held_out=0.1, top=300, quiet=True, **kw)


def _lines(path):
    return open(path, encoding="utf-8").read().splitlines()


def test_build_dedup_split_vocab_unk(tmp_path):
    _src, out, stats = _build(tmp_path)
    tok = stats["tokenize"]
    assert tok["dropped"] == {"duplicate_id": 1, "duplicate_title": 1, "empty": 0}
    assert sum(s["articles"] for s in tok["splits"].values()) == 240
    titles = {}
    for split in ("train", "valid", "test"):
        for line in _lines(out / "work" / f"tok.{split}.txt"):
            if line.startswith("= ") and line.endswith(" ="):
                titles[line[2:-2]] = split
    assert len(titles) == 240  # one title line per article, each article in one split only
    assert all(wc.split_of(t, 0.1) == s for t, s in titles.items())  # titles here tokenise to themselves
    # vocabulary: training tokens seen >= 3 times, most frequent first; everything else <unk>, in every split
    counts = dict(line.split("\t") for line in _lines(out / "work" / "counts.txt"))
    vocab = [line.split("\t")[0] for line in _lines(out / "vocab.txt")]
    assert vocab == [w for w, n in counts.items() if int(n) >= 3]
    assert wc.UNK not in vocab
    vs = set(vocab)
    for split in ("train", "valid", "test"):
        raw, mapped = _lines(out / "work" / f"tok.{split}.txt"), _lines(out / f"{split}.txt")
        assert len(raw) == len(mapped)
        for r, m in zip(raw, mapped):
            assert m.split() == [w if w in vs else wc.UNK for w in r.split()]
        s = stats["settings"]["count>=3"]["splits"][split]
        assert s["unk"] == sum(line.split().count(wc.UNK) for line in mapped) > 0
    top = [line.split("\t")[0] for line in _lines(out / "top300" / "vocab.txt")]
    assert top == list(counts)[:300] and stats["settings"]["top 300"]["V"] == 301
    assert stats["settings"]["count>=3"]["V"] == len(vocab) + 1
    with open(out / "stats.json") as f:
        assert json.load(f)["tokenize"]["splits"] == tok["splits"]


def test_build_resumes_and_matches_git_archive(tmp_path, monkeypatch):
    src, out, stats = _build(tmp_path)
    before = {p: os.path.getmtime(out / p) for p in ("train.txt", "work/tok.train.txt")}
    again = wc.build(str(src), str(out), held_out=0.1, top=300, quiet=True)  # finished steps are not redone
    assert {p: os.path.getmtime(out / p) for p in before} == before
    assert again["tokenize"]["splits"] == stats["tokenize"]["splits"]
    # the same snapshots as bare git repositories (the mirror layout OWNER+NAME/repo), read at their commits
    bare = tmp_path / "bare"
    for name, commit, _prefix in wc.SNAPSHOTS:
        tree = src / name
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t"}
        subprocess.run(["git", "init", "-q", str(tree)], check=True)
        subprocess.run(["git", "-C", str(tree), "add", "."], check=True)
        subprocess.run(["git", "-C", str(tree), "commit", "-qm", "x"], check=True, env=env)
        sha = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], check=True, capture_output=True,
                             text=True).stdout.strip()
        subprocess.run(["git", "clone", "-q", "--bare", str(tree), str(bare / name / "repo")], check=True)
        monkeypatch.setattr(wc, "SNAPSHOTS", tuple((n, sha if n == name else c, p) for n, c, p in wc.SNAPSHOTS))
    out2 = tmp_path / "out2"
    stats2 = wc.build(str(bare), str(out2), held_out=0.1, top=300, quiet=True)
    assert stats2["tokenize"]["splits"] == stats["tokenize"]["splits"]
    for split in ("train", "valid", "test"):
        assert _lines(out2 / f"{split}.txt") == _lines(out / f"{split}.txt")
