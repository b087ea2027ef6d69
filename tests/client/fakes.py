"""In-memory stand-ins for the service and for time, so unit tests never sleep or open a socket."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from pipelines.api import ScanningClient

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
    return ScanningClient(BASE, KEY, transport=httpx.MockTransport(handler), sleep=clock.sleep, clock=clock.time,
                          **kwargs)


def body_of(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None
