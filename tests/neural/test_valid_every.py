"""``--valid-every``: validation points within an epoch (a corpus read once or twice gets its curve and best model
from them) that leave the training's numbers as they were."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import config_for

from sampledlm.neural import rundir as runs
from sampledlm.errors import UserError
from sampledlm.neural.reporting import best_point, plot_learning_curve
from sampledlm.neural.trainer import TrainingInterrupted, new_run, resume_run


def metrics_of(run_dir) -> list[dict]:
    out = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    for m in out:  # timings differ between runs, numbers must not
        m.pop("tokens_per_s"), m.pop("wall_s"), m.pop("cpu_s")
    return out


def weights_of(run_dir) -> dict[str, torch.Tensor]:
    model, _, _, _ = runs.load_run(str(run_dir))
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("model", ["gru", "ffnn"])
def test_points_within_each_epoch_and_the_same_training(words_corpus, model):
    """Every K-th step within an epoch gets a record (its epoch, step and share of the epoch); the epoch ends keep
    theirs; the training loss at each epoch's end and the final weights equal a run without the points (cosine:
    validating neither draws random numbers nor touches the carried state)."""
    config, vocab = config_for(words_corpus, model, epochs=2, lr_schedule="cosine", optimizer="adam", lr=0.01)
    plain = new_run(str(words_corpus / "plain"), config, vocab).train()
    nb = new_run(str(words_corpus / "probe"), config, vocab).data.num_batches()
    k = 2
    assert nb > 2 * k, "the corpus must give each epoch several points"
    config["train"]["valid_every"] = k
    pointed = new_run(str(words_corpus / "pointed"), config, vocab).train()

    inner = [m for m in pointed.metrics if "epoch_fraction" in m]
    want = [(e + 1, e * nb + b) for e in range(2) for b in range(k, nb, k)]  # K counts each epoch's steps
    assert [(m["epoch"], m["step"]) for m in inner] == want
    for m in inner:
        assert m["epoch_fraction"] == pytest.approx((m["step"] - (m["epoch"] - 1) * nb) / nb)
    ends = [m for m in pointed.metrics if "epoch_fraction" not in m]
    assert [m["step"] for m in ends] == [nb, 2 * nb]
    assert [m["train_loss"] for m in ends] == [m["train_loss"] for m in plain.metrics]
    assert [m["valid_ppl"] for m in ends] == [m["valid_ppl"] for m in plain.metrics]
    # the best model is the best of all points, an inner one included
    assert pointed.best_valid == min(m["valid_ppl"] for m in pointed.metrics)
    a, b = weights_of(words_corpus / "plain"), weights_of(words_corpus / "pointed")
    if pointed.best_valid == plain.best_valid:
        for key in a:
            assert torch.equal(a[key], b[key]), key
    plot_learning_curve(pointed.metrics, str(words_corpus / "curve.png"))  # inner points placed within the epoch
    assert (words_corpus / "curve.png").stat().st_size > 0


def test_a_run_stopped_after_a_point_resumes_to_the_same_numbers(words_corpus):
    config, vocab = config_for(words_corpus, "gru", epochs=2, lr_schedule="cosine", optimizer="adam", lr=0.01,
                               valid_every=2)
    new_run(str(words_corpus / "a"), config, vocab).train()
    t = new_run(str(words_corpus / "b"), config, vocab)
    t.stop_when = lambda st: st.step >= 2  # the step of the first point: the point is taken, then the stop
    with pytest.raises(TrainingInterrupted):
        t.train()
    assert len(metrics_of(words_corpus / "b")) == 1
    resume_run(str(words_corpus / "b")).train()
    assert metrics_of(words_corpus / "b") == metrics_of(words_corpus / "a")
    a, b = weights_of(words_corpus / "a"), weights_of(words_corpus / "b")
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_plateau_points_halve_the_rate_and_can_end_the_run(words_corpus):
    """Under the plateau schedule a point that does not improve halves the rate (said in the log); with no halvings
    left it ends the run at that point (no epoch-end validation after it), and the run is finalised; a resume says
    where it ended, and the summary, the provenance and eval's note count the epochs finished, not the points."""
    config, vocab = config_for(words_corpus, "ffnn", epochs=50, lr=0.5, valid_every=1, max_halvings=1,
                               min_improvement=0.999)  # no point improves by 99.9 % on the first
    lines = []
    t = new_run(str(words_corpus / "p"), config, vocab)
    t.log = lines.append
    state = t.train()
    assert [m["step"] for m in state.metrics] == [1, 2, 3] and state.step == 3 and state.done and state.finalized
    assert all("epoch_fraction" in m for m in state.metrics)
    assert (words_corpus / "p" / "model.safetensors").exists()
    said = "\n".join(lines)
    assert "epoch 1 at step 2 (" in said and "lr halved to 0.25 (halving 1 of 1)" in said
    assert "epoch 1 at step 3 (" in said and "after 1 halving (--max-halvings 1): training stops" in said
    prov = json.loads((words_corpus / "p" / "provenance.json").read_text())["figures"]
    best = min(state.metrics, key=lambda m: m["valid_ppl"])
    assert prov["best_epoch"] == 1 and prov["best_step"] == best["step"] and 0 < prov["epochs"] < 1
    with pytest.raises(UserError, match=r"already finished after 0\.\d\d epochs \(at step 3, where validation"):
        resume_run(str(words_corpus / "p"), refuse_finished=True)
    assert best_point(state.metrics).startswith(f"epoch 1 at step {best['step']} (")
    assert best_point(state.metrics).endswith(f"validation {best['step']} of 3")


def test_the_summary_and_evals_note_count_epochs_not_points(words_corpus):
    from sampledlm.neural.rundir import _epochs_done

    metrics = [{"epoch": 1, "step": 2, "valid_ppl": 9.0, "epoch_fraction": 0.5},
               {"epoch": 1, "step": 4, "valid_ppl": 8.0}, {"epoch": 2, "step": 6, "valid_ppl": 7.0, "epoch_fraction": 0.5}]
    assert best_point(metrics) == "epoch 2 at step 6 (50%), validation 3 of 3"
    assert best_point([{"epoch": 1, "valid_ppl": 9.0}, {"epoch": 2, "valid_ppl": 9.5}]) == "epoch 1 of 2"
    (words_corpus / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    assert _epochs_done(str(words_corpus)) == 1
