"""sampledlm export RUN --format onnx: ONNX Runtime gives the PyTorch model's exact log probabilities (1e-4) for
every model kind and for the structured objectives' exact rules; the metadata carries the vocabulary."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import PTB_DIR, run_cli

import sampledlm

ort = pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
pytest.importorskip("onnx", reason="the onnx extra is not installed")


def onnx_word_logprobs(path, sentences: list[list[str]]) -> list[np.ndarray]:
    """ln P of each word and </s> of each sentence, computed by ONNX Runtime alone from the file."""
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    meta = sess.get_modelmeta().custom_metadata_map
    ids = {w: i for i, w in enumerate(meta["vocab"].split("\n"))}
    unk, eos, kind = int(meta["unk_id"]), int(meta["eos_id"]), meta["kind"]
    inputs = {i.name: i for i in sess.get_inputs()}
    out = []
    for s in sentences:
        words = [ids.get(w, unk) for w in s]
        seq, targets = [eos] + words, words + [eos]
        if kind in ("gru", "lstm"):
            layers, _, hidden = inputs["h"].shape
            feed = {"words": np.array([seq], dtype=np.int64), "h": np.zeros((layers, 1, hidden), np.float32)}
            if "c" in inputs:
                feed["c"] = np.zeros((layers, 1, hidden), np.float32)
            lp = sess.run(["logprobs"], feed)[0][0]
        elif kind == "transformer":
            lp = sess.run(["logprobs"], {"words": np.array([seq], dtype=np.int64)})[0][0]
        else:
            n, bos = int(meta["order"]) - 1, int(meta["bos_id"])
            padded = [bos] * n + words
            lp = sess.run(["logprobs"], {"history": np.array([padded[i:i + n] for i in range(len(seq))])})[0]
        out.append(lp[np.arange(len(targets)), targets])
    return out


def agreement(run, path, sentences) -> float:
    lm = sampledlm.load(run, device="cpu")
    got = onnx_word_logprobs(path, sentences)
    ref = [np.array([w.logprob for w in lm.word_scores(s)]) for s in sentences]
    return max(float(np.abs(g - r).max()) for g, r in zip(got, ref))


RUNS = {
    "ffnn": ["--model", "ffnn", "--order", "3"],
    "gru": ["--model", "gru"],
    "lstm": ["--model", "lstm", "--layers", "2"],
    "transformer": ["--model", "transformer", "--layers", "1", "--heads", "2"],
    "gru-class": ["--model", "gru", "--objective", "class"],
    "gru-hsm": ["--model", "gru", "--objective", "hsm"],
    "gru-hsm-wide": ["--model", "gru", "--objective", "hsm", "--arity", "4"],
    "gru-adaptive": ["--model", "gru", "--objective", "adaptive", "--cutoffs", "10"],  # tied input bands: the default
    "transformer-adaptive-input": ["--model", "transformer", "--layers", "1", "--heads", "2", "--objective", "adaptive",
                                   "--cutoffs", "10", "--adaptive-input"],
    "gru-nce": ["--model", "gru", "--objective", "nce"],
}


@pytest.mark.parametrize("name", list(RUNS))
def test_onnx_runtime_gives_the_models_log_probabilities(name, tiny_corpus, tmp_path, capsys):
    run, path = tmp_path / name, tmp_path / f"{name}.onnx"
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "-d", "16", *(["--hidden", "16"] if not name.startswith("transformer") else []), "--epochs", "1", "--threads", "1", *RUNS[name], "-o",
                            str(run)], capsys)
    assert code == 0, err
    code, _, err = run_cli(["export", str(run), "--format", "onnx", "-o", str(path)], capsys)
    assert code == 0, err
    sentences = [line.split() for line in tiny_corpus["test"].read_text().splitlines()[:15]]
    assert agreement(run, path, sentences) < 1e-4
    code, _, err = run_cli(["export", str(run), "-o", str(path)], capsys)  # an existing file needs --force
    assert code == 1 and "--force" in err


@pytest.mark.ptb
def test_a_gru_trained_on_ptb_agrees_on_ptb_test_sentences(tmp_path, capsys):
    if not (PTB_DIR / "ptb.train.txt").exists():
        pytest.skip(f"PTB not found in {PTB_DIR}")
    train = tmp_path / "train.txt"
    train.write_text("".join((PTB_DIR / "ptb.train.txt").read_text().splitlines(True)[:3000]))
    code, _, err = run_cli(["train", "--train", str(train), "--valid", str(PTB_DIR / "ptb.valid.txt"), "--model", "gru",
                            "-d", "32", "--hidden", "32", "--epochs", "1", "--threads", "1", "-o", str(tmp_path / "g")],
                           capsys)
    assert code == 0, err
    assert run_cli(["export", str(tmp_path / "g"), "-o", str(tmp_path / "g.onnx")], capsys)[0] == 0
    sentences = [line.split() for line in (PTB_DIR / "ptb.test.txt").read_text().splitlines()[:50]]
    assert agreement(tmp_path / "g", tmp_path / "g.onnx", sentences) < 1e-4


def test_a_killed_exports_scratch_folder_is_removed_by_the_next_export(tiny_corpus, tmp_path, capsys):
    """The graph is written to a scratch folder beside the output first; a kill -9 left it there for good."""
    import socket

    run, path = tmp_path / "run", tmp_path / "m.onnx"
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "-d", "8", "--hidden", "8", "--epochs", "1", "--threads", "1", "--model", "gru", "-o",
                            str(run)], capsys)
    assert code == 0, err
    host = socket.gethostname().replace(".", "_")
    dead = tmp_path / f".m.onnx.{host}.999999999.abcd1234.tmp"  # no such process
    dead.mkdir()
    (dead / "graph.onnx").write_bytes(b"half a graph")
    code, _, err = run_cli(["export", str(run), "-o", str(path)], capsys)
    assert code == 0, err
    assert not dead.exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    import onnx

    out = next(o for o in onnx.load(str(path)).graph.output if o.name == "logprobs")
    assert out.type.tensor_type.shape.dim[-1].dim_value == len(sampledlm.load(str(run)).vocab)  # V, not a free axis


def test_onnx_runtime_runs_a_class_objective_graph_without_shape_warnings(tiny_corpus, tmp_path, capfd):
    """The exporter declared a 1-D shape on a 2-D branch output of the class objective's per-class maximum; ONNX
    Runtime warned "does not match actual shape" on every call. Branch outputs now declare no shape."""
    run, path = tmp_path / "run", tmp_path / "m.onnx"
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "-d", "8", "--hidden", "8", "--epochs", "1", "--threads", "1", "--model", "gru",
                            "--objective", "class", "-o", str(run)], capfd)
    assert code == 0, err
    assert run_cli(["export", str(run), "-o", str(path)], capfd)[0] == 0
    capfd.readouterr()
    sentences = [line.split() for line in tiny_corpus["test"].read_text().splitlines()[:5]]
    assert agreement(run, path, sentences) < 1e-4
    assert "does not match actual shape" not in capfd.readouterr().err
