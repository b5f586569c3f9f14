"""`sampledlm eval` (exact, interpolated, per sentence) and `sampledlm train`'s argument errors."""

import json
import math

import pytest
from helpers import run_cli

from sampledlm.neural import rundir as runs
from sampledlm.neural.lm import perplexity


def write_uniform_arpa(path, vocab) -> str:
    """A unigram ARPA model giving every word of ``vocab`` (and </s>) probability 1/V."""
    lp = -math.log10(len(vocab))
    lines = ["\\data\\", f"ngram 1={len(vocab) + 1}", "", "\\1-grams:", "-99\t<s>"]
    lines += [f"{lp:.7f}\t{w}" for w in vocab.words]
    path.write_text("\n".join(lines + ["", "\\end\\", ""]), encoding="utf-8")
    return str(path)


def test_eval_cli_exact_interpolated_and_per_sentence(trained_ffnn, capsys, monkeypatch):
    run = str(trained_ffnn / "run")
    code, out, err = run_cli(["eval", run, "--test", str(trained_ffnn / "test.txt"), "--json"], capsys)
    assert code == 0
    res = json.loads(out)
    model, objective, vocab, _ = runs.load_run(run)
    from sampledlm.data.corpus import load_ids

    ids = load_ids(str(trained_ffnn / "test.txt"), vocab)
    assert res["predictions"] == len(ids) and res["ppl"] == pytest.approx(perplexity(model, objective, ids))

    arpa = write_uniform_arpa(trained_ffnn / "uniform.arpa", vocab)
    code, out, err = run_cli(["eval", run, "--test", str(trained_ffnn / "test.txt"), "--interpolate", arpa,
                              "--weights", "auto", "--json"], capsys)
    res2 = json.loads(out)
    assert res2["components"][1]["ppl"] == pytest.approx(len(vocab))
    assert res2["components"][0]["ppl"] == pytest.approx(res["ppl"])
    assert 0 < res2["weights"][0] < 1 and res2["ppl"] <= res["ppl"] + 1e-6
    code, out, err = run_cli(["eval", run, "--test", str(trained_ffnn / "test.txt"), "--interpolate", arpa,
                              "--weight", "1.0", "--json"], capsys)
    assert json.loads(out)["ppl"] == pytest.approx(res["ppl"])

    code, out, err = run_cli(["eval", run, "--test", str(trained_ffnn / "test.txt"), "--per-sentence"], capsys)
    lines = out.strip().split("\n")
    assert lines[0].startswith("ln_prob") and len(lines) == 21
    total = sum(float(ln.split("\t")[0]) for ln in lines[1:])
    assert math.exp(-total / len(ids)) == pytest.approx(res["ppl"], rel=1e-4)


def test_train_cli_errors(trained_ffnn, capsys):
    t = str(trained_ffnn / "train.txt")
    code, _, err = run_cli(["train", "--train", t, "--valid", t, "-o", str(trained_ffnn / "run")], capsys)
    assert code == 1 and "--resume" in err
    code, _, err = run_cli(["train", "--resume", str(trained_ffnn / "run"), "--hidden", "5"], capsys)
    assert code == 1 and "only --epochs" in err
    code, _, err = run_cli(["train", "--train", t, "--valid", t, "-o", str(trained_ffnn / "x"), "--model", "gru",
                            "--direct"], capsys)
    assert code == 1 and "direct" in err
    code, _, err = run_cli(["train", "--train", t, "--valid", t, "-o", str(trained_ffnn / "y"), "--samples", "5"], capsys)
    assert code == 1 and "--samples" in err
    code, _, err = run_cli(["train", "--resume", str(trained_ffnn / "run")], capsys)
    assert code == 1 and "already finished" in err


