"""The optimisers of a neural run and what the loop does with them: dense and row-sparse parameter groups
(:func:`make_optimizers`), the learning-rate schedule, gradient clipping."""

from __future__ import annotations

import math

import torch

from .row_adam import RowAdam, coalesced

from .train_options import TrainOptions

def make_optimizers(model, objective, opts: TrainOptions) -> list[torch.optim.Optimizer]:
    """SGD, Adam or AdamW; parameters with sparse gradients get SGD without weight decay/momentum, or SparseAdam.

    AdamW (Loshchilov & Hutter 2019) shrinks each weight by ``lr · wd · w`` a step beside Adam's update, instead of
    adding ``wd · w`` to the gradient (which Adam's scaling then weakens for weights with large gradients); as in
    GPT-2's and nanoGPT's recipes only the weight matrices and tables decay, not biases (:func:`undecayed_ids`) or
    LayerNorm gains; the row-sparse tables below decay too, every row each step as a dense table's, the factors
    applied in batches of steps (:class:`~sampledlm.neural.row_adam.RowAdam`) so that a step costs no O(V d) pass.

    The sparse ones are ``model.sparse_parameters()`` and ``objective.sparse_parameters()``: with an objective that reads a candidate set, the
    output rows and the word embeddings (tied or not). A step's gradient of such a ``[V, d]`` table holds
    only the rows the batch touched, and both SGD (``W_r -= lr g_r``, the same numbers as dense SGD
    without momentum or decay) and SparseAdam (Adam's moments and update for the touched rows only, a
    *lazy* Adam: an untouched row's moments do not decay; :class:`~sampledlm.neural.row_adam.RowAdam`, its
    update through index operations) cost O(rows touched x d), not O(V d).
    """
    sparse_ids = sparse_parameter_ids(model, objective)
    params = list({id(p): p for p in list(model.parameters()) + list(objective.parameters())
                   if p.requires_grad}.values())  # a weight shared by both (tied adaptive bands) once
    dense = [p for p in params if id(p) not in sparse_ids]
    sparse = [p for p in params if id(p) in sparse_ids]
    if opts.optimizer == "sgd":
        groups = [{"params": dense, "weight_decay": opts.weight_decay, "momentum": opts.momentum}]
        if sparse:
            groups.append({"params": sparse, "weight_decay": 0.0, "momentum": 0.0})
        return [torch.optim.SGD(groups, lr=opts.lr)]
    # the fused update: one kernel for every tensor instead of about ten operations each (0.11 against 0.30 ms a step
    # for the GRU's dense weights on one CPU thread), the same arithmetic
    fused = bool(dense) and all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in dense)
    optimizers: list[torch.optim.Optimizer]
    if opts.optimizer == "adamw":
        keep = undecayed_ids(model, objective)
        optimizers = [torch.optim.AdamW(decay_groups(dense, keep, opts.weight_decay), lr=opts.lr, fused=fused or None)]
        if sparse:  # SparseAdam's update through index operations; the decay reaches these tables too
            optimizers.append(RowAdam(decay_groups(sparse, keep, opts.weight_decay), lr=opts.lr))
        return optimizers
    optimizers = [torch.optim.Adam(dense, lr=opts.lr, weight_decay=opts.weight_decay, fused=fused or None)]
    if sparse:
        optimizers.append(RowAdam(sparse, lr=opts.lr))  # SparseAdam's update through index operations
    return optimizers


def undecayed_ids(model, objective) -> set[int]:
    """The ids of the parameters AdamW leaves undecayed: vectors (LayerNorm gains, biases) and every parameter named
    ``bias`` (the output layer's ``[V, 1]`` column among them: a sampled objective starts it at log unigram
    probabilities, which decay would pull to 0)."""
    named = list(model.named_parameters()) + list(objective.named_parameters())
    return {id(p) for name, p in named if p.dim() < 2 or name.rsplit(".", 1)[-1] == "bias"}


