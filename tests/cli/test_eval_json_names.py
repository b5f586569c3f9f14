"""The JSON of every eval command names perplexity `ppl`; `ngram_ppl` only when the other model is an n-gram."""

from __future__ import annotations

import json


def _json(run_in_process, *args, cwd):
    r = run_in_process(*args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_eval_json_keys_name_what_they_hold(trained_ffnn, run_in_process):
    d = trained_ffnn
    for order in ("2", "3"):
        r = run_in_process("ngram", "train", "--train", "train.txt", "--order", order, "-o", f"kn{order}.arpa", cwd=d)
        assert r.returncode == 0, r.stderr
    two_ngrams = _json(run_in_process, "eval", "kn3.arpa", "--test", "test.txt", "--interpolate", "kn2.arpa",
                       "--weights", "0.5,0.5", cwd=d)
    assert two_ngrams["ngram_ppl"] == two_ngrams["component_ppl"][1]
    ngram_first = _json(run_in_process, "eval", "kn3.arpa", "--test", "test.txt", "--interpolate", "run",
                        "--weights", "0.5,0.5", cwd=d)
    assert "ngram_ppl" not in ngram_first  # the second model is neural: no key may call its perplexity an n-gram's
    alias = _json(run_in_process, "ngram", "eval", "kn3.arpa", "--test", "test.txt", cwd=d)
    assert alias["ppl"] == alias["perplexity"] == two_ngrams["component_ppl"][0]
