"""The command line refuses what it would silently ignore (an empty --valid, flags that do not apply, more classes
than words), leaves quietly when its reader stops reading, and shows each flag's default once, readably."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from helpers import assert_one_line_error, synthetic_sentences, write_corpus
from sampledlm.cli import cli


def error_line(r) -> str:
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    return lines[0].removeprefix("sampledlm: error: ")


@pytest.mark.parametrize("binary", [False, True])
def test_ngram_train_refuses_an_empty_validation_text_before_writing(tiny_corpus, tmp_path, run_in_process, binary):
    (tmp_path / "empty.txt").write_text("\n  \n")
    out = tmp_path / ("kn.bin" if binary else "kn.arpa")
    r = run_in_process("ngram", "train", "--train", "train.txt", "--valid", "empty.txt", "-o", str(out),
                       *(["--binary"] if binary else []), cwd=tmp_path)
    assert_one_line_error(r.returncode, r.stderr, "empty.txt: no sentences (empty file or blank lines only)", out)


@pytest.mark.parametrize("flags,message", [
    (["--k", "5"], "--k is add-k's k: give it with --smoothing addk (not mkn)"),
    (["--smoothing", "wb", "--k", "1"], "--k is add-k's k: give it with --smoothing addk (not wb)"),
    (["--workers", "4"], "--workers sizes the local Dask cluster: give it with --engine dask and without --scheduler"),
    (["--engine", "dask", "--scheduler", "tcp://127.0.0.1:1", "--workers", "2"],
     "--workers sizes the local Dask cluster: give it with --engine dask and without --scheduler"),
])
def test_ngram_train_refuses_flags_of_other_settings(tiny_corpus, tmp_path, run_in_process, flags, message):
    r = run_in_process("ngram", "train", "--train", "train.txt", "-o", "m.arpa", *flags, cwd=tmp_path)
    assert error_line(r) == message and not (tmp_path / "m.arpa").exists()


def test_a_setting_from_a_config_file_counts_as_given(tiny_corpus, tmp_path, run_in_process):
    (tmp_path / "s.toml").write_text("k = 0.5\n")
    r = run_in_process("ngram", "train", "--train", "train.txt", "-o", "m.arpa", "--config", "s.toml", cwd=tmp_path)
    assert error_line(r) == "--k is add-k's k: give it with --smoothing addk (not mkn)"
    r = run_in_process("ngram", "train", "--train", "train.txt", "-o", "m.arpa", "--config", "s.toml",
                       "--smoothing", "addk", cwd=tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("flag", ["--batch-wait-ms", "--max-batch"])
def test_serve_refuses_batch_settings_with_no_batching(tmp_path, run_in_process, flag):
    r = run_in_process("serve", "kn3.arpa", "--no-batching", flag, "5", cwd=tmp_path)
    assert error_line(r) == f"{flag} shapes the batches that --no-batching turns off: give one or the other"


@pytest.mark.parametrize("subset", ["fixed", "variable"])
def test_maxent_refuses_a_negative_subset_for_the_softmax(tiny_corpus, tmp_path, run_in_process, subset):
    r = run_in_process("maxent", "train", "--train", "train.txt", "--valid", "valid.txt", "-o", "melm", "--epochs",
                       "1", "--objective", "softmax", "--neg-subset", subset, cwd=tmp_path)
    assert_one_line_error(r.returncode, r.stderr, "--neg-subset chooses the binary objective's negatives; the "
                                                  "softmax objective has none", tmp_path / "melm")


def test_classes_refuses_more_classes_than_words(tmp_path, run_in_process):
    (tmp_path / "t.txt").write_text(" ".join(f"w{i}" for i in range(47)) + "\n")
    r = run_in_process("classes", "t.txt", "--classes", "100", "-o", "c.txt", cwd=tmp_path)
    assert_one_line_error(r.returncode, r.stderr, "--classes 100: at most V = 49, the vocabulary's size",
                          tmp_path / "c.txt")
    r = run_in_process("classes", "t.txt", "--classes", "49", "-o", "c.txt", cwd=tmp_path)
    assert r.returncode == 0 and "49 classes over 49 words" in r.stderr


@pytest.mark.parametrize("command", ["score", "rescore", "ngram"])
def test_a_reader_that_stops_reading_ends_the_command_quietly(tiny_corpus, tmp_path, command):
    """Under every click release (issue 54: click 8.5 exits 1 on a closed pipe in its own main, which the
    project no longer calls), `| head -c 100` ends the command with status 0 and nothing on stderr."""
    model = tmp_path / "k2.arpa"
    subprocess.run([sys.executable, "-m", "sampledlm", "ngram", "train", "--train", str(tiny_corpus["train"]),
                    "--order", "2", "-o", str(model)], check=True, capture_output=True)
    sents = tiny_corpus["train"].read_text().splitlines()
    (tmp_path / "l.jsonl").write_text("".join(json.dumps({"id": f"u{i}", "hyps": [{"words": s, "am": -1, "lm": -2}]})
                                              + "\n" for i, s in enumerate(sents * 10)))
    # the n-gram model of a larger text: tiny_corpus's trigram ARPA (63,755 bytes) fits in a 64 KiB pipe, so the
    # command could finish its write before the reader closed, and then print its summary (a race, seen in CI)
    big = write_corpus(tmp_path / "big.txt", synthetic_sentences(3000, vocab_size=400, seed=1))  # ARPA ~470 KB
    args = {"score": [str(model), str(tiny_corpus["train"]), "--per-word"],
            "rescore": [str(model), str(tmp_path / "l.jsonl")],
            "ngram": ["train", "--train", str(big), "--order", "3", "-o", "-"]}[command]
    p = subprocess.Popen([sys.executable, "-m", "sampledlm", command, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.read(100)  # as `| head -c 100`: the command writes far more than a pipe holds
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and err == ""


def help_text(*path) -> str:
    r = CliRunner().invoke(cli, [*path, "--help"], terminal_width=100)
    assert r.exit_code == 0
    return re.sub(r"\s+", " ", r.output)


@pytest.mark.parametrize("path", [("rescore",), ("ngram", "train"), ("ngram", "prune"), ("train",), ("serve",),
                                  ("embed", "train"), ("maxent", "train")])
def test_each_flag_shows_one_readable_default(path):
    text = help_text(*path)
    assert "None" not in text
    assert not re.search(r"\[default:[^\]]*\] *\[default:", text)


def test_the_defaults_the_help_explains_are_shown_once():
    text = help_text("train")
    assert "[default: 4 d] [x>=1]" in text and "[default: the training --bptt] [x>=1]" in text
    assert "--am-scale FLOAT Weight of the acoustic score. [default: 1.0]" in help_text("rescore")
    assert "(1 = add-one). [default: 1.0]" in help_text("ngram", "train")


@pytest.mark.parametrize("args,message", [
    (["classes", "train.txt", "--seed", "5", "-o", "out.txt"], "--seed starts --from-model's k-means"),
    (["classes", "train.txt", "--vocab", "v.txt", "--min-count", "3", "-o", "out.txt"],
     "--vocab gives the words; --min-count and --max-size choose them"),
    (["maxent", "train", "--train", "train.txt", "--valid", "train.txt", "--trigger-window", "5", "-o", "out"],
     "--trigger-window shapes trigger features, which --features unigram,bigram,trigram does not use"),
    (["maxent", "train", "--train", "train.txt", "--valid", "train.txt", "--features", "", "-o", "out"],
     "--features is empty"),
    (["ngram", "train", "--train", "train.txt", "--smoothing", "wb", "--temp-dir", ".", "-o", "out.txt"],
     "--temp-dir holds the spilled runs of bounded-memory estimation, which --smoothing wb does not use"),
    (["generate", "kn.arpa", "--prefix", "a b c d", "--max-words", "3"], "--max-words 3 counts the prefix"),
])
def test_settings_that_would_go_unused_are_refused(tiny_corpus, tmp_path, run_in_process, args, message):
    assert run_in_process("vocab", "train.txt", "-o", "v.txt", cwd=tmp_path).returncode == 0
    assert run_in_process("ngram", "train", "--train", "train.txt", "--order", "2", "-o", "kn.arpa",
                          cwd=tmp_path).returncode == 0
    r = run_in_process(*args, cwd=tmp_path)
    assert error_line(r).startswith(message), r.stderr
    assert not (tmp_path / "out.txt").exists() and not (tmp_path / "out").exists()


def test_vocab_counts_its_entries_as_words_unk_and_end(tiny_corpus, tmp_path, run_in_process):
    r = run_in_process("vocab", "train.txt", "-o", "v.txt", cwd=tmp_path)
    entries = len((tmp_path / "v.txt").read_text().splitlines())
    assert f"{entries:,} entries ({entries - 2:,} word types, <unk> and </s>)" in r.stderr, r.stderr


@pytest.mark.parametrize("flags", [[], ["--memory", "8G"], ["--smoothing", "wb"], ["--smoothing", "katz"]])
def test_ngram_train_refuses_an_order_the_text_cannot_support(tmp_path, run_in_process, flags):
    """Issue 54: ``--order 100`` on short sentences ended in an IndexError (bounded path) or wrote a model with
    empty orders (in memory); both refuse now, naming the highest order the text supports."""
    (tmp_path / "t.txt").write_text("a b\nc\n")
    r = run_in_process("ngram", "train", "--train", "t.txt", "--order", "100", "-o", "m.arpa", *flags, cwd=tmp_path)
    assert_one_line_error(r.returncode, r.stderr, "--order 100: the training text has no 5-grams (its longest "
                                                  "sentence has 2 words, 4 tokens with <s> and </s>); use --order 4 "
                                                  "or less", tmp_path / "m.arpa")
    r = run_in_process("ngram", "train", "--train", "t.txt", "--order", "4", "-o", "m.arpa", *flags, cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "m.arpa").exists()


def test_the_old_bf16_flag_still_works_and_says_it_is_deprecated(tiny_corpus, tmp_path, capsys):
    from helpers import run_cli

    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "--bf16", "--epochs", "1", "--embed-dim", "8", "--hidden", "16", "-o",
                            str(tmp_path / "r")], capsys)
    assert code == 0, err
    assert "sampledlm: warning: --bf16 is deprecated; use --precision bf16" in err
    import json

    assert json.loads((tmp_path / "r" / "config.json").read_text())["train"]["precision"] == "bf16"


def test_vocab_file_words_without_counts_take_the_training_texts(tiny_corpus, tmp_path, capsys):
    """A --vocab file without </s> (or a plain word list) gave those entries count 0, so NCE never drew </s> as a
    noise word; they are now counted in the training text, said in one line, and the run's vocab.txt holds them."""
    from collections import Counter

    from helpers import run_cli

    from sampledlm.data.vocab import Vocab

    text = tiny_corpus["train"].read_text().split("\n")
    sents = [line.split() for line in text if line.strip()]
    counts = Counter(w for s in sents for w in s)
    (tmp_path / "counted.txt").write_text("".join(f"{w}\t{c}\n" for w, c in counts.items()))  # no </s>, no <unk>
    (tmp_path / "plain.txt").write_text("".join(f"{w}\n" for w in counts))  # a plain word list
    for name in ("counted", "plain"):
        code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                                "--vocab", str(tmp_path / f"{name}.txt"), "--objective", "nce", "--epochs", "1",
                                "-d", "8", "--hidden", "16", "-o", str(tmp_path / name)], capsys)
        assert code == 0, err
        assert "counted in the training text" in err and "</s>" in err and "<unk>" not in err
        v = Vocab.load(str(tmp_path / name / "vocab.txt"))
        assert v.counts[v.index["</s>"]] == len(sents)
        assert all(v.counts[v.index[w]] == c for w, c in counts.items())
    # the file `sampledlm vocab` writes gives <unk> count 0: the documented workflow, so nothing to say
    assert run_cli(["vocab", str(tiny_corpus["train"]), "-o", str(tmp_path / "ours.txt")], capsys)[0] == 0
    code, _, err = run_cli(["train", "--train", str(tiny_corpus["train"]), "--valid", str(tiny_corpus["valid"]),
                            "--vocab", str(tmp_path / "ours.txt"), "--epochs", "1", "-d", "8", "--hidden", "16",
                            "-o", str(tmp_path / "ours")], capsys)
    assert code == 0, err
    assert "taken from the training text" not in err


