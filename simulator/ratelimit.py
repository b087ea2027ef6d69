"""Fixed-window rate limiting per credential, on wall time.

Wall time, not the simulator clock: a test that jumps the driven clock a day ahead must not refill the
budget, and a benchmark compresses time by shortening the window instead.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset: int  # Unix seconds when the window restarts
    retry_after: int  # seconds, for 429

    def headers(self) -> dict[str, str]:
        return {"X-RateLimit-Limit": str(self.limit), "X-RateLimit-Remaining": str(self.remaining),
                "X-RateLimit-Reset": str(self.reset)}


class RateLimiter:
    def __init__(self, limit: int, window: float, now: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self.window = window
        self._now = now
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[int, int]] = {}  # key -> (window index, requests counted)

    def hit(self, key: str) -> Decision:
        now = self._now()
        index = int(now // self.window)
        reset_at = (index + 1) * self.window
        with self._lock:
            win, count = self._windows.get(key, (index, 0))
            if win != index:
                count = 0
            if count >= self.limit:
                self._windows[key] = (index, count)
                return Decision(False, self.limit, 0, math.ceil(reset_at), max(1, math.ceil(reset_at - now)))
            count += 1
            self._windows[key] = (index, count)
        return Decision(True, self.limit, self.limit - count, math.ceil(reset_at), 0)

    def configure(self, limit: int | None = None, window: float | None = None) -> None:
        with self._lock:
            if limit is not None:
                self.limit = limit
            if window is not None:
                self.window = window
            self._windows.clear()
