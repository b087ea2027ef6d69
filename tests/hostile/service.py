"""A hostile Scanning Service: the simulator behind a proxy that misbehaves on purpose, one case at a time.

Everything reaches scanwatch over real HTTP, exactly as a broken service, a bad proxy or an attacker in the
middle would send it. ``case`` picks the misbehaviour and ``kind`` the list it hits (projects, scans or
issues); ``requests`` counts what scanwatch asked, so each case can bound it.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx

ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m"
LIST_ROUTES = {
    "projects": re.compile(r"^/v1/projects$"),
    "scans": re.compile(r"^/v1/projects/[^/]+/scans$"),
    "issues": re.compile(r"^/v1/projects/[^/]+/issues$"),
}
CASES = ("clean", "same_page", "cycle", "endless", "bomb", "surrogate", "huge", "trickle", "far_reset", "escapes")


def gzip_bomb(size: int) -> bytes:
    """`size` bytes of JSON whitespace, gzipped (about a thousandth of the size)."""
    out = io.BytesIO()
    block = b" " * (1024 * 1024)
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as gz:
        for _ in range(size // len(block)):
            gz.write(block)
    return out.getvalue()


class HostileService:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.case = "clean"
        self.kind = "issues"
        self.requests = 0
        self.bomb = b""
        self.bombs: int | None = None  # how many answers get the bomb (None: every matching one)
        self.huge_bytes = 5 * 1024 * 1024
        self.trickle_gap = 0.5
        self.victim: str | None = None  # the one issue a per-record case spoils
        self.base_url = ""
        self._lock = threading.Lock()

    def set(self, case: str, kind: str = "issues") -> None:
        assert case in CASES, case
        with self._lock:
            self.case, self.kind, self.requests, self.victim = case, kind, 0, None

    def take_bomb(self) -> bool:
        with self._lock:
            if self.bombs is None:
                return True
            self.bombs, left = max(0, self.bombs - 1), self.bombs
            return left > 0

    def _count(self) -> None:
        with self._lock:
            self.requests += 1


@contextmanager
def serve_hostile(upstream: str) -> Iterator[HostileService]:
    """Serve ``upstream`` (a base URL ending in /v1) through a ``HostileService``."""
    state = HostileService(upstream)
    client = httpx.Client(base_url=upstream[: -len("/v1")], timeout=30, headers={"Accept-Encoding": "identity"})

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            state._count()
            path, _, query = self.path.partition("?")
            params = {k: v[-1] for k, v in parse_qs(query).items()}
            kind = next((k for k, rx in LIST_ROUTES.items() if rx.match(path)), None)
            hit = kind is not None and kind == state.kind
            case = state.case
            if hit and case == "bomb" and state.take_bomb():
                return self._send(200, {"Content-Type": "application/json", "Content-Encoding": "gzip"}, state.bomb)
            if hit and case in ("same_page", "cycle", "endless"):
                return self._list(path, params, case)
            upstream = self._upstream(path, params)
            status, headers, body = upstream.status_code, self._headers(upstream), upstream.content
            if status == 200 and case == "far_reset":
                headers.update({"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 10 * 86400)})
            if status == 200 and case in ("surrogate", "huge", "escapes") and kind in ("issues", "projects"):
                body = json.dumps(self._spoil(kind, upstream.json(), case)).encode()
            if hit and case == "trickle" and status == 200:
                return self._trickle(status, headers, body)
            self._send(status, headers, body)

        # -- cases ------------------------------------------------------------------------------------------

        def _list(self, path: str, params: dict[str, str], case: str) -> None:
            first = self._upstream(path, {k: v for k, v in params.items() if k != "starting_after"})
            page = first.json()
            items = page["data"]
            cursor = params.get("starting_after")
            if case == "cycle" and len(items) >= 2:
                half = len(items) // 2
                a, b = items[:half], items[half:]
                items = b if cursor == a[-1]["id"] else a
            elif case == "endless" and items:
                template = items[0]
                items = [dict(template, id=str(uuid.uuid4())) for _ in range(int(params.get("limit", 100)))]
            self._send(200, self._headers(first), json.dumps(dict(page, data=items, has_more=True)).encode())

        def _spoil(self, kind: str, page: dict[str, Any], case: str) -> dict[str, Any]:
            for item in page.get("data", []):
                if case == "escapes" and kind == "projects":
                    item["name"] = f"{item.get('name')}{ESCAPES}"
                if kind != "issues":
                    continue
                with state._lock:
                    if state.victim is None:
                        state.victim = item["id"]
                if item["id"] != state.victim:
                    continue
                if case == "surrogate":
                    item["title"] = "broken \ud800 title"
                elif case == "huge":
                    item["detail"] = "A" * state.huge_bytes
                elif case == "escapes":
                    item["title"] = f"title{ESCAPES}"
                    item["severity"] = f"{ESCAPES}critical"
            return page

        def _trickle(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(state.trickle_gap)
            except OSError:
                pass  # the client gave up: that is the point

        # -- plumbing ---------------------------------------------------------------------------------------

        def _upstream(self, path: str, params: dict[str, str]) -> httpx.Response:
            headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "accept")}
            return client.get(path + ("?" + urlencode(params) if params else ""), headers=headers)

        @staticmethod
        def _headers(r: httpx.Response) -> dict[str, str]:
            skip = ("content-length", "transfer-encoding", "connection", "content-encoding", "date", "server")
            return {k.lower(): v for k, v in r.headers.items() if k.lower() not in skip}

        def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
            try:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass

        def log_message(self, *args: object) -> None:  # quiet
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # clients hanging up on a trickle or a bomb is what the cases are about

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        client.close()
