"""Simulator time: wall time for the demo, a clock the tests drive for everything else.

Scans finishing, quota periods, trials, reuse windows and idempotent replay all read this clock, so a
test can cross an hour or a day in microseconds. The rate limiter deliberately does not (see ratelimit).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

# A fixed instant so that a driven world is identical, timestamps included, from one run to the next.
DRIVEN_EPOCH = datetime(2026, 11, 20, 9, 0, 0, tzinfo=UTC).timestamp()


class RealClock:
    """Wall time; `advance` shifts it so a demo can still fast-forward through the control surface."""

    kind = "real"

    def __init__(self) -> None:
        self._offset = 0.0

    def now(self) -> float:
        return time.time() + self._offset

    def advance(self, seconds: float) -> float:
        self._offset += seconds
        return self.now()


class DrivenClock:
    """Time that moves only when told to, so tests are exact and fast."""

    kind = "driven"

    def __init__(self, start: float = DRIVEN_EPOCH) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("the driven clock only moves forward")
        with self._lock:
            self._now += seconds
            return self._now


Clock = RealClock | DrivenClock


def make_clock(kind: str) -> Clock:
    if kind == "real":
        return RealClock()
    if kind == "driven":
        return DrivenClock()
    raise ValueError(f"unknown clock {kind!r}: use 'real' or 'driven'")


def iso(ts: float | None) -> str | None:
    """The contract's timestamp format: ISO 8601, UTC, milliseconds, `Z`."""
    if ts is None:
        return None
    dt = datetime.fromtimestamp(ts, UTC)
    return f"{dt:%Y-%m-%dT%H:%M:%S}.{dt.microsecond // 1000:03d}Z"
