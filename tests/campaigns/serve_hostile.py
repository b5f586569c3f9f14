"""Hostile traffic against a running ``sampledlm serve``, mixed with valid requests whose answers are checked.

Each hostile request is raw bytes on its own TCP connection (so anything can be sent: broken HTTP too),
drawn from :data:`KINDS` by one seeded generator:

- ``fuzzed-bytes``: random bytes as a /next body;  ``mutated-json``: a valid body with bytes flipped,
  inserted or deleted;  ``wrong-types``: random JSON values in the fields;  ``unknown-field``;
  ``deep-nesting``: 50k-100k open brackets;  ``bad-utf8``: invalid UTF-8 inside a string;
- ``huge-body``: 2-8 MB sent in full (with Content-Length, or chunked);  ``lying-length``: a
  Content-Length of 10^12 with a few bytes sent;  ``too-many``: 5,000 queries or 500-word histories;
- ``garbage-http``: broken request lines and headers, a 20 kB header;  ``wrong-route``: unknown paths,
  wrong methods;  ``abandon``: a valid request whose client leaves before the answer;  ``silent``: half a
  request line, then nothing (closed by the server's idle timeout).

Alongside, ``slow`` clients trickle a body one byte at a time (they should get 408 after the server's
read timeout), and valid /next and /score requests (from :mod:`benchmarks.serve_load`'s queries) are checked
against ``sampledlm score``'s numbers. Recorded: every answer's status by kind, the server's resident
memory sampled every 0.2 s (and its kernel-reported peak), whether it is alive and healthy at the end.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

KINDS = ["fuzzed-bytes", "mutated-json", "wrong-types", "unknown-field", "deep-nesting", "bad-utf8", "huge-body",
         "lying-length", "too-many", "garbage-http", "wrong-route", "abandon", "silent"]


def http(path: str, body: bytes, method: str = "POST", extra: bytes = b"") -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra + b"\r\n" + body


def valid_body(rng: random.Random, queries: list) -> bytes:
    h, w, _ = rng.choice(queries)
    return json.dumps({"queries": [{"history": h, "words": [w]}]}).encode()


def hostile(kind: str, rng: random.Random, queries: list) -> tuple[bytes, bool]:
    """``(bytes to send, whether to read the answer)`` for one request of ``kind``."""
    if kind == "fuzzed-bytes":
        return http("/next", bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000)))), True
    if kind == "mutated-json":
        b = bytearray(valid_body(rng, queries))
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(b))
            op = rng.random()
            if op < 0.4:
                b[i] = rng.getrandbits(8)
            elif op < 0.7:
                b.insert(i, rng.getrandbits(8))
            elif len(b) > 1:
                del b[i]
        return http(rng.choice(["/next", "/score", "/topk"]), bytes(b)), True
    if kind == "wrong-types":
        junk = rng.choice([None, True, 3, -1.5, 1e308, "x" * rng.randint(0, 50), [], {}, [[1]], {"a": [None]},
                           [{"history": 5, "words": None}], [{"history": [1, 2], "words": [True]}]])
        field, path = rng.choice([("queries", "/next"), ("sentences", "/score"), ("histories", "/topk"),
                                  ("k", "/topk"), ("per_word", "/score")])
        obj = {field: junk}
        if path == "/topk" and field == "k":
            obj["histories"] = ["the"]
        if path == "/score" and field == "per_word":
            obj["sentences"] = ["the cat"]
        return http(path, json.dumps(obj).encode()), True
    if kind == "unknown-field":
        obj = json.loads(valid_body(rng, queries))
        obj[rng.choice(["query", "Queries", "k", "model", "__proto__", ""])] = 1
        return http("/next", json.dumps(obj).encode()), True
    if kind == "deep-nesting":
        n = rng.randint(50_000, 100_000)
        return http("/next", b'{"queries": ' + b"[" * n + b"]" * n + b"}"), True
    if kind == "bad-utf8":
        return http("/score", b'{"sentences": ["the ' + bytes([rng.choice([0x80, 0xC0, 0xFF, 0xED])]) + b'a cat"]}'), True
    if kind == "huge-body":
        size = rng.randint(2, 8) << 20
        body = b'{"sentences": ["' + b"a " * (size // 2) + b'"]}'
        if rng.random() < 0.5:
            return http("/score", body), True
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 65536]), body[i:i + 65536])
                          for i in range(0, len(body), 65536))
        return (b"POST /score HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                + chunks + b"0\r\n\r\n"), True
    if kind == "lying-length":
        return (b"POST /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1000000000000\r\n\r\n"
                b'{"queries": ['), True
    if kind == "too-many":
        if rng.random() < 0.5:
            obj = {"queries": [{"history": "the", "words": ["cat"]}] * 5000}
        else:
            obj = {"histories": [" ".join(["the"] * 500)], "k": 5}
            return http("/topk", json.dumps(obj).encode()), True
        return http("/next", json.dumps(obj).encode()), True
    if kind == "garbage-http":
        return rng.choice([b"\x00\xff\x13garbage\r\n\r\n", b"GET / HTTP/7.0\r\n\r\n", b"POST /next HTTP/1.1\r\n"
                           b"Content-Length: -5\r\n\r\n", b"POST /next HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 20000
                           + b"\r\n\r\n", b"POST /next HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 9\r\n\r\nhello",
                           b"\r\n" * 100, b"POST /next HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"]), True
    if kind == "wrong-route":
        method, path = rng.choice([("GET", "/next"), ("DELETE", "/score"), ("POST", "/"), ("POST", "/admin"),
                                   ("PUT", "/info"), ("POST", "/next/../../etc/passwd")])
        return http(path, b"{}", method), True
    if kind == "abandon":
        return http("/next", valid_body(rng, queries)), False
    if kind == "silent":
        return b"POST /ne", True
    raise ValueError(kind)


async def send(host: str, port: int, data: bytes, read: bool = True, timeout: float = 60.0) -> int | str:
    """Send ``data`` on a fresh connection; the answer's status, or what happened instead."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, asyncio.TimeoutError) as e:
        return f"connect failed: {type(e).__name__}"
    try:
        try:
            writer.write(data)
            await asyncio.wait_for(writer.drain(), timeout)
        except (ConnectionError, asyncio.TimeoutError):  # the server closed the connection on a refused body
            pass
        if not read:
            return "abandoned"
        try:
            line = await asyncio.wait_for(reader.readline(), timeout)
        except (ConnectionError, asyncio.TimeoutError) as e:
            return f"no answer: {type(e).__name__}"
        parts = line.split()
        return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else "closed without an answer"
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def slow_client(host: str, port: int, seconds_per_byte: float) -> int | str:
    """Headers, then a body one byte every ``seconds_per_byte`` seconds, until the server answers."""
    body = b'{"queries": [{"history": "the", "words": ["cat"]}]}'
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as e:
        return f"connect failed: {type(e).__name__}"
    try:
        writer.write(f"POST /next HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode())
        read = asyncio.ensure_future(reader.readline())
        for b in body:
            if read.done():
                break
            try:
                writer.write(bytes([b]))
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.sleep(seconds_per_byte)
        line = await asyncio.wait_for(read, 60)
        parts = line.split()
        return int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else "closed without an answer"
    except (ConnectionError, asyncio.TimeoutError) as e:
        return f"no answer: {type(e).__name__}"
    finally:
        writer.close()


async def valid(url: str, rng: random.Random, queries: list, scored: list, tol: float) -> tuple[str, float]:
    """One valid request (/next of 1-4 queries, or /score of one sentence): ``("right"|"wrong"|"error ...", diff)``."""
    import aiohttp

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        if rng.random() < 0.7:
            qs = [rng.choice(queries) for _ in range(rng.randint(1, 4))]
            body = {"queries": [{"history": h, "words": [w]} for h, w, _ in qs]}
            async with session.post(url + "/next", json=body) as r:
                if r.status != 200:
                    return f"error {r.status}", float("nan")
                got = [x["ln"][0] for x in (await r.json())["results"]]
            want = [lp for _, _, lp in qs]
        else:
            s = rng.choice(scored)
            async with session.post(url + "/score", json={"sentences": [s["text"]]}) as r:
                if r.status != 200:
                    return f"error {r.status}", float("nan")
                got = [(await r.json())["sentences"][0]["ln"]]
            want = [s["ln"]]
            tol = tol * s["predictions"]
    diff = max(abs(a - b) for a, b in zip(got, want))
    return ("right" if diff <= tol else "wrong"), diff


async def campaign(server, queries: list, scored: list, n_hostile: int, n_valid: int, n_slow: int,
                   seconds_per_byte: float, tol: float, seed: int = 1, concurrency: int = 24) -> dict:
    """The run of the module docstring against ``server`` (a :class:`.serve_load.ServerProcess`)."""
    rng = random.Random(seed)
    plan = [("hostile", KINDS[i % len(KINDS)]) for i in range(n_hostile)] + [("valid", None)] * n_valid
    rng.shuffle(plan)
    memory: list[int] = []
    done = asyncio.Event()

    async def sample():
        while not done.is_set():
            memory.append(server.memory_kb().get("VmRSS", 0))
            await asyncio.sleep(0.2)

    outcomes: dict[str, dict] = {}
    valid_results = {"right": 0, "wrong": 0, "errors": 0, "max_abs_diff": 0.0}
    gate = asyncio.Semaphore(concurrency)

    async def one(what, kind, r):
        async with gate:
            if what == "valid":
                verdict, diff = await valid(server.url, r, queries, scored, tol)
                if verdict.startswith("error"):
                    valid_results["errors"] += 1
                else:
                    valid_results[verdict] += 1
                    valid_results["max_abs_diff"] = max(valid_results["max_abs_diff"], diff)
                return
            data, read = hostile(kind, r, queries)
            status = await send(server.host, server.port, data, read)
            key = str(status) if isinstance(status, int) else status
            bucket = outcomes.setdefault(kind, {})
            bucket[key] = bucket.get(key, 0) + 1

    t0 = time.perf_counter()
    sampler = asyncio.ensure_future(sample())
    slow = [asyncio.ensure_future(slow_client(server.host, server.port, seconds_per_byte)) for _ in range(n_slow)]
    await asyncio.gather(*(one(w, k, random.Random(rng.getrandbits(64))) for w, k in plan))
    slow_status = await asyncio.gather(*slow)
    done.set()
    await sampler
    elapsed = time.perf_counter() - t0
    slow_counts: dict[str, int] = {}
    for st in slow_status:
        slow_counts[str(st)] = slow_counts.get(str(st), 0) + 1
    mem = server.memory_kb()
    statuses = [int(k) for b in outcomes.values() for k, n in b.items() for _ in range(n) if k.isdigit()]
    return {"hostile": n_hostile, "valid": n_valid, "slow_clients": n_slow, "seconds": round(elapsed, 1),
            "outcomes": outcomes, "slow": slow_counts, "valid_results": valid_results,
            "server_5xx": sum(1 for s in statuses if s >= 500),
            "answered_4xx": sum(1 for s in statuses if 400 <= s < 500),
            "rss_mb_samples_max": max(memory) / 1024 if memory else None,
            "rss_mb_peak_kernel": mem.get("VmHWM", 0) / 1024, "rss_mb_end": mem.get("VmRSS", 0) / 1024,
            "alive": server.alive()}
