"""The synchronous client of the Security Scanning Service.

One ``httpx.Client`` (thread-safe) and one pacer are shared by every thread of a ``ScanningClient``, so that
``map`` can overlap requests to hide latency while the key's budget is still spent as one. Tests swap the
``transport`` (``httpx.MockTransport`` or a real simulator) and inject ``sleep``/``clock``.
"""

from __future__ import annotations

import functools
import json as jsonlib
import logging
import os
import ssl
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from importlib import metadata
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from pipelines.core.credentials import mask_key

from .bounds import DEFAULT_BOUNDS, BodyTooLarge, Bounds, DeadlineExceeded, UnsupportedEncoding, read_capped
from .errors import (
    KEY_SETTING,
    URL_SETTING,
    ApiError,
    DeadlineExceededError,
    MalformedResponseError,
    ResponseTooLargeError,
    connection_error,
    from_response,
)
from .pacing import Pacer, shared_pacer
from .paging import collect_latest, iter_unique, walk
from .retry import RetryPolicy, transient
from .stats import RequestStats

log = logging.getLogger("scanwatch.api")

T = TypeVar("T")
R = TypeVar("R")


def _version() -> str:
    try:
        return metadata.version("scanwatch")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0"


class _Unbounded(Exception):
    """An answer that broke a bound of ``bounds``; turned into the typed error once the request is accounted."""

    def __init__(self, kind: str, status: int, detail: str = "") -> None:
        super().__init__(kind)
        self.kind, self.status, self.detail = kind, status, detail

    def error(self, method: str, route: str, bounds: Bounds) -> Exception:
        misbehaving = "the service, or a proxy at SCANWATCH_BASE_URL, is misbehaving; nothing of it was stored"
        cls, message, what = {
            "too_large": (ResponseTooLargeError, "body over the size cap",
                          f"answered a body larger than {bounds.max_body_bytes // (1024 * 1024)} MiB once "
                          f"decompressed (no page of the contract comes near it): {misbehaving}"),
            "deadline": (DeadlineExceededError, "request deadline passed",
                         f"was still sending its answer after {bounds.request_deadline:g} s (a stalled or "
                         f"trickling body): {misbehaving}"),
            "sync_deadline": (DeadlineExceededError, "sync deadline passed",
                              "was still sending its answer when the sync ran out of its time "
                              f"(SCANWATCH_SYNC_DEADLINE_SECONDS; a stalled or trickling body): {misbehaving}"),
        }.get(self.kind, (MalformedResponseError, "unsupported content encoding",
                          f"answered with Content-Encoding {self.detail[:40]!r}, which scanwatch did not ask for "
                          "(gzip or deflate only): a proxy at SCANWATCH_BASE_URL is rewriting answers"))
        return cls(message, status=self.status, method=method, route=route, summary=f"{method} {route} {what}")


def _check_envelope(body: Any) -> dict[str, Any]:
    if not (
        isinstance(body, dict)
        and body.get("object") == "list"
        and isinstance(body.get("data"), list)
        and isinstance(body.get("has_more"), bool)
        and all(isinstance(item, dict) and isinstance(item.get("id"), str) for item in body["data"])
    ):
        raise ValueError("not a list envelope (object=list, data=[{id...}], has_more=bool)")
    return body


def _check_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    return body


def tls_context() -> ssl.SSLContext:
    """The verifying TLS context every client of this process shares: httpx builds one per client otherwise,
    loading the whole CA bundle each time (about 30 ms, several clients per sync). Built as httpx would
    (`SSL_CERT_FILE`, `SSL_CERT_DIR`, else certifi's bundle), once per value of those variables."""
    return _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _tls_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()


