"""Bit paths for hsm's tree by recursive 2-means over a run's input word vectors (Mnih & Hinton 2009 built
their trees from a first model's learned word vectors). Leaves: clusters of at most LEAF words.
usage: paths.py RUN OUT [LEAF]"""
import sys
import numpy as np
from safetensors.numpy import load_file

run, out = sys.argv[1], sys.argv[2]
leaf = int(sys.argv[3]) if len(sys.argv) > 3 else 16
words = [l.split("\t")[0] for l in open(f"{run}/vocab.txt", encoding="utf-8").read().splitlines()]
counts = [int(l.split("\t")[1]) if "\t" in l else 1 for l in open(f"{run}/vocab.txt", encoding="utf-8").read().splitlines()]
X = load_file(f"{run}/model.safetensors")["model/embed.weight"][: len(words)].astype(np.float64)
X /= np.linalg.norm(X, axis=1, keepdims=True) + 1e-9
rng = np.random.default_rng(0)
paths = {}

def split(idx, prefix):
    if len(idx) <= leaf:
        for i in idx:
            paths[i] = prefix or "0"
        return
    Y = X[idx]
    c = Y[rng.choice(len(idx), 2, replace=False)]
    for _ in range(20):
        d = Y @ c.T
        lab = (d[:, 1] > d[:, 0]).astype(int)
        if lab.min() == lab.max():
            lab = (np.arange(len(idx)) >= len(idx) // 2).astype(int)
        c = np.stack([Y[lab == k].mean(0) for k in (0, 1)])
        c /= np.linalg.norm(c, axis=1, keepdims=True) + 1e-9
    split(idx[lab == 0], prefix + "0")
    split(idx[lab == 1], prefix + "1")

sys.setrecursionlimit(10000)
split(np.arange(len(words)), "")
with open(out, "w", encoding="utf-8") as f:
    for i in sorted(paths, key=lambda i: paths[i]):
        f.write(f"{paths[i]}\t{words[i]}\t{counts[i]}\n")
depth = [len(p) for p in paths.values()]
print(f"{len(paths)} words, {len(set(paths.values()))} leaves, depth {min(depth)}..{max(depth)} mean {np.mean(depth):.1f}")
