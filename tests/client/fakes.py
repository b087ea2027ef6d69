"""In-memory stand-ins for the service and for time, so unit tests never sleep or open a socket."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from pipelines.api import ScanningClient
from tests.client.writing import WritingClient

KEY = "rst_test_0123456789abcdefSECRET"
BASE = "https://api.example.test/v1"


class FakeClock:
    """A clock whose ``sleep`` advances it: pacing and backoff are checked by what they asked for."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            self.now += seconds


def error(status: int, code: str, message: str = "boom", request_id: str = "req_1", **extra: Any) -> httpx.Response:
    body = {"error": {"type": code, "code": code, "message": message, "doc_url": f"https://docs.test/{code}", **extra}}
    return httpx.Response(status, json=body, headers={"Request-Id": request_id, "Service-Version": "2026-10-13"})


def ok(body: Any, status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers={"Request-Id": "req_ok", "Service-Version": "2026-10-13",
                                                      **headers})


def envelope(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {"object": "list", "data": items, "has_more": has_more}


def make_items(n: int, kind: str = "project") -> list[dict[str, Any]]:
    return [{"object": kind, "id": str(uuid.UUID(int=i + 1)), "n": i} for i in range(n)]


class ListService:
    """Serves cursor-paginated lists the way the spec describes, and records every request."""

    def __init__(self, lists: dict[str, list[dict[str, Any]]]) -> None:
        self.lists = lists
        self.requests: list[httpx.Request] = []
        self.hooks: list[Callable[[httpx.Request], httpx.Response | None]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        for hook in self.hooks:
            answer = hook(request)
            if answer is not None:
                return answer
        path = request.url.path.removeprefix("/v1")
        if path not in self.lists:
            return error(404, "resource_not_found")
        items = self.lists[path]
        limit = int(request.url.params.get("limit", 20))
        after = request.url.params.get("starting_after")
        start = 0
        if after:
            ids = [i["id"] for i in items]
            if after not in ids:
                return error(400, "cursor_invalid", param="starting_after")
            start = ids.index(after) + 1
        page = items[start:start + limit]
        return ok(envelope(page, start + limit < len(items)))


def client_for(handler: Callable[[httpx.Request], httpx.Response], clock: FakeClock | None = None,
               **kwargs: Any) -> ScanningClient:
    clock = clock or FakeClock()
    return WritingClient(BASE, KEY, transport=httpx.MockTransport(handler), sleep=clock.sleep, clock=clock.time,
                         **kwargs)


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None


class WindowLimiter:
    """A fixed-window rate limiter in front of a handler, with the spec's headers, on a given clock.

    ``other_per_window`` requests are spent by another client (the agent server) at the start of each window.
    """

    def __init__(self, inner: Callable[[httpx.Request], httpx.Response], clock: Callable[[], float], *,
                 limit: int, window: float, other_per_window: int = 0,
                 latency: float = 0.0, sleep: Callable[[float], None] | None = None) -> None:
        self.inner, self.clock, self.limit, self.window = inner, clock, limit, window
        self.other_per_window, self.latency, self.sleep = other_per_window, latency, sleep
        self.counts: dict[int, int] = {}
        self.served = 0
        self.refused = 0
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.latency and self.sleep:
            self.sleep(self.latency)
        with self._lock:
            now = self.clock()
            slot = int(now // self.window)
            used = self.counts.get(slot, self.other_per_window)
            reset = (slot + 1) * self.window
            if used >= self.limit:
                self.refused += 1
                response = error(429, "rate_limited")
                response.headers["Retry-After"] = str(max(1, int(reset - now + 0.999)))
                return response
            self.counts[slot] = used + 1
            self.served += 1
            remaining = self.limit - used - 1
        response = self.inner(request)
        if response.is_success:
            response.headers.update({"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(remaining),
                                     "X-RateLimit-Reset": f"{reset:.3f}"})
        return response
