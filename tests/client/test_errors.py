"""Every error code of the spec becomes a typed exception with one actionable line ending in the Request-Id."""

from __future__ import annotations

import pickle

import httpx
import pytest

from pipelines.api import (
    ApiConnectionError,
    ApiError,
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PaymentRequiredError,
    PermissionDeniedError,
    PlanRequiredError,
    QuotaExceededError,
    RateLimitedError,
    ServerError,
    ServiceUnavailableError,
)

from .fakes import KEY, FakeClock, client_for, error

SPEC_CODES = {
    400: ["body_invalid", "parameter_invalid", "cursor_invalid", "url_invalid", "url_private",
          "idempotency_key_invalid", "target_kind_invalid", "reason_required"],
    401: ["authentication_required", "invalid_api_key"],
    402: ["api_plan_required", "api_trial_ended", "project_limit_reached", "address_limit_reached", "domain_taken",
          "project_paused", "audit_not_in_plan", "repositories_not_in_plan", "scan_quota_exceeded",
          "audit_quota_exceeded", "fix_quota_exceeded"],
    403: ["scope_missing"],
    404: ["resource_not_found"],
    409: ["issue_already_fixed", "proof_required", "site_excluded", "target_exists", "repository_host_unavailable",
          "idempotency_conflict", "idempotency_in_progress"],
    429: ["rate_limited", "recheck_limit_reached", "repository_analyses_limit_reached"],
    500: ["internal_error"],
    503: ["service_unavailable", "platform_busy"],
}

EXPECTED = {400: InvalidRequestError, 401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError,
            409: ConflictError, 429: RateLimitedError, 500: ServerError, 503: ServiceUnavailableError}


def expected_class(status: int, code: str) -> type[ApiError]:
    if status == 402:
        if code in ("api_plan_required", "api_trial_ended"):
            return PlanRequiredError
        if code.endswith("_quota_exceeded"):
            return QuotaExceededError
        return PaymentRequiredError
    return EXPECTED[status]


def raise_for(status: int, code: str, route_call=lambda c: c.get_account(), **extra) -> ApiError:
    client = client_for(lambda req: error(status, code, message="Le message\nsur deux lignes",
                                          request_id="req_abc", param="limit", **extra),
                        max_attempts=1)
    with pytest.raises(ApiError) as info:
        route_call(client)
    return info.value


@pytest.mark.parametrize(("status", "code"), [(s, c) for s, codes in SPEC_CODES.items() for c in codes])
def test_every_spec_code_is_typed_and_keeps_its_fields(status: int, code: str) -> None:
    err = raise_for(status, code)
    assert type(err) is expected_class(status, code)
    assert (err.status, err.code, err.request_id, err.param) == (status, code, "req_abc", "limit")
    assert err.doc_url == f"https://docs.test/{code}"
    assert err.message == "Le message sur deux lignes"
    text = str(err)
    assert "\n" not in text
    assert text.endswith("Request-Id: req_abc")
    assert f"Docs: https://docs.test/{code}." in text  # the error line shows where the service explains it
    assert KEY not in text and KEY not in repr(err)


def test_401_missing_and_refused_say_which_variable() -> None:
    missing = str(raise_for(401, "authentication_required"))
    refused = str(raise_for(401, "invalid_api_key"))
    assert "SCANWATCH_API_KEY" in missing and "no credential" in missing
    assert "SCANWATCH_API_KEY" in refused and "refused" in refused and "rst_" in refused


def test_402_names_the_plan_gate() -> None:
    free = str(raise_for(402, "api_plan_required"))
    trial = str(raise_for(402, "api_trial_ended"))
    assert "Free plan" in free and "Pro" in free
    assert "trial" in trial and "Pro" in trial
    quota = raise_for(402, "scan_quota_exceeded", upgrade_url="https://app.test/upgrade")
    assert quota.upgrade_url == "https://app.test/upgrade" and "https://app.test/upgrade" in str(quota)


def test_403_names_the_missing_scope_and_suggests_an_api_key() -> None:
    read = str(raise_for(403, "scope_missing", lambda c: list(c.iter_scans("p1"))))
    assert "scans:read" in read and "GET /projects/{project_id}/scans" in read and "rst_" in read
    write = str(raise_for(403, "scope_missing", lambda c: c.mark_issue("i1", "open")))
    assert "issues:write" in write
    run = str(raise_for(403, "scope_missing", lambda c: c.start_scan("t1", idempotency_key="k")))
    assert "scans:run" in run


def test_non_envelope_error_body_still_typed() -> None:
    client = client_for(lambda req: httpx.Response(404, text="<html>nope</html>"), max_attempts=1)
    with pytest.raises(NotFoundError) as info:
        client.get_scan("s1")
    assert str(info.value).endswith("Request-Id: none")


def test_connection_refused_points_at_base_url() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    clock = FakeClock()
    client = client_for(refuse, clock, max_attempts=3)
    with pytest.raises(ApiConnectionError) as info:
        client.get_account()
    assert "SCANWATCH_BASE_URL" in str(info.value)
    assert client.stats.requests == 3 and len(clock.sleeps) == 2


def test_errors_survive_pickling() -> None:
    err = raise_for(403, "scope_missing")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is PermissionDeniedError and str(back) == str(err) and back.code == "scope_missing"


def test_wrong_base_url_symptoms_name_the_variable() -> None:
    moved = httpx.Response(301, headers={"Location": "https://api.example.test/v1/account"})
    client = client_for(lambda r: moved, max_attempts=1)
    with pytest.raises(ApiError) as info:
        client.get_account()
    assert "SCANWATCH_BASE_URL" in str(info.value) and "https://api.example.test/v1/account" in str(info.value)

    client = client_for(lambda r: httpx.Response(404, text="Not Found"), max_attempts=1)
    with pytest.raises(NotFoundError) as info:
        client.get_account()
    assert "SCANWATCH_BASE_URL" in str(info.value)

    client = client_for(lambda r: httpx.Response(200, text="<html>login</html>"), max_attempts=2)
    with pytest.raises(ApiError) as info:
        client.get_account()
    assert "SCANWATCH_BASE_URL" in str(info.value) and client.stats.requests == 2


def test_unexpected_exception_does_not_leak_an_in_flight_slot() -> None:
    def boom(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("bug in a transport")

    client = client_for(boom)
    with pytest.raises(RuntimeError):
        client.get_account()
    assert client.pacer.in_flight == 0


def test_timeouts_and_drops_after_every_retry_are_one_line() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    def dropped(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    for handler, words in ((slow, "timed out"), (dropped, "dropped")):
        client = client_for(handler, max_attempts=2)
        with pytest.raises(ApiConnectionError) as info:
            client.get_account()
        text = str(info.value)
        assert words in text and "SCANWATCH_BASE_URL" in text and "\n" not in text and client.stats.requests == 2
