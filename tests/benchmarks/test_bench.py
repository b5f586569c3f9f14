"""`sampledlm bench`: the framework (list, errors) and each synthetic experiment's --quick run."""

from __future__ import annotations

from helpers import bench, run_quick

from benchmarks import EXPERIMENTS


def test_list_and_unknown():
    r = bench("--list")
    assert r.exit_code == 0 and all(name in r.output for name in EXPERIMENTS)
    r = bench("nope")
    assert r.exit_code != 0 and "available" in str(r.exception)


def test_bad_data_dir(tmp_path):
    r = bench("css-estimates", "--quick", "--data", str(tmp_path), "--out", str(tmp_path))
    assert r.exit_code != 0 and "train.txt" in str(r.exception)


def test_css_estimates(tmp_path):
    data = run_quick("css-estimates", tmp_path)
    by = {(r["method"], r["samples"]): r for r in data["stats"]}
    for S in data["setup"]["samples"]:
        assert by[("css-is", S)]["mean_abs_error"] * 10 < by[("is", S)]["mean_abs_error"]
        assert by[("css-bernoulli", S)]["mean_abs_error"] * 10 < by[("is", S)]["mean_abs_error"]
        assert by[("css-is", S)]["share_above_1"] == 0 and by[("is", S)]["share_above_1"] > 0.2


def test_css_softmax_regression(tmp_path):
    data = run_quick("css-softmax-regression", tmp_path)
    exact = [v for _, v in data["methods"]["exact softmax"]["curve"]]
    assert exact[-1] > exact[0] + 3 and exact[-1] > data["true_model_ll"]
    for m in ("CSS-IS", "CSS-Bernoulli"):
        assert data["methods"][m]["final"] > exact[-1] - 0.5
    assert 0.3 < data["setup"]["bernoulli_power"] < 1.0


def test_scaling(tmp_path):
    data = run_quick("scaling", tmp_path)
    names = {r["objective"] for r in data["rows"]}
    from benchmarks.scaling import SAMPLED

    assert names == set(SAMPLED) and {"softmax", "binary", "css-is", "nce"} <= names
    big = max(data["setup"]["sizes"])
    for r in data["rows"]:
        assert r["tokens_per_s"] > 0
        if r["V"] == big and r["objective"] != "softmax":
            assert r["fraction_of_softmax_cost"] < 0.5
    assert {r["sampler"] for r in data["samplers"]} == {"alias", "multinomial"}
    assert set(data["criteria"]) == names - {"softmax"}
    assert {r["objective"] for r in data["ffnn"]} == (names - {"binary"}) | {"binary (5%)"}
