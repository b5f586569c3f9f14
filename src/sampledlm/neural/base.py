"""What every neural scorer shares: an :class:`~.output.OutputLayer` and the Scorer methods delegated to it.

A neural model computes a hidden representation ``ctx = hidden [N, h]`` of N histories
(``forward``); the scores ``a_w(h) = W_w . h + b_w`` come from ``self.output``. Objectives only
ever call the delegating methods below, so a model never needs to know which objective trains it.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import setting_name
from ..errors import UserError
from ..objectives.output import OutputLayer


def _inputs_to_model_device(module: nn.Module, args: tuple) -> tuple:
    """Forward pre-hook: tensor arguments on the module's device (a no-op when they are there already)."""
    for p in module.parameters():
        device = p.device
        break
    else:
        return args
    return tuple(a.to(device, non_blocking=True) if torch.is_tensor(a) and a.device != device else a for a in args)


class NeuralScorer(nn.Module):
    """Base class: subclasses set ``self.output = OutputLayer(V, h, sparse)`` and define ``forward``.

    A model also says how it reads an id stream, so that the trainer and the evaluator never ask
    which kind of model they hold:

    - ``Config``: its settings dataclass (:mod:`sampledlm.config`), ``from_config(cfg, V, sparse)``;
    - ``train_defaults``: training settings that suit it (they override :class:`TrainOptions`' own);
    - ``train_data(ids, opts)``: an object with ``num_batches()`` and ``batch(epoch, b)``;
    - ``train_contexts(batch, carry) -> (ctx [N, h], targets [N], positions [N], carry)``: ``carry`` is
      whatever the model passes from one batch to the next within an epoch (a recurrent state;
      None at the start of each epoch), a tensor or tuple of tensors;
    - ``eval_contexts(ids, batch_size, independent)``: yields ``(ctx, targets, positions)`` (feed-forward: ``(ctx, targets, positions, rows)``, one ctx row per distinct history) covering
      every token of the stream exactly once, or ``(ctx, targets, positions, rows)`` when one context
      row serves several predictions (``rows [n]``: the row of ``ctx`` of each target).
    """

    output: OutputLayer
    Config: type

    def __init__(self):
        super().__init__()
        # Callers (evaluation, scoring, a server) hand in id tensors made on the host: they follow the
        # model to its device here, once, instead of in every model's forward and stream reader.
        self.register_forward_pre_hook(_inputs_to_model_device)
    train_defaults: dict = {}
    #: whether training reads the text in ``--bptt`` segments (recurrent models, the Transformer's window)
    uses_bptt: bool = True

    @classmethod
    def check_train_options(cls, opts) -> None:
        """Refuse training options this kind of model cannot honour, before a run directory is made. Default:
        models that read running text in order cannot train on a random share of positions."""
        if opts.data_fraction < 1.0:
            raise UserError(f"{setting_name('data_fraction')} applies to feed-forward models only")

    #: True when ``eval_contexts`` yields ``rows`` (one context serves several predictions): exact
    #: scoring then takes ``objective.log_prob(ctx)[rows, targets]``, else ``log_prob_targets``
    shares_contexts: bool = False
    #: True for the recurrent models: objectives' ``sequence_defaults`` apply (measured on the GRU; the Transformer,
    #: with its own learning rate, keeps each objective's general defaults until measured)
    sequence_model: bool = False
    #: True when a prediction may see words before its sentence's ``<s>`` (recurrent state, a Transformer's window):
    #: only then does running text score differently from sentences read on their own
    crosses_sentences: bool = False
    #: the dropout rate a run of one epoch over a long text gets when none is given (None: the model's default
    #: everywhere); see :data:`sampledlm.neural.settings.ONE_PASS_STEPS`
    one_pass_dropout: float | None = None
    #: training settings a run of fewer than :data:`sampledlm.neural.settings.SHORT_RUN_STEPS` planned steps gets
    #: where the user gave none (``{"optimizer": "adamw", ...}``; empty: the model's ``train_defaults`` everywhere)
    short_run_train: dict = {}

    def history_key(self, history) -> tuple | None:
        """A hashable key that determines the context after ``<s> history`` (ids), or None when the
        context depends on the whole history (recurrent models): what a history cache may key on."""
        return None

    def history_contexts(self, histories: list) -> torch.Tensor:
        """``ctx [H, h_out]``: the context after ``<s> histories[i]`` (each a 1-d id array), i.e. what
        predicts the next word. This default reads the stream ``h_1 </s> h_2 </s> ...`` with
        ``eval_contexts`` (independent sentences) and keeps the context at each ``</s>``."""
        import numpy as np

        from ..data.vocab import EOS_ID

        if not len(histories):
            return torch.zeros((0, self.hidden_size))
        ends, stream = [], []
        for h in histories:
            stream.extend(int(x) for x in h)
            ends.append(len(stream))
            stream.append(EOS_ID)
        ids = np.asarray(stream, dtype=np.int64)
        which = np.full(len(ids), -1, dtype=np.int64)
        which[ends] = np.arange(len(histories))
        out = None
        for ctx, _, positions, *rows in self.eval_contexts(ids, independent=True):
            hit = which[np.asarray(positions)]
            keep = np.flatnonzero(hit >= 0)
            if not len(keep):
                continue
            sel = ctx[rows[0][keep]] if rows else ctx[torch.from_numpy(keep)]
            if out is None:
                out = ctx.new_empty((len(histories), ctx.shape[1]))
            out[torch.from_numpy(hit[keep])] = sel
        return out

    @property
    def num_words(self) -> int:
        return self.output.num_words

    @property
    def hidden_size(self) -> int:
        return self.output.hidden_size

    def score_targets(self, ctx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.output.score_targets(ctx, targets)

    def score_shared(self, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        return self.output.score_shared(ctx, words)

    def score_each(self, ctx: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        return self.output.score_each(ctx, words)

    def score_blocks(self, ctx: torch.Tensor, ctx_sizes: list[int], words: torch.Tensor,
                     word_sizes: list[int]) -> list[torch.Tensor]:
        return self.output.score_blocks(ctx, ctx_sizes, words, word_sizes)

    def score_all(self, ctx: torch.Tensor) -> torch.Tensor:
        return self.output.score_all(ctx)

    def normalised_targets(self, ctx: torch.Tensor, targets: torch.Tensor, offset=None,
                           log_sigmoid: bool = False) -> torch.Tensor | None:
        return self.output.normalised_targets(ctx, targets, offset=offset, log_sigmoid=log_sigmoid)

    def shift_bias(self, delta) -> None:
        self.output.shift_bias(delta)

    def sparse_parameters(self) -> list[nn.Parameter]:
        """Parameters that receive row-sparse gradients, which the trainer updates row-wise (plain SGD or
        SparseAdam): the output layer's ``W [V, h]`` and ``b [V, 1]`` when it is built sparse, every
        ``nn.Embedding`` built with ``sparse=True`` (the input embeddings ``[V+1, d]`` of a model trained
        with a sampled objective), and whatever a submodule lists in its own ``sparse_parameters()``
        (the adaptive input's band tables). Each parameter once, even when shared (a tied ``W``)."""
        found = list(self.output.parameters()) if self.output.sparse else []
        for m in self.modules():
            if isinstance(m, nn.Embedding) and m.sparse:
                found.append(m.weight)
            elif m is not self and m is not self.output and callable(getattr(m, "sparse_parameters", None)):
                found.extend(m.sparse_parameters())
        return list({id(p): p for p in found}.values())
