"""Each model reads text with its own options wherever it is used: a mixture whatever the order of its models,
rescore's hypotheses as `score` reads text; rescore reports the words outside the model's vocabulary and can fold
case (fault campaign cases)."""

from __future__ import annotations

import json

import pytest

SENTS = ["the cat sat on the mat", "a dog ran under the rug", "the dog sat", "a cat ran on the rug"] * 15


@pytest.fixture
def models(tmp_path, run_in_process):
    (tmp_path / "train.txt").write_text("\n".join(SENTS) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(SENTS[:8]) + "\n")
    (tmp_path / "upper.txt").write_text("\n".join(s.upper() for s in SENTS[:8]) + "\n")
    for args in (["ngram", "train", "--train", "train.txt", "--order", "2", "-o", "kn2.arpa"],
                 ["train", "--train", "train.txt", "--valid", "valid.txt", "--lowercase", "--epochs", "1", "-d", "4",
                  "--hidden", "6", "--threads", "1", "-o", "lower"],
                 ["train", "--train", "train.txt", "--valid", "valid.txt", "--epochs", "1", "-d", "4", "--hidden",
                  "6", "--threads", "1", "-o", "plain"]):
        r = run_in_process(*args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    return tmp_path


def ppl(run_in_process, cwd, *args):
    r = run_in_process("eval", *args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["ppl"]


def test_a_mixture_reads_text_the_same_way_in_either_order(models, run_in_process):
    a = ppl(run_in_process, models, "lower", "--test", "upper.txt", "--mix", "kn2.arpa", "--weights", "0.5")
    b = ppl(run_in_process, models, "kn2.arpa", "--test", "upper.txt", "--mix", "lower", "--weights", "0.5")
    assert a == pytest.approx(b, rel=1e-9)
    lower_alone = ppl(run_in_process, models, "lower", "--test", "upper.txt")
    assert lower_alone < 50  # it lower-cases the upper-case text: no <unk>


def test_models_that_read_text_differently_are_not_mixed(models, run_in_process):
    r = run_in_process("eval", "plain", "--test", "valid.txt", "--mix", "lower", cwd=models)
    assert r.returncode == 1 and "read text differently" in r.stderr and "lowercase" in r.stderr


def nbest(path, upper):
    hyps = [{"words": (s.upper() if upper else s).split(), "am": -1.0 * i, "lm": -2.0} for i, s in
            enumerate(SENTS[:3])]
    path.write_text("".join(json.dumps({"id": f"u{k}", "ref": SENTS[0].upper() if upper else SENTS[0],
                                        "hyps": hyps}) + "\n" for k in range(3)))
    return path


def test_rescore_reads_hypotheses_with_the_models_text_options(models, run_in_process):
    nbest(models / "up.jsonl", True)
    r = run_in_process("rescore", "lower", "up.jsonl", "--json", cwd=models)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["oov_words"] == 0  # lower-cased as the model was trained


def test_rescore_warns_about_out_of_vocabulary_words_and_folds_case_on_request(models, run_in_process):
    nbest(models / "up.jsonl", True)
    r = run_in_process("rescore", "kn2.arpa", "up.jsonl", "--json", cwd=models)
    s = json.loads(r.stdout)
    assert s["oov_words"] == s["hypothesis_words"] > 0
    assert "100.0% of the hypothesis words" in r.stderr and "--lowercase" in r.stderr
    r = run_in_process("rescore", "kn2.arpa", "up.jsonl", "--json", "--lowercase", cwd=models)
    assert json.loads(r.stdout)["oov_words"] == 0 and "warning" not in r.stderr
    (models / "zz.jsonl").write_text(json.dumps({"id": "u", "hyps": [{"words": "zzqx qqzx", "am": -1, "lm": -2}]})
                                     + "\n")  # words of no case the model knows: --lowercase would not help
    r = run_in_process("rescore", "kn2.arpa", "zz.jsonl", "--json", cwd=models)
    assert "100.0% of the hypothesis words" in r.stderr and "--lowercase" not in r.stderr


@pytest.mark.parametrize("args,message", [
    (["--tune-first-pass"], "--tune-first-pass tunes on development data"),
    (["--one-best", "x.txt", "-o", "x.txt"], "name the same file"),
    (["-o", "up.jsonl", "--force"], "is the input up.jsonl"),
])
def test_rescore_refuses_meaningless_combinations(models, run_in_process, args, message):
    nbest(models / "up.jsonl", False)
    before = (models / "up.jsonl").read_bytes()
    r = run_in_process("rescore", "kn2.arpa", "up.jsonl", *args, cwd=models)
    assert r.returncode == 1 and message in r.stderr
    assert (models / "up.jsonl").read_bytes() == before


@pytest.mark.parametrize("line,message", [
    ('{"id": "a", "hyps": [{"words": "x y", "am": true, "lm": 1}]}', r"hyps\[0\]\.am: true is not a number"),
    ('{"id": null, "hyps": [{"words": "x y", "am": 1, "lm": 1}]}', "id: a string or an integer, not null"),
    ('{"id": "a", "hyps": [{"words": 7, "am": 1, "lm": 1}]}', r"hyps\[0\]\.words: a string or a list of strings, not 7"),
    ('{"id": "a", "ref": {"x": 1}, "hyps": [{"words": "x", "am": 1, "lm": 1}]}', "ref: a string or a list of strings"),
])
def test_json_nbest_fields_of_the_wrong_type_are_refused(tmp_path, line, message):
    from sampledlm.errors import UserError
    from sampledlm.use.nbest import read_jsonl

    (tmp_path / "l.jsonl").write_text(line + "\n")
    with pytest.raises(UserError, match=message):
        read_jsonl(str(tmp_path / "l.jsonl"))


def test_json_nbest_words_may_be_a_list(tmp_path):
    from sampledlm.use.nbest import read_jsonl

    (tmp_path / "l.jsonl").write_text('{"id": 3, "ref": ["no", "it"], "hyps": [{"words": ["no", "it"], "am": 1, '
                                      '"lm": "2.5"}]}\n')
    nb = read_jsonl(str(tmp_path / "l.jsonl"))[0]
    assert nb.id == "3" and nb.ref == ["no", "it"] and nb.hyps[0].words == ["no", "it"] and nb.hyps[0].lm == 2.5


def test_a_kaldi_directory_missing_ac_cost_is_named_as_kaldi(tmp_path):
    from sampledlm.errors import UserError
    from sampledlm.use.nbest import read_nbest

    d = tmp_path / "nb"
    d.mkdir()
    (d / "text").write_text("u-1 a b\n")
    (d / "lm_cost").write_text("u-1 1.0\n")
    with pytest.raises(UserError, match="no 'ac_cost' file \\(Kaldi n-best"):
        read_nbest(str(d), "auto")


def test_option_sets_written_with_fewer_keys_mean_the_same():
    """A config written before an option existed records fewer keys: the same way of reading text, not a conflict."""
    from types import SimpleNamespace

    from sampledlm.lm import common_text_options

    old = SimpleNamespace(text_options={"tokenizer": "whitespace", "lowercase": True})
    new = SimpleNamespace(text_options={"tokenizer": "whitespace", "lowercase": True, "numbers": False,
                                        "gutenberg": False, "sentences": None, "encoding_errors": "strict"})
    assert common_text_options([old, new])["lowercase"] is True
    assert common_text_options([SimpleNamespace(text_options=None), old])["lowercase"] is True


def test_score_takes_evals_text_flags(models, run_in_process):
    """`score --lowercase` reads the text as `eval --lowercase` does (the flags override the model's own)."""
    r = run_in_process("score", "kn2.arpa", "upper.txt", "--lowercase", "--jsonl", cwd=models)
    assert r.returncode == 0, r.stderr
    scored = json.loads(r.stderr.strip().splitlines()[-1])["ppl"]
    assert scored == pytest.approx(ppl(run_in_process, models, "kn2.arpa", "--test", "upper.txt", "--lowercase"),
                                   rel=1e-9)
    assert scored < ppl(run_in_process, models, "kn2.arpa", "--test", "upper.txt")  # the flag did something
