"""An n-gram model's output, checked before the estimate starts (``ngram train``, ``ngram build-binary``,
:func:`sampledlm.train_ngram`)."""

from __future__ import annotations

import contextlib
import os

from ...config import said
from ...data.writing import no_directory
from ...errors import UserError
from ...outputs import refuse_existing, writing_directory


@contextlib.contextmanager
def model_output(output: str, binary: bool, force: bool, inputs, text_options=None):
    """The checks of an n-gram model's output before it is estimated (``ngram train``, ``sampledlm.train_ngram``):
    an ARPA file is writable, none of ``inputs``, and replaced only with ``force``; a binary directory is new, empty
    or (with ``force``) a binary model, checked again under its lock, held to the end (a second writer stops)."""
    from ...data.textio import check_writable
    from ...data.writing import new_file_only

    if not binary:
        check_writable(output)
        refuse_existing(output, force, inputs)
        if force or output == "-":
            yield
        else:
            with new_file_only(output):  # a file that another run put there meanwhile is not replaced
                yield
        return
    from ..mapped import lock_directory

    if output == "-":
        raise UserError("--binary writes a model directory: give -o DIR, not -")
    refuse_existing_dir(output, force, "a binary n-gram model")
    with writing_directory(output, lock_directory):
        refuse_existing_dir(output, force, "a binary n-gram model")  # again, under the lock
        from ..mapped import data_records_of_write

        with data_records_of_write(_data_records(inputs), text_options):
            yield


def _data_records(inputs) -> dict:
    """The provenance records (size, SHA-256) of the texts an n-gram model is estimated from: ``inputs`` is
    ``[train, vocab, valid]`` (None where not given), hashed once, before the estimate, a block at a time."""
    from ... import provenance

    roles = dict(zip(("train", "vocab", "valid"), inputs))
    return provenance.data_records({r: p for r, p in roles.items() if isinstance(p, (str, os.PathLike)) and p != "-"})


def refuse_existing_dir(out_dir: str, force: bool, what: str) -> None:
    """An output directory must be new, empty, what a killed writer of a binary model left (written again), or
    (with --force) a model of the same kind."""
    from ..mapped import interrupted_write, is_binary

    if out_dir.endswith((".arpa", ".gz", ".bz2", ".xz")):
        raise UserError(f"{out_dir}: a binary model is a directory, and this name is an ARPA file's; choose a "
                        "directory name (e.g. kn5.bin)")
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"{out_dir}: exists and is not a directory; choose another -o")
    parent = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.isdir(parent):  # as an ARPA file's -o: a typo in the path is not created silently
        raise no_directory(out_dir, parent)
    names = os.listdir(out_dir) if os.path.isdir(out_dir) else []
    if [n for n in names if n != ".lock"] and not (interrupted_write(names)
                                                   and not os.path.exists(os.path.join(out_dir, "config.json"))):
        if not is_binary(out_dir):
            raise UserError(f"{out_dir}: exists and is not empty (nor a binary n-gram model); choose another -o")
        if not force:
            raise UserError(f"{out_dir}: already holds {what}; give " + said("--force", "force=True")
                            + " to replace it, or choose another " + said("-o", "output"))
