"""The HTTP JSON service (aiohttp): endpoints, error handling, start and graceful stop.

Endpoints (request bodies: :mod:`.limits`; every answer is JSON)::

    GET  /health  {"status": "ok"}
    GET  /info    model, family, vocab_size, device, batching, limits, history cache, counters
    POST /score   {"sentences": [...], "per_word": false} -> {"sentences": [score --jsonl's objects], "totals": {...}}
    POST /next    {"queries": [{"history": ..., "words": [...]}]} -> {"results": [{"ln": [...], "log10": [...],
                  "oov": [...]}]}
    POST /topk    {"histories": [...], "k": 10} -> {"results": [{"words": [...], "ln": [...], "log10": [...]}]}

Every refusal is ``{"error": "one line"}`` with a 4xx status (400 bad input, 404/405 wrong path or
method, 408 a body that does not arrive within ``read_timeout``, 413 over a limit); an unexpected fault
inside the model call is a 500 with one line, and the server goes on. A request's body is read and
checked on the event loop; the model work goes through the :class:`~.batcher.Batcher`.

Stopping (SIGTERM or SIGINT, or :meth:`Server.stop`): the listening socket closes, requests already
received are answered (up to ``shutdown_timeout`` seconds), then the worker thread ends.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import math
import re
import signal
import sys
import threading
from dataclasses import dataclass

from aiohttp import http_exceptions, web, web_protocol

from ..data.vocab import UNK, UNK_ID
from ..errors import UserError
from ..lm import LanguageModel
from ..use.score import Totals
from .batcher import Batcher, Closed
from .engine import Engine
from .limits import BadRequest, Limits, Reader, finite, parse_json, read_next, read_score, read_topk

LN10 = math.log(10.0)
log = logging.getLogger("sampledlm.serve")
MAX_HEADERS = 128  # header fields in one request, as aiohttp 3.14's parser allows


@dataclass(frozen=True)
class Batching:
    """The dynamic batching settings (:mod:`.batcher`)."""

    enabled: bool = True
    wait_ms: float = 2.0
    max_batch: int = 256


def dumps(obj) -> str:
    """JSON text; non-finite floats (which JSON cannot hold) become null."""
    try:
        return json.dumps(obj, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json.dumps(_finite(obj), separators=(",", ":"))


def _finite(v):
    if isinstance(v, float):
        return finite(v)
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def reply(obj, status: int = 200) -> web.Response:
    return web.Response(text=dumps(obj), status=status, content_type="application/json")


def refuse(status: int, message: str) -> web.Response:
    return reply({"error": " ".join(str(message).split())}, status)


class InFlight:
    """How many requests are being handled (their body still arriving included), and a wait for none."""

    def __init__(self):
        self.count = 0
        self._idle: asyncio.Event | None = None

    def enter(self) -> None:
        self.count += 1

    def leave(self) -> None:
        self.count -= 1
        if not self.count and self._idle is not None:
            self._idle.set()

    async def drained(self, timeout: float) -> bool:
        """Wait until no request is in flight (at most ``timeout`` s); whether that happened."""
        if not self.count:
            return True
        self._idle = asyncio.Event()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except asyncio.TimeoutError:
            return False


IN_FLIGHT = web.AppKey("in_flight", InFlight)


# --- errors before a request exists: the HTTP parser's ------------------------------------------------------------
class _JsonErrorHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler, answering what its HTTP parser refuses (a malformed request line, a header
    over aiohttp's 8,190-byte line limit or too many of them) as every other error is answered: one line of JSON
    ``{"error": ...}``, with 431 for header fields too large (RFC 6585), and one log line, not a traceback.

    It also closes a connection on which no request has begun within the idle timeout. aiohttp before 3.10 starts
    its keep-alive clock only after a first response, so there a client that connects and sends nothing, or half
    a request line, would hold its connection for ever."""

    request_began = False  # set by the app's middleware when a request's headers have been read

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if getattr(self, "_keepalive_handle", None) is None and self._keepalive_timeout:  # an aiohttp before 3.10
            asyncio.get_running_loop().call_later(self._keepalive_timeout, self._close_if_silent)

    def _close_if_silent(self) -> None:
        if not self.request_began and self.transport is not None and not self.transport.is_closing():
            log.info("closed a connection that sent no request within the idle timeout")
            self.transport.close()

    def handle_error(self, request, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if request.writer.output_size > 0:  # a response has begun: aiohttp's own handling closes the connection
            return super().handle_error(request, status, exc, message)
        text = " ".join(str(getattr(exc, "message", None) or message or exc or "internal error").split())
        if isinstance(exc, http_exceptions.LineTooLong):
            if "status line" in text.lower():
                status, text = 414, "request line too long"
            else:  # the parser names the bytes it read, not which header: say what the limit is
                limit = re.search(r"more than (\d+) bytes", text)
                status, text = 431, "a request header field too large" + (
                    f" (over {int(limit.group(1)):,} bytes)" if limit else "")
        elif isinstance(exc, http_exceptions.BadHttpMessage) and "too many headers" in text.lower():
            status = 431
        if status >= 500:
            log.error("error handling a request from %s: %s", request.remote, text, exc_info=exc)
            text = "internal error (the server's log has the details)"
        else:
            log.info("refused a request from %s: %d %s", request.remote, status, text)
        resp = refuse(status, text)
        resp.force_close()
        return resp


class _JsonErrorServer(web.Server):
    """The runner's server, making :class:`_JsonErrorHandler` connection handlers."""

    def __call__(self) -> web_protocol.RequestHandler:
        return _JsonErrorHandler(self, loop=self._loop, **self._kwargs)


def answer_protocol_errors_in_json(runner: web.AppRunner) -> bool:
    """Make a set-up runner's server answer its parser's errors in JSON (:class:`_JsonErrorHandler`); False,
    leaving aiohttp's plain-text answers, where this aiohttp's server is not the one these classes extend."""
    server = runner.server
    if type(server) is not web.Server or not hasattr(server, "_kwargs") or not hasattr(server, "_loop"):
        return False
    server.__class__ = _JsonErrorServer
    return True


def make_app(lm: LanguageModel, limits: Limits = Limits(), batching: Batching = Batching()) -> web.Application:
    """The aiohttp application serving ``lm`` (what :func:`sampledlm.load` returns, or its ``lm``; module
    docstring); its batcher starts with the app."""
    from ..lm import language_model

    lm = language_model(lm)
    engine = Engine(lm)
    reader = Reader(lm.vocab, lm.text_options, limits)
    batcher = Batcher(engine.run, wait_ms=batching.wait_ms, max_batch=batching.max_batch, enabled=batching.enabled)
    counters = {"requests": 0, "refused": 0, "errors": 0}
    in_flight = InFlight()
    endpoints = _Endpoints(lm, engine, reader, batcher, limits, batching, counters)

    async def started(app):
        batcher.start()

    async def stopped(app):
        await batcher.close()

    app = web.Application(middlewares=[_error_middleware(counters, in_flight, limits)],
                          client_max_size=limits.max_body)
    app.router.add_get("/health", endpoints.health)
    app.router.add_get("/info", endpoints.info)
    app.router.add_post("/score", endpoints.score)
    app.router.add_post("/next", endpoints.next_words)
    app.router.add_post("/topk", endpoints.topk)
    app.on_startup.append(started)
    app.on_cleanup.append(stopped)
    app[IN_FLIGHT] = in_flight
    return app


def _error_middleware(counters: dict, in_flight: InFlight, limits: Limits):
    """The middleware that counts requests, keeps ``in_flight``, and answers every error as one line of JSON
    (module docstring), counted as refused (4xx) or as an error (500)."""

    @web.middleware
    async def errors(request: web.Request, handler):
        counters["requests"] += 1
        if isinstance(request.protocol, _JsonErrorHandler):
            request.protocol.request_began = True
        if len(request.raw_headers) > MAX_HEADERS:  # aiohttp's parser counts them only from 3.14 on
            counters["refused"] += 1
            resp = refuse(431, f"too many headers ({len(request.raw_headers)}; at most {MAX_HEADERS})")
            resp.force_close()
            return resp
        in_flight.enter()
        try:
            return await handler(request)
        except BadRequest as e:
            counters["refused"] += 1
            return refuse(e.status, e)
        except web.HTTPRequestEntityTooLarge:
            counters["refused"] += 1
            return refuse(413, f"request body over the limit of {limits.max_body} bytes (--max-body)")
        except web.HTTPException as e:
            if e.status < 400:
                raise
            counters["refused"] += 1
            what = {404: f"no endpoint {request.path!r} (GET /health, /info; POST /score, /next, /topk)",
                    405: f"{request.method} is not allowed on {request.path} (GET /health, /info; "
                         "POST /score, /next, /topk)"}
            return refuse(e.status, what.get(e.status, e.reason))
        except Closed as e:
            return refuse(503, e)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 -- a fault in the model call: one line, the server goes on
            counters["errors"] += 1
            log.error("internal error on %s: %s: %s", request.path, type(e).__name__, e)
            return refuse(500, f"internal error: {type(e).__name__}: {e}")
        finally:
            in_flight.leave()

    return errors


class _Endpoints:
    """The handlers of the endpoints (module docstring): each request's body read and checked on the event loop,
    the model work submitted to the batcher."""

    def __init__(self, lm: LanguageModel, engine: Engine, reader: Reader, batcher: Batcher, limits: Limits,
                 batching: Batching, counters: dict):
        self.lm, self.engine, self.reader, self.batcher = lm, engine, reader, batcher
        self.limits, self.batching, self.counters = limits, batching, counters

    async def body(self, request: web.Request) -> dict:
        try:
            raw = await asyncio.wait_for(request.read(), self.limits.read_timeout)
        except asyncio.TimeoutError:
            raise BadRequest(f"request body not received within {self.limits.read_timeout:g} s", 408) from None
        except (web.RequestPayloadError, http_exceptions.HttpProcessingError) as e:  # a body not as its headers say
            # (Content-Encoding: gzip over plain bytes): the client's fault, a 400, not a 500 counted as the server's
            raise BadRequest(f"request body cannot be read as sent: {getattr(e, 'message', None) or e}", 400) from None
        return parse_json(raw)

    async def health(self, request):
        return reply({"status": "ok"})

    async def info(self, request):
        batching = self.batching
        return reply({**self.engine.describe(), "batching": {"enabled": batching.enabled, "wait_ms": batching.wait_ms,
                                                             "max_batch": batching.max_batch,
                                                             **self.batcher.stats.to_dict()},
                      "limits": self.limits.to_dict(), "counters": dict(self.counters)})

    async def score(self, request):
        with self.batcher.arriving():
            sents, per_word = read_score(await self.body(request), self.reader)
        got = await self.batcher.submit("score", sents)
        totals = Totals()
        for i, s in enumerate(got):
            s.index = i + 1
            if s.words:  # an empty sentence is no sentence in the totals, as in sampledlm score and perplexity()
                totals.add(s)
        return reply({"sentences": [s.to_dict(per_word) for s in got], "totals": totals.to_dict()})

    async def next_words(self, request):
        with self.batcher.arriving():
            queries = read_next(await self.body(request), self.reader)
        got = await self.batcher.submit("next", [(h, w) for h, w, _ in queries])
        # "oov": each word outside the vocabulary, scored as <unk> (a class of words, not the word asked about)
        return reply({"results": [{"ln": lp.tolist(), "log10": (lp / LN10).tolist(),
                                   "oov": [i == UNK_ID and t != UNK for i, t in zip(ids, toks)]}
                                  for lp, (_, ids, toks) in zip(got, queries)]})

    async def topk(self, request):
        with self.batcher.arriving():
            hists, k = read_topk(await self.body(request), self.reader)
        got = await self.batcher.submit("topk", [(h, k) for h in hists])
        words = self.lm.vocab.words
        return reply({"results": [{"words": [words[i] for i in ids.tolist()], "ln": lp.tolist(),
                                   "log10": (lp / LN10).tolist()} for ids, lp in got]})


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


class Server:
    """A running server: :meth:`start` binds and serves on an event loop of its own thread (tests, the demo,
    the bench) or :meth:`run` serves in the calling thread until SIGTERM/SIGINT (the command line)."""

    def __init__(self, lm: LanguageModel, host: str = "127.0.0.1", port: int = 0, limits: Limits = Limits(),
                 batching: Batching = Batching(), shutdown_timeout: float = 30.0):
        from ..lm import language_model

        lm = language_model(lm)  # what sampledlm.load returns, or its lm
        self.lm, self.host, self.port, self.limits, self.batching = lm, host, port, limits, batching
        self.shutdown_timeout = shutdown_timeout
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop_requested = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def serve(self, ready=None) -> None:
        """Bind, call ``ready(server)``, serve until :meth:`stop`, then shut down gracefully."""
        self._stop = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        if self._stop_requested:
            self._stop.set()
        app = make_app(self.lm, self.limits, self.batching)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=self.shutdown_timeout, handle_signals=False,
                               keepalive_timeout=self.limits.idle_timeout)
        await runner.setup()
        answer_protocol_errors_in_json(runner)
        site = web.TCPSite(runner, self.host, self.port, backlog=1024)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            hint = ("give another --port (0: any free port)" if e.errno in (errno.EADDRINUSE, errno.EACCES)
                    else "give another --host (an address of this machine, e.g. 127.0.0.1 or 0.0.0.0)")
            raise UserError(f"{self.host}:{self.port}: cannot listen there ({e.strerror or e}); {hint}") from None
        self.port = runner.addresses[0][1]
        self.app = app
        try:
            if ready is not None:
                ready(self)
            await self._stop.wait()
            await site.stop()  # no new connections; requests already received (bodies still arriving too) finish
            await app[IN_FLIGHT].drained(self.shutdown_timeout)
        finally:
            await runner.cleanup()  # idle connections close; then the batcher ends

    def stop(self) -> None:
        """Ask a serving server to stop (any thread, or a signal handler; before it listens too: it then stops
        as soon as it does); :meth:`start`'s thread then ends."""
        self._stop_requested = True
        if self.loop is not None and self._stop is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop closed meanwhile: the server has stopped already
                pass

    # --- in a thread -----------------------------------------------------------------------------------
    def start(self) -> "Server":
        """Serve in a background thread; returns when the port is bound (``self.url`` is then known)."""
        def main():
            try:
                asyncio.run(self.serve(ready=lambda s: self._ready.set()))
            except BaseException as e:  # noqa: BLE001 -- handed to the starting thread
                self._error = e
                self._ready.set()

        self._thread = threading.Thread(target=main, name="sampledlm-serve", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self

    def close(self, timeout: float | None = None) -> None:
        self.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> "Server":
        return self.start() if self._thread is None else self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- in the foreground, until a signal -----------------------------------------------------------
    def run(self, announce=None, restore_signals: bool = True) -> None:
        """Serve until SIGTERM or SIGINT; ``announce(server)`` once listening (the command line prints the URL).

        The first signal stops the server gracefully; later ones change nothing (the drain goes on). With
        ``restore_signals=False`` (the command line, which exits next) both signals are ignored after the return,
        so that a signal arriving between the clean stop and the process's exit cannot kill it."""
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def on_signal(signum, frame):
            self.stop()

        for sig in previous:
            signal.signal(sig, on_signal)
        try:
            asyncio.run(self.serve(ready=announce))
        finally:
            for sig, handler in previous.items():
                # not restored: ignored from now on. Python's finalization puts SIG_DFL back wherever a Python
                # handler was set (a late SIGTERM would then kill the exiting process), but leaves SIG_IGN.
                signal.signal(sig, handler if restore_signals else signal.SIG_IGN)


def announce(server: Server, out=sys.stderr) -> None:
    """The command line's first words: where it listens, and whether other machines can reach it."""
    where = ("localhost only (give --host 0.0.0.0 to accept other machines)" if is_loopback(server.host)
             else f"on {server.host}: any machine that can reach it may query the model")
    b = server.batching
    batching = (f"batching up to {b.max_batch} items, {b.wait_ms:g} ms window" if b.enabled else "batching off")
    print(f"sampledlm serve: {server.lm.describe()}; listening on {server.url}, {where}; {batching}; "
          "SIGTERM or Ctrl-C stops it", file=out, flush=True)
