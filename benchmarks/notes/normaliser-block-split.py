# One core: a normaliser block's float32 product against the whole block (product, max, exp, sum), 30 blocks of
# [1024 x 256] x [256 x 4096]. Run 2026-11-29 on the AMD EPYC machine beside nice-19 jobs: product 0.79-0.85 CPU s
# (76-81 GFLOP/s over four rounds), the rest 13-17 % of the block (large-vocab page, exact evaluation).
import time, torch
torch.set_num_threads(1)
N, h, B, nb = 1024, 256, 4096, 30
ctx = torch.randn(N, h); W = torch.randn(B * nb, h) * 0.1; b = torch.randn(B * nb)
z = torch.empty(N, B); top = torch.full((N,), -1e30); total = torch.zeros(N)
def run(part):
    global top, total
    t0 = time.process_time()
    for k in range(nb):
        torch.addmm(b[k*B:(k+1)*B], ctx, W[k*B:(k+1)*B].t(), out=z)
        if part == "all":
            new_top = torch.maximum(top, z.amax(1))
            z.sub_(new_top.unsqueeze(1)).exp_()
            total.mul_(torch.exp(top - new_top)).add_(z.sum(1))
            top = new_top
    return time.process_time() - t0
for r in range(2):
    a = run("mm"); c = run("all")
    print(f"mm {a:.3f} s, all {c:.3f} s, rest {(c-a)/c*100:.0f}% ; GFLOP/s mm {2*N*h*B*nb/a/1e9:.0f}")
