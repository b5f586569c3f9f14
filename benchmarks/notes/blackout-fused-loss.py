"""Prototype, not in src: BlackOut's per-example loss as one autograd function with the closed-form gradient,
checked against the objective's autograd path (float64 to 1e-14, float32 to 1e-5; logits up to 30 with the same
capped terms as log1mexp) and timed on [1,120, 1,000] scores, one thread (loss forward and backward: 30-43 ms
against 51-53 ms, on a loaded machine). Run from the checkout: OMP_NUM_THREADS=1 python benchmarks/notes/blackout-fused-loss.py"""
import math, time, torch
from sampledlm.objectives.nce import log1mexp
from sampledlm.objectives.sampled import masked_fill, NEG_INF

class BlackOutLoss(torch.autograd.Function):
    """Per-example BlackOut loss over l_true [N] and l_neg [N, S] (not kept: -inf), gradient in closed form."""
    @staticmethod
    def forward(ctx, l_true, l_neg):
        log_z = torch.logaddexp(l_true, torch.logsumexp(l_neg, dim=1))
        x = (l_neg - log_z.unsqueeze(1)).clamp_(max=-1e-7)  # as log1mexp: a negative holding all the mass is capped
        p = torch.exp(x)
        one_minus = torch.expm1(x).neg_()
        neg = torch.where(x > -math.log(2), torch.log(one_minus), torch.log1p(-p)).sum(1)
        r = (p / one_minus).masked_fill_(x >= -1e-7, 0.0)  # d -log(1 - p_k) / d x_k; 0 where capped (clamp's gradient)
        p_true = torch.exp(l_true - log_z)
        ctx.save_for_backward(p, p_true, r)
        return log_z - l_true - neg

    @staticmethod
    def backward(ctx, g):
        p, p_true, r = ctx.saved_tensors
        b = r.sum(1)
        g_neg = (p + r - p * b.unsqueeze(1)) * g.unsqueeze(1)
        g_true = (p_true - 1 - p_true * b) * g
        return g_true, g_neg

def ref(true, logq_true, scores, logq, keep):
    l_true = (true - logq_true).unsqueeze(1)
    l_neg = masked_fill(scores - logq, keep, NEG_INF)
    log_z = torch.logsumexp(torch.cat([l_true, l_neg], 1), dim=1, keepdim=True)
    neg = masked_fill(log1mexp(l_neg - log_z), keep, 0.0).sum(1)
    return (log_z - l_true).squeeze(1) - neg

def fused(true, logq_true, scores, logq, keep):
    return BlackOutLoss.apply(true - logq_true, masked_fill(scores - logq, keep, NEG_INF))

torch.manual_seed(0)
for dt in (torch.float64, torch.float32):
    N,S=64,50
    true=torch.randn(N,dtype=dt,requires_grad=True); lqt=torch.randn(N,dtype=dt)-3
    scores=(3*torch.randn(N,S,dtype=dt)).requires_grad_(); lq=torch.randn(1,S,dtype=dt)-3
    keep=torch.rand(N,S)>0.1
    w=torch.rand(N,dtype=dt)
    a=ref(true,lqt,scores,lq,keep); ga=torch.autograd.grad((a*w).sum(),[true,scores])
    b=fused(true,lqt,scores,lq,keep); gb=torch.autograd.grad((b*w).sum(),[true,scores])
    print(dt, (a-b).abs().max().item(), (ga[0]-gb[0]).abs().max().item(), (ga[1]-gb[1]).abs().max().item())
torch.set_num_threads(1)
N,S=1120,1000
true=torch.randn(N,requires_grad=True); lqt=torch.randn(N)-8
scores=torch.randn(N,S,requires_grad=True); lq=torch.randn(1,S)-8
keep=torch.rand(N,S)>0.001
for f in (ref, fused, ref, fused):
    for _ in range(3): f(true,lqt,scores,lq,keep).sum().backward()
    t=time.process_time()
    for _ in range(20): f(true,lqt,scores,lq,keep).sum().backward()
    print(f.__name__, round((time.process_time()-t)/20*1000,1), "ms")
