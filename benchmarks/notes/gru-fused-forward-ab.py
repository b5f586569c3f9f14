"""A/B of the segment GRU's forward and backward over one 32 x 35 segment of GRU-256, before and after the fused
forward step (2026-11-27): run from the repository root after
    git show 7de9209:src/sampledlm/neural/gru_cpu.py | sed "s/from .gru_cpu_kernel/from sampledlm.neural.gru_cpu_kernel/" > /tmp/gru_cpu_old.py
Prints the process CPU ms of each side, three alternated rounds of 30."""
import sys, time, torch
sys.path.insert(0, '/tmp')
import gru_cpu_old
from sampledlm.neural import gru_cpu
torch.set_num_threads(1)
T, B, H = 35, 32, 256
def make(e, ident):
    rnn = torch.nn.GRU(e, H, batch_first=True)
    if ident: gru_cpu.identity_input(rnn)
    return rnn
res = {}
for e, ident in ((200, False), (256, True)):
    rnn = make(e, ident)
    x = torch.randn(B, T, e, requires_grad=True); h0 = torch.zeros(1, B, H)
    for prec in ('fp32', 'bf16'):
        for rep in range(3):
            for name, mod in (('old', gru_cpu_old), ('new', gru_cpu)):
                def once():
                    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=prec == 'bf16'):
                        out, _ = mod.gru_forward(rnn, x, h0)
                    out.float().sum().backward()
                once(); c = time.process_time()
                for _ in range(30): once()
                res.setdefault((e, prec, name), []).append((time.process_time() - c) / 30 * 1e3)
for (e, prec, name), v in res.items():
    print(f'input {e} {"identity" if e == 256 else "matrices"} {prec} {name}: ' + ', '.join(f'{t:.2f}' for t in v) + ' ms')