def test_a_resumed_run_keeps_its_own_thread_count_unless_given(tmp_path, capsys):
    import torch

    (tmp_path / "t.txt").write_text("a b c a b\nb c a\n" * 20)
    t, run = str(tmp_path / "t.txt"), str(tmp_path / "run")
    before = torch.get_num_threads()
    try:
        code, _, err = run_cli(["train", "--train", t, "--valid", t, "-o", run, "--model", "ffnn", "-d", "4",
                                "--hidden", "4", "--epochs", "1", "--threads", "1"], capsys)
        assert code == 0, err
        torch.set_num_threads(3)
        code, _, err = run_cli(["train", "--resume", run, "--epochs", "2"], capsys)
        assert code == 0, err
        assert torch.get_num_threads() == 1  # the run's --threads 1, from its config.toml
        code, _, err = run_cli(["train", "--resume", run, "--epochs", "3", "--threads", "2"], capsys)
        assert code == 0, err
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_eval_reports_oov_counts_for_every_family(trained_ffnn, tmp_path, capsys):
    """An all-OOV test file: every family says how many tokens it scored as <unk> (as `ngram eval` does)."""
    import json

    from helpers import run_cli

    (tmp_path / "oov.txt").write_text("zzz-never yyy-never\nqqq-never\n")
    code, _, err = run_cli(["ngram", "train", "--train", str(trained_ffnn / "train.txt"), "--order", "2", "-o",
                            str(tmp_path / "k2.arpa")], capsys)
    assert code == 0, err
    for model in (trained_ffnn / "run", tmp_path / "k2.arpa"):
        code, out, err = run_cli(["eval", str(model), "--test", str(tmp_path / "oov.txt"), "--json"], capsys)
        assert code == 0, err
        assert json.loads(out)["oov"] == 3 and json.loads(out)["predictions"] == 5
        code, out, err = run_cli(["eval", str(model), "--test", str(tmp_path / "oov.txt")], capsys)
        assert "3 OOV, scored as <unk>)" in out
        # a text read otherwise than the training text (case, tokeniser) was silent at 83 % OOV
        assert "100.0 % of its 3 words are outside the model's vocabulary" in err
        code, out, err = run_cli(["eval", str(model), "--test", str(trained_ffnn / "train.txt")], capsys)
        assert code == 0 and "outside the model's vocabulary" not in err


@pytest.mark.parametrize("command, model", [("maxent", "ffnn3"), ("maxent", "kn3.arpa"), ("ngram", "ffnn3"),
                                            ("ngram", "melm")])
def test_a_family_named_eval_refuses_another_familys_model(four_models, capsys, command, model):
    """`maxent eval` of a neural run had scored it (the fault campaign's case of item 6): the family-named evals
    read their own family and say which command reads any."""
    from helpers import run_cli

    code, out, err = run_cli([command, "eval", str(four_models / model), "--test", str(four_models / "test.txt")],
                             capsys)
    assert code == 1 and "`sampledlm eval` reads any" in err and out == "", err


def test_the_old_weight_flag_still_works_and_says_it_is_deprecated(tmp_path, capsys):
    """--weight (hidden, the old two-model name of --weights) gives --weights' numbers and one line on standard
    error naming the replacement; --weights says nothing of the kind."""
    from sampledlm.data.vocab import Vocab

    (tmp_path / "test.txt").write_text("a b\nb c a\n", encoding="utf-8")
    vocab = Vocab.from_sentences([["a", "b", "c"]])
    a, b = write_uniform_arpa(tmp_path / "a.arpa", vocab), write_uniform_arpa(tmp_path / "b.arpa", vocab)
    base = ["eval", a, "--test", str(tmp_path / "test.txt"), "--mix", b, "--json"]
    code, new, err = run_cli(base + ["--weights", "0.3"], capsys)
    assert code == 0 and "deprecated" not in err, err
    code, old, err = run_cli(base + ["--weight", "0.3"], capsys)
    assert code == 0, err
    assert json.loads(old)["weights"] == json.loads(new)["weights"] == [0.3, 0.7]
    assert json.loads(old)["ppl"] == json.loads(new)["ppl"]
    assert [ln for ln in err.splitlines() if "--weight " in ln] == \
        ["sampledlm: warning: --weight is deprecated; use --weights"]


def test_eval_sum_precision_bf16_is_recorded_and_close(trained_ffnn, capsys):
    """--sum-precision bf16: the normaliser's products in bfloat16, the perplexity close to float32's, the choice in
    the JSON summary; an unknown precision is refused by the option itself."""
    run, test = str(trained_ffnn / "run"), str(trained_ffnn / "test.txt")
    code, out, _ = run_cli(["eval", run, "--test", test, "--json"], capsys)
    assert code == 0
    exact = json.loads(out)
    assert exact["sum_precision"] == "fp32"
    code, out, _ = run_cli(["eval", run, "--test", test, "--json", "--sum-precision", "bf16"], capsys)
    assert code == 0
    low = json.loads(out)
    assert low["sum_precision"] == "bf16"
    assert low["ppl"] == pytest.approx(exact["ppl"], rel=2e-2)
    code, _, err = run_cli(["eval", run, "--test", test, "--sum-precision", "fp8"], capsys)
    assert code == 2 and "fp8" in err
