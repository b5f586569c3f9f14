"""``sampledlm rescore``: SRILM word counts are checked, references without words give no WER (null, n/a, and no
tuning), the lattice-only flags are refused on n-best lists, --json holds the new 1-best, and -o writes what its
name says."""

from __future__ import annotations

import json

import pytest

from sampledlm.errors import UserError
from sampledlm.use.nbest import read_srilm_file


@pytest.fixture(scope="module")
def samples(samples_kn3):
    """``sampledlm samples``'s files, kn3.arpa, and references without words."""
    d = samples_kn3
    (d / "empty-refs.txt").write_text("".join(f"{line.split()[0]}\n" for line in (d / "refs.txt").read_text()
                                              .splitlines()))
    (d / "empty-refs.jsonl").write_text("".join(json.dumps({**json.loads(line), "ref": ""}) + "\n"
                                                for line in (d / "nbest.jsonl").read_text().splitlines()))
    return d


@pytest.mark.parametrize("line,message", [
    ("-40.14 -22.4 11 if it\n", "u.nbest:1: word count 11, but 2 words follow"),
    ("-40.14 -22.4 -2 if it\n", "u.nbest:1: word count '-2' is not a whole number"),
    ("-40.14 -22.4 3 <s> if it </s>\n", "u.nbest:1: word count 3, but 2 words follow"),
])
def test_a_word_count_that_is_not_the_lines_is_refused(tmp_path, line, message):
    (tmp_path / "u.nbest").write_text(line)
    with pytest.raises(UserError) as e:
        read_srilm_file(str(tmp_path / "u.nbest"))
    assert str(e.value) == f"{tmp_path}/{message}"


def test_the_word_count_may_leave_out_or_count_the_sentence_markers(tmp_path):
    (tmp_path / "u.nbest").write_text("-1 -2 2 <s> if it </s>\n-1 -2 4 <s> if it </s>\n-1 -2 0\n")
    assert [h.words for h in read_srilm_file(str(tmp_path / "u.nbest")).hyps] == [["if", "it"], ["if", "it"], []]


def test_references_without_words_give_no_wer(samples, run_in_process):
    for args in (["empty-refs.jsonl"], ["lattices", "--refs", "empty-refs.txt"]):
        r = run_in_process("rescore", "kn3.arpa", *args, "--json", cwd=samples)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the JSON output"))
        assert doc["reference_words"] == 0 and doc["first_pass_wer"] is None and doc["rescored_wer"] is None
        r = run_in_process("rescore", "kn3.arpa", *args, cwd=samples)
        assert r.returncode == 0 and "WER: n/a (the references hold no words)" in r.stderr and "inf" not in r.stderr


@pytest.mark.parametrize("dev,refs,named", [("empty-refs.jsonl", [], "empty-refs.jsonl"),
                                            ("lattices", ["--tune-refs", "empty-refs.txt"], "empty-refs.txt")])
def test_tuning_on_references_without_words_is_refused(samples, run_in_process, dev, refs, named):
    r = run_in_process("rescore", "kn3.arpa", "nbest.jsonl", "--tune-on", dev, *refs, cwd=samples)
    assert r.returncode == 1 and r.stderr.splitlines() == [
        f"sampledlm: error: {named}: the references hold no words, so there is no WER to tune on"]


@pytest.mark.parametrize("flags,message", [
    (["--k", "2"], "--k merges lattice histories: it applies to lattices, and nbest.jsonl holds n-best lists"),
    (["--tune-nbest", "5"], "--tune-nbest takes the best paths of the lattices given to --tune-on: give --tune-on DEV"),
    (["--tune-nbest", "5", "--tune-on", "nbest.jsonl"],
     "--tune-nbest takes the best paths of the lattices given to --tune-on: nbest.jsonl holds n-best lists"),
])
def test_lattice_flags_on_n_best_lists_are_refused(samples, run_in_process, flags, message):
    r = run_in_process("rescore", "kn3.arpa", "nbest.jsonl", *flags, cwd=samples)
    assert r.returncode == 1 and r.stderr.splitlines() == [f"sampledlm: error: {message}"]


