"""The demo's step for serving: the KN3 model behind ``sampledlm serve`` on a free loopback port, asked by
eight client threads at once; its answers are checked against ``sampledlm score``'s numbers."""

from __future__ import annotations

import threading
import time


from ..loader import load_model
from ..use.score import score_sentences
from .common import DemoData, Result, say


def serve_step(data: DemoData) -> list[Result]:
    """Serve KN3, send sentence-score and next-word requests from 8 threads, compare with score's numbers."""
    arpa = data.extra.get("kn3_arpa")
    if not arpa:
        return []
    try:
        from ..serve.app import Server
    except ImportError:  # aiohttp is an extra
        say("\n== serving (sampledlm serve) ==\nskipped: pip install 'sampledlm[serve]' (aiohttp)")
        return []
    from ..serve.client import Client

    t0 = time.perf_counter()
    lm = load_model(arpa)
    with open(data.test, encoding="utf-8") as f:
        sentences = [line.split() for line in f if line.split()][:40]
    want = score_sentences(lm, sentences)
    say("\n== serving (sampledlm serve) ==")
    with Server(lm) as server:
        client = Client(server.url)
        answers: list = [None] * len(sentences)

        def ask(k: int) -> None:
            for i in range(k, len(sentences), 8):
                toks = sentences[i]
                queries = [(toks[:j], [w]) for j, w in enumerate(toks + ["</s>"])]
                answers[i] = sum(lp[0] for lp in client.next_words(queries))

        threads = [threading.Thread(target=ask, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        scored = client.score([" ".join(s) for s in sentences])
        info = client.info()
    diff = max(max(abs(a - w.ln_prob) for a, w in zip(answers, want)),
               max(abs(s["ln"] - w.ln_prob) for s, w in zip(scored["sentences"], want)))
    b = info["batching"]
    say(f"KN3 served on {server.url} (localhost only): {len(sentences)} sentences asked word by word by 8 "
               f"client threads and scored whole; {b['requests']} requests in {b['calls']} model calls; largest "
               f"difference from sampledlm score: {diff:.2g} nats ({time.perf_counter() - t0:.1f} s)")
    return []