class ScanningClient:
    """Paced, retried, paginated access to the service with typed errors; see the package docstring."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
        max_attempts: int = 6,
        page_size: int = 100,
        concurrency: int = 4,
        user_agent: str = f"scanwatch/{_version()}",
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        max_restarts: int = 5,
        retry: RetryPolicy | None = None,
        share_pacer: bool = True,
        bounds: Bounds = DEFAULT_BOUNDS,
        sync_deadline: float | None = None,
        key_setting: str = KEY_SETTING,
        url_setting: str = URL_SETTING,
    ) -> None:
        if not 1 <= page_size <= 100:
            raise ValueError("page_size must be between 1 and 100 (the service's limit)")
        self.base_url = base_url.rstrip("/")
        api_key = (api_key or "").strip()
        self._api_key = api_key
        self.page_size = page_size
        self.concurrency = max(1, concurrency)
        self.max_restarts = max_restarts
        self.stats = RequestStats()
        self.bounds = bounds
        # When the whole sync must be over, on ``clock``: no request starts, and no wait runs, past it.
        self.sync_deadline = sync_deadline
        # What a line must name for this workspace: its key's variable and where its address came from.
        self.key_setting, self.url_setting = key_setting, url_setting
        self._timeout = timeout
        self._sleep = sleep
        self._clock = clock
        self._retry = retry or RetryPolicy(max_attempts=max_attempts)
        # One pacer per key and process (see shared_pacer), unless asked for a private one.
        self._pacer = shared_pacer(self.base_url, api_key, clock=clock, sleep=sleep) if share_pacer else Pacer(
            clock=clock, sleep=sleep)
        self._pacer.max_reset_wait = bounds.max_reset_wait
        self._http = httpx.Client(
            base_url=self.base_url + "/",
            transport=transport,
            verify=tls_context(),
            timeout=timeout,
            # No key, no header: the service then answers 401 authentication_required, which names the variable.
            headers={
                **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
                "User-Agent": user_agent,
                "Accept": "application/json",
                # Only what read_capped decompresses itself, under the body cap.
                "Accept-Encoding": "gzip, deflate",
            },
            limits=httpx.Limits(max_connections=self.concurrency + 2, max_keepalive_connections=self.concurrency + 2),
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"ScanningClient(base_url={self.base_url!r}, api_key={mask_key(self._api_key)!r})"

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ScanningClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pacer(self) -> Pacer:
        return self._pacer

    # -- the one request path ----------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        route: str,
        *,
        path_params: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        json: Any = None,
        idempotency_key: str | None = None,
        check: Callable[[Any], dict[str, Any]] = _check_object,
    ) -> dict[str, Any]:
        """Send one logical request (with its retries) and return the decoded body.

        ``route`` is the spec's path template (``/projects/{project_id}``): it names the route in stats, logs
        and errors and decides the scope a 403 names; ids are quoted into it here. Every error leaving here
        names this client's workspace settings.
        """
        try:
            return self._request(method, route, path_params=path_params, params=params, json=json,
                                 idempotency_key=idempotency_key, check=check)
        except ApiError as err:
            raise err.for_settings(self.key_setting, self.url_setting)  # noqa: B904 - the same error, renamed

    def _request(
        self,
        method: str,
        route: str,
        *,
        path_params: dict[str, str] | None,
        params: dict[str, Any] | None,
        json: Any,
        idempotency_key: str | None,
        check: Callable[[Any], dict[str, Any]],
    ) -> dict[str, Any]:
        method = method.upper()
        if method == "POST" and not idempotency_key:
            raise ValueError("every POST needs an idempotency_key, so that a retry never spends quota twice")
        path = route.format(**{k: quote(str(v), safe="") for k, v in (path_params or {}).items()})
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        label = f"{method} {route}"
        attempt = 0
        while True:
            attempt += 1
            ticket = self._pacer.acquire(self.stats, deadline=self.sync_deadline)
            started = time.perf_counter()
            try:
                status, answer, raw = self._send(method, path, params=params, json=json, headers=headers)
            except httpx.RequestError as exc:
                self._pacer.release(None, ticket, stats=self.stats)
                self.stats.record_request(label, None)
                log.debug("%s %s -> %s in %.3fs", method, path, type(exc).__name__, time.perf_counter() - started)
                delay = self._retry.delay_for_failure(attempt) if transient(exc) else None
                if delay is None:
                    raise connection_error(exc, self.base_url, method, route) from None
                self._pause(delay)
                continue
            except _Unbounded as exc:
                # Asking again would cost the same again: the answer is the service's, not the network's.
                self._pacer.release(None, ticket, stats=self.stats)
                self.stats.record_request(label, None)
                raise exc.error(method, route, self.bounds) from None
            except BaseException:
                self._pacer.release(None, ticket, stats=self.stats)
                raise
            success = 200 <= status < 300
            self._pacer.release(answer, ticket, success=success, stats=self.stats)
            self.stats.record_request(label, status)
            self._note_version(answer.get("service-version"))
            log.debug("%s %s -> %d in %.3fs", method, path, status, time.perf_counter() - started)
            if success:
                try:
                    return check(jsonlib.loads(raw))
                except ValueError as exc:
                    delay = self._retry.delay_for_failure(attempt)
                    if delay is None:
                        raise MalformedResponseError(
                            f"the body is not the JSON the contract promises ({str(exc)[:200]})",
                            status=status,
                            request_id=answer.get("request-id"),
                            method=method,
                            route=route,
                            summary=f"{method} {route} answered {status} with a body that is not the "
                            f"contract's JSON on every attempt ({str(exc)[:200]}): the service, or a proxy in "
                            "front of it at SCANWATCH_BASE_URL, is misbehaving",
                        ) from None
                    self._pause(delay)
                    continue
            err = from_response(status, self._json_or_none(raw), answer, method=method, route=route)
            delay = self._retry.delay_for_error(err, attempt)
            if delay is None:
                raise err
            if err.status == 429 and err.code == "rate_limited":
                # The budget is the key's: every thread holds back, not only this one.
                self._pacer.block_for(delay if err.retry_after is not None else max(delay, 1.0))
            self._pause(delay)

    def _send(self, method: str, path: str, **kw: Any) -> tuple[int, httpx.Headers, bytes]:
        """One HTTP exchange under the request deadline and the body cap (see ``bounds``)."""
        limit, cut_by = self.bounds.request_deadline, "deadline"
        if self.sync_deadline is not None and self.sync_deadline - self._clock() < limit:
            # The sync's own deadline comes first: the error line must name that one, not the request's.
            limit, cut_by = max(0.001, self.sync_deadline - self._clock()), "sync_deadline"
        deadline = time.monotonic() + limit
        # No single read may wait past the deadline either (a silent connection, trickled headers).
        timeout = httpx.Timeout(min(self._timeout, limit))
        with self._http.stream(method, path.lstrip("/"), timeout=timeout, **kw) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.bounds.max_body_bytes:
                raise _Unbounded("too_large", response.status_code)
            if response.is_stream_consumed:  # an in-memory transport handing back a body already read
                chunks, encoding = iter([response.content]), None
            else:
                chunks, encoding = response.iter_raw(), response.headers.get("content-encoding")
            try:
                raw = read_capped(chunks, content_encoding=encoding, max_bytes=self.bounds.max_body_bytes,
                                  deadline=deadline)
            except BodyTooLarge:
                raise _Unbounded("too_large", response.status_code) from None
            except DeadlineExceeded:
                raise _Unbounded(cut_by, response.status_code) from None
            except UnsupportedEncoding as exc:
                raise _Unbounded("encoding", response.status_code, str(exc)) from None
            except zlib.error as exc:
                raise httpx.DecodingError(f"corrupt compressed body ({exc})") from None
            return response.status_code, response.headers, raw

    def _pause(self, seconds: float) -> None:
        self.stats.record_retry()
        if seconds > 0:
            self._sleep(seconds)
            self.stats.add_wait(seconds)

    @staticmethod
    def _json_or_none(raw: bytes) -> Any:
        try:
            return jsonlib.loads(raw)
        except ValueError:
            return None

    def _note_version(self, version: str | None) -> None:
        if not version:
            return
        previous = self.stats.record_version(version)
        if previous is not None:
            log.warning("the service's version changed from %s to %s between responses", previous, version)

    # -- lists ---------------------------------------------------------------------------------------------------

    def _walk(self, route: str, path_params: dict[str, str] | None = None, filters: dict[str, Any] | None = None,
              on_restart: Callable[[], None] | None = None, expected: int | None = None
              ) -> Iterator[dict[str, Any]]:
        def fetch(page: dict[str, Any]) -> dict[str, Any]:
            params = {**(filters or {}), **page}
            return self.request("GET", route, path_params=path_params, params=params, check=_check_envelope)

        def restarted() -> None:
            self.stats.record_restart()
            if on_restart is not None:
                on_restart()

        where = route.format(**{k: v[:40] for k, v in (path_params or {}).items()})
        return walk(fetch, page_size=self.page_size, max_restarts=self.max_restarts, on_restart=restarted,
                    max_items=self.bounds.list_bound(expected), label=f"GET {where}")

    # -- routes --------------------------------------------------------------------------------------------------

    def get_account(self) -> dict[str, Any]:
        return self.request("GET", "/account")

    def list_projects(self, *, expected: int | None = None) -> list[dict[str, Any]]:
        """Every project (oldest first), each with its targets; ``expected`` is what the counts say (bounds)."""
        return collect_latest(lambda restarted: self._walk("/projects", on_restart=restarted, expected=expected))

    def iter_scans(self, project_id: str, *, expected: int | None = None) -> Iterator[dict[str, Any]]:
        """Scans newest first, fetched a page at a time: stop iterating at the first known scan to save requests."""
        return iter_unique(self._walk("/projects/{project_id}/scans", {"project_id": project_id},
                                      expected=expected))

    def list_issues(
        self,
        project_id: str,
        *,
        status: str | None = None,
        severity: str | None = None,
        target_id: str | None = None,
        expected: int | None = None,
    ) -> list[dict[str, Any]]:
        """Every issue of the project matching the filters (worst first); ``expected`` is what the counts say."""
        filters = {k: v for k, v in (("status", status), ("severity", severity), ("target_id", target_id)) if v}
        return collect_latest(lambda restarted: self._walk("/projects/{project_id}/issues", {"project_id": project_id},
                                                           filters, on_restart=restarted, expected=expected))

    def iter_issues(self, project_id: str, *, on_restart: Callable[[], None],
                    expected: int | None = None) -> Iterator[dict[str, Any]]:
        """Every issue of the project, a page at a time, for a consumer that writes them out as they come
        rather than holding the list. When the list changes under the walk it starts over: `on_restart` is
        called, and the consumer must drop what it was given so far (see `paging`)."""
        return self._walk("/projects/{project_id}/issues", {"project_id": project_id}, on_restart=on_restart,
                          expected=expected)

    def get_scan(self, scan_id: str) -> dict[str, Any]:
        return self.request("GET", "/scans/{scan_id}", path_params={"scan_id": scan_id})

    def start_scan(self, target_id: str, *, kind: str | None = None, idempotency_key: str) -> dict[str, Any]:
        """A new scan (201) or the running/recent one (200, ``reused`` true); both mean the target is covered."""
        body = {"kind": kind} if kind else {}
        return self.request("POST", "/targets/{target_id}/scans", path_params={"target_id": target_id},
                            json=body, idempotency_key=idempotency_key)

    # -- concurrency ---------------------------------------------------------------------------------------------

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Run ``fn`` over ``items`` on up to ``concurrency`` threads sharing this client's pacer.

        Overlapping hides latency; the pacer keeps the overlap inside the budget. Results keep the input
        order. On the first exception no new item starts, running ones finish, and that exception is raised.
        """
        todo = list(items)
        results: list[Any] = [None] * len(todo)
        if self.concurrency == 1 or len(todo) <= 1:
            return [fn(item) for item in todo]
        failure: BaseException | None = None
        running: dict[Future[R], int] = {}
        next_index = 0
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="scanwatch-api") as pool:
            while running or (next_index < len(todo) and failure is None):
                while failure is None and next_index < len(todo) and len(running) < self.concurrency:
                    running[pool.submit(fn, todo[next_index])] = next_index
                    next_index += 1
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    index = running.pop(future)
                    exc = future.exception()
                    if exc is not None:
                        failure = failure or exc
                    else:
                        results[index] = future.result()
        if failure is not None:
            raise failure
        return results
