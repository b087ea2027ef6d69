"""Peak resident memory of a block of code in this process, DuckDB's native allocations included.

tracemalloc would only see Python objects, and most of a merge's memory is DuckDB's. Linux keeps the
peak RSS (`VmHWM`) and lets a process reset it by writing 5 to `/proc/self/clear_refs`; where that is not
possible the figure falls back to the process's lifetime peak and says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class Peak:
    peak_mb: float | None = None  # peak RSS of the process while the block ran
    before_mb: float | None = None  # RSS when the block started
    exact: bool = False  # False when the peak could not be reset (then it is the lifetime peak)

    @property
    def growth_mb(self) -> float | None:
        if self.peak_mb is None or self.before_mb is None:
            return None
        return round(self.peak_mb - self.before_mb, 1)


@contextmanager
def peak_rss() -> Iterator[Peak]:
    peak = Peak()
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
            fh.write("5")
        peak.exact = True
    except OSError:
        peak.exact = False
    before = _status_kb("VmRSS")
    peak.before_mb = None if before is None else round(before / 1024, 1)
    yield peak
    hwm = _status_kb("VmHWM")
    peak.peak_mb = None if hwm is None else round(hwm / 1024, 1)
