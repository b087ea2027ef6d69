"""Deterministic crash points for the reliability tests.

`killpoint("merge.before_commit")` SIGKILLs the whole process when `SCANWATCH_KILL_AT` names that point
(`name` or `name:nth` for its nth passage, counted from 1), so a test can prove that a crash at exactly
that moment leaves the history and the snapshot whole. SIGKILL, not an exception: nothing runs after it,
no `finally`, no rollback, no flush, as with the OOM killer or a power cut. Unset, a call costs one
dictionary lookup.
"""

from __future__ import annotations

import os
import signal
import threading

_passages: dict[str, int] = {}
_lock = threading.Lock()


def killpoint(name: str) -> None:
    """Die here, at once and without cleanup, if `SCANWATCH_KILL_AT` asks for this point (and passage)."""
    spec = os.environ.get("SCANWATCH_KILL_AT")
    if not spec:
        return
    wanted, _, nth = spec.partition(":")
    if wanted != name:
        return
    with _lock:
        _passages[name] = count = _passages.get(name, 0) + 1
    if count >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
