import json
import math

from sampledlm.data.builtin import builtin_sentences
from sampledlm.demo import run_demo


def test_builtin_corpus_is_deterministic_and_sizeable():
    a, b = builtin_sentences(), builtin_sentences()
    assert a == b
    assert sum(map(len, a)) > 20_000


def test_demo_runs_and_reports_finite_perplexities(tmp_path, capsys):
    results = run_demo(str(tmp_path / "demo"))
    assert results and all(math.isfinite(r.test_ppl) and r.test_ppl > 1 for r in results)
    assert (tmp_path / "demo" / "vocab.txt").exists()
    assert any("context classes" in r.model for r in results)  # classes --from-model, 4 scores a class
    assert (tmp_path / "demo" / "ctx-classes.txt").exists()
    assert "exact perplexity" in capsys.readouterr().out
    scale = next(r for r in results if r.model == "KN3 bounded memory -> binary dir")
    assert "DIFFERS" not in scale.note and "ARPA -> binary in sorted runs = it" in scale.note, scale.note
    points = [json.loads(line) for line in open(tmp_path / "demo" / "ffnn3-softmax" / "metrics.jsonl")]
    assert sum("epoch_fraction" in p for p in points) >= 2 and sum("epoch_fraction" not in p for p in points) == 2
    budget = [json.loads(line) for line in open(tmp_path / "demo" / "ffnn3-css-is-budget" / "metrics.jsonl")]
    stopped = budget[-1]["cpu_s"] >= 3.0 or (budget[-1]["epoch"] == 20 and "epoch_fraction" not in budget[-1])
    assert stopped and any("3 CPU-second budget" in r.model for r in results)  # its budget, or all its epochs
