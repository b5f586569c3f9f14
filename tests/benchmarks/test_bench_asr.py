"""``sampledlm bench asr --quick``: the simulated recogniser's page, on the built-in corpus."""

from __future__ import annotations

from helpers import run_quick


def test_asr_quick_page(tmp_path, private_cache):
    data = run_quick("asr", tmp_path, against="Against the issue's targets")
    rows = {r["model"]: r for r in data["rows"]}
    assert {"KN3 (first pass)", "KN5", "FFNN", "GRU", "GRU + FFNN + KN5"} <= set(rows)
    assert all(0 <= r["nbest_wer"] <= 1.5 and 0 <= r["lattice_wer"] <= 1.5 for r in rows.values())
    assert data["oracle_wer_100best"] <= data["first_pass_wer"]
    # exact lattice search (n-gram, feed-forward) never does worse on its own objective than the 100-best subset
    sp = data["speed"]
    assert abs(sp["gru_score_ppl"] - sp["gru_eval_ppl"]) <= 1e-4 * sp["gru_eval_ppl"]
    assert sp["gru_bunch1_ppl"] == sp["gru_bunch64_ppl"] or abs(sp["gru_bunch1_ppl"] / sp["gru_bunch64_ppl"] - 1) < 1e-5
