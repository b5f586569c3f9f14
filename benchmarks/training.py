"""``training``: what the trainer costs end to end, on this machine's CPU and (when torch sees one) a GPU.

1. **CPU, end to end** (always): ``sampledlm train`` of the feed-forward trigram and the tied GRU with
   ``css-is`` on synthetic Zipf(1) text (400k training tokens, a small validation file), with the
   vocabulary fixed at V = 10k and at V = 1M (``--vocab``: every word of the Zipf law, seen or not), the
   tokens/s the trainer reports for epoch 1. The two sizes alternate, two rounds each (their median).
   Target: the two sizes within 1.5x (a step whose cost does not grow with V: the output layer's sampled
   rows, and the input embeddings' row-sparse updates).
2. **Data-parallel** (always): the same feed-forward run with one process and with two ranks
   (``torchrun --nproc-per-node 2``; gloo on CPUs, NCCL between GPUs), same global batch: the two runs'
   losses and validation perplexities side by side, and tokens/s.
3. **GPU** (when ``torch.cuda.is_available()``; else the page says it was not measured):
   (a) a 1-layer LSTM (h = 1024, bf16 autocast, 128 x 35 tokens a step) on Zipf data at V = 10k, 100k
   and 1M: tokens/s for the full softmax, ``torch.nn.AdaptiveLogSoftmaxWithLoss`` and every sampled
   objective (S = 8192 shared samples), beside the bf16 matrix-multiply rate measured on the card
   (the softmax's useful FLOPs: about 6 V h per token); (b) the medium PTB LSTM of Zaremba et al. 2014
   (2 x 650, dropout 0.5, SGD lr 1, batch 20 x 35, clip 5, 39 epochs at most) with the softmax, CSS-IS
   and BlackOut, each with its test perplexity and wall time (``--data`` or ../shared/data/ptb).

4. **Nothing slower** (when PTB is at hand): the feed-forward and GRU models of the results pages (their
   defaults, the softmax) trained for one epoch on the first 100k / 50k PTB training tokens by this code and
   by an older commit (``SAMPLEDLM_TRAINING_BEFORE=REV``, default ``5620ad1``, the trainer before devices,
   precisions and ranks; a git worktree), alternating, two rounds: the tokens/s ratio now / before.

``--quick`` shrinks everything (sizes, tokens, steps) and runs section 3's code on the CPU, so the page's
machinery is tested without a GPU.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from sampledlm.neural.distributed import launch_error, local_launch
from .report import REPO_DIR, stamp, table, write_page
from .scaling import zipf_counts

NAME = "training"
SAMPLED_GPU = ["is", "css-is", "css-bernoulli", "nce", "neg", "blackout", "ranking", "binary"]


# --- synthetic data ----------------------------------------------------------------------------------------------
def zipf_text(path: str, vocab_size: int, tokens: int, seed: int, sentence: int = 20) -> None:
    """``tokens`` words drawn from Zipf(1) over ``w0 .. w{V-3}``, ``sentence`` words a line."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab_size - 1)
    ids = rng.choice(len(p), size=tokens, p=p / p.sum())
    with open(path, "w", encoding="utf-8") as f:
        for s in range(0, tokens, sentence):
            f.write(" ".join(f"w{i}" for i in ids[s:s + sentence]) + "\n")


def zipf_vocab(path: str, vocab_size: int) -> None:
    """A vocabulary file holding every word of the Zipf law (counts by rank), so V is exactly ``vocab_size``."""
    from sampledlm.data.vocab import EOS, UNK, Vocab

    n = vocab_size - 2  # </s> and <unk> count among the V words
    counts = zipf_counts(n)
    Vocab([EOS, UNK] + [f"w{i}" for i in range(n)], [int(1e9 / 20), 0] + counts.tolist()).save(path)


def _env() -> dict:
    src = os.path.join(REPO_DIR, "src")
    return dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")


