"""The bounds themselves, without a network: body cap, request deadline, cursor cycles, list length,
absurd rate-limit resets and the sync deadline."""

from __future__ import annotations

import zlib

import pytest

from pipelines.api import DeadlineExceededError, PagingError, RateLimitResetTooFarError
from pipelines.api.bounds import BodyTooLarge, Bounds, DeadlineExceeded, read_capped
from pipelines.api.pacing import Pacer
from pipelines.api.paging import walk
from tests.client.fakes import FakeClock

MIB = 1024 * 1024


def _gzip(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def test_a_gzip_bomb_is_refused_without_unpacking_past_the_cap():
    bomb = _gzip(b" " * (256 * MIB))  # about 250 KB on the wire
    assert len(bomb) < MIB
    with pytest.raises(BodyTooLarge):
        read_capped(iter([bomb]), content_encoding="gzip", max_bytes=4 * MIB, deadline=float("inf"))


def test_a_body_under_the_cap_is_returned_decoded():
    body = b'{"object": "list"}' * 1000
    assert read_capped(iter([_gzip(body)]), content_encoding="gzip", max_bytes=MIB, deadline=1e18) == body
    assert read_capped(iter([body[:10], body[10:]]), content_encoding=None, max_bytes=MIB, deadline=1e18) == body


def test_a_body_past_its_deadline_stops_at_the_next_chunk():
    now = [0.0]

    def chunks():
        for _ in range(100):
            now[0] += 2.0  # one byte every 2 s
            yield b" "

    with pytest.raises(DeadlineExceeded):
        read_capped(chunks(), content_encoding=None, max_bytes=MIB, deadline=60.0, clock=lambda: now[0])
    assert now[0] <= 62.0


def _pages(pages: dict[str | None, tuple[list[str], bool]]):
    asked: list[str | None] = []

    def fetch(params):
        asked.append(params.get("starting_after"))
        ids, more = pages[params.get("starting_after")]
        return {"object": "list", "data": [{"id": i} for i in ids], "has_more": more}

    return fetch, asked


def test_the_same_page_forever_ends_at_the_second_request():
    fetch, asked = _pages({None: (["a", "b"], True), "b": (["a", "b"], True)})
    with pytest.raises(PagingError, match="already given"):
        list(walk(fetch, page_size=2, label="GET /projects"))
    assert len(asked) == 2


def test_a_cursor_cycle_ends_when_a_cursor_comes_back():
    fetch, asked = _pages({None: (["a", "b"], True), "b": (["c", "d"], True), "d": (["a", "b"], True)})
    with pytest.raises(PagingError, match="cycle"):
        list(walk(fetch, page_size=2))
    assert len(asked) == 3


def test_a_list_far_past_its_counts_ends_at_the_bound():
    counter = iter(range(10**9))

    def fetch(params):
        return {"object": "list", "data": [{"id": str(next(counter))} for _ in range(100)], "has_more": True}

    bound = Bounds().list_bound(50)
    assert bound == 10_500
    with pytest.raises(PagingError, match="far beyond"):
        list(walk(fetch, page_size=100, max_items=bound))


def test_a_reset_days_away_fails_at_once_and_is_forgotten():
    clock = FakeClock()
    pacer = Pacer(clock=clock.time, sleep=clock.sleep)
    pacer.release({"x-ratelimit-limit": "120", "x-ratelimit-remaining": "0",
                   "x-ratelimit-reset": str(int(clock.now) + 10 * 86400)}, success=True)
    with pytest.raises(RateLimitResetTooFarError, match=r"10\.0 days"):
        pacer.acquire()
    assert clock.sleeps == []
    assert pacer.acquire() == 1  # the next call probes again rather than trust that window


def test_a_reset_within_a_minute_is_waited_for():
    clock = FakeClock()
    pacer = Pacer(clock=clock.time, sleep=clock.sleep)
    pacer.release({"x-ratelimit-limit": "120", "x-ratelimit-remaining": "0",
                   "x-ratelimit-reset": str(int(clock.now) + 30)}, success=True)
    pacer.acquire()
    assert 29 <= sum(clock.sleeps) <= 31


def test_a_wait_past_the_sync_deadline_fails_instead():
    clock = FakeClock()
    pacer = Pacer(clock=clock.time, sleep=clock.sleep)
    pacer.release({"x-ratelimit-limit": "120", "x-ratelimit-remaining": "0",
                   "x-ratelimit-reset": str(int(clock.now) + 30)}, success=True)
    with pytest.raises(DeadlineExceededError, match="SCANWATCH_SYNC_DEADLINE_SECONDS"):
        pacer.acquire(deadline=clock.now + 10)
    assert clock.sleeps == []
