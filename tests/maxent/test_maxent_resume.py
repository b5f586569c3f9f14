"""A maximum-entropy training stopped after an epoch goes on with `maxent train --resume DIR` (or
sampledlm.resume_maxent) and ends with the model an unbroken run makes: the same epoch log, the same weights."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import sampledlm
from helpers import synthetic_sentences, write_corpus
from sampledlm.cli import main
from sampledlm.maxent import checkpoint

SETTINGS = dict(epochs=4, min_improvement=0.0, average="auto", l2=0.1)  # auto: the averages' restarts are state too


@pytest.fixture
def corpus(tmp_path, private_cache):
    sents = synthetic_sentences(300, seed=3)
    return write_corpus(tmp_path / "train.txt", sents[:250]), write_corpus(tmp_path / "valid.txt", sents[250:])


class Killed(Exception):
    pass


def stop_after(monkeypatch, last: int) -> None:
    """Every rank dies right after it has saved epoch ``last`` (as kill -9 would, the commit point written)."""
    real = checkpoint.Checkpointer.save

    def save(self, epoch, arrays, meta):
        real(self, epoch, arrays, meta)
        if epoch == last:
            raise Killed(f"killed after epoch {epoch}")

    monkeypatch.setattr(checkpoint.Checkpointer, "save", save)


def weights(out) -> dict:
    from sampledlm.store import load_tensors

    config = json.loads((out / "config.json").read_text())
    tensors, _ = load_tensors(str(out / config["maxent"]["weights"]))
    return {k: v.numpy() for k, v in tensors.items()}


def cli(args, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    return e.value.code, capsys.readouterr().err


def test_a_stopped_training_resumes_to_the_unbroken_runs_model(tmp_path, corpus, monkeypatch, capsys):
    whole = tmp_path / "whole"
    sampledlm.train_maxent(*map(str, corpus), whole, **SETTINGS)
    assert not (whole / checkpoint.FOLDER).exists()  # a finished run keeps no training state

    broken = tmp_path / "broken"
    with monkeypatch.context() as m:
        stop_after(m, 2)
        with pytest.raises(Killed):
            sampledlm.train_maxent(*map(str, corpus), broken, **SETTINGS)
    assert checkpoint.committed_epoch(str(broken)) == 2 and not (broken / "config.json").exists()
    # the same command again is refused, and says how to go on
    code, err = cli(["maxent", "train", "--train", str(corpus[0]), "--valid", str(corpus[1]), "-o", str(broken)],
                    capsys)
    assert code == 1 and "stopped after epoch 2" in err and f"--resume {broken}" in err, err
    # --resume takes nothing else: the run's own settings and texts
    code, err = cli(["maxent", "train", "--resume", str(broken), "--epochs", "9"], capsys)
    assert code == 1 and "give no other option" in err and "--epochs" in err, err

    code, err = cli(["maxent", "train", "--resume", str(broken)], capsys)
    assert code == 0, err
    assert "resum" in err and "after epoch 2" in err
    a, b = (json.loads((d / "config.json").read_text())["training"] for d in (whole, broken))
    assert [e["valid_ppl"] for e in a["epochs"]] == [e["valid_ppl"] for e in b["epochs"]]
    wa, wb = weights(whole), weights(broken)
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k], wb[k]) for k in wa)
    assert not (broken / checkpoint.FOLDER).exists()
    code, err = cli(["maxent", "train", "--resume", str(broken)], capsys)
    assert code == 1 and "holds a finished maxent model: nothing to resume" in err


def stopped_run(monkeypatch, corpus, out) -> None:
    """A 3-epoch training of ``corpus`` into ``out``, killed after its first epoch."""
    with monkeypatch.context() as m:
        stop_after(m, 1)
        with pytest.raises(Killed):
            sampledlm.train_maxent(*map(str, corpus), out, epochs=3)


def test_force_starts_a_stopped_training_over(tmp_path, corpus, monkeypatch):
    out = tmp_path / "m"
    stopped_run(monkeypatch, corpus, out)
    sampledlm.train_maxent(*map(str, corpus), out, epochs=2, force=True)
    assert (out / "config.json").exists() and not (out / checkpoint.FOLDER).exists()
    assert len(json.loads((out / "config.json").read_text())["training"]["epochs"]) <= 3


def test_a_changed_training_text_is_not_resumed(tmp_path, corpus, monkeypatch):
    out = tmp_path / "m"
    stopped_run(monkeypatch, corpus, out)
    with open(corpus[0], "a", encoding="utf-8") as f:
        f.write("w1 w2 w3\n")
    with pytest.raises(sampledlm.UserError, match="changed since its training began"):
        sampledlm.resume_maxent(out)
    assert not (out / "config.json").exists() and os.path.isdir(out / checkpoint.FOLDER)  # nothing lost either


def test_two_vocabulary_shards_resume_to_the_unbroken_runs_model(tmp_path, corpus, monkeypatch):
    """Each rank saves and loads its own shard; the commit point names an epoch once both have written it."""
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    settings = dict(min_improvement=0.0, ranks=2, alpha=0.5)
    sampledlm.train_maxent(*map(str, corpus), whole, epochs=3, **settings)
    # the ranks run in processes of their own, out of a patch's reach: stop them by the epoch limit, keep their
    # state, and take the model away, as a kill after epoch 2 leaves the directory
    monkeypatch.setattr(checkpoint, "remove", lambda out_dir: None)
    sampledlm.train_maxent(*map(str, corpus), broken, epochs=2, **settings)
    monkeypatch.undo()
    saved = sorted(os.listdir(broken / checkpoint.FOLDER))
    assert "state-2-r0.safetensors" in saved and "state-2-r1.safetensors" in saved
    assert not [n for n in saved if n.startswith("state-1-")]  # older epochs removed after the commit
    for name in os.listdir(broken):
        if name != checkpoint.FOLDER:
            os.remove(broken / name)
    run = json.loads((broken / checkpoint.FOLDER / "run.json").read_text())
    run["settings"]["epochs"] = 3
    (broken / checkpoint.FOLDER / "run.json").write_text(json.dumps(run))
    sampledlm.resume_maxent(broken)
    wa, wb = weights(whole), weights(broken)
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)


def test_sentences_given_in_python_are_kept_for_the_resumed_run(tmp_path, monkeypatch, private_cache):
    """Their temporary files are gone when the run is resumed: the state keeps copies."""
    sents = [" ".join(s) for s in synthetic_sentences(200, seed=5)]
    whole, out = tmp_path / "whole", tmp_path / "m"
    sampledlm.train_maxent(sents[:160], sents[160:], whole, **SETTINGS)
    with monkeypatch.context() as m:
        stop_after(m, 1)
        with pytest.raises(Killed):
            sampledlm.train_maxent(sents[:160], sents[160:], out, **SETTINGS)
    lm = sampledlm.resume_maxent(out)
    assert lm.perplexity(sents[160:]) == sampledlm.load(whole).perplexity(sents[160:])


def test_a_training_stopped_before_its_first_epoch_is_said_so(tmp_path, corpus, monkeypatch, capsys):
    """It was "stopped after epoch 0"."""
    out = tmp_path / "m"
    with monkeypatch.context() as m:
        m.setattr(checkpoint.Checkpointer, "save", lambda self, epoch, arrays, meta: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            sampledlm.train_maxent(*map(str, corpus), out, epochs=3)
    assert checkpoint.committed_epoch(str(out)) == 0
    code, err = cli(["maxent", "train", "--train", str(corpus[0]), "--valid", str(corpus[1]), "-o", str(out)], capsys)
    assert code == 1 and "stopped before its first epoch ended" in err and "epoch 0" not in err, err


def test_an_interrupt_says_how_to_resume_and_so_does_a_reader_of_the_directory(tmp_path, corpus, monkeypatch, capsys):
    """Ctrl-C or SIGTERM printed only 'interrupted', and eval on the directory said to run the command again (which
    is refused) or to remove the directory (losing the finished epochs)."""
    from sampledlm.errors import Terminated

    real = checkpoint.Checkpointer.save

    def save(self, epoch, arrays, meta):
        real(self, epoch, arrays, meta)
        raise Terminated("terminated (SIGTERM)")

    out = tmp_path / "stopped"
    with monkeypatch.context() as m:
        m.setattr(checkpoint.Checkpointer, "save", save)
        code, err = cli(["maxent", "train", "--train", str(corpus[0]), "--valid", str(corpus[1]), "-o", str(out),
                         "--epochs", "3"], capsys)
    assert code == 143 and f"terminated (SIGTERM); resume with: sampledlm maxent train --resume {out}" in err, err
    code, err = cli(["eval", str(out), "--test", str(corpus[1])], capsys)
    assert code == 1 and f"go on with 'sampledlm maxent train --resume {out}'" in err, err
    code, err = cli(["maxent", "train", "--resume", str(out)], capsys)
    assert code == 0 and (out / "config.json").exists(), err
