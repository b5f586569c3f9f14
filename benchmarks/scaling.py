"""``scaling``: training cost per token of every output objective against the vocabulary size V,
as a fraction of the full softmax's; the two samplers; the PTB feed-forward model's step per objective.

1. Synthetic: Zipf(1) words over V = 10k, 100k, 1M, a small model (one tanh layer of H = 256 over
   a 64-d input per example) and the output layer ``OutputLayer(V, H, sparse=objective.sparse_output)``;
   one step = forward + backward + ``torch.optim.SGD`` step on a batch of B = 128; the sampled
   objectives use S = 250 samples shared by the batch from unigram^0.75 (``binary``: negative rate
   S / V). Median seconds per step; the sampled objectives at every V are timed in interleaved rounds
   (one step of each per round) so that load from other processes spreads evenly over them; the
   softmax (seconds per step at V = 1M) is timed afterwards with a few steps. Criteria: a sampled
   objective's cost grows at most 1.5x from V = 10k to 1M, and at V = 100k it is >= 20x cheaper
   than the softmax.
2. Samplers: building and drawing S + 20 words from unigram^0.75 by the alias method and by
   ``torch.multinomial``, at each V.
3. The feed-forward trigram of :mod:`sampledlm.neural.ffnn` (d = 50, h = 200) on real trigram
   histories (PTB, ``--data``, or with ``--quick`` the built-in corpus), tokens/s per objective.

``python -m benchmarks objectives`` is another name for this experiment.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
import torch
from torch import nn

from sampledlm.errors import UserError

from sampledlm.objectives.output import OutputLayer
from sampledlm.objectives import OBJECTIVES, make_objective, objective_options
from sampledlm.objectives.sampling import SAMPLERS, noise_distribution
from .report import lm_data, new_figure, stamp, table, work_dir, write_page

NAME = "scaling"
H, B, S, IN = 256, 128, 250, 64
#: the softmax and the sampled objectives (the structured and self-normalised ones: ``python -m benchmarks outputs``)
SAMPLED = [n for n in OBJECTIVES if n in ("softmax", "binary") or "samples" in objective_options(OBJECTIVES[n])]


def zipf_counts(V: int) -> np.ndarray:
    return np.maximum((1e9 / np.arange(1, V + 1)).astype(np.int64), 1)


def zipf_batches(V: int) -> tuple[np.ndarray, list[tuple[torch.Tensor, torch.Tensor]]]:
    """``(counts, batches)`` of the synthetic setting at V: Zipf counts and 8 batches of B random inputs
    [B, IN] with targets drawn from the unigram (seeded: every objective sees the same batches)."""
    torch.manual_seed(0)
    counts = zipf_counts(V)
    q = torch.from_numpy(counts / counts.sum())
    return counts, [(torch.randn(B, IN), torch.multinomial(q, B, replacement=True)) for _ in range(8)]


def options(name: str, V: int) -> dict:
    return {"neg_rate": min(1.0, S / V)} if name == "binary" else {} if name == "softmax" else {"samples": S}


def make_step(obj, model, scorer, batches):
    """A closure doing one training step: ``obj(scorer, model(x), t)``, backward, SGD step."""
    opt = torch.optim.SGD([*model.parameters(), *obj.parameters()], lr=0.01)
    k = [0]

    def step():
        x, t = batches[k[0] % len(batches)]
        k[0] += 1
        obj(scorer, model(x), t).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)  # here, so each step pays for freeing its own gradients

    return step


class Small(nn.Module):
    """The synthetic step's model: a tanh layer over the input, then the output layer."""

    def __init__(self, V: int, sparse: bool):
        super().__init__()
        self.hidden = nn.Sequential(nn.Linear(IN, H), nn.Tanh())
        self.output = OutputLayer(V, H, sparse=sparse)

    def forward(self, x):
        return self.hidden(x)


