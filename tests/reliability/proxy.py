"""A rewriting proxy in front of the simulator: pages with wrong types, missing fields or huge bodies,
which the simulator itself never serves, reach scanwatch over real HTTP exactly as a buggy or newer
service would send them."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

Rewrite = Callable[[str, Any], Any]  # (path, decoded body) -> body to send


@contextmanager
def rewriting_proxy(upstream: str, rewrite: Rewrite) -> Iterator[str]:
    """Serve `upstream` (a base URL ending in /v1) through `rewrite`; yields the proxy's base URL."""
    root = upstream[: -len("/v1")]
    client = httpx.Client(base_url=root, timeout=30)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._forward("GET")

        def do_POST(self) -> None:
            self._forward("POST")

        def _forward(self, method: str) -> None:
            keep = ("authorization", "accept", "content-type", "idempotency-key")
            headers = {k: v for k, v in self.headers.items() if k.lower() in keep}
            sent = self.rfile.read(int(self.headers.get("content-length") or 0))
            r = client.request(method, self.path, headers=headers, content=sent or None)
            body = r.content
            if r.status_code in (200, 201):
                body = json.dumps(rewrite(self.path.split("?")[0], r.json())).encode()
            self.send_response(r.status_code)
            for k, v in r.headers.items():
                if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()
        client.close()