def decay_groups(params: list, keep: set[int], weight_decay: float) -> list[dict]:
    """``params`` as optimiser groups: those whose ids are not in ``keep`` with ``weight_decay``, the others
    without; empty groups left out."""
    groups = [{"params": [p for p in params if id(p) not in keep], "weight_decay": weight_decay},
              {"params": [p for p in params if id(p) in keep], "weight_decay": 0.0}]
    return [g for g in groups if g["params"]]


def sparse_parameter_ids(model, objective) -> set[int]:
    """The ids of the parameters with row-sparse gradients: the model's and the objective's (hsm's node layer)."""
    found = list(model.sparse_parameters())
    found += getattr(objective, "sparse_parameters", lambda: [])()
    return {id(p) for p in found}


def scheduled_lr(base: float, schedule: str, step: int, total_steps: int, budget_spent: float = 0.0,
                 warmup: int = 0) -> float:
    """The rate of optimiser step ``step`` (0-based) of ``total_steps``: ``base · (step + 1) / warmup`` over the
    first ``warmup`` steps (a linear warm-up, as Transformers are trained: Vaswani et al. 2017), then ``base`` under
    ``plateau`` (halvings change ``base`` itself), ``base · (1 + cos(π p)) / 2`` under ``cosine`` with
    ``p = s / S`` (``s = step - warmup`` of the ``S = total - warmup`` steps after it), and under ``cosine-budget``
    with ``p = max(s / S, budget_spent)``, the share of ``--max-time`` spent: the rate reaches 0 where whichever
    budget ends first ends (a schedule that decays over the budget it is given, Li, Yumer & Ramanan 2020, where a
    cosine over steps a time budget cuts short stops at a rate above 0)."""
    if step < warmup:
        return base * (step + 1) / warmup
    step, total_steps = step - warmup, total_steps - warmup
    if schedule == "plateau" or total_steps <= 0:
        return base
    p = min(step, total_steps) / total_steps
    if schedule == "cosine-budget":
        p = max(p, min(budget_spent, 1.0))
    return base * 0.5 * (1.0 + math.cos(math.pi * p))


def plateau_rule(st, opts, optimizers, what: str, before: float, log) -> None:
    """A validation that did not improve on ``before`` by ``--min-improvement`` (Xu et al. 2011 §3.1): halve the
    rate, or, after ``--max-halvings`` halvings, end the run (``st.done``); said through ``log``. ``what``: where
    and what the validation was (``epoch 2: valid ppl 110.31``)."""
    gain = f"{what} gained less than --min-improvement {opts.min_improvement:g} on {before:.2f}"
    if st.halvings >= opts.max_halvings:
        st.done = True
        log(f"{gain}, after {st.halvings} halving{'s' if st.halvings != 1 else ''} (--max-halvings "
            f"{opts.max_halvings}): training stops")
    else:
        st.halvings += 1
        st.lr /= 2
        set_lr(optimizers, st.lr)
        log(f"{gain}: lr halved to {st.lr:g} (halving {st.halvings} of {opts.max_halvings})")


def set_lr(optimizers, lr: float) -> None:
    for opt in optimizers:
        for g in opt.param_groups:
            g["lr"] = lr


def clip_gradients(params, max_norm: float) -> float:
    """Scale all gradients (dense or sparse) so that their total 2-norm is at most ``max_norm``."""
    sq = 0.0
    for p in params:
        if p.grad is not None and p.grad.is_sparse:
            p.grad = coalesced(p.grad)  # once: the norm needs each row once, and the optimiser reuses it
        if p.grad is not None:
            sq += float((p.grad.values() if p.grad.is_sparse else p.grad).pow(2).sum())
    norm = math.sqrt(sq)
    if max_norm > 0 and norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        for p in params:
            if p.grad is not None:
                p.grad = p.grad * scale if p.grad.is_sparse else p.grad.mul_(scale)
    return norm
