"""The exporter's ASGI app: /metrics through prometheus-client, /-/healthy and /-/ready for probes, 404 elsewhere.

/-/healthy answers 200 while the process serves and its poll of the snapshot runs (liveness: 503, with the
reason, when the poll of a PostgreSQL-kept snapshot has stopped or is stuck past its bound); /-/ready answers
503 until a first snapshot has loaded and 200 after (readiness), so a new pod joins its Service only once
/metrics carries the workspaces, and 503 again while its poll cannot be trusted. A request that fails in an
unforeseen way is logged, with its traceback, and answered 500 with one line.

An unfiltered GET of /metrics is answered from the per-snapshot cache (exposition.py) with the library's
own format negotiation and gzip; everything else on /metrics (filters by `name[]`, OPTIONS, and the 405
for other methods) is the library's WSGI app as it is. Only a scrape whose answer is already encoded is
served on the event loop (a fraction of a millisecond, and no hand-off between threads, which on a busy
machine costs more than the work); any encoding runs in a worker thread, so it never holds up the loop
that accepts connections and enforces the deadlines.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import make_wsgi_app

from exporters.exposition import Exposition

METRICS_PATHS = ("/metrics", "/")
TEXT = [("Content-Type", "text/plain; charset=utf-8")]
log = logging.getLogger("scanwatch.exporter")
Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _call_wsgi(app: Callable[..., Iterable[bytes]],
               environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: object = None) -> None:
        answer["status"], answer["headers"] = status, headers

    body = b"".join(app(environ, start_response))
    return answer["status"], answer["headers"], body


def _library(exposition: Exposition, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    return _call_wsgi(make_wsgi_app(exposition.registry()), environ)


def make_app(exposition: Exposition) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        try:
            status, out, body = await _answer(exposition, scope)
        except Exception:
            log.exception("the exporter could not answer %s", scope.get("path", "")[:100])
            status, out, body = "500 Internal Server Error", TEXT, b"the exporter failed: see its log\n"
        out = [*out, ("Content-Length", str(len(body)))]
        await send({"type": "http.response.start", "status": int(status.split(" ", 1)[0]),
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in out]})
        await send({"type": "http.response.body", "body": body})

    return app


async def _answer(exposition: Exposition, scope: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    query = scope["query_string"].decode("latin-1")
    if scope["path"] == "/-/healthy":
        problem = exposition.problem()
        if problem is None:
            status, out, body = "200 OK", TEXT, b"ok\n"
        else:
            status, out, body = "503 Service Unavailable", TEXT, f"unhealthy: {problem}\n".encode()
    elif scope["path"] == "/-/ready":
        ready = await asyncio.to_thread(exposition.ready)  # a first load reads and parses the snapshot
        status = "200 OK" if ready else "503 Service Unavailable"
        out = TEXT
        problem = None if ready else exposition.problem()
        body = b"ready\n" if ready else f"not ready: {problem}\n".encode() if problem else \
            b"not ready: no metrics snapshot loaded yet (has a sync run?)\n"
    elif scope["path"] not in METRICS_PATHS:
        status, out = "404 Not Found", [("Content-Type", "text/plain; charset=utf-8")]
        body = b"not found: scanwatch serves /metrics\n"
    elif scope["method"] == "GET" and "name[]" not in parse_qs(query):
        accept, encoding = headers.get("accept"), headers.get("accept-encoding")
        answer = exposition.body(accept, encoding, cached_only=True) or \
            await asyncio.to_thread(exposition.body, accept, encoding)
        assert answer is not None  # body() answers None only when asked for a cached part
        status, out, body = answer
    else:
        environ = {"REQUEST_METHOD": scope["method"], "PATH_INFO": scope["path"], "QUERY_STRING": query,
                   "HTTP_ACCEPT": headers.get("accept", ""),
                   "HTTP_ACCEPT_ENCODING": headers.get("accept-encoding", "")}
        status, out, body = await asyncio.to_thread(_library, exposition, environ)
    return status, out, body
