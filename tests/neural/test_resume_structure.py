"""A resumed run whose objective takes its structure from the checkpoint (hsm's tree over word classes, whose node
layer is rebuilt at its saved size) trains every parameter, as the unbroken run does."""

from __future__ import annotations

import json

import pytest
import torch

from helpers import config_for
from sampledlm.neural import rundir as runs
from sampledlm.neural.trainer import TrainingInterrupted, new_run, resume_run


def _hsm_over_classes(corpus, tmp_path):
    config, vocab = config_for(corpus, "gru", optimizer="adam", lr=0.01, clip=1.0, epochs=2)
    classes = tmp_path / "classes.txt"
    classes.write_text("".join(f"{i % 5}\t{w}\n" for i, w in enumerate(vocab.words)))
    config["objective"] = {"name": "hsm", "options": {"arity": 4, "word_classes": str(classes)}}
    return config, vocab


def test_a_resumed_hsm_over_word_classes_updates_its_node_layer_as_the_unbroken_run(words_corpus, tmp_path):
    config, vocab = _hsm_over_classes(words_corpus, tmp_path)
    new_run(str(words_corpus / "a"), config, vocab).train()
    t = new_run(str(words_corpus / "b"), config, vocab)
    t.stop_when = lambda st, n=t.data.num_batches() + 2: st.step >= n
    with pytest.raises(TrainingInterrupted):
        t.train()
    resumed = resume_run(str(words_corpus / "b"))
    trained = {id(p) for p in resumed.params}
    missing = [name for module in (resumed.model, resumed.objective)
               for name, p in module.named_parameters() if p.requires_grad and id(p) not in trained]
    assert not missing, f"parameters no optimiser updates after the resume: {missing}"
    resumed.train()
    a, b = runs.load_run(str(words_corpus / "a")), runs.load_run(str(words_corpus / "b"))
    for x, y in ((a[0], b[0]), (a[1], b[1])):
        for k, v in x.state_dict().items():
            assert torch.equal(v, y.state_dict()[k]), k
    assert [json.loads(line)["valid_ppl"] for line in open(words_corpus / "a" / "metrics.jsonl")] == \
        [json.loads(line)["valid_ppl"] for line in open(words_corpus / "b" / "metrics.jsonl")]


def test_a_run_started_from_an_hsm_over_word_classes_updates_its_node_layer(words_corpus, tmp_path, capsys,
                                                                              private_cache):
    """--init-from copies the source's tree, and with it a node layer of the source's size: the new run trains it."""
    from helpers import run_cli

    _, vocab = config_for(words_corpus, "gru")
    classes = tmp_path / "classes.txt"
    classes.write_text("".join(f"{i % 5}\t{w}\n" for i, w in enumerate(vocab.words)))
    text = ["--train", str(words_corpus / "train.txt"), "--valid", str(words_corpus / "valid.txt"), "--epochs", "1",
            "--threads", "1"]
    code, _, err = run_cli(["train", *text, "--model", "gru", "-d", "6", "--hidden", "8", "--objective", "hsm",
                            "--arity", "4", "--word-classes", str(classes), "-o", str(tmp_path / "src")], capsys)
    assert code == 0, err
    code, _, err = run_cli(["train", *text, "--init-from", str(tmp_path / "src"), "-o", str(tmp_path / "ft")], capsys)
    assert code == 0, err
    before = runs.load_run(str(tmp_path / "src"))[1].state_dict()
    after = runs.load_run(str(tmp_path / "ft"))[1].state_dict()
    assert torch.equal(before["parent"], after["parent"])  # the source's class tree
    assert before["node_layer.weight"].shape == after["node_layer.weight"].shape
    assert not torch.equal(before["node_layer.weight"], after["node_layer.weight"])  # and its nodes trained further


def test_training_refuses_a_parameter_replaced_after_the_optimisers_were_built(words_corpus):
    config, vocab = config_for(words_corpus, "gru", epochs=1)
    t = new_run(str(words_corpus / "run"), config, vocab)
    t.model.output.bias = torch.nn.Parameter(t.model.output.bias.detach().clone())
    with pytest.raises(RuntimeError, match="outside the optimisers: model.output.bias"):
        t.train()
    t.build_optimizers()
    t.train()
