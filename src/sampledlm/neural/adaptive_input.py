"""Adaptive input embeddings (Baevski & Auli 2019): frequent words get wide vectors, rare words narrow ones.

Words are ranked by training count (rank 0 the most frequent, :func:`frequency_order`, the order the
adaptive softmax uses). Cutoffs ``0 < c_0 < ... < c_{K-1} < V`` split the ranks into K + 1 bands;
band ``i`` holds ranks ``[c_{i-1}, c_i)`` (``c_{-1} = 0``, ``c_K = V``) and embeds into
``d_i = d // factor^i`` dimensions (at least 1), projected up to the model size d::

    e(w) = E_0[w]                   w in band 0 (the head): a full-width row, no projection
    e(w) = E_i[w] Q_i               w in band i > 0:  E_i [|band i|, d_i],  Q_i [d_i, d]
    e(<s>) = its own row [d]        the input-only start symbol (id V)

so the table holds ``sum_i |band i| d_i`` numbers instead of ``V d``. The band widths are those of
the adaptive softmax's tails with ``div_value = factor`` (tail ``i`` <-> band ``i + 1``), which is
what lets the two share their weights (Baevski & Auli §4.3): ``E_i`` is tail ``i-1``'s output
matrix and ``Q_i`` its projection read the other way round, and the head band's rows are the
model's output rows of the head words.

Shapes: ``forward(ids [B, T]) -> [B, T, d]``; ids in ``[0, V]`` (``V`` = ``<s>``).

``sparse=True`` (a model trained with a sampled or structured objective) looks the rows up with
row-sparse gradients: a step's gradient of ``E_i`` holds only the rows of the batch's words of band
``i``, and the trainer updates only those (:meth:`AdaptiveInput.sparse_parameters`). A table shared with
the adaptive softmax (:meth:`AdaptiveInput.offer`) is read densely there, so it goes back to dense
gradients once offered.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..config import option
from ..objectives.adaptive import default_cutoffs
from ..objectives.structure import frequency_order


@dataclass
class InputOptions:
    """The word-embedding settings the recurrent and Transformer models share: tying and adaptive input."""

    tie: bool = option(True, "tie input and output embeddings (Press & Wolf 2017)")
    adaptive_input: bool = option(False, "adaptive input embeddings in frequency bands (Baevski & Auli 2019); "
                                         "tied with --objective adaptive when --tie (on by default for a recurrent "
                                         "model with --objective adaptive)")
    input_cutoffs: list[int] | None = option(None, "adaptive input: rank cutoffs of the bands [default: --cutoffs, "
                                                   "else 80 % and 95 % unigram coverage]", min=1, multiple=True)
    input_factor: float = option(4.0, "adaptive input: each band is this many times narrower than the last "
                                      "(tied to an adaptive softmax: its --div-value unless given)", min=1.0)
    embed_dropout: float = option(0.0, "embedding dropout (Gal & Ghahramani 2016): in training, each word of a batch "
                                       "is dropped from the input with this probability, all its occurrences at once",
                                  min=0.0, max=0.99)


def tied_embedding(x: torch.Tensor, output, bos_embed: torch.Tensor) -> torch.Tensor:
    """Tied input embeddings: ``x [B, T]`` -> ``[B, T, e]``, word w's row of ``output.weight [V, e]``, ``<s>`` (id V)
    the row ``bos_embed [1, e]``; looked up in place (no ``[V+1, e]`` copy of the table per call, which cost more
    than a short sentence's whole forward pass and whose backward pass would be a dense ``[V, e]`` gradient), with a
    row-sparse gradient when the output layer is sparse."""
    V = output.weight.shape[0]
    bos = x == V
    e = F.embedding(x.clamp(max=V - 1), output.weight, sparse=output.sparse)
    return torch.where(bos.unsqueeze(-1), bos_embed.to(e.dtype), e) if bool(bos.any()) else e



def band_width(dim: int, factor: float, band: int) -> int:
    """``d_i``: band ``band``'s embedding width (band 0 = the head = ``dim``); the adaptive softmax's
    tail ``band - 1`` uses the same width (:class:`~sampledlm.objectives.adaptive.AdaptiveSoftmax`)."""
    return max(1, int(dim // (factor ** band)))


def check_cutoffs(cutoffs: list[int], num_words: int, flag: str = "--input-cutoffs") -> list[int]:
    cuts = [int(c) for c in cutoffs]
    if any(b <= a for a, b in zip(cuts, cuts[1:])) or any(c < 1 or c > num_words - 1 for c in cuts):
        raise ValueError(f"{flag} {' '.join(map(str, cuts))}: give increasing ranks between 1 and "
                         f"V-1 = {num_words - 1}")
    return cuts


class AdaptiveInput(nn.Module):
    """The embedding table of the module docstring.

    ``head_rows``: when given (a function returning a ``[V, d]`` parameter, the output layer's weight, which
    stays the output layer's: a function, so it is neither registered nor saved twice), band 0 reads
    its rows instead of owning a table: the head is tied to the output embeddings (then ``sparse``
    should be the output layer's own setting, so that its weight gets one kind of gradient).
    ``sparse``: row-sparse gradients for the head and the band tables (see the module docstring).
    """

    def __init__(self, num_words: int, dim: int, cutoffs: list[int], factor: float = 4.0, counts=None,
                 head_rows=None, sparse: bool = False):
        super().__init__()
        self.num_words, self.dim, self.factor = num_words, dim, float(factor)
        self.sparse_head = self.sparse_tables = bool(sparse)
        self.cutoffs = check_cutoffs(cutoffs, num_words) + [num_words]
        order = frequency_order(counts, num_words)
        rank = np.empty(num_words + 1, dtype=np.int64)
        rank[order] = np.arange(num_words)
        rank[num_words] = -1  # <s>: no band
        band = np.searchsorted(np.asarray(self.cutoffs), rank, side="right")
        starts = np.asarray([0] + self.cutoffs[:-1])
        local = rank - starts[np.minimum(band, len(starts) - 1)]
        band[num_words], local[num_words] = -1, 0
        self.register_buffer("band", torch.from_numpy(band), persistent=False)
        self.register_buffer("local", torch.from_numpy(local), persistent=False)
        self.register_buffer("order", torch.from_numpy(order), persistent=False)
        self.head_rows = head_rows
        self.head = None if head_rows is not None else nn.Parameter(torch.empty(self.cutoffs[0], dim))
        self.tables = nn.ParameterList()
        self.projs = nn.ParameterList()
        for i in range(1, len(self.cutoffs)):
            d_i = band_width(dim, factor, i)
            self.tables.append(nn.Parameter(torch.empty(self.cutoffs[i] - self.cutoffs[i - 1], d_i)))
            self.projs.append(nn.Parameter(torch.empty(d_i, dim)))
        self.bos = nn.Parameter(torch.empty(1, dim))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Rows ``N(0, 1/d_i)`` and projections ``N(0, 1/d)``, so every band's ``e(w)`` has entries of
        variance about ``1/d``, the scale of the head rows and of the output rows ``N(0, 1/d)``."""
        if self.head is not None:
            nn.init.normal_(self.head, std=self.dim ** -0.5)
        for t, p in zip(self.tables, self.projs):
            nn.init.normal_(t, std=t.shape[1] ** -0.5)
            nn.init.normal_(p, std=self.dim ** -0.5)
        nn.init.normal_(self.bos, std=self.dim ** -0.5)

    def bands(self) -> list[tuple[nn.Parameter, nn.Parameter]]:
        """``[(Q_i [d_i, d], E_i [|band i|, d_i]) for bands i = 1..K]``: what an adaptive softmax may share."""
        return list(zip(self.projs, self.tables))

    def offer(self):
        """``(cutoffs, factor, word order [V], bands())``: what a tied adaptive softmax checks and shares.
        The adaptive softmax reads the shared tables densely (a tail's softmax covers its whole band), so
        from here on they take dense gradients too."""
        self.sparse_tables = False
        return self.cutoffs[:-1], self.factor, self.order.cpu().numpy(), self.bands()

    def sparse_parameters(self) -> list[nn.Parameter]:
        """The parameters this module looks up with row-sparse gradients: its own head table and the band
        tables ``E_i`` (not the projections ``Q_i`` nor the ``<s>`` row, which are dense; not a tied
        head's rows, which the output layer lists)."""
        out = [self.head] if self.sparse_head and self.head is not None else []
        return out + (list(self.tables) if self.sparse_tables else [])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if torch.jit.is_tracing() or torch.onnx.is_in_onnx_export():
            return self.every_band(ids)
        flat = ids.reshape(-1)
        band, local = self.band[flat], self.local[flat]
        rows = []  # (positions, vectors) per band, written into one [n, d] tensor at the end
        sel = (band == 0).nonzero().squeeze(1)
        rows.append((sel, F.embedding(flat[sel], self.head_rows(), sparse=self.sparse_head)
                     if self.head_rows is not None else F.embedding(local[sel], self.head, sparse=self.sparse_head)))
        for i, (proj, table) in enumerate(zip(self.projs, self.tables), start=1):
            sel = (band == i).nonzero().squeeze(1)
            if sel.numel():
                rows.append((sel, F.embedding(local[sel], table, sparse=self.sparse_tables) @ proj))
        sel = (band < 0).nonzero().squeeze(1)
        if sel.numel():
            rows.append((sel, self.bos.expand(sel.numel(), -1)))
        dtype = rows[0][1].dtype
        for _, v in rows[1:]:
            dtype = torch.promote_types(dtype, v.dtype)
        out = torch.zeros(flat.shape[0], self.dim, dtype=dtype, device=flat.device)
        for sel, v in rows:
            out = out.index_copy(0, sel, v.to(dtype))
        return out.reshape(*ids.shape, self.dim)

    def every_band(self, ids: torch.Tensor) -> torch.Tensor:
        """The same ``[*ids.shape, d]`` with no branch on the ids (what an exported graph needs: a trace keeps only
        the bands its example ids reach): every band's lookup for every position, each kept where its band is the
        word's. K + 1 lookups and K projections of every position: for export, not for training."""
        flat = ids.reshape(-1)
        band, local = self.band[flat], self.local[flat]
        zero = torch.zeros_like(flat)
        if self.head_rows is not None:
            out = F.embedding(torch.where(band == 0, flat, zero), self.head_rows())
        else:
            out = F.embedding(torch.where(band == 0, local, zero), self.head)
        for i, (proj, table) in enumerate(zip(self.projs, self.tables), start=1):
            v = F.embedding(torch.where(band == i, local, zero), table) @ proj
            out = torch.where((band == i).unsqueeze(1), v.to(out.dtype), out)
        out = torch.where((band < 0).unsqueeze(1), self.bos.to(out.dtype).expand_as(out), out)
        return out.reshape(*ids.shape, self.dim)


def from_config(cfg, num_words: int, dim: int, counts, head_rows=None, sparse: bool = False) -> AdaptiveInput:
    """The adaptive input a model's settings ask for (``input_cutoffs``, default: the adaptive softmax's
    default bands from the counts; ``input_factor``)."""
    cuts = cfg.input_cutoffs if cfg.input_cutoffs is not None else default_cutoffs(counts, num_words)
    return AdaptiveInput(num_words, dim, cuts, cfg.input_factor, counts, head_rows=head_rows, sparse=sparse)