def interleaved(steps: dict, rounds: int, warmup: int = 3) -> dict:
    """Median seconds per step of each closure, timed one step of each per round."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    times: dict = {k: [] for k in steps}
    for _ in range(rounds):
        for key, step in steps.items():
            t0 = time.perf_counter()
            step()
            times[key].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def synthetic(sizes: list[int], rounds: int, soft_rounds: int) -> list[dict]:
    """Every objective at every V. The objectives of one V share one model (two at most: sparse and
    dense output gradients), so V = 1M needs a few GB, not one output layer per objective."""
    steps, soft = {}, {}
    for V in sizes:
        counts, batches = zipf_batches(V)
        models: dict[bool, Small] = {}
        for name in SAMPLED:
            obj = make_objective(name, counts, **options(name, V))
            model = models.setdefault(obj.sparse_output, Small(V, obj.sparse_output))
            (soft if name == "softmax" else steps)[(V, name)] = make_step(obj, model, model.output, batches)
    timed = interleaved(steps, rounds)
    for key, step in soft.items():
        timed[key] = interleaved({key: step}, soft_rounds, warmup=1)[key]
    return [{"V": V, "objective": name, "options": options(name, V), "sec_per_step": timed[(V, name)],
             "tokens_per_s": B / timed[(V, name)], "us_per_token": 1e6 * timed[(V, name)] / B,
             "fraction_of_softmax_cost": timed[(V, name)] / timed[(V, "softmax")]}
            for V in sizes for name in SAMPLED]


def criteria(rows: list[dict], sizes: list[int]) -> dict:
    """Per sampled objective: cost growth from the smallest to the largest V (<= 1.5x) and the speed-up
    over the softmax at V = 100k (or the largest V; >= 20x)."""
    by = {(r["objective"], r["V"]): r for r in rows}
    lo, hi = sizes[0], sizes[-1]
    mid = 100_000 if 100_000 in sizes else hi
    out = {}
    for name in dict.fromkeys(r["objective"] for r in rows):
        if name == "softmax":
            continue
        growth = by[(name, hi)]["sec_per_step"] / by[(name, lo)]["sec_per_step"]
        speed = by[("softmax", mid)]["sec_per_step"] / by[(name, mid)]["sec_per_step"]
        out[name] = {"growth": growth, "speedup_at": mid, "speedup": speed, "pass": growth <= 1.5 and speed >= 20}
    return out


def sampler_times(V: int, rounds: int) -> list[dict]:
    q = noise_distribution(zipf_counts(V), 0.75)
    out = []
    for name, cls in SAMPLERS.items():
        t0 = time.perf_counter()
        smp = cls(q)
        build = time.perf_counter() - t0
        sec = interleaved({name: lambda: smp.draw((S + 20,))}, rounds=rounds)[name]
        out.append({"V": V, "sampler": name, "build_s": build, "us_per_draw_call": 1e6 * sec})
    return out


def ffnn_rows(files: dict, rounds: int) -> tuple[list[dict], int]:
    """Tokens/s of the feed-forward trigram (d = 50, h = 200) per objective on real histories."""
    from sampledlm.data.batches import ngram_histories, sentence_positions
    from sampledlm.data.corpus import build_vocab, load_ids
    from sampledlm.neural.ffnn import FFNN

    vocab = build_vocab(files["train"])
    ids = load_ids(files["train"], vocab, cache=False)
    V = len(vocab)
    take = np.arange(0, min(len(ids), 64 * B))
    hist = torch.as_tensor(ngram_histories(ids, sentence_positions(ids), 3, vocab.bos_id, take))
    tgt = torch.as_tensor(np.asarray(ids[take], dtype=np.int64))
    batches = [(hist[i:i + B], tgt[i:i + B]) for i in range(0, len(take) - B + 1, B)]
    steps, opts_of = {}, {}
    for name in SAMPLED:
        o = {"neg_rate": 0.05} if name == "binary" else options(name, V)  # binary: Xu et al.'s 5 %
        label = "binary (5%)" if name == "binary" else name
        torch.manual_seed(0)
        obj = make_objective(name, vocab.counts, **o)
        model = FFNN.build(V, order=3, embed_dim=50, hidden=[200], dropout=0.0, sparse_output=obj.sparse_output)
        steps[label], opts_of[label] = make_step(obj, model, model, batches), o
    return [{"V": V, "objective": label, "options": opts_of[label], "sec_per_step": sec, "tokens_per_s": B / sec,
             "us_per_token": 1e6 * sec / B} for label, sec in interleaved(steps, rounds).items()], V


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    rounds, soft_rounds = (8, 2) if quick else (30, 4)
    meta = stamp()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        load0 = os.getloadavg()[0]
        samplers = [r for V in sizes for r in sampler_times(V, 20 if quick else 100)]
        rows = synthetic(sizes, rounds, soft_rounds)
        try:
            files, label = lm_data(data_dir, quick, os.path.join(work_dir(NAME, quick), "data"))
            ffnn, ffnn_V = ffnn_rows(files, 5 if quick else 25)
        except UserError as e:  # no PTB and no --data: the synthetic parts still stand
            ffnn, ffnn_V, label = [], None, f"skipped: {e}"
    finally:
        torch.set_num_threads(threads)
    data = {"setup": {"hidden": H, "batch": B, "samples": S, "sizes": sizes, "rounds": rounds,
                      "softmax_rounds": soft_rounds, "quick": quick, "torch_threads": 1,
                      "load_average_start": load0, "load_average_end": os.getloadavg()[0],
                      "ffnn_data": label, "ffnn_vocabulary": ffnn_V},
            "rows": rows, "criteria": criteria(rows, sizes), "samplers": samplers, "ffnn": ffnn}
    write_page(out_dir, NAME, "Cost per token against vocabulary size", meta, data, markdown(data), figure=plot(data))
    return data


def plot(data: dict):
    fig, axes = new_figure(1, 2, figsize=(13, 4.5))
    for name in dict.fromkeys(r["objective"] for r in data["rows"]):
        pts = [(r["V"], r["tokens_per_s"], r["fraction_of_softmax_cost"]) for r in data["rows"] if r["objective"] == name]
        v, tps, frac = zip(*pts)
        lw = 2.5 if name == "softmax" else 1.2
        axes[0].plot(v, tps, marker="o", label=name, lw=lw)
        axes[1].plot(v, frac, marker="o", label=name, lw=lw)
    for ax, yl in zip(axes, ["training tokens/s", "cost per token / full softmax's"]):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("vocabulary size V")
        ax.set_ylabel(yl)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=8)  # one legend, beside both panels
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    return fig


def markdown(data: dict) -> str:
    st = data["setup"]
    sizes = st["sizes"]
    by = {(r["objective"], r["V"]): r for r in data["rows"]}
    names = list(dict.fromkeys(r["objective"] for r in data["rows"]))
    t = table(["objective"] + [f"V = {v:,}: tokens/s (fraction of softmax cost)" for v in sizes]
              + [f"growth of cost {sizes[0] // 1000}k → {sizes[-1] // 1000}k"],
              [[n] + [f"{by[(n, v)]['tokens_per_s']:,.0f} ({by[(n, v)]['fraction_of_softmax_cost']:.4f})" for v in sizes]
               + [f"{by[(n, sizes[-1])]['sec_per_step'] / by[(n, sizes[0])]['sec_per_step']:.2f}x"] for n in names])
    sampled = [n for n in names if n != "softmax"]
    worst = max(sampled, key=lambda n: by[(n, sizes[-1])]["fraction_of_softmax_cost"])
    best = min(sampled, key=lambda n: by[(n, sizes[-1])]["fraction_of_softmax_cost"])
    growth = {n: by[(n, sizes[-1])]["sec_per_step"] / by[(n, sizes[0])]["sec_per_step"] for n in names}
    flat = [n for n in sampled if growth[n] <= 1.5]
    med = statistics.median(by[(n, sizes[-1])]["fraction_of_softmax_cost"] for n in sampled)
    ratio = (st["batch"] + st["samples"]) / sizes[-1]
    verdict = (f"the saving is {med / ratio:.1f}x smaller than the count predicts, because the fixed costs (hidden "
               "layer, sampling, Python overhead, sparse updates) do not shrink with V; the paper's argument counts "
               "exp evaluations only." if med > 1.5 * ratio else
               "the measured saving is as large as the count of score evaluations predicts, as the paper argues.")
    return f"""Training throughput of one step (forward + backward + SGD) of a small model (64-d input -> tanh {st['hidden']})
