"""The HTTP side: the exporter's WSGI app on uvicorn, in a bounded pool of threads, so no client can wedge it.

The standard library's thread-per-connection server (the one prometheus-client's `start_http_server` runs)
let 3,000 dropped half-requests hold 3,000 threads and the exporter went unanswering for half a minute.
Here one event loop holds the connections, the app runs in `THREADS` worker threads (a2wsgi), and:

- a request head may be at most MAX_HEAD_BYTES (h11's own limit; larger is a 400);
- every exchange (head in, body out) has EXCHANGE_SECONDS, Prometheus' default scrape timeout, after
  which the connection is dropped, so a half-request or a reader that stopped reading cannot stay (uvicorn
  times out only idle keep-alive connections: `_BoundedH11` adds this);
- an idle keep-alive connection is closed after KEEP_ALIVE_SECONDS;
- at MAX_CONNECTIONS the oldest connection with no request in progress is dropped for the new one, so a
  flood of silent connections cannot keep a real scrape out; uvicorn's `limit_concurrency` answers 503
  beyond that many requests at once.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any, cast

import uvicorn
from a2wsgi import WSGIMiddleware
from uvicorn.protocols.http.h11_impl import H11Protocol

from exporters.app import make_app
from exporters.cache import EncodedSnapshot
from exporters.collector import SecscanCollector
from exporters.source import Shard, SnapshotSource
from pipelines.snapshot.format import Limits
from pipelines.snapshot.store import SnapshotStore

MAX_HEAD_BYTES = 8 * 1024
EXCHANGE_SECONDS = 10.0
KEEP_ALIVE_SECONDS = 5
MAX_CONNECTIONS = 64
THREADS = 4  # scrapes encoded at once (two Prometheus replicas, a probe, a person)
BACKLOG = 512


class _BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline per exchange and room kept for new connections."""

    exchange_seconds = EXCHANGE_SECONDS
    max_connections = MAX_CONNECTIONS
    _deadline: asyncio.TimerHandle | None = None
    opened = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.opened = self.loop.time()
        self._arm()
        if len(self.connections) >= self.max_connections:
            idle = [c for c in self.connections if c is not self and isinstance(c, _BoundedH11)
                    and (c.cycle is None or c.cycle.response_complete)]
            if idle:
                oldest = min(idle, key=lambda c: c.opened)
                oldest.transport.abort()
                self.connections.discard(oldest)  # now: its connection_lost only runs on the next loop turn

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()  # the next exchange on this keep-alive connection gets its own deadline

    def _arm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(self.exchange_seconds, self._expire)

    def _expire(self) -> None:
        if not self.transport.is_closing():
            self.transport.abort()


class RunningExporter:
    """A started exporter: where it listens, and how to stop it."""

    def __init__(self, server: uvicorn.Server, thread: threading.Thread, sock: socket.socket,
                 app: WSGIMiddleware, encoded: EncodedSnapshot) -> None:
        self._server, self._thread, self._app, self._encoded = server, thread, app, encoded
        self.server_address: tuple[Any, ...] = sock.getsockname()
        self.server_port: int = self.server_address[1]

    def shutdown(self, timeout: float = 15.0) -> None:
        self._server.should_exit = True
        self._encoded.stop()
        self._thread.join(timeout)
        # Answers still queued for scrapes that were dropped would each be encoded before the process could end.
        self._app.executor.shutdown(wait=False, cancel_futures=True)


def _collector(snapshot: Path | SnapshotStore, critical_info_limit: int, limits: Limits | None,
               shard: Shard | None) -> SecscanCollector:
    return SecscanCollector(SnapshotSource(snapshot, limits, shard), critical_info_limit=critical_info_limit)


def _bind(address: str, port: int) -> socket.socket:
    family, _, _, _, sockaddr = socket.getaddrinfo(address or None, port, type=socket.SOCK_STREAM,
                                                   flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(sockaddr)
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def serve(snapshot: Path | SnapshotStore, *, address: str = "0.0.0.0", port: int = 9817, certfile: str | None = None,
          keyfile: str | None = None, critical_info_limit: int = 0, exchange_seconds: float = EXCHANGE_SECONDS,
          max_connections: int = MAX_CONNECTIONS, limits: Limits | None = None,
          shard: Shard | None = None) -> tuple[RunningExporter, threading.Thread]:
    """Bind, then serve in a background thread; OSError (or ssl.SSLError) when it cannot start. `limits` bound
    the parts of a snapshot folder (a store given brings its own); `shard` picks the workspaces served."""
    protocol = type("BoundedH11", (_BoundedH11,), {"exchange_seconds": exchange_seconds,
                                                   "max_connections": max_connections})
    encoded = EncodedSnapshot(_collector(snapshot, critical_info_limit, limits, shard))
    # a2wsgi types its app with its own WSGI aliases; make_app is the same callable under the standard's names
    app = WSGIMiddleware(cast(Any, make_app(encoded, exchange_seconds)), workers=THREADS)
    config = uvicorn.Config(app, http=protocol, lifespan="off", log_config=None, log_level="error",
                            access_log=False, server_header=False,
                            limit_concurrency=max_connections, timeout_keep_alive=KEEP_ALIVE_SECONDS,
                            h11_max_incomplete_event_size=MAX_HEAD_BYTES, backlog=BACKLOG,
                            timeout_graceful_shutdown=5, ssl_certfile=certfile, ssl_keyfile=keyfile)
    config.load()  # certificate errors surface here, in the caller's thread
    sock = _bind(address, port)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="scanwatch-exporter",
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        sock.close()
        raise OSError(f"the HTTP server did not start on {address}:{port}")
    encoded.start()  # the first encoding, in the background: /-/ready says when it is done
    return RunningExporter(server, thread, sock, app, encoded), thread
