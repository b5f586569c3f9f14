"""Writing files (:mod:`sampledlm.data.writing`): a write that must not replace a file another process put there."""

from __future__ import annotations

import pytest


def test_a_new_only_write_keeps_a_file_that_appeared_meanwhile(tmp_path):
    """Two `ngram train -o m.arpa` started together both passed the existing-output check; the later to finish
    replaced the other's model without --force."""
    from sampledlm.data.writing import atomic_write, new_file_only
    from sampledlm.errors import UserError

    out = tmp_path / "m.arpa"
    with new_file_only(str(out)):
        with pytest.raises(UserError, match="written by another process while this one ran"):
            with atomic_write(str(out)) as f:
                f.write("ours")
                out.write_text("theirs")  # the other run finished first
        assert out.read_text() == "theirs" and sorted(p.name for p in tmp_path.iterdir()) == ["m.arpa"]
        out.unlink()
        with atomic_write(str(out)) as f:  # nothing appeared: written as usual
            f.write("ours")
    assert out.read_text() == "ours"
    with atomic_write(str(out)) as f:  # outside the block a write replaces, as before
        f.write("again")
    assert out.read_text() == "again"
