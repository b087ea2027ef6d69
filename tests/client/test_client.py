"""The public surface: map semantics, version warnings, request logging, stats snapshot."""

from __future__ import annotations

import logging
import threading
import time

import httpx
import pytest

from pipelines.api import ApiError, NotFoundError, RequestStats
from tests.client.writing import WritingClient

from .fakes import BASE, KEY, client_for, envelope, error, ok


def test_map_keeps_input_order_and_overlaps() -> None:
    client = client_for(lambda r: ok({"object": "scan", "id": r.url.path.rsplit("/", 1)[-1]}))
    active = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def fetch(i: int) -> str:
        with lock:
            active["now"] += 1
            active["peak"] = max(active["peak"], active["now"])
        time.sleep(0.01)
        with lock:
            active["now"] -= 1
        return client.get_scan(f"s{i}")["id"]

    assert client.map(fetch, range(12)) == [f"s{i}" for i in range(12)]
    assert 1 < active["peak"] <= client.concurrency


def test_map_stops_submitting_on_first_error_and_reraises_it() -> None:
    client = client_for(lambda r: ok({}), concurrency=2)
    started: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        if i == 1:
            raise NotFoundError("gone", status=404, code="resource_not_found")
        time.sleep(0.02)
        return i

    with pytest.raises(NotFoundError):
        client.map(work, range(50))
    assert len(started) <= 4


def test_version_change_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    versions = iter(["2026-10-13", "2026-10-13", "2027-01-01"])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"object": "account"}, headers={"Service-Version": next(versions)})

    client = client_for(handler)
    with caplog.at_level(logging.WARNING, logger="scanwatch.api"):
        for _ in range(3):
            client.get_account()
    assert client.stats.service_version == "2027-01-01"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "2026-10-13" in warnings[0].getMessage() and "2027-01-01" in warnings[0].getMessage()


def test_one_debug_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    answers = iter([error(500, "internal_error"), ok(envelope([], False))])
    client = client_for(lambda r: next(answers))
    with caplog.at_level(logging.DEBUG, logger="scanwatch.api"):
        client.list_issues("p1", status="open")
    lines = [r.getMessage() for r in caplog.records if r.name == "scanwatch.api"]
    assert len(lines) == 2
    assert lines[0].startswith("GET /projects/p1/issues -> 500 in ")
    assert all("status=open" not in line and "?" not in line for line in lines)


def test_stats_snapshot_and_by_route() -> None:
    client = client_for(lambda r: ok({"object": "x"}, **{"X-RateLimit-Limit": "120", "X-RateLimit-Remaining": "99",
                                                        "X-RateLimit-Reset": "1800000060"}))
    client.get_account()
    client.get_scan("a")
    client.get_scan("b")
    snap = client.stats.snapshot()
    assert snap["requests"] == 3
    assert snap["by_route"] == {"GET /account": 1, "GET /scans/{scan_id}": 2}
    assert (snap["last_limit"], snap["last_remaining"], snap["last_reset"]) == (120, 99, 1800000060)
    assert snap["service_version"] == "2026-10-13"
    assert isinstance(client.stats, RequestStats)


def test_ids_are_quoted_into_paths_and_headers_are_sent() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return ok({"object": "project"})

    with WritingClient(BASE + "/", KEY, transport=httpx.MockTransport(handler), user_agent="scanwatch/test") as c:
        c.get_project("a/../b")
        c.create_project("n", "https://example.test", idempotency_key="create-n")
    assert seen[0].url.raw_path == b"/v1/projects/a%2F..%2Fb"
    assert seen[0].headers["user-agent"] == "scanwatch/test"
    assert seen[1].headers["idempotency-key"] == "create-n" and seen[1].method == "POST"


def test_every_error_is_an_api_error() -> None:
    client = client_for(lambda r: error(418, "teapot"), max_attempts=1)
    with pytest.raises(ApiError) as info:
        client.get_account()
    assert info.value.status == 418
