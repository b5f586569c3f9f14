"""Starting a new run from a trained one (``sampledlm train --init-from RUN``): domain adaptation.

The new run has the source's model and objective (their shapes and options) and its own training settings and
text. Its weights start as the source's final ones:

* same vocabulary (the default: the new text is read with the source's words, others become ``<unk>``): every
  tensor is copied;
* a new vocabulary (``--vocab`` or ``--min-count``/``--max-size`` given): a tensor whose first dimension runs over
  the vocabulary (embeddings, output rows and biases) gets the source's row for every word the two share, a
  fresh row for a new word; a vocabulary-sized *buffer* of the objective (its noise distribution, say) is the new
  run's own, made from the new text's counts; every other tensor is copied.

Then ``objective.unfinalize`` undoes what finishing did (binary's calibration), so training sees the scores it
was trained on. ``config.json`` records the origin under ``init_from``.
"""

from __future__ import annotations

import os

import torch

from ..data.vocab import Vocab
from ..data.vocabmap import VocabMap
from .. import store
from ..config import setting_value
from ..errors import UserError
from . import rundir as runs


def source_run(path: str) -> tuple[torch.nn.Module, torch.nn.Module, Vocab, dict]:
    """``(model, objective, vocab, config)`` of the trained run to start from (its final weights)."""
    if not os.path.isdir(path) or not os.path.exists(os.path.join(path, "config.json")):
        raise store.no_run_directory(path, "--init-from")
    return runs.load_run(path)


def _rows(src: torch.Tensor, fresh: torch.Tensor, rows: tuple[torch.Tensor, torch.Tensor], extra: int) -> torch.Tensor:
    """``fresh`` with the source's rows of the shared words (``rows``: source and new indices), and the ``extra``
    rows past the vocabulary (a history-padding row, say) copied as they are."""
    out = fresh.detach().clone()
    s, d = rows
    out[d] = src.detach()[s].to(out.dtype)
    if extra:
        out[-extra:] = src.detach()[-extra:].to(out.dtype)
    return out


def copy_weights(source, model: torch.nn.Module, objective: torch.nn.Module, vocab: Vocab, where: str) -> None:
    """Copy ``source`` = ``(model, objective, vocab, config)`` into a fresh ``model`` and ``objective`` over
    ``vocab`` (module docstring)."""
    src_model, src_objective, src_vocab, _ = source
    mapping = VocabMap.between(src_vocab, vocab)
    same, s_idx, d_idx = mapping.same, torch.from_numpy(mapping.source), torch.from_numpy(mapping.target)
    v_src, v_new = len(src_vocab), len(vocab)
    for part, src_part, dst_part in (("model", src_model, model), ("objective", src_objective, objective)):
        src_state = src_part.state_dict()
        if same and hasattr(dst_part, "upgrade_state"):  # the source's tree first: hsm's node layer follows it
            src_state = dst_part.upgrade_state(dict(src_state))
        dst_state = dst_part.state_dict()
        if set(src_state) != set(dst_state):
            raise UserError(f"{setting_value('init_from', where)}: its {part} holds other tensors than this run's "
                            f"({sorted(set(src_state) ^ set(dst_state))[:3]}...)")
        buffers = {name for name, _ in dst_part.named_buffers()}
        new_state = {}
        for name, fresh in dst_state.items():
            src = src_state[name]
            if src.shape == fresh.shape and (same or src.dim() == 0 or src.shape[0] not in (v_src, v_src + 1, v_src + 2)):
                new_state[name] = src
            elif src.dim() >= 1 and 0 <= src.shape[0] - v_src == fresh.shape[0] - v_new <= 2 \
                    and src.shape[1:] == fresh.shape[1:]:
                new_state[name] = fresh if part == "objective" and name in buffers else \
                    _rows(src, fresh, (s_idx, d_idx), src.shape[0] - v_src)
            else:
                raise UserError(f"{setting_value('init_from', where)}: {part} tensor {name} is {tuple(src.shape)} "
                                f"there and {tuple(fresh.shape)} here; the model's shape comes from the source run")
        dst_part.load_state_dict(new_state)
    objective.unfinalize(model)


def copy_into_trainer(source, trainer, vocab: Vocab, where: str) -> None:
    """:func:`copy_weights` into a new run's trainer, whose optimisers are then built again: copying may replace a
    parameter (hsm adopts the source's tree and a node layer of its size), which optimisers built before would
    never update."""
    copy_weights(source, trainer.model, trainer.objective, vocab, where)
    trainer.build_optimizers()
