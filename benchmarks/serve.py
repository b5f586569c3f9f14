"""``serve``: ``sampledlm serve`` under load and under attack, all traffic on loopback, bounded in count and time.

Load (:mod:`.serve_load`): KN5 and a GRU (:mod:`.serve_models`), each behind two servers started side by
side, batching on (the defaults) and off (``--no-batching``), one torch thread each. For 1, 8 and 64
concurrent clients sending next-word queries (one (history, word) pair per request, the histories being
the prefixes of the first test sentences), the two servers are loaded in turn, alternating, ``REPS`` cells
of ``CELL_S`` seconds each: queries/s, latency p50/p99, the server's CPU time per query, and every answer
compared with the per-word numbers of ``sampledlm score`` on the same sentences. Acceptance: with 64
clients the GRU with batching serves at least 5x the queries/s of the same server without.

Robustness (:mod:`tests.campaigns.serve_hostile`): the GRU server (batching on, 2 s read and idle timeouts so slow and
silent clients resolve within the run) under at least 1,000 hostile requests mixed with valid ones, and slow clients:
no crash (the process alive, no 5xx), no wrong answer to a valid request, peak resident memory.
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import click

from . import lmruns, serve_models
from .report import new_figure, table, write_page
from .serve_load import ServerProcess, cpu_seconds, load_cell, next_word_queries

NAME = "serve"
CLIENTS = (1, 8, 64)
REPS, CELL_S, QUERY_SENTENCES = 3, 4.0, 200
QUICK = {"reps": 1, "cell_s": 1.0, "sentences": 30, "hostile": 150, "valid": 40, "slow": 4}
FULL = {"reps": REPS, "cell_s": CELL_S, "sentences": QUERY_SENTENCES, "hostile": 1200, "valid": 400, "slow": 24}
#: neural answers may differ from ``sampledlm score`` by float32 rounding (which depends on a batch's shape)
TOLERANCE = {"KN5": 0.0, "GRU": 1e-5}
SERVER_ARGS = ("--threads", "1")


def expected_scores(model: str, sentences_file: str) -> list[dict]:
    """``sampledlm score MODEL FILE --per-word --jsonl``, one object per sentence."""
    out = lmruns.cli("score", model, sentences_file, "--per-word", "--jsonl", "--threads", "1")
    return [json.loads(x) for x in out.splitlines() if x.strip()]


def first_sentences(path: str, n: int, out: str) -> str:
    from sampledlm.data.textio import atomic_write

    with open(path, encoding="utf-8") as f, atomic_write(out) as w:
        kept = 0
        for line in f:
            if line.split() and kept < n:
                w.write(line)
                kept += 1
    return out


def load_model_cells(name: str, path: str, queries: list, cfg: dict) -> dict:
    """Both servers of one model, loaded in turn (module docstring); per clients: each side's cells and totals."""
    servers = {"on": ServerProcess(path, *SERVER_ARGS), "off": ServerProcess(path, *SERVER_ARGS, "--no-batching")}
    out = {}
    try:
        for clients in CLIENTS:
            cells = {"on": [], "off": []}
            for rep in range(cfg["reps"]):
                for side in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                    srv = servers[side]
                    before = _info(srv.url)["batching"]
                    cpu0, own0 = cpu_seconds(srv.pid), time.process_time()
                    cell = asyncio.run(load_cell(srv.url, queries, clients, cfg["cell_s"], seed=rep))
                    cell["server_cpu_s"] = cpu_seconds(srv.pid) - cpu0
                    cell["generator_cpu_s"] = time.process_time() - own0
                    after = _info(srv.url)["batching"]
                    cell["queries_per_call"] = ((after["items"] - before["items"])
                                                / max(after["calls"] - before["calls"], 1))
                    cell["load_average"] = os.getloadavg()[0]
                    cells[side].append(cell)
                    click.echo(f"  {name} batching {side:3} {clients:2} clients: {cell['qps']:7.1f} q/s, p50 "
                               f"{cell['p50_ms']:.1f} ms, p99 {cell['p99_ms']:.1f} ms, max |diff| "
                               f"{cell['max_abs_diff']}", err=True)
            out[clients] = {side: summarise(cs) for side, cs in cells.items()}
            out[clients]["ratio"] = out[clients]["on"]["qps"] / out[clients]["off"]["qps"]
            out[clients]["cpu_ratio"] = (out[clients]["off"]["cpu_ms_per_query"]
                                         / max(out[clients]["on"]["cpu_ms_per_query"], 1e-9))
        for side, srv in servers.items():
            out[f"batching_{side}"] = {k: v for k, v in _info(srv.url)["batching"].items()}
    finally:
        for srv in servers.values():
            srv.stop()
    return out


