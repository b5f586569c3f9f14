"""KN5 on the text each neural row of the large-vocabulary page read: built, scored, recorded once, shown."""

from __future__ import annotations

import os
import random

from benchmarks import large_vocab_kn5_text as kt
from benchmarks import large_vocab_neural_page as lvpage
from benchmarks.large_vocab_record import append_row, read_rows


def _corpus(tmp_path):
    rng = random.Random(3)
    words = [f"w{i}" for i in range(40)]
    lines = [" ".join(rng.choice(words[: rng.randint(5, 40)]) for _ in range(rng.randint(3, 12))) for _ in range(400)]
    prefix = tmp_path / "train-1000.txt"
    prefix.write_text("\n".join(lines[:200]) + "\n", encoding="utf-8")
    test = tmp_path / "test.txt"
    test.write_text("\n".join(lines[300:]) + "\n<unk> w1 w2\n", encoding="utf-8")
    vocab = tmp_path / "vocab-full.txt"
    vocab.write_text("</s>\t200\n<unk>\t3\n" + "".join(f"{w}\t5\n" for w in words), encoding="utf-8")
    return str(prefix), {"vocab": str(vocab), "test": str(test)}


def _row(row, train, ppl):
    return {"key": f"neural/{row}", "row": row, "model": "gru", "objective": row, "rc": 0,
            "plan": {"train": train, "budget": 7200.0, "epochs": 4, "epoch_predictions": 1000},
            "curve": [{"epoch": 1, "cpu_s": 100.0, "valid_ppl": ppl}], "epochs": 1, "valid_ppl": ppl,
            "train_cpu_s": 100.0, "process_cpu_s": 110.0, "words_per_cpu_s": 10.0, "peak_mb": 100.0,
            "test": {"ppl": ppl, "predictions": 1000, "cpu_s": 1.0, "wall_s": 1.0}, "invocations": [{"rc": 0}]}


def test_kn5_on_each_rows_prefix_is_built_with_the_rows_vocabulary_recorded_once_and_shown(tmp_path):
    train, files = _corpus(tmp_path)
    notes = str(tmp_path / "rows.jsonl")
    append_row(_row("nce", train, 5.0), notes)
    append_row(_row("is", train, 500.0), notes)  # the same prefix: one KN5 for both
    append_row({**_row("class", str(tmp_path / "gone.txt"), 9.0)}, notes)  # its prefix deleted: passed by
    assert kt.prefixes(read_rows(notes)) == {train: ["nce", "is"], str(tmp_path / "gone.txt"): ["class"]}
    assert kt.step(str(tmp_path), notes, files) == 1
    rows = read_rows(notes)
    k = rows[kt.KEY + "train-1000.txt"]
    assert k["rc"] == 0 and k["rows"] == ["nce", "is"] and k["tokens"] == sum(
        len(line.split()) for line in open(train, encoding="utf-8"))
    # every word and </s> of the test text, <unk> a word of the vocabulary like the others
    assert 1.0 < k["ppl"] < 41.0 and k["predictions"] == sum(
        len(line.split()) + 1 for line in open(files["test"], encoding="utf-8"))
    assert not any(name.endswith(".bin") for name in os.listdir(tmp_path))  # the model is deleted after scoring
    assert kt.step(str(tmp_path), notes, files) == 0  # recorded: not built again
    assert set(kt.same_text(rows)) == {"nce", "is"}
    # a prefix gone is cut again from the whole text, as the row's plan cut it; not when the count differs
    whole = tmp_path / "train.txt"
    whole.write_text(open(train, encoding="utf-8").read() * 3, encoding="utf-8")
    lost = str(tmp_path / "train-77.txt")
    append_row({**_row("blackout", lost, 7.0), "plan": {**_row("blackout", lost, 7.0)["plan"],
                                                         "epoch_tokens_planned": 77, "epoch_predictions": 0}}, notes)
    assert kt.prefix_again(read_rows(notes), lost, str(whole)) is None and not os.path.exists(lost)
    plan = {"train": lost, "epoch_tokens_planned": 77, "epoch_predictions": None}
    first = open(whole, encoding="utf-8").read().splitlines()
    n = i = 0
    while n < 77:
        n += len(first[i].split())
        i += 1
    plan["epoch_predictions"] = n + i
    append_row({**_row("blackout", lost, 7.0), "plan": {**_row("blackout", lost, 7.0)["plan"], **plan}}, notes)
    assert kt.prefix_again(read_rows(notes), lost, str(whole)) == lost
    assert open(lost, encoding="utf-8").read().splitlines() == first[:i]
    rows = read_rows(notes)
    kn5 = {"rc": 0, "query": {"ppl": 20.0}, "train_tokens": 10 * k["tokens"]}
    text, _ = lvpage.section({**rows, "kn5/ours/all": kn5})
    assert "KN5 on the row's text (vs it)" in text and f"| {k['ppl']:.2f} (" in text
    assert "the neural row beats KN5 in 1 of 2 rows" in text and "read 10.0-10.0 % of it" in text
    # the best row (nce, 5.00) against a whole-corpus KN5 it misses: the reason, KN5 on its own text, is given
    line = lvpage.target_line({**rows, "kn5/ours/all": {**kn5, "query": {"ppl": 4.0}}})
    assert f"KN5 counted on that same text scores {k['ppl']:.2f}, and the row is " in line
