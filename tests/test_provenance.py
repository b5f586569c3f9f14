"""provenance.json and the model card (README.md) in every model directory: what they record (the device used, the
data files' checksums, the final figures), that resuming keeps them consistent, and that they are informative only
(a directory without them, or with a damaged one, loads as before)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

import sampledlm
from sampledlm import provenance
from helpers import config_for


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _prov(directory) -> dict:
    return json.loads((directory / "provenance.json").read_text(encoding="utf-8"))


def test_files_are_hashed_a_block_at_a_time(tmp_path, monkeypatch):
    path = tmp_path / "big.txt"
    path.write_bytes(b"the cat sat\n" * 5000)
    reads = []
    real_open = open

    class Counting:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            reads.append(n)
            return self.f.read(n)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(provenance, "_BLOCK", 4096)
    monkeypatch.setattr("builtins.open", lambda p, mode="r", *a, **k: Counting(real_open(p, mode, *a, **k))
                        if p == str(path) else real_open(p, mode, *a, **k))
    record = provenance.file_record(str(path))
    monkeypatch.undo()
    assert record == {"path": str(path), "bytes": 60000, "sha256": _sha(path)}
    assert reads and all(n == 4096 for n in reads)  # never the whole file at once
    assert provenance.file_record(str(tmp_path / "gone.txt"))["error"]


def test_a_neural_run_records_its_device_data_and_final_figures_and_resume_keeps_them(words_corpus):
    from sampledlm.neural.trainer import RUN_FILES, new_run, resume_run

    run = words_corpus / "run"
    config, vocab = config_for(words_corpus, epochs=1)
    assert config["train"].get("device", "auto") == "auto"
    new_run(str(run), config, vocab).train()
    prov = _prov(run)
    assert prov["family"] == "neural" and prov["device"] == "cpu"  # the device used, not "auto"
    assert prov["sampledlm"] == sampledlm.__version__ and prov["torch"] and prov["numpy"] and prov["python"]
    assert prov["created"].endswith("Z") and prov["finished"].endswith("Z")
    for role in ("train", "valid"):
        rec = prov["data"][role]
        assert rec["sha256"] == _sha(words_corpus / f"{role}.txt")
        assert rec["bytes"] == os.path.getsize(words_corpus / f"{role}.txt")
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert prov["figures"]["valid_ppl"] == pytest.approx(min(m["valid_ppl"] for m in metrics))
    assert prov["figures"]["epochs"] == 1
    card = (run / "README.md").read_text(encoding="utf-8")
    assert "validation perplexity" in card and "sampledlm.load" in card and prov["data"]["train"]["sha256"][:16] in card
    assert {n for n in os.listdir(run) if not n.startswith(".")} <= RUN_FILES
    json.loads((run / "config.json").read_text())  # config.json's keys are untouched: the run loads
    before = sampledlm.load(str(run)).score("a b")

    trainer = resume_run(str(run), {"epochs": 2})
    trainer.train()
    prov2 = _prov(run)
    assert prov2["created"] == prov["created"] and prov2["data"] == prov["data"]
    assert len(prov2["sessions"]) == 1 and prov2["sessions"][0]["device"] == "cpu"
    assert prov2["figures"]["epochs"] == 2
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert prov2["figures"]["valid_ppl"] == pytest.approx(min(m["valid_ppl"] for m in metrics))
    assert "Resumed" in (run / "README.md").read_text(encoding="utf-8")
    assert isinstance(before, float)


def test_a_directory_without_provenance_or_with_a_damaged_one_loads_and_resumes(words_corpus):
    from sampledlm.neural.trainer import new_run, resume_run

    run = words_corpus / "old"
    config, vocab = config_for(words_corpus, epochs=1)
    new_run(str(run), config, vocab).train()
    want = sampledlm.load(str(run)).score("a b")
    (run / "README.md").unlink()
    (run / "provenance.json").write_text("{not json")
    assert sampledlm.load(str(run)).score("a b") == want
    (run / "provenance.json").unlink()
    assert sampledlm.load(str(run)).score("a b") == want  # a run written before 0.2.0
    resume_run(str(run), {"epochs": 2}).train()  # resumed: its provenance is begun then
    prov = _prov(run)
    assert prov["recorded"].startswith("when the run was resumed") and prov["figures"]["epochs"] == 2


def test_ngram_maxent_and_embedding_directories_have_provenance(tiny_corpus, tmp_path, private_cache):
    train, valid = str(tiny_corpus["train"]), str(tiny_corpus["valid"])
    kn = tmp_path / "kn.bin"
    sampledlm.train_ngram(train, str(kn), order=2, binary=True, valid=valid)
    prov = _prov(kn)
    assert prov["family"] == "ngram" and prov["data"]["train"]["sha256"] == _sha(train)
    assert prov["data"]["valid"]["sha256"] == _sha(valid) and "vocab" not in prov["data"]
    assert "order 2" in prov["model"] and (kn / "README.md").is_file()
    from sampledlm.ngram.mapped import verify_binary

    assert verify_binary(str(kn)) == []
    (kn / "provenance.json").write_text("[]")
    assert sampledlm.load(str(kn)).score("a") == sampledlm.load(str(kn)).score("a")
    sampledlm.train_ngram(train, str(kn), order=3, binary=True, force=True)  # replaced: the new model's provenance
    prov = _prov(kn)
    assert "order 3" in prov["model"] and "valid" not in prov["data"]

    me = tmp_path / "melm"
    sampledlm.train_maxent(train, valid, str(me), epochs=1)
    prov = _prov(me)
    assert prov["family"] == "maxent" and prov["device"] == "cpu"
    assert prov["data"]["train"]["sha256"] == _sha(train) and prov["figures"]["valid_ppl"] > 1
    assert "validation perplexity" in (me / "README.md").read_text(encoding="utf-8")

    vec = tmp_path / "vec"
    sampledlm.train_embeddings(train, str(vec), dim=4, epochs=1, min_count=1)
    prov = _prov(vec)
    assert prov["family"] == "embeddings" and prov["data"]["corpus"][0]["sha256"] == _sha(train)
    assert "embed neighbors" in (vec / "README.md").read_text(encoding="utf-8")


def test_a_pipe_is_not_read_to_hash_it(tmp_path):
    """Training reads a FIFO or standard input once: provenance must not consume it first."""
    import os

    from sampledlm import provenance

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    record = provenance.file_record(str(fifo))  # would block forever if it opened the FIFO
    assert record["error"] == "not a regular file: not hashed" and "sha256" not in record
    assert provenance.file_record("-")["path"] == "standard input"