@pytest.mark.parametrize("flags", [["-o", "nodir/x.jsonl"], ["--one-best", "nodir/1best.txt"],
                                   ["-o", "nodir/lattices"]])
def test_an_output_in_a_missing_directory_is_refused_before_any_scoring(samples, run_in_process, flags):
    inputs = "lattices" if flags[-1].endswith("lattices") else "nbest.jsonl"
    r = run_in_process("rescore", "kn3.arpa", inputs, *flags, cwd=samples)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [f"sampledlm: error: {flags[-1]}: cannot write: directory "
                                     f"{samples / 'nodir'} does not exist"]


def test_lattice_flags_still_apply_to_lattices(samples, run_in_process):
    r = run_in_process("rescore", "kn3.arpa", "lattices", "--k", "1", "--tune-on", "lattices", "--tune-refs",
                       "refs.txt", "--tune-nbest", "5", "--refs", "refs.txt", "--json", cwd=samples)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["k"] == 1


def test_rescore_json_holds_the_new_1_best(samples, run_in_process, tmp_path):
    """--json without --one-best or -o: the one JSON object on standard output holds the new 1-best (it used to
    hold only the summary, the 1-best that --help promises dropped); with --one-best the file holds it."""
    plain = run_in_process("rescore", "kn3.arpa", "nbest.jsonl", "--lm-weight", "10", cwd=samples)
    assert plain.returncode == 0, plain.stderr
    want = [line.split(" ", 1) + [""] * (" " not in line) for line in plain.stdout.splitlines()]
    r = run_in_process("rescore", "kn3.arpa", "nbest.jsonl", "--lm-weight", "10", "--json", cwd=samples)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [[b["id"], b["words"]] for b in doc["one_best"]] == want and len(want) == doc["utterances"] > 0
    assert doc["rescored_wer"] is not None and r.stderr == ""
    r = run_in_process("rescore", "kn3.arpa", "nbest.jsonl", "--lm-weight", "10", "--json", "--one-best",
                       str(tmp_path / "best.txt"), cwd=samples)
    assert r.returncode == 0, r.stderr
    assert "one_best" not in json.loads(r.stdout)
    assert (tmp_path / "best.txt").read_text().splitlines() == plain.stdout.splitlines()


def test_rescore_output_named_jsonl_writes_jsonl_whatever_the_input(samples, run_in_process, tmp_path):
    """-o out.jsonl on Kaldi input writes JSONL (it wrote a Kaldi directory named out.jsonl); an --output-format
    that writes a directory, or lattices, with such a name are refused in one line naming the mismatch."""
    from sampledlm.use.nbest import read_nbest, write_nbest

    write_nbest(str(tmp_path / "kaldi"), read_nbest(str(samples / "nbest.jsonl")), "kaldi")
    model = str(samples / "kn3.arpa")
    r = run_in_process("rescore", model, "kaldi", "-o", "out.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.jsonl").is_file()
    r = run_in_process("rescore", model, "kaldi", "-o", "out-kaldi", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "out-kaldi" / "text").is_file()  # no JSONL name: NBEST's format
    got, same = read_nbest(str(tmp_path / "out.jsonl")), read_nbest(str(tmp_path / "out-kaldi"))
    assert [[h.words for h in nb.hyps] for nb in got] == [[h.words for h in nb.hyps] for nb in same] and got
    for args, words in (([model, "kaldi", "--output-format", "kaldi", "-o", "x.jsonl"],
                         "-o x.jsonl: a JSONL file's name, but --output-format kaldi writes a directory"),
                        ([model, str(samples / "lattices"), "-o", "x.jsonl"],
                         "-o x.jsonl: a JSONL file's name, but rescored lattices are written as a directory")):
        r = run_in_process("rescore", *args, cwd=tmp_path)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1 and words in r.stderr, r.stderr
        assert not (tmp_path / "x.jsonl").exists()
