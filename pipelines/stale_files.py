"""Leftovers of a killed process: temp files that a SIGKILL kept from being removed."""

from __future__ import annotations

import time
from pathlib import Path


def remove_stale(folder: Path, pattern: str, *, older_than_seconds: float = 600.0) -> int:
    """Delete files matching `pattern` in `folder` untouched for a while; a live writer's file is recent."""
    cutoff = time.time() - older_than_seconds
    removed = 0
    for path in Path(folder).glob(pattern):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except OSError:  # another process removed it first, or it is not ours to remove
            continue
    return removed
