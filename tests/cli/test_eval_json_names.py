"""One JSON schema for `eval --json` (and `ngram eval --json`): `ppl` is the perplexity of what was evaluated (the
mixture when mixing), each model's own under `components` in the order given, the test file named as given."""

from __future__ import annotations

import json


def _json(run_in_process, *args, cwd, stdin=None):
    r = run_in_process(*args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_eval_json_keys_name_what_they_hold(trained_ffnn, run_in_process):
    d = trained_ffnn
    for order in ("2", "3"):
        r = run_in_process("ngram", "train", "--train", "train.txt", "--order", order, "-o", f"kn{order}.arpa", cwd=d)
        assert r.returncode == 0, r.stderr
    alone = {m: _json(run_in_process, "eval", m, "--test", "test.txt", cwd=d) for m in ("kn3.arpa", "kn2.arpa", "run")}
    mix = _json(run_in_process, "eval", "kn3.arpa", "--test", "test.txt", "--mix", "run", "--weights", "0.5,0.5",
                cwd=d)
    assert [c["model"] for c in mix["components"]] == ["kn3.arpa", "run"]
    assert [c["ppl"] for c in mix["components"]] == [alone["kn3.arpa"]["ppl"], alone["run"]["ppl"]]
    assert mix["weights"] == [0.5, 0.5] and mix["test"] == "test.txt"
    assert mix["ppl"] not in (alone["kn3.arpa"]["ppl"], alone["run"]["ppl"])  # the mixture's own
    assert not {"interpolated_ppl", "component_ppl", "ngram_ppl", "weight"} & set(mix)
    assert "components" not in alone["run"] and alone["run"]["model"] == "run"
    ngram = _json(run_in_process, "ngram", "eval", "kn3.arpa", "--test", "test.txt", cwd=d)
    assert ngram["ppl"] == alone["kn3.arpa"]["ppl"]
    # which protocol a number came from: a recurrent model reads running text unless --per-sentence
    assert alone["kn3.arpa"]["history"] == "each sentence alone" and "stride" not in alone["kn3.arpa"]
    assert alone["run"]["history"] == "each sentence alone"  # a feed-forward model


def test_eval_json_says_whether_a_recurrent_model_read_running_text(four_models, run_in_process):
    """Both protocols gave the same keys, so a collected number could not say which one it was."""
    d = four_models
    running = _json(run_in_process, "eval", "gru", "--test", "test.txt", cwd=d)
    r = run_in_process("eval", "gru", "--test", "test.txt", "--per-sentence", "--json", cwd=d)
    alone = json.loads(r.stderr.strip().splitlines()[-1])
    assert (running["history"], alone["history"]) == ("running text", "each sentence alone")
    assert running["ppl"] != alone["ppl"]


def test_standard_input_is_named_as_given(tmp_path):
    import subprocess
    import sys

    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 5)
    subprocess.run([sys.executable, "-m", "sampledlm", "ngram", "train", "--train", "t.txt", "--order", "2", "-o",
                    "k.arpa"], cwd=tmp_path, check=True, capture_output=True)
    r = subprocess.run([sys.executable, "-m", "sampledlm", "eval", "k.arpa", "--test", "-", "--json"], cwd=tmp_path,
                       input=(tmp_path / "t.txt").read_text(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["test"] == "-"  # not the name of a temporary copy deleted at exit
