"""The training bench's quick page: every section's code runs (the GPU section on the CPU at toy sizes)."""

from helpers import run_quick


def test_quick_training_page(tmp_path):
    data = run_quick("training", tmp_path, against="Against the targets")
    assert {r["model"] for r in data["cpu"]} == {"ffnn", "gru (tied)"}
    assert all(v > 0 for r in data["cpu"] for v in r["tokens_per_s"].values())
    assert data["dp"]["max_rel_diff"] < 1e-5  # two ranks take one process's steps
    objectives = {r["objective"] for r in data["lstm"]}
    assert {"softmax", "torch-adaptive", "css-is", "blackout"} <= objectives
    assert all(r["tokens_per_s"] > 0 for r in data["lstm"])
