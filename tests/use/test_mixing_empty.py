"""Mixing refuses what cannot give weights: an empty held-out text (a fault campaign's case)."""

from __future__ import annotations

from sampledlm.cli import cli


def test_em_weights_on_an_empty_held_out_text_are_refused(tmp_path):
    """The fault campaign's case: ``--interp-valid EMPTY`` printed ppl inf with weights nan, exit 0."""
    from click.testing import CliRunner

    (tmp_path / "t.txt").write_text("a b c\nb c a\n" * 10)
    (tmp_path / "empty.txt").write_text("")
    r = CliRunner()
    for name, order in (("k2.arpa", "2"), ("k1.arpa", "1")):
        r.invoke(cli, ["ngram", "train", "--train", str(tmp_path / "t.txt"), "--order", order, "-o", str(tmp_path / name)])
    res = r.invoke(cli, ["eval", str(tmp_path / "k2.arpa"), "--test", str(tmp_path / "t.txt"), "--mix",
                         str(tmp_path / "k1.arpa"), "--interp-valid", str(tmp_path / "empty.txt")])
    assert res.exit_code != 0 and "no sentences to fit the interpolation weights" in str(res.exception)


def test_one_weight_outside_0_1_or_a_wrong_count_names_what_was_typed():
    """``--weights 1.2`` said 'interpolation weights [1.2, -0.19999999999999996]', a value nobody typed."""
    import pytest

    from sampledlm.errors import UserError
    from sampledlm.use.mixing import parse_weights

    assert parse_weights("0.4", 2) == [0.4, pytest.approx(0.6)]
    with pytest.raises(UserError, match=r"--weights 1.2: one number is the first model's weight .* in \[0, 1\]"):
        parse_weights("1.2", 2)
    with pytest.raises(UserError, match=r"--weights 0.3,0.3,0.4: 3 number\(s\) for 2 models"):
        parse_weights("0.3,0.3,0.4", 2)
    with pytest.raises(UserError, match=r"--weights 0.5: 1 number\(s\) for 3 models: give one per model"):
        parse_weights("0.5", 3)
