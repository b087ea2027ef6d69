"""Typed errors of the Scanning Service, each rendered as one actionable line.

Callers branch on the class (or on ``code``); people read ``str(err)``, which says what to change and ends with
the Request-Id so support can find the call. The credential never appears here: messages are built only from
the response body, the method and the route template.
"""

from __future__ import annotations

from typing import Any

import httpx

# Scope each route needs when the credential is an OAuth token (rat_...); the spec's Authentication table.
ROUTE_SCOPES: dict[str, str] = {
    "GET /account": "scans:read",
    "GET /projects": "scans:read",
    "GET /projects/{project_id}": "scans:read",
    "POST /projects": "scans:run",
    "POST /projects/{project_id}/targets": "scans:run",
    "POST /targets/{target_id}/scans": "scans:run",
    "GET /scans/{scan_id}": "scans:read",
    "GET /projects/{project_id}/scans": "scans:read",
    "GET /projects/{project_id}/issues": "scans:read",
    "PATCH /issues/{issue_id}": "issues:write",
}

# The settings the messages name by default: the one workspace of the two variables. An error from a client
# of a workspace listed in SCANWATCH_WORKSPACES_FILE names that workspace's own (`ApiError.for_settings`).
KEY_SETTING = "SCANWATCH_API_KEY"
URL_SETTING = "SCANWATCH_BASE_URL"

QUOTA_CODES = frozenset({"scan_quota_exceeded", "audit_quota_exceeded", "fix_quota_exceeded"})
PLAN_GATE_CODES = frozenset({"api_plan_required", "api_trial_ended"})


def _one_line(text: str | None) -> str:
    return " ".join(str(text or "").split())


class ApiError(Exception):
    """Any failure talking to the service; the fields are those of the spec's error envelope.

    Messages are written naming `SCANWATCH_API_KEY` and `SCANWATCH_BASE_URL`; `key_setting` and
    `url_setting` say what those stand for in this error's workspace (its key's variable, where its address
    came from), and `str()` reads them, so a line never sends a user to fix a variable that is not theirs.
    """

    key_setting = KEY_SETTING
    url_setting = URL_SETTING

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        param: str | None = None,
        request_id: str | None = None,
        doc_url: str | None = None,
        method: str | None = None,
        route: str | None = None,
        retry_after: float | None = None,
        upgrade_url: str | None = None,
        summary: str | None = None,
    ) -> None:
        self.message = _one_line(message)
        self.status = status
        self.code = code
        self.param = param
        self.request_id = request_id
        self.doc_url = doc_url
        self.method = method
        self.route = route
        self.retry_after = retry_after
        self.upgrade_url = upgrade_url
        self._summary = _one_line(summary) if summary else None
        super().__init__(str(self))

    def for_settings(self, key_setting: str, url_setting: str) -> ApiError:
        """The same error told with the workspace's own settings (its key's variable, its address's source)."""
        self.key_setting, self.url_setting = key_setting, url_setting
        self.args = (str(self),)
        return self

    def with_summary(self, summary: str) -> ApiError:
        """The same error told better by a caller that knows more (e.g. a list that kept changing)."""
        self._summary = _one_line(summary)
        self.args = (str(self),)
        return self

    def describe(self) -> str:
        """The actionable part of the line; subclasses say what to fix."""
        where = f"{self.method} {self.route}" if self.method and self.route else "request"
        what = " ".join(str(p) for p in (self.status, self.code) if p)
        detail = f" ({what})" if what else ""
        param = f" [param: {self.param}]" if self.param else ""
        return f"{where} failed{detail}: {self.message or 'no message'}{param}"

    def __str__(self) -> str:
        body = (self._summary or self.describe()).rstrip(". ")
        # The service's page for this error says what it means and what to do: the line names it.
        docs = f". Docs: {_one_line(self.doc_url)[:200]}" if self.doc_url else ""
        body = body.replace(KEY_SETTING, self.key_setting).replace(URL_SETTING, self.url_setting)
        return f"{body}{docs}. Request-Id: {self.request_id or 'none'}"

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps errors picklable across Dagster's process boundaries.
        return (_rebuild, (type(self), self.message, self.__dict__.copy()))