def _info(url: str) -> dict:
    from sampledlm.serve.client import Client

    return Client(url).info()


def summarise(cells: list[dict]) -> dict:
    q = sum(c["queries"] for c in cells)
    s = sum(c["seconds"] for c in cells)
    diffs = [c["max_abs_diff"] for c in cells if c["max_abs_diff"] is not None]
    return {"queries": q, "seconds": round(s, 2), "qps": q / s, "p50_ms": _median([c["p50_ms"] for c in cells]),
            "p99_ms": max(c["p99_ms"] for c in cells), "errors": sum(c["errors"] for c in cells),
            "max_abs_diff": max(diffs) if diffs else None,
            "cpu_ms_per_query": 1000 * sum(c["server_cpu_s"] for c in cells) / max(q, 1),
            "generator_cpu_ms_per_query": 1000 * sum(c["generator_cpu_s"] for c in cells) / max(q, 1),
            "queries_per_call": sum(c["queries_per_call"] for c in cells) / len(cells),
            "load_average": [round(c["load_average"], 2) for c in cells], "cells": cells}


def _median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def model_alone(path: str, queries: list, batch: int = 64, reps: int = 5) -> dict:
    """The GRU without HTTP, in this process (1 torch thread): CPU time per query of ``batch`` single-query
    ``logprobs_after`` calls against one call of ``batch`` queries, alternating, ``reps`` times each."""
    import torch

    from sampledlm.loader import load_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lm = load_model(path)
        items = [(lm.vocab.encode(h), lm.vocab.encode([w])) for h, w, _ in queries]
        single, batched = [], []
        for r in range(reps):
            chunk = items[(r * batch) % max(len(items) - batch, 1):][:batch]
            for side in (("one", "all") if r % 2 == 0 else ("all", "one")):
                t = time.process_time()
                if side == "one":
                    for h, w in chunk:
                        lm.logprobs_after([h], [w])
                    single.append((time.process_time() - t) / len(chunk))
                else:
                    lm.logprobs_after([h for h, _ in chunk], [w for _, w in chunk])
                    batched.append((time.process_time() - t) / len(chunk))
    finally:
        torch.set_num_threads(threads)
    one, many = 1000 * sum(single) / len(single), 1000 * sum(batched) / len(batched)
    return {"batch": batch, "reps": reps, "single_ms_per_query": one, "batched_ms_per_query": many, "ratio": one / many}


def run(quick: bool, data_dir: str | None, out_dir: str) -> dict:
    cfg = QUICK if quick else FULL
    s = lmruns.setting(quick, data_dir, with_kn3=False)
    t_models = time.perf_counter()
    kn5 = serve_models.kn5(s)
    gru, gru_note = serve_models.gru(s)
    click.echo(f"  models ready ({time.perf_counter() - t_models:.0f} s)", err=True)
    sub = os.path.join(s.work, "serve-data")
    os.makedirs(sub, exist_ok=True)
    sents = first_sentences(s.files["test"], cfg["sentences"], os.path.join(sub, f"test-first-{cfg['sentences']}.txt"))
    models = {"KN5": kn5, "GRU": gru}
    scored = {name: expected_scores(path, sents) for name, path in models.items()}
    queries = {name: next_word_queries(sc) for name, sc in scored.items()}
    load = {name: load_model_cells(name, path, queries[name], cfg) for name, path in models.items()}
    for name in models:
        diffs = [load[name][c][side]["max_abs_diff"] for c in CLIENTS for side in ("on", "off")]
        load[name]["max_abs_diff"] = max(d for d in diffs if d is not None)
        load[name]["within_tolerance"] = load[name]["max_abs_diff"] <= TOLERANCE[name]
    alone = model_alone(gru, queries["GRU"], reps=3 if quick else 8)
    click.echo(f"  GRU alone: {alone['single_ms_per_query']:.2f} ms/query one at a time, "
               f"{alone['batched_ms_per_query']:.2f} in calls of {alone['batch']}", err=True)
    click.echo("  robustness run", err=True)
    from tests.campaigns.serve_hostile import campaign

    srv = ServerProcess(gru, *SERVER_ARGS, "--read-timeout", "2", "--idle-timeout", "2")
    try:
        rss_start = srv.memory_kb().get("VmRSS", 0) / 1024
        robust = asyncio.run(campaign(srv, queries["GRU"], scored["GRU"], cfg["hostile"], cfg["valid"], cfg["slow"],
                                      seconds_per_byte=0.25, tol=TOLERANCE["GRU"]))
        robust["rss_mb_start"] = rss_start
        robust["healthy_after"] = _info(srv.url)["counters"]
        robust["exit_code_on_sigterm"] = srv.stop()
        robust["server_log_tail"] = [ln.strip() for ln in srv.log[-5:]]
    finally:
        srv.stop()
    data = {"setup": {**s.describe([]), "gru": gru, "gru_note": gru_note, "kn5": kn5, "query_sentences": cfg["sentences"],
                      "queries": {k: len(v) for k, v in queries.items()}, "clients": list(CLIENTS),
                      "reps": cfg["reps"], "cell_s": cfg["cell_s"], "server_args": list(SERVER_ARGS),
                      "tolerance": TOLERANCE},
            "load": {m: {str(k): v for k, v in d.items()} for m, d in load.items()}, "gru_alone": alone,
            "robustness": robust}
    gru64 = load["GRU"][64]
    data["acceptance"] = {"gru_64_ratio": gru64["ratio"], "gru_64_ratio_target": 5.0,
                          "gru_64_met": gru64["ratio"] >= 5.0,
                          "numbers_equal": all(load[m]["within_tolerance"] for m in models),
                          "robust": robust["alive"] and robust["server_5xx"] == 0
                          and robust["valid_results"]["wrong"] == 0 and robust["valid_results"]["errors"] == 0}
    write_page(out_dir, NAME, "sampledlm serve: load and hostile requests", s.meta, data, markdown(data),
               figure=plot(load))
    return data


