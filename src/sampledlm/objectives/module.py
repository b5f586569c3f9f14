"""A drop-in output layer + sampled loss for any PyTorch model (:class:`SampledOutput`)."""

from __future__ import annotations

import torch
from torch import nn

from .output import OutputLayer
from .registry import make_objective


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
    ================== ====================================================================

    The sampled objectives draw S words per mini-batch from ``q ∝ counts^β`` (one bag shared by
    the batch: the forward pass is a single ``[N, h] x [h, S]`` product) and give **sparse**
    gradients to ``weight`` and ``bias``: only the rows of the true and sampled words. Per
    training step the output layer costs O((N + S) h), independent of V, provided the optimiser
    accepts sparse gradients (``torch.optim.SGD`` without momentum/weight decay, or
    ``torch.optim.SparseAdam`` for these two parameters).

    :meth:`log_prob` is exact: the softmax over all V words (or, for ``binary``, the calibrated
    sigmoids renormalised over V), at O(V h) per example -- use it for evaluation, never for training.

    Args:
        in_features (int): size ``h`` of the hidden states.
        num_words (int): number of classes ``V``.
        objective (str): one of the names above (default ``"css-is"``).
        counts (array of int, optional): training counts of the V words, for the noise
            distribution (uniform if omitted).
        **options: the objective's keyword options, e.g. ``samples=250`` (S),
            ``noise_power=0.75`` (β), ``sample_mode="shared"|"each"``, ``neg_rate=0.05`` (α),
            ``neg_subset="variable"|"fixed"``, ``margin``, ``learn_norm``, ``exclude_true``.

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
    """

    def __init__(self, in_features: int, num_words: int, objective: str = "css-is", counts=None, **options):
        super().__init__()
        if counts is not None and len(counts) != num_words:
            raise ValueError(f"counts has {len(counts)} entries, expected num_words={num_words}")
        self.objective = make_objective(objective, counts, **options)
        self.output = OutputLayer(num_words, in_features, sparse=self.objective.sparse_output)

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
