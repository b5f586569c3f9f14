"""Load on a running ``sampledlm serve``: concurrent clients sending next-word queries, every answer
checked against ``sampledlm score``'s per-word numbers; the server itself in a subprocess.

A *query* is one (history, next word) pair, one per request (a decoder asking about one hypothesis at a
time: the hardest case for batching, since every query pays a whole HTTP request). ``clients`` coroutines
of one asyncio load generator (aiohttp's client, keep-alive connections) each send a request, wait for
the answer and send the next, for ``seconds``; reported: queries/s, latency p50/p99, and the largest
difference from the expected log-probability.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np


class ServerProcess:
    """``python -m sampledlm serve MODEL --port 0 ARGS`` in a subprocess; its URL, memory, stop."""

    def __init__(self, model: str, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "sampledlm", "serve", model, "--port", "0", *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        first = self.proc.stderr.readline()
        m = re.search(r"listening on (http://\S+?),", first)
        if not m:
            rest = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError(f"the server did not start: {first}{rest}"[-600:])
        self.url = m.group(1)
        self.host, self.port = self.url[len("http://"):].rsplit(":", 1)
        self.port = int(self.port)
        self.log: list[str] = [first]
        self._drain = threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True)
        self._drain.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def memory_kb(self) -> dict:
        """``VmRSS`` (now) and ``VmHWM`` (the peak resident set so far) of the server, kB."""
        out = {}
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith(("VmRSS:", "VmHWM:")):
                        out[line.split(":")[0]] = int(line.split()[1])
        except OSError:
            pass
        return out

    def stop(self, timeout: float = 60) -> int | None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return None
        return self.proc.returncode


def next_word_queries(scored: list[dict]) -> list[tuple[list[str], str, float]]:
    """``(history, word, expected ln)`` for every prediction of ``sampledlm score --per-word --jsonl``'s sentences."""
    out = []
    for s in scored:
        toks = s["text"].split()
        for i, w in enumerate(s["per_word"]):
            out.append((toks[:i], w["word"], w["ln"]))
    return out


async def load_cell(url: str, queries: list, clients: int, seconds: float, seed: int = 0) -> dict:
    """``clients`` concurrent clients for ``seconds`` (module docstring)."""
    import aiohttp

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(queries))
    latencies: list[float] = []
    diffs: list[float] = []
    errors = 0
    conn = aiohttp.TCPConnector(limit=clients, force_close=False)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=60)) as session:
        async def one(i):
            nonlocal errors
            h, w, want = queries[order[i % len(order)]]
            t = time.perf_counter()
            async with session.post(url + "/next", json={"queries": [{"history": h, "words": [w]}]}) as r:
                body = await r.json()
            latencies.append(time.perf_counter() - t)
            if r.status != 200:
                errors += 1
            else:
                diffs.append(abs(body["results"][0]["ln"][0] - want))

        for i in range(min(clients, 8)):  # warm the connections
            await one(i)
        latencies.clear()
        diffs.clear()
        deadline = time.perf_counter() + seconds
        counter = iter(range(10**9))

        async def client():
            while time.perf_counter() < deadline:
                await one(next(counter))

        t0 = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed = time.perf_counter() - t0
    lat = np.array(latencies) * 1000
    return {"clients": clients, "queries": len(latencies), "seconds": round(elapsed, 2),
            "qps": len(latencies) / elapsed, "p50_ms": float(np.percentile(lat, 50)) if len(lat) else None,
            "p99_ms": float(np.percentile(lat, 99)) if len(lat) else None, "errors": errors,
            "max_abs_diff": max(diffs) if diffs else None}


def info(url: str) -> dict:
    from sampledlm.serve.client import Client

    return Client(url).info()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc; 0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0
