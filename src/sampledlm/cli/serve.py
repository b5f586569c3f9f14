"""``sampledlm serve``: a model as an HTTP JSON scoring service (see :mod:`sampledlm.serve`)."""

from __future__ import annotations

import click

from .common import CONTEXT, FiniteFloat, device_option, given, mix_options, THREADS
from .configfile import config_option


@click.command("serve", context_settings=CONTEXT)
@click.argument("model", metavar="MODEL")
@mix_options
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; the default accepts connections from this machine only.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="TCP port (0: any free one).")
@click.option("--batch-wait-ms", type=FiniteFloat(min=0), default=2.0, show_default=True,
              help="Longest wait of a batch's first request for others to join it (it waits only while "
                   "other requests are being read; a lone client never waits).")
@click.option("--max-batch", type=click.IntRange(min=1), default=256, show_default=True,
              help="Most items (sentences, history-word pairs, histories) that requests arriving together join into "
                   "one model call; one request over it is still answered by one call.")
@click.option("--no-batching", is_flag=True, help="Send every request to the model by itself.")
@click.option("--history-cache", type=click.IntRange(min=0), default=20000, show_default=True,
              help="Contexts of feed-forward histories kept (LRU; 0: none). Other models keep none.")
@click.option("--max-body", type=click.IntRange(min=64), default=1 << 20, show_default=True,
              help="Largest request body, bytes (413 above).")
@click.option("--max-items", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Most sentences, history-word pairs or histories in one request (413 above).")
@click.option("--max-words", type=click.IntRange(min=1), default=200, show_default=True,
              help="Most tokens in one sentence, one history or one /next query's word list (413 above).")
@click.option("--max-k", type=click.IntRange(min=1), default=1000, show_default=True, help="Largest k of /topk.")
@click.option("--read-timeout", type=FiniteFloat(min=0.1), default=10.0, show_default=True,
              help="Seconds a client has to send a request's body (408 after).")
@click.option("--idle-timeout", type=FiniteFloat(min=0.1), default=30.0, show_default=True,
              help="Seconds before a connection that is idle, or still sending its headers, is closed.")
@click.option("--shutdown-timeout", type=FiniteFloat(min=0), default=30.0, show_default=True,
              help="Seconds SIGTERM waits for the requests in flight.")
@click.option("--threads", type=THREADS, default=None, help="Torch CPU threads for the model.")
@device_option
@config_option
def serve(model, others, weights, interp_valid, host, port, batch_wait_ms, max_batch, no_batching, history_cache,
          max_body, max_items, max_words, max_k, read_timeout, idle_timeout, shutdown_timeout, threads, device):
    """Serve MODEL (any family, or a mixture with --mix) over HTTP with JSON requests.

    \b
    GET  /health                 {"status": "ok"}
    GET  /info                   model, vocabulary size, device, batching, limits
    POST /score   {"sentences": ["the cat sat", ...], "per_word": false}
                  each sentence's scores, as 'sampledlm score --jsonl' gives them, and the totals
    POST /next    {"queries": [{"history": "the cat", "words": ["sat", "</s>"]}]}
                  ln P(word | <s> history) of each word (the decoder's query)
    POST /topk    {"histories": ["the cat"], "k": 10}   the k most probable next words
    \b
    Requests that arrive together are answered by one model call (--batch-wait-ms, --max-batch).
    Bad requests get a 4xx and a one-line {"error": ...}; the server listens on localhost unless
    --host says otherwise, and SIGTERM lets the requests in flight finish.
    Example:
      sampledlm serve kn3.arpa --port 8080
      curl -s localhost:8080/next -d '{"queries": [{"history": "the cat", "words": ["sat"]}]}'
    """
    from ..errors import UserError

    for flag, name in (("--batch-wait-ms", "batch_wait_ms"), ("--max-batch", "max_batch")):
        if no_batching and given(name):
            raise UserError(f"{flag} shapes the batches that --no-batching turns off: give one or the other")
    try:
        from ..serve.app import Batching, Server, announce
    except ImportError as e:
        raise UserError(f"sampledlm serve needs aiohttp ({e}): pip install 'sampledlm[serve]'") from None
    from ..serve.engine import enable_history_cache
    from ..serve.limits import Limits
    from ..use.mixing import open_models

    if threads:
        import torch

        torch.set_num_threads(threads)
    lm = open_models([model, *others], weights, interp_valid, device=device)
    enable_history_cache(lm, history_cache)
    server = Server(lm, host, port, Limits(max_body, max_items, max_words, max_k, read_timeout, idle_timeout),
                    Batching(not no_batching, batch_wait_ms, max_batch), shutdown_timeout)
    server.run(announce=announce, restore_signals=False)  # a signal after the clean stop cannot kill the exit
    click.echo("sampledlm serve: stopped", err=True)
