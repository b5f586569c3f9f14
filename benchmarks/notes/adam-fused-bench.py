"""Adam on the GRU-256 dense tensors (768 x 256, biases, a 10,000-row bias): one step, single-tensor, foreach and
fused, process CPU microseconds, three alternated rounds (2026-11-27)."""
import time, torch
torch.set_num_threads(1)
ps = [torch.nn.Parameter(torch.randn(*s)) for s in [(768, 256), (768,), (768,), (10000,), (1, 256), (256,)]]
for p in ps: p.grad = torch.randn_like(p)
opts = {k: torch.optim.Adam(ps, lr=1e-3, **kw) for k, kw in (('single', {}), ('foreach', {'foreach': True}), ('fused', {'fused': True}))}
for rep in range(3):
    for k, o in opts.items():
        o.step(); c = time.process_time()
        for _ in range(500): o.step()
        print(k, f'{(time.process_time() - c) / 500 * 1e6:.0f} us')