def _rebuild(cls: type[ApiError], message: str, state: dict[str, Any]) -> ApiError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class InvalidRequestError(ApiError):
    """400: the request itself is wrong; retrying the same request cannot help."""


class AuthenticationError(ApiError):
    """401: the credential is missing or refused."""

    def describe(self) -> str:
        if self.code == "authentication_required":
            return (
                "The service received no credential (401 authentication_required): set SCANWATCH_API_KEY to an "
                "API key (rst_...) created under Settings, API keys"
            )
        return (
            f"The service refused the credential in SCANWATCH_API_KEY (401 {self.code or 'invalid_api_key'}: "
            "wrong, revoked or expired): create a new API key (rst_...) under Settings, API keys and set "
            "SCANWATCH_API_KEY to it"
        )


class PaymentRequiredError(ApiError):
    """402: the plan or its quotas do not allow this action."""


class PlanRequiredError(PaymentRequiredError):
    """402 plan gate: the workspace's plan has no API access at all, so nothing will work until it changes."""

    def describe(self) -> str:
        if self.code == "api_trial_ended":
            return (
                "The Solo plan's 14-day API trial of this workspace is over (402 api_trial_ended): move the "
                "workspace to the Pro plan to restore API access at once"
            )
        return (
            "The workspace is on the Free plan, which has no API access (402 api_plan_required): move it to the "
            "Pro plan (or Solo, with a 14-day trial) to use scanwatch"
        )


class QuotaExceededError(PaymentRequiredError):
    """402 quota codes: the period quota and pack credits are used up; ``upgrade_url`` says where to buy more."""

    def describe(self) -> str:
        where = f" for {self.method} {self.route}" if self.method and self.route else ""
        upgrade = f"; more at {self.upgrade_url}" if self.upgrade_url else ""
        return (
            f"Quota used up{where} (402 {self.code}): wait for the next quota period or add pack credits"
            f"{upgrade}"
        )


class PermissionDeniedError(ApiError):
    """403: the OAuth token lacks the scope the route needs."""

    @property
    def scope(self) -> str | None:
        return ROUTE_SCOPES.get(f"{self.method} {self.route}")

    def describe(self) -> str:
        scope = f"the scope {self.scope}" if self.scope else "the scope this route needs"
        return (
            f"The token in SCANWATCH_API_KEY lacks {scope} for {self.method} {self.route} "
            f"(403 {self.code or 'scope_missing'}): use an API key (rst_...), which has every permission, "
            "or a token granted that scope"
        )


class NotFoundError(ApiError):
    """404: no such id in this key's workspace (another workspace's object looks the same)."""

    def describe(self) -> str:
        if self.code is None:
            # Not the service's envelope: the address itself is probably wrong.
            return (f"{self.method} {self.route} answered 404 without the service's error envelope: check that "
                    "SCANWATCH_BASE_URL is the API address ending in /v1")
        return super().describe()


class ConflictError(ApiError):
    """409: the object's state forbids the action (already fixed, proof required, key reused...)."""


class RateLimitedError(ApiError):
    """429: too many requests (or a daily ceiling); ``retry_after`` says how long the service asks to wait."""


class ServerError(ApiError):
    """5xx: the service failed; retried with backoff before this is raised."""


class ServiceUnavailableError(ServerError):
    """503: temporarily unavailable or the platform is busy; nothing was charged."""

    def describe(self) -> str:
        if self.code == "platform_busy":
            wait = f"{self.retry_after:g} s" if self.retry_after is not None else "a few minutes"
            return (f"The scanning platform is busy (503 platform_busy) for {self.method} {self.route}: nothing was "
                    f"charged; start it again in {wait} (the same Idempotency-Key is safe)")
        return super().describe()


class ApiConnectionError(ApiError):
    """No HTTP answer at all: refused, dropped, reset or timed out, after every retry."""


class ApiTimeoutError(ApiConnectionError):
    """The service did not answer within the client's timeout, after every retry."""