def _train(args: list[str], out: str, ranks: int = 1) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="sampledlm-torchrun-") as logs:
        launch = ([sys.executable, "-m", "sampledlm"] if ranks == 1
                  else [*local_launch(ranks, log_dir=logs), "-m", "sampledlm"])
        p = subprocess.run(launch + ["train", *args, "-o", out], env=_env(), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"sampledlm train {' '.join(args)}:\n{launch_error(p.stderr)}")
    with open(os.path.join(out, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


# --- 1. the CPU, end to end --------------------------------------------------------------------------------------
MODELS = {"ffnn": ["--model", "ffnn"],
          "gru (tied)": ["--model", "gru", "--tie", "--embed-dim", "200", "--hidden", "256", "--proj", "200"]}


def cpu_end_to_end(work: str, sizes: list[int], tokens: int, rounds: int) -> list[dict]:
    data = {}
    for V in sizes:
        d = os.path.join(work, f"V{V}")
        os.makedirs(d, exist_ok=True)
        zipf_text(os.path.join(d, "train.txt"), V, tokens, seed=1)
        zipf_text(os.path.join(d, "valid.txt"), V, 200, seed=2)
        zipf_vocab(os.path.join(d, "vocab.txt"), V)
        data[V] = d
    rows = []
    for model, margs in MODELS.items():
        speeds: dict[int, list[float]] = {V: [] for V in sizes}
        for r in range(rounds):
            for V in (sizes if r % 2 == 0 else sizes[::-1]):  # alternate which size goes first
                d = data[V]
                m = _train(["--train", f"{d}/train.txt", "--valid", f"{d}/valid.txt", "--vocab", f"{d}/vocab.txt",
                            *margs, "--objective", "css-is", "--epochs", "1", "--threads", "1", "--seed", "1"],
                           os.path.join(work, f"run-{model.split()[0]}-{V}-{r}"))
                speeds[V].append(m[0]["tokens_per_s"])
        med = {V: statistics.median(v) for V, v in speeds.items()}
        rows.append({"model": model, "objective": "css-is", "tokens_per_s": med, "all": speeds,
                     "ratio": max(med.values()) / min(med.values())})
    return rows


# --- 2. data-parallel --------------------------------------------------------------------------------------------
def data_parallel(work: str, tokens: int, epochs: int) -> dict:
    zipf_text(os.path.join(work, "dp-train.txt"), 2000, tokens, seed=3)
    zipf_text(os.path.join(work, "dp-valid.txt"), 2000, max(tokens // 20, 200), seed=4)
    args = ["--train", f"{work}/dp-train.txt", "--valid", f"{work}/dp-valid.txt", "--model", "ffnn", "--dropout", "0",
            "--epochs", str(epochs), "--threads", "1", "--seed", "1"]
    one = _train(args, os.path.join(work, "dp-1"))
    two = _train(args, os.path.join(work, "dp-2"), ranks=2)
    worst = max(max(abs(a["valid_ppl"] / b["valid_ppl"] - 1), abs(a["train_loss"] / b["train_loss"] - 1))
                for a, b in zip(one, two))
    return {"one": one, "two": two, "max_rel_diff": worst}


# --- 4. nothing slower -------------------------------------------------------------------------------------------
ENV_BEFORE = "SAMPLEDLM_TRAINING_BEFORE"
BEFORE = "5620ad1"
PAGE_MODELS = {"ffnn (page defaults)": (["--model", "ffnn"], 100_000),
               "gru (page defaults)": (["--model", "gru"], 50_000)}


def before_after(work: str, files: dict, rounds: int, scale: float = 1.0) -> dict:
    """tokens/s of the pages' models, this code against ``BEFORE`` (alternating which goes first)."""
    from tests.campaigns.faults import before_side  # the fault campaign's old-commit worktree, reused
    from tests.campaigns.faults_engine import Side, child_env

    rev = os.environ.get(ENV_BEFORE, BEFORE)
    with before_side(rev, work) as (old, where):
        if old is None:
            return {"skipped": where}
        sides = {"now": Side("now", os.path.join(REPO_DIR, "src"), "now"), "before": old}
        rows = []
        for model, (margs, tokens) in PAGE_MODELS.items():
            n = int(tokens * scale)
            train = os.path.join(work, f"ptb-{n}.txt")
            with open(files["train"], encoding="utf-8") as f, open(train, "w", encoding="utf-8") as g:
                seen = 0
                for line in f:
                    if seen >= n:
                        break
                    g.write(line)
                    seen += len(line.split()) + 1
            speeds: dict[str, list[float]] = {"now": [], "before": []}
            for r in range(rounds):
                for name in (("now", "before") if r % 2 == 0 else ("before", "now")):
                    out = os.path.join(work, f"ba-{model.split()[0]}-{name}-{r}")
                    cmd = [sys.executable, "-m", "sampledlm", "train", "--train", train, "--valid", files["valid"],
                           *margs, "--epochs", "1", "--threads", "1", "--seed", "1", "-o", out]
                    p = subprocess.run(cmd, env=child_env(sides[name], os.path.join(work, "cache")),
                                       capture_output=True, text=True)
                    if p.returncode != 0:
                        return {"skipped": f"{name}: {p.stderr.strip().splitlines()[-1:]}"}
                    with open(os.path.join(out, "metrics.jsonl")) as f:
                        speeds[name].append(json.loads(f.readline())["tokens_per_s"])
            rows.append({"model": model, "tokens": n, "now": speeds["now"], "before": speeds["before"],
                         "ratio": statistics.median(speeds["now"]) / statistics.median(speeds["before"])})
        return {"before": where, "rows": rows}


# --- 3. the GPU --------------------------------------------------------------------------------------------------
def matmul_rate(device, n: int = 8192, reps: int = 20) -> float:
    """Measured bf16 matrix-multiply rate (FLOP/s) of ``n x n`` products on ``device``."""
    import torch

    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    _sync(device)
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    _sync(device)
    return 2 * n ** 3 * reps / (time.perf_counter() - t)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def lstm_step_rates(device, sizes: list[int], hidden: int, batch: int, bptt: int, samples: int, steps: int,
                    precision: str = "bf16") -> list[dict]:
    """Training tokens/s of an LSTM LM (one layer, ``hidden`` units, input embeddings of ``hidden``) per output
    layer at each V: forward, backward and an optimiser step (SGD; sparse rows for the sampled ones)."""
    import torch

    rows = []
    if device.type == "cpu":  # small matrices on a shared CPU: one thread (more spin-wait on busy cores)
        torch.set_num_threads(1)
    for V in sizes:
        counts = zipf_counts(V)
        q = torch.from_numpy(counts / counts.sum())
        torch.manual_seed(0)
        x = torch.multinomial(q, batch * bptt, replacement=True).view(batch, bptt).to(device)
        y = torch.multinomial(q, batch * bptt, replacement=True).view(batch, bptt).to(device)
        for name in ["softmax", "torch-adaptive", *SAMPLED_GPU]:
            try:
                rate = _lstm_rate(device, name, V, counts, x, y, hidden, samples, steps, precision)
            except torch.cuda.OutOfMemoryError if device.type == "cuda" else MemoryError:
                rate = None
            rows.append({"V": V, "objective": name, "tokens_per_s": rate})
            del rate
            if device.type == "cuda":
                torch.cuda.empty_cache()
    return rows


def _lstm_rate(device, name, V, counts, x, y, hidden, samples, steps, precision) -> float:
    import torch
    from torch import nn

    from sampledlm.neural.device import autocast
    from sampledlm.neural.rnn import LSTMLM
    from sampledlm.objectives import make_objective

    sampled = name not in ("softmax", "torch-adaptive")
    if name == "torch-adaptive":
        cut = [c for c in (V // 50, V // 10, V // 2) if 0 < c < V]
        cut = sorted(set(max(2000, c) for c in cut if max(2000, c) < V)) or [V // 2]
        model = LSTMLM.build(V, embed_dim=hidden, hidden=hidden, layers=1, dropout=0.0, tie=False).to(device)
        head = nn.AdaptiveLogSoftmaxWithLoss(hidden, V, cut, div_value=4.0).to(device)
        params = list(model.rnn.parameters()) + list(model.embed.parameters()) + list(head.parameters())

        def loss_fn():
            h, _ = model(x)
            return head(h.reshape(-1, hidden).float(), y.reshape(-1)).loss
    else:
        opts = {} if name == "softmax" else ({"neg_rate": min(1.0, samples / V)} if name == "binary"
                                              else {"samples": samples})
        objective = make_objective(name, counts=counts, **opts)
        model = LSTMLM.build(V, embed_dim=hidden, hidden=hidden, layers=1, dropout=0.0, tie=False,
                       sparse_output=sampled)
        objective.prepare(model)
        model, objective = model.to(device), objective.to(device)
        params = list({id(p): p for p in list(model.parameters()) + list(objective.parameters())}.values())

        def loss_fn():
            h, _ = model(x)
            return objective(model, h.reshape(-1, h.shape[-1]), y.reshape(-1))
    opt = torch.optim.SGD(params, lr=0.01)
    times = []
    for i in range(steps + 2):
        _sync(device)
        t = time.perf_counter()
        with autocast(device, precision):
            loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        _sync(device)
        if i >= 2:
            times.append(time.perf_counter() - t)
    return x.numel() / statistics.median(times)


ZAREMBA = ["--model", "lstm", "--embed-dim", "650", "--hidden", "650", "--layers", "2", "--dropout", "0.5",
           "--no-tie", "--optimizer", "sgd", "--lr", "1", "--clip", "5", "--batch-size", "20", "--bptt", "35",
           "--epochs", "39", "--min-improvement", "0.003"]


def zaremba_runs(work: str, files: dict, objectives: list[str], extra: list[str]) -> list[dict]:
    rows = []
    for name in objectives:
        obj = ["--objective", name] + ([] if name == "softmax" else ["--samples", "8192"])
        out = os.path.join(work, f"zaremba-{name}")
        t = time.perf_counter()
        m = _train(["--train", files["train"], "--valid", files["valid"], *ZAREMBA, *extra, *obj], out)
        wall = time.perf_counter() - t
        p = subprocess.run([sys.executable, "-m", "sampledlm", "eval", out, "--test", files["test"], "--json"],
                           env=_env(), capture_output=True, text=True)
        test = json.loads(p.stdout)["ppl"] if p.returncode == 0 else None
        rows.append({"objective": name, "epochs": len(m), "best_valid": min(r["valid_ppl"] for r in m),
                     "test_ppl": test, "wall_s": wall})
    return rows


# --- the page ----------------------------------------------------------------------------------------------------
def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    import shutil

    work = tempfile.mkdtemp(prefix="sampledlm-training-")
    try:
        return _run(quick, data_dir, out_dir, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(quick: bool, data_dir: str | None, out_dir: str, work: str) -> dict:
    import torch

    cuda = torch.cuda.is_available()
    t0 = time.perf_counter()
    data: dict = {"cuda": cuda}
    sizes = [1000, 20000] if quick else [10_000, 1_000_000]
    data["cpu"] = cpu_end_to_end(work, sizes, tokens=6000 if quick else 400_000, rounds=1 if quick else 2)
    data["dp"] = data_parallel(work, tokens=3000 if quick else 100_000, epochs=1 if quick else 2)
    gpu_device = torch.device("cuda") if cuda else (torch.device("cpu") if quick else None)
    if gpu_device is not None:
        if cuda:
            data["gpu_name"] = torch.cuda.get_device_name(0)
            data["cuda_version"] = torch.version.cuda
            data["driver"] = _driver()
        data["matmul_flops"] = matmul_rate(gpu_device, n=256 if quick else 8192, reps=3 if quick else 20)
        data["lstm"] = lstm_step_rates(gpu_device, [500, 2000] if quick else [10_000, 100_000, 1_000_000],
                                       hidden=32 if quick else 1024, batch=4 if quick else 128, bptt=5 if quick else 35,
                                       samples=50 if quick else 8192, steps=2 if quick else 20,
                                       precision="fp32" if quick else "bf16")
        data["lstm_hidden"] = 32 if quick else 1024
        if cuda and not quick:
            from .report import data_files, default_ptb

            files = data_files(data_dir or default_ptb())
            data["zaremba"] = zaremba_runs(work, files, ["softmax", "css-is", "blackout"], ["--precision", "bf16"])
    from .report import data_files, default_ptb

    try:
        ptb = data_files(data_dir or default_ptb())
    except Exception as e:  # no PTB beside this checkout: the section says so
        data["before_after"] = {"skipped": f"no PTB ({e})"}
    else:
        data["before_after"] = before_after(work, ptb, rounds=1 if quick else 2, scale=0.05 if quick else 1.0)
    data["seconds"] = time.perf_counter() - t0
    write_page(out_dir, NAME, "Training at scale: cost flat in V end to end, data-parallel ranks, the GPU",
               stamp(), data, markdown(data, quick), figure=figure(data))
    return data


def _driver() -> str | None:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def markdown(data: dict, quick: bool) -> str:
    out = []
    if data["cuda"]:
        out.append(f"GPU: {data['gpu_name']}, driver {data.get('driver')}, CUDA {data['cuda_version']}.\n")
    sizes = sorted(data["cpu"][0]["tokens_per_s"])
    out += ["## 1. End to end on the CPU: `sampledlm train --objective css-is`, tokens/s by V", "",
            "Synthetic Zipf(1) text, vocabulary fixed with `--vocab` at each V, epoch 1's training tokens/s as the "
            "trainer reports it (median of the rounds, the sizes alternating), one thread.", "",
            table(["model", *[f"V = {V:,}" for V in sizes], "slowest / fastest", "target <= 1.5x"],
                  [[r["model"], *[f"{r['tokens_per_s'][V]:,.0f}" for V in sizes], f"{r['ratio']:.2f}x",
                    "met" if r["ratio"] <= 1.5 else "**missed**"] for r in data["cpu"]]), ""]
    dp = data["dp"]
    out += ["## 2. Data-parallel: one process against two ranks (`torchrun --nproc-per-node 2`, gloo)", "",
            "Feed-forward trigram, softmax, dropout 0 (so that the two runs draw nothing differently), the same "
            "global batch: each rank computes its half and the gradients are averaged.", "",
            table(["epoch", "train loss (1 rank)", "train loss (2 ranks)", "valid ppl (1 rank)", "valid ppl (2 ranks)",
                   "tokens/s (1 rank)", "tokens/s (2 ranks)"],
                  [[a["epoch"], f"{a['train_loss']:.6f}", f"{b['train_loss']:.6f}", f"{a['valid_ppl']:.4f}",
                    f"{b['valid_ppl']:.4f}", f"{a['tokens_per_s']:,.0f}", f"{b['tokens_per_s']:,.0f}"]
                   for a, b in zip(dp["one"], dp["two"])]), "",
            f"Largest relative difference between the two: {dp['max_rel_diff']:.1e}.", ""]
    out += ["## 3. The GPU", ""]
    if "lstm" not in data:
        out += ["Not measured: torch sees no CUDA GPU on this machine. On a machine with one, "
                "`python -m benchmarks training` measures (a) the LSTM tokens/s table at V = 10k, 100k and 1M (softmax, "
                "`torch.nn.AdaptiveLogSoftmaxWithLoss`, every sampled objective with S = 8192) beside the card's bf16 "
                "matrix-multiply rate and (b) the medium PTB LSTM of Zaremba et al. 2014 with the softmax, CSS-IS and "
                "BlackOut, and writes them here.", ""]
    else:
        where = "this CPU (--quick: the GPU section's code at toy sizes)" if not data["cuda"] else data["gpu_name"]
        h = data["lstm_hidden"]
        vs = sorted({r["V"] for r in data["lstm"]})
        cell = {(r["V"], r["objective"]): r["tokens_per_s"] for r in data["lstm"]}
        names = list(dict.fromkeys(r["objective"] for r in data["lstm"]))
        out += [f"(a) One-layer LSTM, h = {h}, on {where}; tokens/s of a training step "
                f"(measured matrix-multiply rate {data['matmul_flops'] / 1e12:.1f} TFLOP/s).", "",
                table(["objective", *[f"V = {V:,}" for V in vs]],
                      [[n, *[("out of memory" if cell.get((V, n)) is None else f"{cell[(V, n)]:,.0f}") for V in vs]]
                       for n in names]), ""]
        for V in vs:
            soft = cell.get((V, "softmax"))
            if soft:
                share = soft * 6 * V * h / data["matmul_flops"]
                out.append(f"- V = {V:,}: the softmax runs its output layer at {100 * share:.0f} % of the measured "
                           f"matrix-multiply rate (6 V h FLOPs a token); the fastest sampled objective is "
                           f"{max((cell.get((V, n)) or 0) for n in SAMPLED_GPU) / soft:.1f}x the softmax.")
        out.append("")
        if data.get("zaremba"):
            out += ["(b) Medium PTB LSTM (Zaremba et al. 2014: 2 x 650, dropout 0.5; their test perplexity 82.7), "
                    "bf16:", "",
                    table(["objective", "epochs", "best valid ppl", "test ppl", "wall time"],
                          [[r["objective"], r["epochs"], f"{r['best_valid']:.1f}",
                            "-" if r["test_ppl"] is None else f"{r['test_ppl']:.1f}", f"{r['wall_s']:.0f} s"]
                           for r in data["zaremba"]]), ""]
    ba = data.get("before_after") or {"skipped": "not measured"}
    out += ["## 4. Nothing slower: the results pages' models, this code against the trainer before", ""]
    if "rows" in ba:
        out += [f"One epoch with the softmax and each model's defaults, the first tokens of PTB train, one thread; "
                f"before: {ba['before']}; the two sides alternate.", "",
                table(["model", "tokens", "now tokens/s", "before tokens/s", "now / before (medians)"],
                      [[r["model"], f"{r['tokens']:,}", ", ".join(f"{v:,.0f}" for v in r["now"]),
                        ", ".join(f"{v:,.0f}" for v in r["before"]), f"{r['ratio']:.2f}x"] for r in ba["rows"]]), ""]
    else:
        out += [f"Not measured: {ba['skipped']}.", ""]
    out += ["## Against the targets", ""]
    for r in data["cpu"]:
        out.append(f"- {r['model']} with css-is: V = {sizes[0]:,} and V = {sizes[-1]:,} within "
                   f"{r['ratio']:.2f}x of each other (target 1.5x): {'met' if r['ratio'] <= 1.5 else '**missed**'}")
    out.append(f"- two ranks reach the numbers of one process with the same global batch: largest relative "
               f"difference {dp['max_rel_diff']:.1e} ({'met' if dp['max_rel_diff'] < 1e-5 else '**missed**'})")
    for r in ba.get("rows", []):
        spread = max(r["now"] + r["before"]) / min(r["now"] + r["before"])
        out.append(f"- {r['model']}: now {r['ratio']:.2f}x the tokens/s before (rounds spread {spread:.2f}x): "
                   + ("not slower" if r["ratio"] >= 1 / spread or r["ratio"] >= 0.95 else "**slower**"))
    if not data["cuda"]:
        out.append("- the GPU targets (sampled objectives >= 10x the softmax and >= the adaptive softmax at V = 1M, "
                   ">= 1M tokens/s; the softmax at >= 40 % of the matrix-multiply rate; Zaremba medium <= 82.7): "
                   "not measured here (no GPU)")
    return "\n".join(out)


def figure(data: dict):
    from .report import new_figure

    fig, ax = new_figure()
    for r in data["cpu"]:
        vs = sorted(r["tokens_per_s"])
        ax.plot(vs, [r["tokens_per_s"][V] for V in vs], "o-", label=f"{r['model']}, css-is (CPU)")
    ax.set_xscale("log")
    ax.set_xlabel("vocabulary size V")
    ax.set_ylabel("training tokens/s")
    ax.set_ylim(bottom=0)
    ax.set_title("end-to-end training speed against V")
    ax.legend(fontsize=8)
    return fig
