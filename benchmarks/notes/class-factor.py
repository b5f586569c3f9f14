"""Split a model's PTB validation perplexity into a class factor and a within-class factor over one class layer's
classes: for the class model its own two factors; for any other model (the softmax GRU) its class marginal
log sum_{w in c} P(w|h) and the rest. Lab note: gru-structured-2026-11-26.md ("Where the class layer loses").

usage: python benchmarks/notes/class-factor.py CLASS_RUN OTHER_RUN VALID_TXT
"""
import math
import sys

import torch

from sampledlm.data.corpus import load_ids
from sampledlm.data.tokenizer import TextOptions
from sampledlm.neural.lm import load_neural

torch.set_num_threads(1)
class_lm, other = (load_neural(p, device="cpu") for p in sys.argv[1:3])
ids = load_ids(sys.argv[3], class_lm.vocab, TextOptions(), cache=False)
word_class = class_lm.objective.word_class
C = int(word_class.max()) + 1
with torch.no_grad():
    for name, lm in (("class model", class_lm), ("other model", other)):
        lm.model.eval()
        class_nats = within_nats = n = 0.0
        for ctx, y, _ in lm.model.eval_contexts(ids, batch_size=512):
            lp = lm.objective.log_prob(lm.model, ctx)  # [n, V], exact
            top = lp.max(1, keepdim=True).values
            lc_all = torch.zeros(len(y), C).index_add_(1, word_class, (lp - top).exp()).log() + top
            lc = lc_all.gather(1, word_class[y].unsqueeze(1)).squeeze(1)
            lw = lp.gather(1, y.unsqueeze(1)).squeeze(1)
            class_nats -= float(lc.sum())
            within_nats -= float((lw - lc).sum())
            n += len(y)
        print(f"{name}: class perplexity {math.exp(class_nats / n):.2f}, within-class {math.exp(within_nats / n):.2f}, "
              f"total {math.exp((class_nats + within_nats) / n):.2f}")
