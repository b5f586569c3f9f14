"""Forward + backward of hsm's wide output layer alone (one thread, V = 10k PTB, h = 200, 1,120 PTB targets a step):
wide nodes scored as blocks from GROUP_MIN scores, against every step gathering its own siblings, beside the full
softmax. Lab note: gru-structured-2026-11-26.md ("hsm: wide nodes as blocks").

usage: python benchmarks/notes/hsm-blocks-bench.py VOCAB_TXT PTB_TRAIN TREE_OR_CLASSES_FILE [K,K,...]
"""
import sys
import time

import numpy as np
import torch

import sampledlm.objectives.hsm as hsm
from sampledlm.data.clusters import read_word_classes
from sampledlm.data.corpus import load_ids
from sampledlm.data.vocab import Vocab
from sampledlm.objectives import make_objective
from sampledlm.objectives.output import OutputLayer

torch.set_num_threads(1)
vocab = Vocab.load(sys.argv[1])
ids = load_ids(sys.argv[2], vocab).astype(np.int64)
arities = [int(k) for k in (sys.argv[4] if len(sys.argv) > 4 else "16,64,128").split(",")]
rng = np.random.default_rng(0)


def timed(step, reps=5) -> float:
    t = time.process_time()
    for _ in range(reps):
        step()
    return (time.process_time() - t) / reps * 1000


for k in arities:
    out = OutputLayer(len(vocab), 200, sparse=True)
    obj = make_objective("hsm", vocab.counts, arity=k)
    obj.bind(out)
    cls, _, labels = read_word_classes(sys.argv[3], vocab.words, labels=True)
    obj.set_word_classes(cls, labels)

    def step():
        s = rng.integers(0, len(ids) - 1120)
        obj(out, torch.randn(1120, 200, requires_grad=True), torch.from_numpy(ids[s:s + 1120])).backward()

    best = {}
    for _ in range(3):  # alternate the variants, keep each one's fastest
        for group_min in (4, 16, 64, 256, 10**9):
            hsm.GROUP_MIN = group_min
            best[group_min] = min(best.get(group_min, float("inf")), timed(step))
    print(f"K = {k}: " + ", ".join(f"{'gathered' if g == 10**9 else f'blocks from {g}'} {ms:.1f} ms"
                                    for g, ms in best.items()), flush=True)
soft = OutputLayer(len(vocab), 200)
y = torch.from_numpy(ids[:1120])
print(f"full softmax {timed(lambda: torch.nn.functional.cross_entropy(soft.score_all(torch.randn(1120, 200, requires_grad=True)), y).backward()):.1f} ms")
