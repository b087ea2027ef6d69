"""Retries only where safe, with Retry-After honoured and full-jitter backoff otherwise."""

from __future__ import annotations

import httpx
import pytest

from pipelines.api import (
    ApiTimeoutError,
    ConflictError,
    InvalidRequestError,
    MalformedResponseError,
    RateLimitedError,
    RetryPolicy,
    ServerError,
)

from .fakes import FakeClock, body_of, client_for, envelope, error, ok


def scripted(*answers):
    """A handler answering from a script; exceptions in it are raised like a transport would."""
    script = list(answers)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    handler.seen = seen  # type: ignore[attr-defined]
    return handler


@pytest.mark.parametrize("status", [500, 502, 504])
def test_5xx_retried_with_backoff(status: int) -> None:
    clock = FakeClock()
    handler = scripted(error(status, "internal_error"), error(status, "internal_error"), ok({"object": "account"}))
    client = client_for(handler, clock)
    assert client.get_account() == {"object": "account"}
    assert client.stats.requests == 3 and client.stats.retries == 2 and client.stats.server_errors == 2
    assert len(clock.sleeps) == 2 and all(0 <= s <= 30 for s in clock.sleeps)


def test_retry_after_honoured_on_429_and_503() -> None:
    clock = FakeClock()
    rate = error(429, "rate_limited")
    rate.headers["Retry-After"] = "7"
    busy = error(503, "service_unavailable")
    busy.headers["Retry-After"] = "3"
    client = client_for(scripted(rate, busy, ok({"object": "account"})), clock)
    client.get_account()
    assert sum(clock.sleeps) == pytest.approx(10)
    assert client.stats.rate_limited == 1 and client.stats.waited_seconds == pytest.approx(10)


def test_dropped_connection_timeout_and_malformed_json_are_retried() -> None:
    clock = FakeClock()
    handler = scripted(
        httpx.RemoteProtocolError("peer closed connection"),
        httpx.ReadTimeout("slow"),
        httpx.Response(200, text='{"object": "acc'),  # truncated JSON
        ok({"object": "list", "data": "nope"}),  # wrong envelope for a list
        ok(envelope([], False)),
    )
    client = client_for(handler, clock)
    assert client.list_projects() == []
    assert client.stats.requests == 5 and client.stats.retries == 4 and client.stats.transport_errors == 2


def test_gives_up_after_max_attempts() -> None:
    client = client_for(scripted(error(500, "internal_error")), max_attempts=4)
    with pytest.raises(ServerError):
        client.get_account()
    assert client.stats.requests == 4

    client = client_for(scripted(httpx.Response(200, text="not json")), max_attempts=2)
    with pytest.raises(MalformedResponseError):
        client.get_account()

    client = client_for(scripted(httpx.ReadTimeout("slow")), max_attempts=2)
    with pytest.raises(ApiTimeoutError):
        client.get_account()


def test_client_errors_are_not_retried() -> None:
    handler = scripted(error(400, "parameter_invalid", param="limit"))
    client = client_for(handler)
    with pytest.raises(InvalidRequestError):
        client.get_account()
    assert client.stats.requests == 1


def test_daily_429_ceilings_raise_at_once() -> None:
    client = client_for(scripted(error(429, "recheck_limit_reached")))
    with pytest.raises(RateLimitedError):
        client.recheck_issue("i1", idempotency_key="recheck-i1-2026-10-13")
    assert client.stats.requests == 1


def test_post_retries_carry_the_same_idempotency_key() -> None:
    handler = scripted(httpx.ConnectError("reset"), error(503, "service_unavailable"),
                       error(409, "idempotency_in_progress"), ok({"object": "scan", "reused": False}, 201))
    client = client_for(handler)
    scan = client.start_scan("t-1", kind="quick", idempotency_key="scan-t-1-tick-42")
    assert scan["reused"] is False
    keys = {r.headers.get("idempotency-key") for r in handler.seen}
    assert keys == {"scan-t-1-tick-42"} and len(handler.seen) == 4
    assert body_of(handler.seen[-1]) == {"kind": "quick"}


def test_post_requires_an_idempotency_key() -> None:
    client = client_for(scripted(ok({})))
    with pytest.raises(ValueError, match="idempotency_key"):
        client.create_project("x", idempotency_key="")
    with pytest.raises(ValueError):
        client.request("POST", "/projects", json={"name": "x"})


def test_patch_is_retried_with_the_same_body() -> None:
    handler = scripted(error(502, "internal_error"), ok({"object": "issue", "status": "accepted_risk"}))
    client = client_for(handler)
    client.mark_issue("i-1", "accepted_risk", "known and accepted for now")
    expected = {"status": "accepted_risk", "reason": "known and accepted for now"}
    assert [body_of(r) for r in handler.seen] == [expected, expected]
    assert [r.method for r in handler.seen] == ["PATCH", "PATCH"]


def test_conflicts_other_than_in_progress_raise() -> None:
    client = client_for(scripted(error(409, "issue_already_fixed")))
    with pytest.raises(ConflictError):
        client.mark_issue("i-1", "open")
    assert client.stats.requests == 1


def test_full_jitter_bounds() -> None:
    policy = RetryPolicy(base=0.5, cap=30, rand=lambda: 1.0)
    assert [policy.backoff(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert RetryPolicy(rand=lambda: 0.0).backoff(5) == 0.0


def test_retry_after_beyond_the_ceiling_raises() -> None:
    busy = error(503, "platform_busy")
    busy.headers["Retry-After"] = "120"
    client = client_for(scripted(busy))
    with pytest.raises(ServerError) as info:
        client.start_scan("t", idempotency_key="k")
    assert info.value.retry_after == 120 and client.stats.requests == 1
    assert "nothing was charged" in str(info.value) and "120 s" in str(info.value)


def test_a_burst_of_rate_limited_answers_with_retry_after_outlasts_the_fault_budget():
    from pipelines.api.errors import RateLimitedError
    from pipelines.api.retry import RetryPolicy

    policy = RetryPolicy(max_attempts=6, rand=lambda: 1.0)
    told = RateLimitedError("slow down", status=429, code="rate_limited", retry_after=1.0)
    assert [policy.delay_for_error(told, n) for n in (6, 10, 19)] == [1.0, 1.0, 1.0]
    assert policy.delay_for_error(told, 20) is None
    untold = RateLimitedError("slow down", status=429, code="rate_limited")
    assert policy.delay_for_error(untold, 6) is None
