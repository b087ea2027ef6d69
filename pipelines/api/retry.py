"""When to try a request again and how long to wait first.

Only safe retries are made: every GET, every PATCH (same body, same result) and POSTs, which always carry an
``Idempotency-Key`` so the service replays the first answer instead of spending quota twice. Waits are the
service's ``Retry-After`` when it gives one (429, 503), otherwise exponential backoff with full jitter so that
many clients failing together do not come back together.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from .errors import ApiError

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# 409 idempotency_in_progress: our earlier attempt with the same key is still running on the service.
RETRY_CODES = frozenset({"idempotency_in_progress"})
# Daily ceilings answer 429 too, but waiting minutes inside one call would not help: surface them at once
# unless the service itself names a short wait.
LONG_429_CODES = frozenset({"recheck_limit_reached", "repository_analyses_limit_reached"})


@dataclass
class RetryPolicy:
    max_attempts: int = 6
    base: float = 0.5
    cap: float = 30.0
    # Longer asks (platform_busy says minutes) are raised with ``retry_after`` rather than slept through inside
    # one call: the caller (a schedule's next tick) is the better place to wait.
    max_retry_after: float = 60.0
    # A 429 rate_limited with Retry-After is the service saying exactly when to come back, not a fault: a burst
    # of them (the key's budget spent by another client) gets more attempts than a failing service does.
    max_rate_limited_attempts: int = 20
    rand: Callable[[], float] = random.random

    def backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**(attempt-1))] for the ``attempt``-th failure."""
        ceiling = min(self.cap, self.base * (2.0 ** max(0, attempt - 1)))
        return ceiling * self.rand()

    def delay_for_error(self, err: ApiError, attempt: int) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` when this error must be raised now."""
        status = err.status or 0
        told = err.retry_after is not None and err.retry_after <= self.max_retry_after
        if status == 429 and err.code == "rate_limited" and told and attempt < self.max_rate_limited_attempts:
            return err.retry_after
        if attempt >= self.max_attempts:
            return None
        if status not in RETRY_STATUSES and err.code not in RETRY_CODES:
            return None
        if err.retry_after is not None and status in (429, 503):
            return err.retry_after if err.retry_after <= self.max_retry_after else None
        if status == 429 and err.code in LONG_429_CODES:
            return None
        return self.backoff(attempt)

    def delay_for_failure(self, attempt: int) -> float | None:
        """Dropped connections, timeouts and malformed bodies: backoff while attempts remain."""
        if attempt >= self.max_attempts:
            return None
        return self.backoff(attempt)


def transient(exc: httpx.RequestError) -> bool:
    """Worth another attempt: the network or the service hiccuped, not a request that can never be sent."""
    if isinstance(exc, httpx.LocalProtocolError | httpx.UnsupportedProtocol | httpx.TooManyRedirects):
        return False
    return isinstance(exc, httpx.TransportError | httpx.DecodingError)
