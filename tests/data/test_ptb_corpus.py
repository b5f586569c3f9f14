"""Integration on the real Penn Treebank (skipped with a reason when ../shared/data/ptb is absent)."""

from sampledlm.data.corpus import build_vocab, load_ids, sentence_count
from sampledlm.data.stats import corpus_stats


def test_ptb_vocabulary_and_counts(ptb_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SAMPLEDLM_CACHE", str(tmp_path))
    train = str(ptb_dir / "ptb.train.txt")
    v = build_vocab(train)
    assert len(v) == 10_000  # 9,999 word types (<unk> among them) + </s>
    s = corpus_stats(train, vocab=v)
    assert (s["tokens"], s["sentences"], s["types"]) == (887_521, 42_068, 9_999)
    t = corpus_stats(str(ptb_dir / "ptb.test.txt"), vocab=v)
    assert t["oov_tokens"] == 0 and t["tokens"] == 78_669
    ids = load_ids(str(ptb_dir / "ptb.test.txt"), v)
    assert len(ids) == 82_430 and sentence_count(ids) == 3_761
