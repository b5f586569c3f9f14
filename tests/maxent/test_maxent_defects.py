"""Maxent model directories and command line: regressions of defects found in review.

Each test failed before its fix: vocabulary fingerprint ignored, out-of-range index tensors
crashing the kernels, silent overwrite, untrained models saved from bad flags / empty
validation text / divergence, tracebacks from mistyped config.json fields, flag names that
differed from the neural trainer's, no envelope / checksum / LanguageModel for maxent models.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import synthetic_sentences, write_corpus

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "sampledlm"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("maxent_corpus")
    sents = synthetic_sentences(520, seed=0)
    files = {"train": write_corpus(d / "train.txt", sents[:400]), "valid": write_corpus(d / "valid.txt", sents[400:460]),
             "test": write_corpus(d / "test.txt", sents[460:]), "empty": d / "empty.txt"}
    files["empty"].write_text("")
    return {k: str(v) for k, v in files.items()}


def sampledlm(*args: str, capsys=None) -> tuple[int, str, str]:
    """Run the command line in this process: ``(exit status, stdout, stderr)``."""
    from sampledlm.cli import main

    if capsys is not None:
        capsys.readouterr()
    try:
        main([str(a) for a in args])
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    out, err = capsys.readouterr() if capsys is not None else ("", "")
    return rc, out, err


def sampledlm_subprocess(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sampledlm", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory) -> str:
    """A binary Feat-I model trained by the command line (the old positional form works on every version)."""
    out = str(tmp_path_factory.mktemp("maxent_model") / "m")
    r = sampledlm_subprocess("maxent", "train", corpus["train"], corpus["valid"], "-o", out, "--epochs", "2")
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def model(trained, tmp_path) -> str:
    """A fresh copy of the trained model directory."""
    dst = str(tmp_path / "model")
    shutil.copytree(trained, dst)
    return dst


def read_config(model_dir: str) -> dict:
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        return json.load(f)


def write_config(model_dir: str, config: dict) -> None:
    with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)


def weights_path(model_dir: str) -> str:
    config = read_config(model_dir)
    name = config.get("maxent", {}).get("weights", "model.safetensors") if isinstance(config.get("maxent"), dict) \
        else "model.safetensors"
    return os.path.join(model_dir, name)


def eval_ppl(model_dir: str, test: str, capsys) -> float:
    rc, out, err = sampledlm("maxent", "eval", model_dir, test, "--json", capsys=capsys)
    assert rc == 0, err
    return json.loads(out.strip().splitlines()[-1])["ppl"]


def one_line_error(rc: int, err: str, *needles: str) -> None:
    assert rc == 1, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("sampledlm: error:"), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, err)


# --- vocabulary fingerprint and sizes ---------------------------------------------------------
def test_shuffled_vocab_is_refused(model, corpus, capsys):
    path = os.path.join(model, "vocab.txt")
    lines = open(path, encoding="utf-8").read().splitlines(keepends=True)
    rest = lines[1:]
    np.random.default_rng(3).shuffle(rest)
    assert rest != lines[1:]
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(lines[:1] + rest)
    rc, out, err = sampledlm("maxent", "eval", model, corpus["test"], capsys=capsys)
    one_line_error(rc, err, "vocab.txt")
    assert "perplexity" not in out


def test_vocab_sizes_are_checked_against_config(model, corpus, capsys):
    config = read_config(model)
    config["maxent"]["num_words"] -= 1
    write_config(model, config)
    rc, _, err = sampledlm("maxent", "eval", model, "--test", corpus["test"], capsys=capsys)
    one_line_error(rc, err, "num_words")
    config["maxent"]["num_words"] += 1
    config["vocab"]["size"] += 1
    write_config(model, config)
    rc, _, err = sampledlm("maxent", "eval", model, "--test", corpus["test"], capsys=capsys)
    one_line_error(rc, err, "vocab")


# --- index tensors are validated before any kernel runs ----------------------------------------
def _rewrite_tensor(model_dir: str, name: str, change) -> str:
    """Change one tensor of the weights file, keeping its checksum valid (so only the index checks can catch it)."""
    import torch
    from safetensors import safe_open

    from sampledlm import store

    path = weights_path(model_dir)
    with safe_open(path, framework="np") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k).copy() for k in f.keys()}
    change(tensors[name])
    meta.pop("sha256", None)
    os.remove(path)
    store.save_tensors(path, {k: torch.from_numpy(v) for k, v in tensors.items()}, meta)
    return path


@pytest.mark.parametrize("name,index", [("ctx_keys.1", 0), ("gptr", 5), ("gword", 3), ("ctx_keys.0", -1)])
def test_out_of_range_index_is_refused_not_a_crash(model, corpus, name, index):
    def change(a):
        a[index] = 10 ** 9

    path = _rewrite_tensor(model, name, change)
    r = sampledlm_subprocess("maxent", "eval", model, corpus["test"])
    assert r.returncode == 1, (r.returncode, r.stderr[-500:])  # a segmentation fault is -11
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and os.path.basename(path) in lines[0] and name in lines[0], r.stderr


def test_non_monotone_pointers_are_refused(model, capsys):
    from sampledlm.errors import UserError
    from sampledlm.maxent import MaxEntModel

    def change(a):
        i = int(np.flatnonzero(np.diff(a) > 0)[5])  # not the first pointer (which must be 0)
        a[i], a[i + 1] = a[i + 1], a[i]

    _rewrite_tensor(model, "gptr", change)
    with pytest.raises(UserError, match="gptr.*non-decreasing"):
        MaxEntModel.load(model)


# --- output directory: refused unless --force, locked while written -----------------------------
def test_existing_model_is_not_overwritten_without_force(model, corpus, capsys):
    before = open(weights_path(model), "rb").read()
    rc, _, err = sampledlm("maxent", "train", "--train", corpus["train"], "--valid", corpus["valid"], "-o", model,
                           "--epochs", "1", "--seed", "5", capsys=capsys)
    one_line_error(rc, err, "--force")
    assert open(weights_path(model), "rb").read() == before
    rc, _, err = sampledlm("maxent", "train", "--train", corpus["train"], "--valid", corpus["valid"], "-o", model,
                           "--epochs", "1", "--seed", "5", "--force", capsys=capsys)
    assert rc == 0, err
    assert open(weights_path(model), "rb").read() != before
    assert [f for f in os.listdir(model) if f.endswith(".safetensors")] == [os.path.basename(weights_path(model))]
    rc, out, _ = sampledlm("maxent", "train", "--help", capsys=capsys)
    assert "--force" in out


def test_force_never_writes_into_a_foreign_directory(tmp_path, corpus, capsys):
    d = tmp_path / "notes"
    d.mkdir()
    (d / "todo.txt").write_text("keep me")
    rc, _, err = sampledlm("maxent", "train", "--train", corpus["train"], "--valid", corpus["valid"], "-o", d,
                           "--force", capsys=capsys)
    one_line_error(rc, err, "not empty")
    assert sorted(os.listdir(d)) == ["todo.txt"]


def test_a_locked_directory_is_refused(tmp_path, corpus, capsys):
    from sampledlm import store

    out = str(tmp_path / "busy")
    with store.lock_directory(out):
        rc, _, err = sampledlm("maxent", "train", "--train", corpus["train"], "--valid", corpus["valid"], "-o", out,
                               "--epochs", "1", capsys=capsys)
    one_line_error(rc, err, "another sampledlm process")
    assert not os.path.exists(os.path.join(out, "config.json"))


# --- bad flags, empty validation text, divergence: refused, nothing saved ------------------------
@pytest.mark.parametrize("flag,value", [("--lr", "nan"), ("--lr", "inf"), ("--neg-rate", "nan"), ("--l2", "inf"),
                                        ("--min-improvement", "nan"), ("--lr", "0")])
def test_bad_numeric_flags_are_refused_at_parse_time(tmp_path, corpus, capsys, flag, value):
    out = tmp_path / "m"
    rc, _, err = sampledlm("maxent", "train", "--train", corpus["train"], "--valid", corpus["valid"], "-o", out,
                           flag, value, capsys=capsys)
    assert rc == 2 and flag in err, err
    assert not out.exists()


def test_empty_validation_file_is_refused(tmp_path, corpus, capsys):
    out = tmp_path / "m"
    rc, _, err = sampledlm("maxent", "train", "--train", corpus["train"], "--valid", corpus["empty"], "-o", out,
                           capsys=capsys)
    one_line_error(rc, err, corpus["empty"])
    assert not out.exists()


def test_divergence_stops_with_an_error_and_saves_nothing(tmp_path, model, corpus, capsys):
    out = tmp_path / "m"
    args = ["--train", corpus["train"], "--valid", corpus["valid"], "--epochs", "3", "--lr", "1e300",
            "--optimizer", "sgd"]
    rc, _, err = sampledlm("maxent", "train", *args, "-o", out, capsys=capsys)
    assert rc == 1 and "diverged" in err, err
    assert not out.exists()
    # replacing an existing model: a diverged run leaves the old one whole
    before = eval_ppl(model, corpus["test"], capsys)
    rc, _, err = sampledlm("maxent", "train", *args, "-o", model, "--force", capsys=capsys)
    assert rc == 1 and "diverged" in err, err
    assert eval_ppl(model, corpus["test"], capsys) == before


# --- config.json fields of the wrong type --------------------------------------------------------
@pytest.mark.parametrize("keys,value", [
    (("maxent", "alpha"), "0.5"), (("maxent", "num_words"), "52"), (("maxent", "hash_size"), "x"),
    (("maxent", "calibrated"), "yes"), (("maxent", "objective"), 3), (("maxent", "features", "names"), "bigram"),
    (("maxent", "features", "trigger_window"), 2.5), (("maxent", "sizes"), []), (("maxent", "weights"), 7),
    (("maxent",), [1, 2]), (("vocab",), "abc"), (("text_options",), "lines"), (("training",), [1]),
    (("maxent", "features"), None), (("maxent", "alpha"), None),
])
def test_mistyped_config_fields_give_one_line(model, corpus, capsys, keys, value):
    config = read_config(model)
    node = config
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    write_config(model, config)
    rc, _, err = sampledlm("maxent", "eval", model, "--test", corpus["test"], capsys=capsys)
    one_line_error(rc, err, "config.json")


# --- one name per knob; --train/--valid and --test like the other commands ---------------------
def test_min_improvement_is_the_name_and_min_gain_a_hidden_alias(tmp_path, corpus, capsys):
    rc, out, _ = sampledlm("maxent", "train", "--help", capsys=capsys)
    assert "--min-improvement" in out and "--min-gain" not in out
    base = ["maxent", "train", "--train", corpus["train"], "--valid", corpus["valid"], "--epochs", "1"]
    rc, _, err = sampledlm(*base, "-o", tmp_path / "a", "--min-improvement", "0.01", capsys=capsys)
    assert rc == 0, err
    assert read_config(str(tmp_path / "a"))["training"]["config"]["min_gain"] == 0.01
    rc, _, err = sampledlm(*base, "-o", tmp_path / "b", "--min-gain", "0.02", capsys=capsys)
    assert rc == 0 and "deprecated" in err, err
    assert read_config(str(tmp_path / "b"))["training"]["config"]["min_gain"] == 0.02
    rc, _, err = sampledlm(*base, "-o", tmp_path / "c", "--min-gain", "0.02", "--min-improvement", "0.01",
                           capsys=capsys)
    one_line_error(rc, err, "--min-improvement")


def test_train_and_eval_take_file_options(tmp_path, corpus, capsys):
    out = str(tmp_path / "m")
    rc, _, err = sampledlm("maxent", "train", "--train", corpus["train"], "--valid", corpus["valid"], "-o", out,
                           "--epochs", "1", capsys=capsys)
    assert rc == 0, err
    rc, opt_out, err = sampledlm("maxent", "eval", out, "--test", corpus["test"], "--json", capsys=capsys)
    assert rc == 0, err
    rc, pos_out, err = sampledlm("maxent", "eval", out, corpus["test"], "--json", capsys=capsys)
    def numbers(out):  # the summary without its timings (seconds_load, seconds_score)
        return {k: v for k, v in json.loads(out).items() if not k.startswith("seconds_")}

    assert rc == 0 and numbers(opt_out) == numbers(pos_out)
    rc, _, err = sampledlm("maxent", "eval", out, capsys=capsys)
    one_line_error(rc, err, "--test")
    rc, _, err = sampledlm("maxent", "train", "--train", corpus["train"], "-o", tmp_path / "n", capsys=capsys)
    one_line_error(rc, err, "--valid")
    rc, out_help, _ = sampledlm("maxent", "train", "--help", capsys=capsys)
    assert "--train" in out_help and "--valid" in out_help and "deprecated" in out_help


# --- the envelope, checksums, atomic saves, legacy directories, LanguageModel --------------------
def test_model_directory_uses_the_envelope(model):
    from sampledlm import store

    config, family = store.read_config(model)
    assert family == "maxent" and config["format"] == "sampledlm-model" and config["version"] == 2
    vocab = store.load_vocab_checked(model, config)
    assert config["vocab"] == {"size": len(vocab), "fingerprint": vocab.fingerprint()}
    assert config["text_options"]["tokenizer"] == "whitespace"
    tensors, _ = store.load_tensors(weights_path(model))  # checksummed
    assert set(config["maxent"]["sizes"]) == set(tensors)


def test_damaged_weights_are_refused(model, corpus, capsys):
    path = weights_path(model)
    data = bytearray(open(path, "rb").read())
    data[-3] ^= 0xFF
    open(path, "wb").write(bytes(data))
    rc, _, err = sampledlm("maxent", "eval", model, "--test", corpus["test"], capsys=capsys)
    one_line_error(rc, err, "checksum")


def test_load_model_gives_a_maxent_language_model(model, corpus, capsys):
    from sampledlm.data.corpus import load_ids
    from sampledlm.loader import load_model
    from sampledlm.maxent.lm import MaxEntLM

    lm = load_model(model)
    assert isinstance(lm, MaxEntLM) and lm.family == "maxent"
    ids = np.asarray(load_ids(corpus["test"], lm.vocab))
    lp = lm.logprobs(ids)
    assert lp.dtype == np.float64 and lp.shape == ids.shape and np.all(lp < 0)
    assert lm.perplexity(ids) == pytest.approx(eval_ppl(model, corpus["test"], capsys), rel=1e-12)
    np.testing.assert_array_equal(lm.logprobs(ids, independent=True), lp)  # n-gram features stop at <s>
    assert "maxent" in lm.describe()
    assert lm.text_options["tokenizer"] == "whitespace"


def test_independent_scoring_stops_trigger_windows_at_the_sentence(tmp_path, corpus):
    from sampledlm.data.vocab import EOS_ID
    from sampledlm.loader import load_model
    from sampledlm.data.corpus import load_ids

    out = str(tmp_path / "trig")
    r = sampledlm_subprocess("maxent", "train", "--train", corpus["train"], "--valid", corpus["valid"], "-o", out,
                             "--epochs", "1", "--features", "bigram,trigger", "--trigger-min-count", "1",
                             "--trigger-window", "4", "--trigger-gap", "1")
    assert r.returncode == 0, r.stderr
    lm = load_model(out)
    ids = np.asarray(load_ids(corpus["test"], lm.vocab))[:200]
    ends = np.flatnonzero(ids == EOS_ID)
    alone = np.concatenate([lm.logprobs(ids[s:e + 1]) for s, e in zip(np.r_[0, ends[:-1] + 1], ends)])
    n = ends[-1] + 1
    np.testing.assert_allclose(lm.logprobs(ids[:n], independent=True), alone, rtol=1e-12)
    assert not np.allclose(lm.logprobs(ids[:n]), alone)  # running text: the windows reach back


def test_a_kill_mid_save_leaves_the_previous_model(model, corpus, monkeypatch):
    from sampledlm import store
    from sampledlm.maxent import MaxEntModel

    m, vocab = MaxEntModel.load(model)
    old_theta = m.theta.copy()
    m.theta = m.theta + 1.0

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "write_json", killed)  # config.json (the commit point) is never written
    with pytest.raises(KeyboardInterrupt):
        m.save(model, vocab)
    monkeypatch.undo()
    again, _ = MaxEntModel.load(model)
    np.testing.assert_array_equal(again.theta, old_theta)
    m.save(model, vocab)  # a completed save replaces it, and leaves one weights file
    np.testing.assert_array_equal(MaxEntModel.load(model)[0].theta, old_theta + 1.0)
    assert [f for f in os.listdir(model) if f.endswith(".safetensors")] == [os.path.basename(weights_path(model))]


def _make_legacy(model_dir: str) -> None:
    """Rewrite a model directory in the format written before the envelope (sampledlm-maxent-1)."""
    from safetensors.numpy import save_file

    from sampledlm import store

    config = read_config(model_dir)
    tensors, _ = store.load_tensors(weights_path(model_dir))
    os.remove(weights_path(model_dir))
    save_file({k: v.numpy() for k, v in tensors.items()}, os.path.join(model_dir, "model.safetensors"))
    sec = config["maxent"]
    legacy = {"format": "sampledlm-maxent-1", "objective": sec["objective"], "alpha": sec["alpha"],
              "calibrated": sec["calibrated"], "num_words": sec["num_words"], "hash_size": sec["hash_size"],
              "features": sec["features"], "feature_counts": config["feature_counts"],
              "vocab_fingerprint": config["vocab"]["fingerprint"], "training": config["training"]}
    write_config(model_dir, legacy)


def test_legacy_directories_still_load_and_are_checked(model, corpus, capsys):
    before = eval_ppl(model, corpus["test"], capsys)
    _make_legacy(model)
    assert eval_ppl(model, corpus["test"], capsys) == before
    from safetensors.numpy import load_file, save_file

    from sampledlm.data.corpus import load_ids
    from sampledlm.loader import load_model

    lm = load_model(model)
    assert lm.perplexity(np.asarray(load_ids(corpus["test"], lm.vocab))) == pytest.approx(before, rel=1e-12)

    path = os.path.join(model, "model.safetensors")
    t = load_file(path)
    t["gptr"][3] = 10 ** 9
    save_file(t, path)
    rc, _, err = sampledlm("maxent", "eval", model, "--test", corpus["test"], capsys=capsys)
    one_line_error(rc, err, "model.safetensors", "gptr")


# --- the binary rule and calibration are the objectives' --------------------------------------
def test_calibration_is_the_binary_objectives():
    from sampledlm.maxent import FeatureSet, FeatureSpec, MaxEntModel
    from sampledlm.objectives.binary import Binary

    ids = np.array([2, 3, 4, 0, 3, 4, 2, 0] * 5, dtype=np.int32)
    m = MaxEntModel(FeatureSet.build(ids, 6, FeatureSpec.parse("bigram")), "binary", alpha=0.25)
    m.u = np.linspace(-1, 1, 6)
    ctx = m.context(ids)
    before = m.log_prob_targets(ctx, ids.astype(np.int64))
    u0 = m.u.copy()
    m.calibrate()
    np.testing.assert_allclose(m.u - u0, Binary(neg_rate=0.25).log_alpha)
    np.testing.assert_allclose(m.log_prob_targets(ctx, ids.astype(np.int64)), before, rtol=1e-12)
    m.calibrate()  # exactly once
    np.testing.assert_allclose(m.u - u0, Binary(neg_rate=0.25).log_alpha)
    theirs = Binary(neg_rate=0.25)
    theirs.calibrated.fill_(True)  # the objective's view of the calibrated model
    np.testing.assert_allclose(theirs.log_prob(m, ctx).double().numpy()[np.arange(len(ids)), ids], before, atol=1e-5)


def test_no_seed_or_issue_references_in_maxent_code():
    files = list((SRC / "maxent").glob("*.py")) + [SRC / "cli" / "maxent.py", SRC / "demo" / "maxent.py"]
    for f in files:
        text = f.read_text(encoding="utf-8")
        assert not re.search(r"seed 00\d", text), f
        assert not re.search(r"\bissue\s*#?\d", text, re.IGNORECASE), f


def test_running_text_applies_to_trigger_models_only(tmp_path, run_in_process):
    """Trigger windows reach across sentence starts in running text (eval's default): --running-text is theirs;
    without triggers the history stops at <s>, and the flag is refused."""
    (tmp_path / "t.txt").write_text("a b c d\nb c a d\nc a b\n" * 30)
    for name, features in (("trig", ["bigram,trigger", "--trigger-min-count", "1"]), ("plain", ["bigram"])):
        r = run_in_process("maxent", "train", "--train", "t.txt", "--valid", "t.txt", "--epochs", "1", "--features",
                           *features, "-o", name, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    r = run_in_process("eval", "trig", "--test", "t.txt", "--per-sentence", "--running-text", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_in_process("eval", "plain", "--test", "t.txt", "--running-text", cwd=tmp_path)
    assert r.returncode == 1 and "each sentence on its own" in r.stderr, r.stderr
