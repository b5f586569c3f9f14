"""CPU ms for one BPTT segment (32 x 35, GRU-256) forward + backward through gru_cpu.gru_forward, and through
torch.nn.GRU, in float32 and under bf16 autocast; input width 200 (input matrices) or 256 (none)."""
import time, torch
torch.set_num_threads(1); torch.manual_seed(0)
from sampledlm.neural import gru_cpu
from sampledlm.neural.device import keep_freed_memory; keep_freed_memory()
def tm(f, k=30):
    for _ in range(5): f()
    ts = []
    for _ in range(k):
        t0 = time.process_time(); f(); ts.append(time.process_time() - t0)
    return 1000 * sorted(ts)[k // 2]
for e, ident in ((200, False), (256, True)):
    rnn = torch.nn.GRU(e, 256, batch_first=True)
    if ident: gru_cpu.identity_input(rnn)
    x = torch.randn(32, 35, e, requires_grad=True)
    for prec in ("fp32", "bf16"):
        for how in ("segment", "torch.nn.GRU"):
            def one():
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "bf16"):
                    out, st = gru_cpu.gru_forward(rnn, x, None) if how == "segment" else rnn(x)
                (out.float().sum() + st.float().sum()).backward()
            print(f"input {'none (e=256)' if ident else 'matrices (e=200)'} {prec} {how}: {tm(one):.2f} ms")
