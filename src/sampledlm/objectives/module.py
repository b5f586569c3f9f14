"""A drop-in output layer + sampled loss for any PyTorch model (:class:`SampledOutput`)."""

from __future__ import annotations

import torch
from torch import nn

from .output import OutputLayer
from .registry import make_objective, objective_options


class SampledOutput(nn.Module):
    r"""Output layer over a large vocabulary trained with a sampled objective, evaluated exactly.

    PyTorch has :class:`torch.nn.AdaptiveLogSoftmaxWithLoss` but no sampled softmax, NCE or
    negative-sampling loss; this module gives all of them behind one interface. It owns the
    output embeddings ``weight [V, h]`` and biases ``bias [V, 1]`` (an
    :class:`~sampledlm.objectives.output.OutputLayer`, scores ``a_w(h) = W_w . h + b_w``) and an
    output objective that decides how those scores are trained:

    ================== ====================================================================
    ``objective``      training loss (paper)
    ================== ====================================================================
    ``softmax``        exact cross-entropy over V (the reference; O(V h))
    ``binary``         V logistic classifiers, negatives subsampled at rate α, log-α
                       calibration (Xu et al. 2011)
    ``is``             importance sampling of the normaliser (Bengio & Senécal 2003)
    ``css-is``         complementary sum sampling, true word exact + IS (Botev et al. 2017)
    ``css-bernoulli``  complementary sum sampling with Bernoulli sampling (Botev et al. 2017)
    ``nce``            noise-contrastive estimation, normaliser fixed to 1 (Mnih & Teh 2012)
    ``neg``            negative sampling (Mikolov et al. 2013), 1/S scaled
    ``blackout``       BlackOut (Ji et al. 2016)
    ``ranking``        log-sigmoid ranking with margin log(V-1) (Collobert & Weston 2008)
    ``class``          two-level class factorisation, frequency-binned classes (Mikolov et al. 2011)
    ``hsm``            hierarchical softmax over a Huffman tree (Morin & Bengio 2005;
                       Mikolov et al. 2013)
    ``adaptive``       adaptive softmax, head + reduced tail clusters (Grave et al. 2017)
    ``selfnorm``       softmax + alpha (log Z)^2, raw scores usable as log P (Devlin et al. 2014)
    ``shortlist``      softmax over the S most frequent words, the rest from a back-off model
                       (Schwenk 2007; here the training unigram: no histories in a user's model)
    ================== ====================================================================

    The sampled objectives draw S words per mini-batch from ``q ∝ counts^β`` (one bag shared by
    the batch: the forward pass is a single ``[N, h] x [h, S]`` product) and give **sparse**
    gradients to ``weight`` and ``bias``: only the rows of the true and sampled words (the
    structured ones, ``class``, ``hsm`` and ``adaptive``, likewise only the rows they read). Per
    training step the output layer costs O((N + S) h), independent of V, provided the optimiser
    accepts sparse gradients (``torch.optim.SGD`` without momentum/weight decay, or
    ``torch.optim.SparseAdam`` for these two parameters): :func:`optimizer_pair` makes the right
    pair for a whole model. ``sparse=False`` gives dense gradients instead (O(V h) per step in the
    optimiser), so that ``torch.optim.Adam(model.parameters())`` works as it is.

    :meth:`log_prob` is exact: the softmax over all V words (or, for ``binary``, the calibrated
    sigmoids renormalised over V), at O(V h) per example -- use it for evaluation, never for training.

    Args:
        in_features (int): size ``h`` of the hidden states.
        num_words (int): number of classes ``V``.
        objective (str): one of the names above (default ``"css-is"``).
        counts (array of int, optional): training counts of the V words, for the noise
            distribution (uniform if omitted).
        sparse (bool, optional): sparse gradients for ``weight`` and ``bias`` (default: when the
            objective reads only some rows); False for dense ones, e.g. for ``torch.optim.Adam``.
        device (torch.device or str, optional): where its parameters and noise tables live (and
            its negatives are drawn), e.g. ``"cuda"``; default: the CPU (``.to(device)`` moves it later).
        **options: the objective's keyword options, e.g. ``samples=250`` (S),
            ``noise_power=0.75`` (β), ``sample_mode="shared"|"each"``, ``neg_rate=0.05`` (α),
            ``neg_subset="variable"|"fixed"``, ``margin``, ``learn_norm``, ``exclude_true``,
            ``classes``, ``cutoffs``, ``div_value``, ``selfnorm_alpha``, ``shortlist``;
            ``word_classes``: each word's class ``(V,)`` for ``class`` and ``hsm`` (e.g. the exchange
            algorithm's: :func:`sampledlm.data.clusters.exchange_classes`).

    Shape:
        - hidden: ``(N, in_features)``; target: ``(N,)`` int64 in ``[0, V)``; positions (optional):
          ``(N,)`` int64, each example's index in the training data (``binary`` with fixed subsets)
        - :meth:`forward` returns a scalar: the mean training loss over the N examples
        - :meth:`log_prob` returns ``(N, V)``: exact ``log P(w | hidden)``

    Call :meth:`finalize` once after training (the ``binary`` objective's calibration; a no-op for
    the others), and :meth:`start_epoch` before each epoch.

    Example::

        >>> import torch
        >>> from sampledlm.objectives import SampledOutput
        >>> counts = torch.randint(1, 1000, (50_000,)).numpy()
        >>> out = SampledOutput(256, 50_000, objective="css-is", counts=counts, samples=100)
        >>> hidden, target = torch.randn(32, 256), torch.randint(50_000, (32,))
        >>> loss = out(hidden, target)          # O((32 + 100) * 256), sparse weight grads
        >>> loss.backward()
        >>> out.weight.grad.is_sparse
        True
        >>> torch.optim.SGD(out.parameters(), lr=0.1).step()
        >>> with torch.no_grad():                # exact distribution over all 50k words
        ...     out.log_prob(hidden[:2]).exp().sum(1)
        tensor([1.0000, 1.0000])

    In a model of your own, with the optimiser most people reach for first::

        >>> model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh())
        >>> head = SampledOutput(256, 50_000, objective="adaptive", counts=counts, sparse=False)
        >>> opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-3)
        >>> head(model(torch.randn(32, 64)), target).backward()
        >>> opt.step()

    or keep the sparse gradients and let :func:`optimizer_pair` split the parameters (Adam for the
    dense ones, SparseAdam for the output rows)::

        >>> both = torch.nn.ModuleDict({"trunk": model, "head": out})
        >>> opts = optimizer_pair(both, lr=1e-3)
        >>> [type(o).__name__ for o in opts]
        ['Adam', 'SparseAdam']
        >>> out(both["trunk"](torch.randn(32, 64)), target).backward()
        >>> for o in opts:
        ...     o.step()
    """

    def __init__(self, in_features: int, num_words: int, objective: str = "css-is", counts=None,
                 sparse: bool | None = None, device=None, **options):
        super().__init__()
        if counts is not None and len(counts) != num_words:
            raise ValueError(f"counts has {len(counts)} entries, expected num_words={num_words}")
        word_classes = options.pop("word_classes", None)
        if isinstance(word_classes, str):
            raise TypeError("SampledOutput(word_classes=...) takes each word's class [num_words]; read a file with "
                            "sampledlm.data.clusters.read_word_classes(path, words)[0]")
        self.objective = make_objective(objective, counts, **options)
        sparse = self.objective.sparse_output if sparse is None else bool(sparse)
        self.output = OutputLayer(num_words, in_features, sparse=sparse)
        self.objective.bind(self.output)  # the objective's own output parameters (class layer, tails)
        if word_classes is not None:  # class / hsm: the user's classes (e.g. the exchange algorithm's)
            if "word_classes" not in objective_options(type(self.objective)):
                raise TypeError(f"word_classes does not apply to objective {objective!r} (class, hsm)")
            self.objective.set_word_classes(word_classes)
        self.objective.prepare(self.output)  # initial biases (log unigram, log 1/V, ...)
        if device is not None:
            self.to(device)

    @property
    def weight(self) -> torch.Tensor:
        return self.output.weight

    @property
    def bias(self) -> torch.Tensor:
        return self.output.bias

    def forward(self, hidden: torch.Tensor, target: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """Mean training loss; ``positions (N,)``, each example's index in the training data, is needed
        only by objectives keyed per example (``uses_positions``: ``binary`` with fixed subsets)."""
        if self.objective.uses_positions:
            return self.objective(self.output, hidden, target, positions=positions)
        return self.objective(self.output, hidden, target)

    def log_prob(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.objective.log_prob(self.output, hidden)

    def start_epoch(self, epoch: int) -> None:
        self.objective.start_epoch(epoch)

    def finalize(self) -> None:
        self.objective.finalize(self.output)


def optimizer_pair(model: nn.Module, lr: float = 1e-3, **adam_options) -> list[torch.optim.Optimizer]:
    """The optimisers for a model holding :class:`SampledOutput` layers: ``[Adam]`` over its dense
    parameters, plus ``SparseAdam`` over the parameters that take row-sparse gradients, when there are
    any: sparse output rows, ``nn.Embedding(..., sparse=True)`` tables, and what a submodule lists in its
    ``sparse_parameters()`` (sampledlm's own models do).

    Step (and zero) every optimiser in the list. ``adam_options`` go to ``torch.optim.Adam``
    (``weight_decay`` only there: SparseAdam has none).
    """
    sparse_ids = set()
    for m in model.modules():
        if isinstance(m, OutputLayer) and m.sparse:
            sparse_ids.update(id(p) for p in m.parameters())
        elif isinstance(m, nn.Embedding) and m.sparse:
            sparse_ids.add(id(m.weight))
        elif callable(getattr(m, "sparse_parameters", None)):
            sparse_ids.update(id(p) for p in m.sparse_parameters())
    params = [p for p in model.parameters() if p.requires_grad]
    dense = [p for p in params if id(p) not in sparse_ids]
    sparse = [p for p in params if id(p) in sparse_ids]
    opts: list[torch.optim.Optimizer] = [torch.optim.Adam(dense, lr=lr, **adam_options)] if dense else []
    if sparse:
        opts.append(torch.optim.SparseAdam(sparse, lr=lr, betas=adam_options.get("betas", (0.9, 0.999))))
    return opts