@pytest.mark.parametrize("rank,every_rank,printed", [("0", True, True), ("1", True, False), ("1", False, True),
                                                      (None, True, True)])
def test_under_torchrun_an_error_of_every_rank_is_printed_by_rank_0_alone(monkeypatch, capsys, rank, every_rank,
                                                                         printed):
    """A checkpoint of another rank count was refused once per rank (3 identical lines under --nproc-per-node 3);
    an error that is a rank's own still prints from that rank."""
    import click

    from sampledlm.cli import main
    from sampledlm.errors import UserError

    @click.command()
    def refuse():
        raise UserError("run: written by a run with 2 rank(s)", every_rank=every_rank)

    if rank is None:
        monkeypatch.delenv("RANK", raising=False)
    else:
        monkeypatch.setenv("RANK", rank)
    with pytest.raises(SystemExit) as e:
        main([], command=refuse)
    assert e.value.code == 1
    assert ("written by a run with 2 rank(s)" in capsys.readouterr().err) == printed


def test_two_inputs_from_standard_input_are_refused(tmp_path):
    """`ngram train --train - --valid -` reported the training text's perplexity as the validation perplexity."""
    r = subprocess.run([sys.executable, "-m", "sampledlm", "ngram", "train", "--train", "-", "--valid", "-", "--order",
                        "2", "-o", "-"], input="a b c\nb c a\n", capture_output=True, text=True, cwd=tmp_path)
    assert error_line(r) == ("--train and --valid both read standard input, which can be read only once: give a file for "
                             "all but one")
