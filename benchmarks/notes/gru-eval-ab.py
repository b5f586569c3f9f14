"""A/B of a GRU run's exact validation perplexity on PTB valid (one running-text row) through torch.nn.GRU and
through the segment GRU's loops (2026-11-27): python benchmarks/notes/gru-eval-ab.py RUN_DIR"""
import sys, time, torch
from sampledlm.neural import gru_cpu
from sampledlm.neural import rundir as runs
from sampledlm.neural.lm import perplexity
from sampledlm.data.corpus import load_ids
torch.set_num_threads(1)
model, obj, vocab, _ = runs.load_run(sys.argv[1])
ids = load_ids('../shared/data/ptb/ptb.valid.txt', vocab)
real = gru_cpu.usable
for rep in range(2):
    for name in ('torch.nn.GRU', 'fused'):
        gru_cpu.usable = real if name == 'fused' else (lambda rnn, x: real(rnn, x) and torch.is_grad_enabled())
        c = time.process_time(); p = perplexity(model, obj, ids); print(name, f'{p:.4f}', f'{time.process_time() - c:.2f} CPU s')
