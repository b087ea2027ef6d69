"""Counters of what a client spent, read by assets (run metadata) and benchmarks (requests against the minimum)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestStats:
    """Thread-safe tallies; every HTTP request sent counts, retries included, because each one costs budget."""

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    server_errors: int = 0
    transport_errors: int = 0
    restarts: int = 0
    last_limit: int | None = None
    last_remaining: int | None = None
    last_reset: float | None = None
    service_version: str | None = None
    by_route: dict[str, int] = field(default_factory=dict)
    waited_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_request(self, route: str, status: int | None) -> None:
        with self._lock:
            self.requests += 1
            self.by_route[route] = self.by_route.get(route, 0) + 1
            if status is None:
                self.transport_errors += 1
            elif status == 429:
                self.rate_limited += 1
            elif status >= 500:
                self.server_errors += 1

    def record_retry(self) -> None:
        with self._lock:
            self.retries += 1

    def record_restart(self) -> None:
        with self._lock:
            self.restarts += 1

    def record_limits(self, limit: int | None, remaining: int | None, reset: float | None) -> None:
        with self._lock:
            self.last_limit = limit if limit is not None else self.last_limit
            self.last_remaining = remaining
            self.last_reset = reset

    def record_version(self, version: str) -> str | None:
        """Store the version and return the previous one when it changed (the caller warns)."""
        with self._lock:
            previous, self.service_version = self.service_version, version
        return previous if previous is not None and previous != version else None

    def add_wait(self, seconds: float) -> None:
        with self._lock:
            self.waited_seconds += seconds

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "rate_limited": self.rate_limited,
                "server_errors": self.server_errors,
                "transport_errors": self.transport_errors,
                "restarts": self.restarts,
                "last_limit": self.last_limit,
                "last_remaining": self.last_remaining,
                "last_reset": self.last_reset,
                "service_version": self.service_version,
                "by_route": dict(self.by_route),
                "waited_seconds": round(self.waited_seconds, 3),
            }