with the output layer over V words, batch {st['batch']}, for the softmax and every sampled objective (`benchmarks.scaling.SAMPLED`; the structured ones: `outputs.md`);
sampled objectives draw S = {st['samples']} words shared by the batch (binary: negative rate S/V). Median of
{st['rounds']} interleaved rounds ({st['softmax_rounds']} steps for the softmax), 1 torch thread. Timings on a shared
machine while other engineers' jobs ran (1-minute load average {st['load_average_start']:.1f} at the start,
{st['load_average_end']:.1f} at the end): absolute figures are noisy; ratios are steadier.
Module: `benchmarks.scaling` (`python -m benchmarks scaling`, also named `objectives`).

![tokens/s and cost fraction vs V](scaling.png)

{t}

At V = {sizes[-1]:,} the sampled objectives cost between {by[(best, sizes[-1])]['fraction_of_softmax_cost']:.4f}
({best}) and {by[(worst, sizes[-1])]['fraction_of_softmax_cost']:.4f} ({worst}) of the full softmax per token; the
softmax's own cost grows {growth['softmax']:.0f}x from V = {sizes[0]:,}. Cost roughly flat in V (at most 1.5x):
{', '.join(flat) or 'none'}.

{criteria_text(data)}

## Samplers

Time to draw S + 20 = {st['samples'] + 20} words from unigram^0.75 (and to build the sampler once):

