"""A minimal re-implementation of PyTorch's word_language_model example, ``--model Transformer``
(pytorch/examples, ``word_language_model/model.py`` and ``main.py``), for the ``transformer`` bench.

It is *not* the example's code: the example is not shipped with this package, so its model and its
training loop are written again here as they are in the original, at the example's defaults:

- data: each line's words plus ``<eos>``, a dictionary in order of first appearance; the stream
  cut into 20 columns for training and 10 for evaluation (``batchify``), read in ``bptt = 35``
  steps (``get_batch``);
- model (``TransformerModel``, a subclass of ``nn.Transformer`` whose decoder is replaced by the
  output ``nn.Linear``): ``nn.TransformerEncoder`` of 2 post-LayerNorm ``nn.TransformerEncoderLayer``
  (d = 200, 2 heads, feed-forward 200, ReLU, dropout 0.1: ``nn.Transformer``'s default, since the
  example hands its ``--dropout`` to the positional encoding only) with ``nn.Transformer``'s final
  LayerNorm and Xavier-uniform initialisation; input ``nn.Embedding`` times sqrt(d), sinusoidal
  positions with dropout 0.2, a square causal mask (0 / -inf), no weight tying; embedding and
  output weights uniform in [-0.1, 0.1], output bias 0; ``log_softmax`` + ``NLLLoss``;
- training: plain SGD by hand (``p.data.add_(p.grad, alpha=-lr)``) at lr 5 (the example's README for
  the Transformer), gradient norm clipped to 0.25, seed 1111, one epoch;
- evaluation: ``total_loss += len(data) * loss`` over the 10-column blocks, divided by the number of
  predictions; perplexity ``exp`` of it (every block read on its own: no memory across blocks).

``python -m benchmarks.transformer_reference TRAIN VALID TEST OUT.json [--epochs N] [--threads T]``
trains, evaluates and writes ``{"valid_ppl", "test_ppl", "train_seconds", "tokens_per_s", ...}``.
"""

from __future__ import annotations

import json
import math
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


class Dictionary:
    def __init__(self):
        self.word2idx: dict[str, int] = {}

    def add(self, word: str) -> int:
        if word not in self.word2idx:
            self.word2idx[word] = len(self.word2idx)
        return self.word2idx[word]


def tokenize(path: str, dictionary: Dictionary) -> torch.Tensor:
    ids = []
    with open(path, encoding="utf8") as f:
        for line in f:
            ids.extend(dictionary.add(w) for w in line.split() + ["<eos>"])
    return torch.tensor(ids, dtype=torch.int64)


def batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()  # [steps, bsz]


def get_batch(source: torch.Tensor, i: int, bptt: int):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))  # [max_len, 1, d]

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(0), :])


class TransformerModel(nn.Module):
    """The example's model, with ``nn.Transformer``'s encoder part built directly (same modules, same init)."""

    def __init__(self, ntoken: int, ninp: int = 200, nhead: int = 2, nhid: int = 200, nlayers: int = 2,
                 dropout: float = 0.2):
        super().__init__()
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout=0.1)  # nn.Transformer's default dropout
        self.encoder = nn.TransformerEncoder(layer, nlayers, norm=nn.LayerNorm(ninp), enable_nested_tensor=False)
        for p in self.encoder.parameters():  # nn.Transformer._reset_parameters
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.src_mask = None
        nn.init.uniform_(self.input_emb.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, src):
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            mask = (torch.triu(torch.ones(len(src), len(src))) == 1).transpose(0, 1)
            self.src_mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)
        src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
        return F.log_softmax(self.decoder(self.encoder(src, mask=self.src_mask)), dim=-1)


def train_step(model, data, targets, lr: float, clip: float) -> float:
    model.zero_grad()
    output = model(data)
    loss = F.nll_loss(output.view(-1, output.size(-1)), targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    return loss.item()


def evaluate(model, source: torch.Tensor, bptt: int) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, bptt):
            data, targets = get_batch(source, i, bptt)
            output = model(data)
            total += len(data) * F.nll_loss(output.view(-1, output.size(-1)), targets).item()
    return total / (len(source) - 1)


def main(train: str, valid: str, test: str, out: str, epochs: int = 1, lr: float = 5.0, threads: int | None = None,
         max_batches: int | None = None) -> dict:
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(1111)
    d = Dictionary()
    corpus = [tokenize(p, d) for p in (train, valid, test)]
    train_data = batchify(corpus[0], 20)
    val_data, test_data = batchify(corpus[1], 10), batchify(corpus[2], 10)
    model = TransformerModel(len(d.word2idx))
    bptt, seconds, tokens = 35, 0.0, 0
    for _ in range(epochs):
        model.train()
        for b, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            if max_batches is not None and b >= max_batches:
                break
            data, targets = get_batch(train_data, i, bptt)
            t0 = time.perf_counter()
            train_step(model, data, targets, lr, 0.25)
            seconds += time.perf_counter() - t0
            tokens += targets.numel()
    result = {"valid_ppl": math.exp(evaluate(model, val_data, bptt)), "test_ppl": math.exp(evaluate(model, test_data, bptt)),
              "train_seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / max(seconds, 1e-9),
              "vocab": len(d.word2idx), "epochs": epochs, "threads": torch.get_num_threads()}
    with open(out + ".tmp", "w") as f:
        json.dump(result, f)
    import os

    os.replace(out + ".tmp", out)
    return result


if __name__ == "__main__":
    args = sys.argv[1:]
    opts = {"epochs": 1, "threads": None, "max_batches": None}
    for key in list(opts):
        flag = "--" + key.replace("_", "-")
        if flag in args:
            k = args.index(flag)
            opts[key] = int(args[k + 1])
            del args[k : k + 2]
    print(json.dumps(main(*args, **opts)))
