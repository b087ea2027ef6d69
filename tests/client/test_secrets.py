"""The credential travels only in the Authorization header: never in a URL, a log line, an error or a repr."""

from __future__ import annotations

import logging

import httpx
import pytest

from pipelines.api import ApiError

from .fakes import KEY, FakeClock, ListService, client_for, error, make_items


def test_key_only_in_authorization_header(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    service = ListService({"/projects": make_items(120)})
    failures = iter([error(401, "invalid_api_key"), error(403, "scope_missing"), error(500, "internal_error")])

    def hook(request: httpx.Request) -> httpx.Response | None:
        return next(failures, None) if request.url.path.endswith("/account") else None

    service.hooks.append(hook)
    client = client_for(service, FakeClock(), max_attempts=1)
    texts = [repr(client), str(client.stats.snapshot())]
    for _ in range(3):
        with pytest.raises(ApiError) as info:
            client.get_account()
        texts += [str(info.value), repr(info.value), str(info.value.__dict__)]
    client.list_projects()
    texts += [record.getMessage() for record in caplog.records]
    assert caplog.records, "expected debug lines per request"
    for request in service.requests:
        assert KEY not in str(request.url)
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert KEY not in str({k: v for k, v in request.headers.items() if k != "authorization"})
    for text in texts:
        assert KEY not in text and KEY[4:] not in text
    assert "rst_…" in repr(client)


def test_connection_error_text_has_no_key() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused {request.url}", request=request)

    client = client_for(refuse, max_attempts=1)
    with pytest.raises(ApiError) as info:
        client.get_account()
    assert KEY not in str(info.value) and KEY not in repr(info.value)
