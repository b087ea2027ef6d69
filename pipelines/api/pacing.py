"""Pacing under the service's rate limit, shared by every thread of one client.

The budget (120 requests a minute per key) is shared with the service's agent server, so the only truth is the
``X-RateLimit-*`` headers of the latest answers. The pacer lets a request go only while the last reported
``Remaining``, minus the requests still in flight (their answers may not be counted in it yet), stays above a
tiny reserve; once the budget is spent it sleeps until the reported reset plus a small margin rather than
sending into a 429. A 429 with ``Retry-After`` blocks every thread until then.

Within a window the first ``burst`` share of the limit goes out at once (a small sync finishes in seconds);
the rest is spread evenly until the reset, so an agent server working alongside still finds budget instead of
meeting 429s that our burst caused, and our own share adapts to what it spends.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

from .errors import DeadlineExceededError, RateLimitResetTooFarError
from .stats import RequestStats


def _num(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _server_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


class Pacer:
    """Admission control for requests: call ``acquire()`` before sending and ``release(headers)`` after."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        stats: RequestStats | None = None,
        reserve: int = 1,
        margin: float = 0.2,
        max_pause: float = 65.0,
        burst: float = 0.5,
        max_reset_wait: float = 900.0,
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._stats = stats
        self.reserve = reserve
        self.margin = margin
        self.max_pause = max_pause
        self.burst = burst
        self.max_reset_wait = max_reset_wait  # a window resetting further away than this is the service's bug
        self.min_sample = 0.25  # seconds of a window before the other client's rate is trusted
        self.last_send = float("-inf")
        self.sent = 0  # tickets handed out: our requests, in sending order
        self._unanswered: set[int] = set()  # tickets handed out and not released
        # Another client's spending (the agent server), in requests a second, measured within a window as a lower
        # bound: the drop of Remaining beyond every request we sent meanwhile. The spread phase leaves it room.
        self.foreign_rate = 0.0
        # (remaining, ticket, time, ours still uncounted) of a window's first answer: the last, our requests sent
        # before it and not answered yet, which the service may count after it.
        self._ref: tuple[int, int, float, int] | None = None
        self._cond = threading.Condition(threading.Lock())
        self.limit: int | None = None
        self.remaining: int | None = None  # as last reported, less answers seen without headers since
        self.reset: float | None = None  # Unix seconds on our clock
        self.reset_reported: float | None = None  # as the service said it, to tell windows apart
        self.same_window = 0.5  # resets this close are one window (a service rounding differently per answer)
        self.in_flight = 0
        self.blocked_until = 0.0
        self.headerless = False  # a successful answer came without X-RateLimit-Remaining
        # Seconds the service's clock is ahead of ours, from its Date header; only trusted beyond the header's
        # one-second resolution, so a reset is never read early because of rounding.
        self.skew = 0.0

    # -- decisions (called under the lock; they may roll the window over) ------------------------------------

    def _roll_over(self, now: float) -> None:
        """Past the reset the window restarted: the whole limit is presumed back until an answer says more."""
        if self.reset is not None and now >= self.reset + self.margin:
            self.remaining = self.limit
            self.reset = self.reset_reported = None

    def wait_needed(self, now: float) -> tuple[float, bool]:
        """Seconds to wait before a request sent at `now`, and whether that wait is for an in-flight answer (not a
        sleep): the pacing decision itself, which `acquire` acts on. Public because it is the whole policy in one
        answer, checkable against the headers seen without a thread waiting; it may roll the window over, so
        call it under the pacer's lock (as `acquire` does) or where one thread alone uses the pacer."""
        if now < self.blocked_until:
            return self.blocked_until - now, False
        self._roll_over(now)
        if self.remaining is None:
            if self.headerless:
                return 0.0, False  # a service (or proxy) that never tells: only 429s and Retry-After pace us
            # Nothing known yet: one probe at a time until the first headers arrive.
            return (0.0, False) if self.in_flight == 0 else (0.05, True)
        available = self.remaining - self.in_flight - self.reserve
        if available > 0:
            return self._spread(now, available), False
        if self.in_flight > 0:
            # Answers in flight carry fresher headers: wait for them rather than for the reset.
            return 0.05, True
        if self.reset is None:
            # Spent, with no reset known (answers without headers): back off briefly, then probe again.
            self.blocked_until, self.remaining = now + 1.0, None
            return 1.0, False
        return min(self.max_pause, self._until_reset(now)), False

    def _until_reset(self, now: float) -> float:
        """Seconds to the reset; one absurdly far away fails now rather than sleep holding the history's lock."""
        left = max(0.0, (self.reset or now) + self.margin - now)
        if left > self.max_reset_wait:
            # Forget it: the next sync probes once instead of trusting this window again.
            self.remaining, self.reset, self.reset_reported = None, None, None
            raise RateLimitResetTooFarError(
                "rate-limit reset too far away",
                status=200,
                code="rate_limit_reset_too_far",
                summary=f"The service says the key's rate limit is spent until {left / 86400:.1f} days from now "
                f"(X-RateLimit-Remaining 0, X-RateLimit-Reset {left:.0f} s ahead); no rate-limit window is that "
                "long, so the sync stops instead of sleeping with the history locked: check the service (or a "
                "proxy) at SCANWATCH_BASE_URL",
            )
        return left

    def _spread(self, now: float, available: int) -> float:
        """Past the burst share, one request per (time left / requests left): the budget lasts to the reset."""
        if self.limit is None or self.reset is None or self.remaining is None:
            return 0.0
        if self.remaining - self.in_flight > self.limit * (1.0 - self.burst):
            return 0.0
        left = max(0.0, self.reset - now)
        # The other client's share is measured as a floor (our requests in flight count as ours): leave it a
        # tenth more and one slot, so the window's last requests are not taken from under it.
        foreign = math.ceil(1.1 * self.foreign_rate * left) + 1 if self.foreign_rate > 0 else 0
        usable = available - foreign
        if usable < 1:
            # What is left of this window is the other client's: come back at the reset.
            return min(self.max_pause, self._until_reset(now))
        gap = left / (usable + 1)  # the last one lands before the reset, not on it
        return max(0.0, self.last_send + gap - now)

    # -- the protocol ------------------------------------------------------------------------------------------

    def acquire(self, stats: RequestStats | None = None, deadline: float | None = None) -> int:
        """Wait until a request may go; the ticket returned goes back with ``release``.

        ``stats`` (the calling client's, when several clients share this pacer) receives the time waited.
        ``deadline`` (on this pacer's clock) is the sync's: a wait that would pass it fails now.
        """
        stats = stats or self._stats
        while True:
            with self._cond:
                now = self._clock()
                wait, for_answer = self.wait_needed(now)
                if deadline is not None and now + max(wait, 0.0) > deadline:
                    raise DeadlineExceededError(
                        "sync deadline passed", code="sync_deadline",
                        summary="The sync ran out of its time (SCANWATCH_SYNC_DEADLINE_SECONDS) before this request "
                        "could go: what was stored stays; the next sync continues, or raise the deadline",
                    )
                if wait <= 0:
                    self.in_flight += 1
                    self.last_send = now
                    self.sent += 1
                    self._unanswered.add(self.sent)
                    return self.sent
                if for_answer:
                    started = time.monotonic()
                    self._cond.wait(timeout=wait)
                    _add_wait(stats, time.monotonic() - started)
                    continue
            self._sleep(wait)
            _add_wait(stats, wait)

    def release(self, headers: Mapping[str, str] | None, ticket: int | None = None, success: bool = False,
                stats: RequestStats | None = None) -> None:
        """Account an answer (``None`` when no answer came back) and wake threads waiting for one.

        ``success`` says the answer was a 2xx, which the contract says carries the rate-limit headers.
        """
        with self._cond:
            self.in_flight = max(0, self.in_flight - 1)
            self._unanswered.discard(ticket)
            if headers is not None and success:
                self.headerless = headers.get("x-ratelimit-remaining") is None
            self._observe(headers, ticket, stats or self._stats)
            self._cond.notify_all()

    def block_for(self, seconds: float) -> None:
        """Hold every thread for ``seconds`` (a ``Retry-After``): the budget is the key's, not the thread's."""
        with self._cond:
            until = self._clock() + min(seconds, self.max_pause)
            self.blocked_until = max(self.blocked_until, until)
            # Past the block, the headers of the next answer decide again (one probe at a time).
            self.remaining, self.reset, self.reset_reported = None, None, None

    def _observe(self, headers: Mapping[str, str] | None, ticket: int | None, stats: RequestStats | None) -> None:
        if headers is None:
            return  # no answer: whether the service counted the request is unknown
        limit = _num(headers.get("x-ratelimit-limit"))
        remaining = _num(headers.get("x-ratelimit-remaining"))
        reset = _num(headers.get("x-ratelimit-reset"))
        self._observe_skew(_server_time(headers.get("date")))
        if limit is not None:
            self.limit = int(limit)
        if remaining is None:
            if self.remaining is not None:
                self.remaining -= 1  # an error answer without headers still spent one request
            return
        remaining_i = int(remaining)
        if stats is not None:
            stats.record_limits(self.limit, remaining_i, reset)
        # Windows are told apart by the reported reset; sleeping uses it on our own clock.
        local_reset = None
        if reset is not None:
            local_reset = self._clock() + reset if reset < 1e9 else reset - self.skew
        if reset is None or self.reset_reported is None or reset > self.reset_reported + self.same_window:
            # A newer window (or the first news): take it as it is.
            self.remaining, self.reset, self.reset_reported = remaining_i, local_reset, reset
            self._ref = None
            if ticket is not None:
                earlier = sum(1 for t in self._unanswered if t < ticket)
                self._ref = (remaining_i, ticket, self._clock(), earlier)
        elif reset >= self.reset_reported - self.same_window:
            # Same window, answers may arrive out of order: the lowest count is the latest.
            self.remaining = remaining_i if self.remaining is None else min(self.remaining, remaining_i)
            self._measure_foreign(remaining_i)
        # else: a straggler from a window already over; it says nothing about this one.

    def _measure_foreign(self, remaining: int) -> None:
        if self._ref is None:
            return
        ref_remaining, ref_ticket, ref_time, earlier = self._ref
        elapsed = self._clock() - ref_time
        if elapsed < self.min_sample:
            return
        # Every request we sent after the reference one may be in the drop, and so may those sent before it that
        # were still unanswered (threads reach the service in another order than they took their tickets); what is
        # beyond them is not ours.
        foreign = (ref_remaining - remaining) - (self.sent - ref_ticket) - earlier
        self.foreign_rate = max(0, foreign) / elapsed

    def _observe_skew(self, server_now: float | None) -> None:
        if server_now is None:
            return
        offset = server_now + 0.5 - self._clock()
        self.skew = offset if abs(offset) > 2.0 else 0.0


def _add_wait(stats: RequestStats | None, seconds: float) -> None:
    if stats is not None and seconds > 0:
        stats.add_wait(seconds)


_SHARED: OrderedDict[tuple[object, ...], Pacer] = OrderedDict()
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 32


def shared_pacer(base_url: str, api_key: str, *, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> Pacer:
    """The one pacer of a key in this process.

    The budget belongs to the key, not to a client object: Dagster builds a new client for every asset and run,
    and each would otherwise start blind (its first request a probe into a window another client had spent).
    Clients with their own clock or sleep (tests) get their own pacer. Only a digest of the key is kept.
    """
    digest = hashlib.sha256(api_key.encode()).hexdigest()
    key = (base_url.rstrip("/"), digest, clock, sleep)
    with _SHARED_LOCK:
        pacer = _SHARED.get(key)
        if pacer is None:
            pacer = _SHARED[key] = Pacer(clock=clock, sleep=sleep)
            while len(_SHARED) > _SHARED_MAX:
                _SHARED.popitem(last=False)
        _SHARED.move_to_end(key)
        return pacer
