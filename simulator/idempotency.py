"""Idempotency-Key handling for POST routes.

Only successful (2xx) first responses are kept and replayed: an error leaves the key free so that a
retry of a failed request (503, 429, a quota the user has since topped up) actually runs again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from .errors import ApiError

MAX_KEY = 255


@dataclass
class Entry:
    fingerprint: str
    created_at: float
    done: bool = False
    status: int = 0
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def validate_key(key: str) -> None:
    if not key or len(key) > MAX_KEY or not all(32 < ord(ch) < 127 for ch in key):
        raise ApiError(400, "idempotency_key_invalid")


def fingerprint(method: str, path: str, body: bytes) -> str:
    """The request a key stands for; JSON bodies compare by value, not by spacing or key order."""
    try:
        canon = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode() if body.strip() else b""
    except ValueError:
        canon = body
    return hashlib.sha256(method.encode() + b" " + path.encode() + b"\n" + canon).hexdigest()


class IdempotencyStore:
    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[tuple[str, str], Entry] = {}

    def begin(self, owner: str, key: str, fp: str, now: float) -> Entry | None:
        """Replay entry if done, None when the caller should process (and the key is now reserved)."""
        self._expire(now)
        entry = self._entries.get((owner, key))
        if entry is not None and now - entry.created_at > self.ttl:
            entry = None
        if entry is None:
            self._entries[(owner, key)] = Entry(fp, now)
            return None
        if entry.fingerprint != fp:
            raise ApiError(409, "idempotency_conflict")
        if not entry.done:
            raise ApiError(409, "idempotency_in_progress")
        return entry

    def finish(self, owner: str, key: str, status: int, body: bytes, headers: dict[str, str], *,
               keep_errors: bool = False) -> None:
        entry = self._entries.get((owner, key))
        if entry is None:
            return
        if 200 <= status < 300 or keep_errors:
            entry.done, entry.status, entry.body, entry.headers = True, status, body, headers
        else:
            del self._entries[(owner, key)]

    def release(self, owner: str, key: str) -> None:
        """Free a key whose request did not succeed; a stored success is never dropped."""
        entry = self._entries.get((owner, key))
        if entry is not None and not entry.done:
            del self._entries[(owner, key)]

    def _expire(self, now: float) -> None:
        if len(self._entries) > 10_000:
            self._entries = {k: e for k, e in self._entries.items() if now - e.created_at <= self.ttl}
