"""The HTTP side: /metrics from the snapshot collector plus the exporter's own process metrics.

A small WSGI app instead of prometheus-client's `start_http_server`, so the snapshot's series can be
served from the exposition rendered once per snapshot (see render.py) rather than re-rendered per scrape.
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.process_collector import ProcessCollector

from exporters.collector import SecscanCollector
from exporters.render import CONTENT_TYPE
from exporters.source import SnapshotSource


def build_registry(snapshot: Path, *, critical_info_limit: int = 0) -> CollectorRegistry:
    """A registry with scanwatch's series and the exporter's process metrics (for generate_latest users)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SecscanCollector(SnapshotSource(snapshot), critical_info_limit=critical_info_limit))
    ProcessCollector(registry=registry)
    return registry


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # scrapes every few seconds: no access log
        pass


def make_app(collector: SecscanCollector):
    """WSGI app: /metrics (and /) serve the exposition, /-/healthy answers ok, the rest is 404."""
    process = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=process)

    def app(environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if path == "/-/healthy":
            body, status, ctype = b"ok\n", "200 OK", "text/plain; charset=utf-8"
        elif path in ("/", "/metrics"):
            body, status, ctype = collector.exposition() + generate_latest(process), "200 OK", CONTENT_TYPE
        else:
            body, status, ctype = b"not found: scanwatch serves /metrics\n", "404 Not Found", "text/plain"
        start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
        return [b""] if environ.get("REQUEST_METHOD") == "HEAD" else [body]

    return app


def serve(snapshot: Path, *, address: str = "0.0.0.0", port: int = 9817, certfile: str | None = None,
          keyfile: str | None = None, critical_info_limit: int = 0) -> tuple[WSGIServer, threading.Thread]:
    """Start serving in a background thread; returns (server, thread) so callers and tests can stop it."""
    collector = SecscanCollector(SnapshotSource(snapshot), critical_info_limit=critical_info_limit)

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in address else socket.AF_INET

    httpd = make_server(address, port, make_app(collector), Server, handler_class=_QuietHandler)
    if certfile and keyfile:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile=certfile, keyfile=keyfile)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, name="scanwatch-exporter", daemon=True)
    thread.start()
    return httpd, thread
