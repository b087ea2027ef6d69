"""A real Prometheus for the backfill tests, and the comparison of what it answers with the service's dates."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from pipelines.core.processes import stop_process
from tests.backfill.served_past import ServedPast, by_day
from tests.prometheus.tools import free_port, require

DAY = timedelta(days=1)


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


class Prom:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log

    def get(self, path: str, **params) -> dict:
        with urllib.request.urlopen(f"{self.url}{path}?{urllib.parse.urlencode(params)}", timeout=120) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def range(self, expr: str, start: datetime, end: datetime, step: timedelta = DAY) -> list[dict]:
        return self.get("/api/v1/query_range", query=expr, start=start.timestamp(), end=end.timestamp(),
                        step=step.total_seconds())["result"]

    def samples(self, selector: str, window: str = "800d") -> dict[tuple, list[tuple[float, float]]]:
        """Every raw sample of the selected series: {sorted labels: [(ts, value)]}."""
        result = self.get("/api/v1/query", query=f"{selector}[{window}]")["result"]
        return {tuple(sorted(s["metric"].items())): [(float(t), float(v)) for t, v in s["values"]] for s in result}


@contextmanager
def prometheus(work: Path, data: Path, *flags: str, config: str = "global: {}\n") -> Iterator[Prom]:
    """Debian's Prometheus on `data` with `config` and `flags`, stopped on exit."""
    binary = require("prometheus")
    work.mkdir(parents=True, exist_ok=True)
    (work / "prometheus.yml").write_text(config)
    port = free_port()
    log_path = work / "prometheus.log"
    log = open(log_path, "w")  # noqa: SIM115
    proc = subprocess.Popen([binary, f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={data}",
                             f"--web.listen-address=127.0.0.1:{port}", *flags],
                            stdout=log, stderr=subprocess.STDOUT)
    prom = Prom(f"http://127.0.0.1:{port}", log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                prom.get("/api/v1/query", query="1")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.2)
        yield prom
    finally:
        stop_process(proc)
        log.close()


def by(result: list[dict], *labels: str) -> dict:
    """{(label values...): {day the sample closes: value}}; a sample at midnight stands for the day before."""
    out = {}
    for series in result:
        key = tuple(series["metric"].get(label) for label in labels)
        out[key] = {(datetime.fromtimestamp(float(ts), UTC) - DAY).date(): float(v) for ts, v in series["values"]}
    return out


def past_days(first_day: date, served: ServedPast, back: int) -> list[date]:
    """The days a range query of `back` days ending at the first sync's midnight answers for, that were
    reconstructed (never before the service's year)."""
    return [d for d in (first_day - timedelta(days=k) for k in range(back, 0, -1))
            if d >= served.first_day() and d >= first_day - timedelta(days=366)]


def assert_answers_as_served(prom: Prom, first_day: date, served: ServedPast, back: int) -> int:
    """Every day of every series within `back` days before the first sync equals the truth worked out from the
    served dates; returns the number of days compared."""
    end = midnight(first_day)
    start = end - back * DAY
    days = past_days(first_day, served, back)
    open_issues = by(prom.range("secscan_issues_open", start, end), "project_id", "severity")
    assert open_issues == by_day(served.open_issues(days), days)
    totals = by(prom.range("secscan:issues_open:sum", start, end), "severity")
    per_severity: dict[tuple, dict[date, float]] = {}
    for (_, severity), values in by_day(served.open_issues(days), days).items():
        for day, n in values.items():
            per_severity.setdefault((severity,), {}).setdefault(day, 0.0)
            per_severity[(severity,)][day] += n
    assert totals == per_severity
    assert by(prom.range("secscan_target_score", start, end), "target_id") == {
        (t,): v for t, v in by_day(served.target_scores(days), days).items()}
    assert by(prom.range("secscan_project_score", start, end), "project_id") == {
        (p,): v for p, v in by_day(served.project_scores(days), days).items()}
    new, fixed = served.new_and_fixed()
    for rule, want in (("secscan:issues_opened:increase1d", new), ("secscan:issues_fixed:increase1d", fixed)):
        got = by(prom.range(f"sum({rule})", start, end), "x")[(None,)]
        assert sum(got.values()) > 0, rule
        assert got == {day: float(want.get(day, 0)) for day in got}, rule
    return len(days)