{table(["V", "sampler", "build (s)", "µs per draw"], [[f"{r['V']:,}", r['sampler'], f"{r['build_s']:.3f}",
        f"{r['us_per_draw_call']:.1f}"] for r in data['samplers']])}

The alias method costs O(1) per draw after an O(V) build; `torch.multinomial` rescans the O(V)
distribution on every call, so its cost grows with V. The alias sampler is the default.

## The feed-forward LM on real text

{ffnn_text(data)}

**Against the paper.** Botev et al. 2017 (fig. 2 caption) counts about 1,050 score evaluations per mini-batch of 50 with
S = 20 shared samples against 50,000 for the exact softmax at C = 1000, "a roughly 50 fold decrease"; the
saving is proportional to V / (S + batch). At V = {sizes[-1]:,} the count ratio (B + S) / V is
{(st['batch'] + st['samples']) / sizes[-1]:.4f} and the median measured cost fraction of the sampled objectives is
{statistics.median(by[(n, sizes[-1])]['fraction_of_softmax_cost'] for n in sampled):.4f}: {verdict}
"""


def criteria_text(data: dict) -> str:
    crit = data["criteria"]
    if not crit:
        return ""
    mid = next(iter(crit.values()))["speedup_at"]
    rows = [[n, f"{c['growth']:.2f}x", f"{c['speedup']:.0f}x", "met" if c["pass"] else "NOT met"] for n, c in crit.items()]
    sizes = data["setup"]["sizes"]
    return (f"Criteria: a sampled objective's cost per token grows at most 1.5x from V = {sizes[0]:,} to "
            f"{sizes[-1]:,}, and at V = {mid:,} it is at least 20x cheaper than the full softmax.\n\n"
            + table(["objective", f"growth {sizes[0] // 1000}k → {sizes[-1] // 1000}k", f"speed-up at {mid // 1000}k",
                     "criteria"], rows))


def ffnn_text(data: dict) -> str:
    st, rows = data["setup"], data["ffnn"]
    if not rows:
        return f"The feed-forward part was {st['ffnn_data']}."
    soft = next(r for r in rows if r["objective"] == "softmax")["us_per_token"]
    return (f"`sampledlm.neural.ffnn.FFNN` (trigram, d = 50, h = 200, V = {st['ffnn_vocabulary']:,}) on the first "
            f"{64 * st['batch']:,} trigram histories of {st['ffnn_data']}, batch {st['batch']}, the same step "
            "(median of interleaved rounds); `binary (5%)`: Xu et al.'s 5 % of the negatives.\n\n"
            + table(["objective", "tokens/s", "µs/token", "speed-up vs softmax"],
                    [[r["objective"], f"{r['tokens_per_s']:,.0f}", f"{r['us_per_token']:.1f}",
                      f"{soft / r['us_per_token']:.1f}x"] for r in rows])
            + "\n\nAt V = 10k the output layer is only part of the step (the input embeddings get a dense gradient, "
            "the hidden layer and Python overhead are fixed costs), so the gain is smaller than on the synthetic "
            "100k-1M vocabularies. `binary (5%)` draws 8 negative groups per batch, so each step scores the union "
            "of 8 subsets, about 1 - 0.95^8 = 34 % of V: at 5 % and V = 10k it saves little.")
