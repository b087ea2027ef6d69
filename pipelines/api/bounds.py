"""How much a service may cost scanwatch before scanwatch stops listening.

A sync runs unattended while holding the history's only write lock, so a service that pages forever,
answers gigabytes, trickles bytes or asks for a wait of days must end the sync with one line instead of
hanging it. Every limit sits far above what a working service needs: real pages are a few hundred KB, real
answers take seconds, real rate-limit windows reset within a minute.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class Bounds:
    max_body_bytes: int = 64 * MIB  # decompressed; a page of 100 issues is a few hundred KB
    request_deadline: float = 60.0  # seconds, whole request: connect, headers and every byte of the body
    max_reset_wait: float = 15 * 60.0  # a rate-limit window further away than this is not a window
    list_slack: int = 10_000  # items a list may have beyond 10x what the service's own counts say
    list_factor: int = 10

    def list_bound(self, expected: int | None) -> int:
        """The most items a list can honestly hold when the service's counts say ``expected``."""
        return self.list_factor * max(0, expected or 0) + self.list_slack


DEFAULT_BOUNDS = Bounds()


class BodyTooLarge(Exception):
    """The body, once decompressed, is larger than the cap."""


class DeadlineExceeded(Exception):
    """The whole request took longer than its deadline."""


class UnsupportedEncoding(Exception):
    """A Content-Encoding scanwatch did not ask for."""


def _decoder(encoding: str) -> Callable[[bytes, int], bytes] | None:
    """A decompressor taking (data, max_length); None for identity."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        obj = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding != "deflate" else zlib.MAX_WBITS)
        state = {"obj": obj}

        def decode(data: bytes, max_length: int) -> bytes:
            d = state["obj"]
            out = d.decompress(data, max_length)
            while d.unconsumed_tail and len(out) < max_length:
                out += d.decompress(d.unconsumed_tail, max_length - len(out))
            if d.unconsumed_tail:
                out += b"\0"  # more is waiting: the caller's cap is passed
            return out

        return decode
    raise UnsupportedEncoding(encoding)


def read_capped(chunks: Iterator[bytes], *, content_encoding: str | None, max_bytes: int,
                deadline: float, clock: Callable[[], float] = time.monotonic) -> bytes:
    """The decoded body, never holding more than ``max_bytes`` of it, and never reading past ``deadline``.

    Decompression is ours (on raw bytes) so that a small gzip bomb cannot expand in one step beyond the cap.
    """
    encodings = [e for e in (content_encoding or "").split(",") if e.strip()]
    if len(encodings) > 1:
        raise UnsupportedEncoding(content_encoding or "")
    decode = _decoder(encodings[0] if encodings else "")
    body = bytearray()
    for chunk in chunks:
        if clock() > deadline:
            raise DeadlineExceeded
        piece = chunk if decode is None else decode(chunk, max_bytes - len(body) + 1)
        body += piece
        if len(body) > max_bytes:
            raise BodyTooLarge
    return bytes(body)