def markdown(d: dict) -> str:
    su, ac, rb = d["setup"], d["acceptance"], d["robustness"]
    out = [f"Data: {su['data']}. Models: KN5 (`sampledlm ngram train --order 5` on the training text, "
           f"{os.path.basename(su['kn5'])}); "
           f"GRU: {su['gru_note']}.", "",
           f"Queries: one (history, next word) pair per request, the prefixes of the first {su['query_sentences']} "
           f"test sentences ({su['queries']['KN5']:,} queries), every answer checked against `sampledlm score "
           f"--per-word` on those sentences. Each server: `sampledlm serve MODEL {' '.join(su['server_args'])}` "
           "(batching on: the defaults, an adaptive window of at most 2 ms and 256 items; off: `--no-batching`), in "
           f"its own process; the load generator is one asyncio process on the same machine. Per client count, "
           f"{su['reps']} cell(s) of {su['cell_s']:g} s per side, the two sides alternating. CPU ms/query: the "
           "server process's CPU time (user + system) per answered query, less sensitive to the other jobs on a "
           "shared machine than queries/s.", ""]
    for model, res in d["load"].items():
        rows = []
        for c in su["clients"]:
            r = res[str(c)]
            for side in ("on", "off"):
                x = r[side]
                rows.append([c, side, f"{x['qps']:.0f}", f"{x['p50_ms']:.1f}", f"{x['p99_ms']:.1f}",
                             f"{x['cpu_ms_per_query']:.2f}", f"{x['generator_cpu_ms_per_query']:.2f}",
                             f"{x['queries_per_call']:.1f}", x["queries"], x["errors"],
                             f"{x['max_abs_diff']:.2g}" if x["max_abs_diff"] is not None else "-",
                             ", ".join(f"{v:.1f}" for v in x["load_average"])])
            rows.append([c, "**on/off**", f"**{r['ratio']:.2f}x**", "", "", f"{r['cpu_ratio']:.2f}x less", "", "", "",
                         "", "", ""])
        on = res["batching_on"]
        out += [f"### {model}", "",
                table(["clients", "batching", "queries/s", "p50 ms", "p99 ms", "server CPU ms/query",
                       "load generator CPU ms/query", "queries per model call", "answered", "errors",
                       "max abs diff vs score (nats)", "load average"], rows), "",
                f"Batching on: {on['requests']:,} requests in {on['calls']:,} model calls (mean "
                f"{on['mean_items_per_call'] or 0:.1f} queries per call, largest {on['largest_call']}). Every answer "
                f"within {su['tolerance'][model]:g} nats of `sampledlm score`: "
                f"{'yes' if res['within_tolerance'] else 'NO'} (largest difference {res['max_abs_diff']:.2g}).", ""]
    vr = rb["valid_results"]
    rows = [[k, sum(v.values()), ", ".join(f"{s}: {n}" for s, n in sorted(v.items()))] for k, v in rb["outcomes"].items()]
    rows.append(["slow (1 byte / 0.25 s)", rb["slow_clients"], ", ".join(f"{s}: {n}" for s, n in sorted(rb["slow"].items()))])
    out += ["### Robustness (the GRU server, batching on, `--read-timeout 2 --idle-timeout 2`)", "",
            f"{rb['hostile']:,} hostile requests and {rb['valid']:,} valid ones, shuffled, 24 at a time, with "
            f"{rb['slow_clients']} slow clients alongside; {rb['seconds']:.0f} s.", "",
            table(["kind", "sent", "answers (status: count)"], rows), "",
            "A 200 among the hostile kinds is a mutation that happened to leave a well-formed request (a changed "
            "letter inside a word, `\"per_word\": true`, `\"k\": 3`): it passed every check and was answered. "
            "*Closed without an answer*: the connection sent no complete request line (blank lines, half a line) "
            "and was closed by the idle timeout.", "",
            f"- server alive at the end: {'yes' if rb['alive'] else 'NO'}; 5xx answers: {rb['server_5xx']}; "
            f"SIGTERM exit code: {rb['exit_code_on_sigterm']}",
            f"- valid requests: {vr['right']} right, {vr['wrong']} wrong, {vr['errors']} refused or failed "
            f"(largest difference from `sampledlm score`: {vr['max_abs_diff']:.2g} nats)",
            f"- server resident memory: {rb['rss_mb_start']:.0f} MB at the start, at most "
            f"{rb['rss_mb_samples_max']:.0f} MB sampled every 0.2 s, peak {rb['rss_mb_peak_kernel']:.0f} MB "
            f"(VmHWM), {rb['rss_mb_end']:.0f} MB at the end", "",
            "### The GRU without HTTP", "",
            f"In the bench process, one torch thread, CPU time: {d['gru_alone']['single_ms_per_query']:.2f} ms per "
            f"query asked one at a time, {d['gru_alone']['batched_ms_per_query']:.2f} ms in calls of "
            f"{d['gru_alone']['batch']} queries: {d['gru_alone']['ratio']:.2f}x (the most batching can gain before "
            "HTTP and JSON are paid per request).", "",
            "### Acceptance", "",
            f"- GRU, 64 clients: batching on serves {ac['gru_64_ratio']:.2f}x the queries/s of batching off "
            f"(target 5x): {'met' if ac['gru_64_met'] else '**missed**'}",
            f"- numbers equal to `sampledlm score` (KN5 exactly, GRU within float32 rounding): "
            f"{'yes' if ac['numbers_equal'] else 'NO'}",
            f"- hostile run: zero crashes, zero wrong answers, memory bounded: {'yes' if ac['robust'] else 'NO'}"]
    if not ac["gru_64_met"]:
        g = d["load"]["GRU"]["64"]
        out += ["", f"What limits it here: with 64 clients the batched GRU server answered {g['on']['queries_per_call']:.1f} "
                f"queries per model call and spent {g['on']['cpu_ms_per_query']:.2f} ms of CPU per query against "
                f"{g['off']['cpu_ms_per_query']:.2f} ms without batching ({g['cpu_ratio']:.2f}x less), while the "
                f"load generator spent {g['on']['generator_cpu_ms_per_query']:.2f} ms per query on the same 2 cores "
                f"(load average {max(g['on']['load_average']):.1f} during the cells: other jobs ran too). "
                f"Without HTTP the model itself gains {d['gru_alone']['ratio']:.2f}x from calls of "
                f"{d['gru_alone']['batch']}: one query per request leaves HTTP, JSON and the checks as a fixed "
                "cost per query that batching cannot share, and the server's event loop and its model thread "
                "compete for the same two cores as the clients."]
    return "\n".join(out)


def plot(load: dict):
    fig, axes = new_figure(1, 2, figsize=(10, 4))
    for ax, (model, res) in zip(axes, load.items()):
        for side, style in (("on", "o-"), ("off", "s--")):
            ax.plot(CLIENTS, [res[c][side]["qps"] for c in CLIENTS], style, label=f"batching {side}")
        ax.set_xscale("log")
        ax.set_xticks(CLIENTS, [str(c) for c in CLIENTS])
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("queries/s")
        ax.set_title(model)
        ax.legend()
    fig.tight_layout()
    return fig