class MalformedResponseError(ApiError):
    """The service answered 2xx with a body that is not the JSON the contract promises."""


class ResponseTooLargeError(MalformedResponseError):
    """The body, decompressed, passed the cap: no page of the contract comes near it."""


class PagingError(MalformedResponseError):
    """A list that cannot end: its cursor repeats or cycles, or it runs far past the service's own counts."""


class DeadlineExceededError(ApiTimeoutError):
    """A request, or the whole sync, ran past its deadline."""


class RateLimitResetTooFarError(RateLimitedError):
    """The service says the rate-limit window resets further away than any real window."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    402: PaymentRequiredError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: InvalidRequestError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}


def error_class(status: int, code: str | None) -> type[ApiError]:
    if status == 402 and code in PLAN_GATE_CODES:
        return PlanRequiredError
    if status == 402 and code in QUOTA_CODES:
        return QuotaExceededError
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status >= 500:
        return ServerError
    if status == 401:
        return AuthenticationError
    return ApiError


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP-date form is not used by this service; fall back to backoff
    return max(0.0, seconds)


def from_response(
    status: int, body: Any, headers: Any, *, method: str, route: str
) -> ApiError:
    """Build the typed error for a non-2xx answer, tolerating bodies that are not the spec's envelope."""
    err = body.get("error") if isinstance(body, dict) else None
    err = err if isinstance(err, dict) else {}
    code = err.get("code") if isinstance(err.get("code"), str) else None
    message = err.get("message") if isinstance(err.get("message"), str) else None
    if message is None:
        message = f"HTTP {status} without the error envelope"
    cls = error_class(status, code)
    summary = None
    if 300 <= status < 400:
        summary = (f"{method} {route} was redirected ({status}) to {headers.get('location') or 'another address'}: "
                   "set SCANWATCH_BASE_URL to the final API address ending in /v1")
    return cls(
        message,
        status=status,
        code=code,
        param=err.get("param") if isinstance(err.get("param"), str) else None,
        request_id=headers.get("request-id"),
        doc_url=err.get("doc_url") if isinstance(err.get("doc_url"), str) else None,
        method=method,
        route=route,
        retry_after=parse_retry_after(headers.get("retry-after")),
        upgrade_url=err.get("upgrade_url") if isinstance(err.get("upgrade_url"), str) else None,
        summary=summary,
    )


def connection_error(exc: httpx.RequestError, base_url: str, method: str, route: str) -> ApiError:
    """No answer at all, told as what to check: the address, the network, or stray characters in the settings."""
    kind = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return ApiTimeoutError(
            f"no answer from {base_url} within the timeout ({kind})",
            method=method, route=route,
            summary=f"{method} {route} timed out ({kind}) against {base_url} after every retry: "
            "the service is slow or unreachable; check SCANWATCH_BASE_URL and the network",
        )
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ApiConnectionError(
            f"{base_url} is not an http(s) address ({kind})",
            method=method, route=route,
            summary=f"{base_url} is not an http(s) address: set SCANWATCH_BASE_URL to the API address "
            "ending in /v1",
        )
    if isinstance(exc, httpx.LocalProtocolError):
        return ApiConnectionError(
            f"the request could not be sent ({kind})",
            method=method, route=route,
            summary=f"{method} {route} could not be sent ({kind}): check SCANWATCH_API_KEY and SCANWATCH_BASE_URL "
            "for stray characters",
        )
    if isinstance(exc, httpx.ConnectError):
        return ApiConnectionError(
            f"could not connect to {base_url} ({kind})",
            method=method, route=route,
            summary=f"Could not connect to {base_url} ({kind}: connection refused or host unknown): "
            "check SCANWATCH_BASE_URL and that the service is running",
        )
    return ApiConnectionError(
        f"the connection to {base_url} failed ({kind})",
        method=method, route=route,
        summary=f"{method} {route}: the connection to {base_url} dropped ({kind}) on every retry: "
        "check SCANWATCH_BASE_URL and the network",
    )
