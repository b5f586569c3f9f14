"""CPU ms of one SegmentGRU layer, forward + backward on a [32, 35] batch (GRU-256), 200 repetitions after 5 warm-up
ones: `python gru-segment-ab.py 200` (input matrices, e = 200) or `python gru-segment-ab.py 256 id` (none, e = 256).
Run it under two checkouts (PYTHONPATH=.../src) to compare them."""
import sys
import time

import torch

from sampledlm.neural import gru_cpu
from sampledlm.neural.device import keep_freed_memory

keep_freed_memory()
torch.set_num_threads(1)
T, B, E, H = 35, 32, int(sys.argv[1]), 256
rnn = torch.nn.GRU(E, H, batch_first=True)
if E == H and len(sys.argv) > 2:
    gru_cpu.identity_input(rnn)
x = torch.randn(B, T, E, requires_grad=True)
g = torch.randn(B, T, H)


def run():
    out, _ = gru_cpu.gru_forward(rnn, x, None)
    out.backward(g)


for _ in range(5):
    run()
n = 200
t = time.process_time()
for _ in range(n):
    run()
total = (time.process_time() - t) / n * 1e3
t = time.process_time()
for _ in range(n):
    gru_cpu.gru_forward(rnn, x, None)
fwd = (time.process_time() - t) / n * 1e3
print(f"E={E} identity={len(sys.argv) > 2}: forward+backward {total:.2f} ms, forward {fwd:.2f} ms, "
      f"backward {total - fwd:.2f} ms")
