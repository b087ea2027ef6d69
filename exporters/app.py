"""The exporter's WSGI app: /metrics from the encoded snapshot or prometheus-client's `make_wsgi_app`, and probes.

A plain GET of /metrics (and /) is answered from the snapshot's bytes encoded once per snapshot change
(cache.py), in the format `Accept` picks (OpenMetrics or the text format) and gzipped when asked, as the
library's app answers. Everything else on /metrics is the library's app as it is: `?name[]=` filters,
OPTIONS answers, other methods 405, a format not encoded yet. Its registry holds the custom collector, read on
every such request, and the process collector. /-/healthy answers 200 while the process serves and its
watch and poll of the snapshot run (liveness: 503 with the reason when one has stopped or a PostgreSQL poll is
stuck past its bound); /-/ready answers 503 until a first snapshot has loaded and been encoded, and 200 after
(readiness), so a new pod joins its Service only once /metrics carries its workspaces. A request that fails
in an unforeseen way is logged with its traceback and answered 500 with one line; other paths are 404.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.process_collector import ProcessCollector

from exporters.cache import EncodedSnapshot
from exporters.collector import SecscanCollector

METRICS_PATHS = ("/metrics", "/")
TEXT = [("Content-Type", "text/plain; charset=utf-8")]
log = logging.getLogger("scanwatch.exporter")
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def registry_of(collector: SecscanCollector) -> CollectorRegistry:
    """What /metrics serves: scanwatch's series and the process metrics. The collector names no families (they
    depend on the snapshot), so the registry collects it for every `name[]` filter and keeps what matches."""
    registry = CollectorRegistry(support_collectors_without_names=True)
    registry.register(collector)
    ProcessCollector(registry=registry)
    return registry


def _probe(encoded: EncodedSnapshot, path: str) -> tuple[str, bytes]:
    if path == "/-/healthy":
        problem = encoded.problem()
        if problem is None:
            return "200 OK", b"ok\n"
        return "503 Service Unavailable", f"unhealthy: {problem}\n".encode()
    if encoded.ready():
        return "200 OK", b"ready\n"
    problem = encoded.problem() or "no metrics snapshot loaded and encoded yet (has a sync run?)"
    return "503 Service Unavailable", f"not ready: {problem}\n".encode()


def make_app(encoded: EncodedSnapshot, slow_seconds: float) -> WSGIApp:
    """`slow_seconds`: an answer to /metrics that takes longer is said once (until one is fast again): a
    scrape given that long (the server's exchange deadline) was dropped. A plain scrape waits as long for the
    first encoding of the snapshot."""
    metrics = make_wsgi_app(registry_of(encoded.collector))
    slow = [False]

    def scrape(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.monotonic()
        plain = environ.get("REQUEST_METHOD") == "GET" and "name[]" not in parse_qs(environ.get("QUERY_STRING", ""))
        cached = encoded.answer(environ.get("HTTP_ACCEPT"), environ.get("HTTP_ACCEPT_ENCODING"),
                                max(slow_seconds, 0.0)) if plain else None
        if cached is None:
            answer: Iterable[bytes] = metrics(environ, start_response)
        else:
            status, headers, answer = cached
            start_response(status, headers)
        took = time.monotonic() - started
        if took > slow_seconds and not slow[0]:
            log.warning("a /metrics answer took %.1f s, more than the %.0f s a scrape is given: it was dropped; "
                        "split the workspaces across exporters (--shard I/N)", took, slow_seconds)
        slow[0] = took > slow_seconds
        return answer

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        try:
            if path in METRICS_PATHS:
                return scrape(environ, start_response)
            if path in ("/-/healthy", "/-/ready"):
                status, body = _probe(encoded, path)
            else:
                status, body = "404 Not Found", b"not found: scanwatch serves /metrics\n"
        except Exception:
            log.exception("the exporter could not answer %s %s", environ.get("REQUEST_METHOD"), path[:100])
            status, body = "500 Internal Server Error", b"the exporter failed: see its log\n"
        start_response(status, TEXT)
        return [body]

    return app
