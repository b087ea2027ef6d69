"""A real Prometheus started on the backfilled data directory shows the reconstruction, and nothing after it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from pipelines.backfill.openmetrics import FAMILIES, RULE_FAMILIES
from pipelines.commands.processes import stop_process
from tests.backends import rows
from tests.backfill.served_past import ServedPast, by_day
from tests.grafana.queries import METRIC, dashboard_queries, substitute
from tests.prometheus.tools import free_port, require

DAY = timedelta(days=1)
# Series with a past before the first sync: /metrics' own that the reconstruction rebuilds, and the recording
# rules over them. Quotas are known only from the first sync on (quota_snapshots), like the pipeline's counters.
WITH_PAST = ({name for name in FAMILIES if not name.startswith("secscan_quota_")} | {"secscan:issues_open:sum"}
             | set(RULE_FAMILIES))


def _rows(db: Path | str, sql: str) -> list[tuple]:
    return rows(db, sql)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def backfill_cli(db: Path | str, data_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "backfill-prometheus", "--db", str(db),
                           "--data-dir", str(data_dir), *extra], capture_output=True, text=True, timeout=600)


class Prom:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params) -> dict:
        with urllib.request.urlopen(f"{self.url}{path}?{urllib.parse.urlencode(params)}", timeout=30) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def range(self, expr: str, start: datetime, end: datetime, step: timedelta = DAY) -> list[dict]:
        return self.get("/api/v1/query_range", query=expr, start=start.timestamp(), end=end.timestamp(),
                        step=step.total_seconds())["result"]


@pytest.fixture(scope="module")
def backfilled(synced, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Prom, date]]:
    prometheus = require("prometheus")
    require("promtool")
    db, _ = synced
    work = tmp_path_factory.mktemp("prom")
    data = work / "data"
    done = backfill_cli(db, data)
    assert done.returncode == 0, done.stderr
    config = work / "prometheus.yml"
    config.write_text("global: {}\n")
    port = free_port()
    log = open(work / "prometheus.log", "w")  # noqa: SIM115
    proc = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={data}",
                             "--storage.tsdb.retention.time=2y", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    prom = Prom(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                prom.get("/api/v1/query", query="1")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (work / "prometheus.log").read_text()
                time.sleep(0.2)
        [(first_day,)] = _rows(db, "SELECT first_observed_day FROM first_observations")
        yield db, data, prom, first_day
    finally:
        stop_process(proc)
        log.close()


def _by(result: list[dict], *labels: str) -> dict:
    """{(label values...): {day the sample closes: value}}; a sample at midnight stands for the day before."""
    out = {}
    for series in result:
        key = tuple(series["metric"].get(label) for label in labels)
        out[key] = {(datetime.fromtimestamp(float(ts), UTC) - DAY).date(): float(v) for ts, v in series["values"]}
    return out


@pytest.fixture(scope="module")
def served(synced) -> ServedPast:
    """The service's own dates, read by an independent walk (the world has not moved since the sync)."""
    _, sim = synced
    return ServedPast.walk(sim.base_url, sim.api_key)


def _window(first_day: date, served: ServedPast) -> list[date]:
    """The days a 90-day range query ending at the first sync's midnight answers for, that were reconstructed."""
    return [d for d in (first_day - timedelta(days=k) for k in range(91, 0, -1)) if d >= served.first_day()]


def test_prometheus_answers_the_past_90_days_as_the_service_dates_say(backfilled, served) -> None:
    """Every day of every series, against the truth worked out from the served dates (served_past.py), not
    against scanwatch's own reconstructed tables, which would prove only the transport.

    Mutation that fails it (and passed the former comparison with the tables): the reconstruction taking a
    fixed issue's end from its last sighting before its `fixed_at` (`coalesce(i.last_seen_at, i.fixed_at,
    ...)` in sql/backfill/issue_changes.sql)."""
    _, _, prom, first_day = backfilled
    end = _midnight(first_day)
    start = end - 90 * DAY
    days = _window(first_day, served)
    assert len(days) >= 85

    open_issues = _by(prom.range("secscan_issues_open", start, end), "project_id", "severity")
    assert open_issues == by_day(served.open_issues(days), days)
    totals = _by(prom.range("secscan:issues_open:sum", start, end), "severity")
    per_severity: dict[tuple, dict[date, float]] = {}
    for (_, severity), values in by_day(served.open_issues(days), days).items():
        for day, n in values.items():
            per_severity.setdefault((severity,), {}).setdefault(day, 0.0)
            per_severity[(severity,)][day] += n
    assert totals == per_severity
    assert _by(prom.range("secscan_target_score", start, end), "target_id") == {
        (t,): v for t, v in by_day(served.target_scores(days), days).items()}
    assert _by(prom.range("secscan_project_score", start, end), "project_id") == {
        (p,): v for p, v in by_day(served.project_scores(days), days).items()}


def test_new_and_fixed_per_day_count_first_seen_and_fixed_at(backfilled, served) -> None:
    """The past of the lifecycle rules: issues first seen, and fixed, in the day each sample closes, as the
    service dates them."""
    _, _, prom, first_day = backfilled
    end = _midnight(first_day)
    new, fixed = served.new_and_fixed()
    for rule, want in (("secscan:issues_opened:increase1d", new), ("secscan:issues_fixed:increase1d", fixed)):
        got = _by(prom.range(f"sum({rule})", end - 90 * DAY, end), "x")[(None,)]
        assert len(got) >= 85 and sum(got.values()) > 0, rule
        assert got == {day: float(want.get(day, 0)) for day in got}, rule


def test_labels_are_those_of_the_exporter_and_the_scrape(backfilled) -> None:
    db, _, prom, first_day = backfilled
    [series, *_] = prom.range("secscan_target_score", _midnight(first_day) - DAY, _midnight(first_day))
    assert set(series["metric"]) == {"__name__", "job", "instance", *FAMILIES["secscan_target_score"]}
    assert series["metric"]["job"] == "scanwatch"
    [(workspace,)] = _rows(db, "SELECT workspace_name FROM accounts LIMIT 1")
    assert series["metric"]["workspace"] == workspace


def test_every_dashboard_range_query_has_a_past_before_the_first_sync(backfilled) -> None:
    db, _, prom, first_day = backfilled
    end = _midnight(first_day) - DAY  # a window that ends a day before the first sync, so before any scrape
    [(project_id,)] = _rows(db, "SELECT project_id FROM reconstructed_scores GROUP BY project_id "
                                "ORDER BY count(*) DESC, project_id LIMIT 1")
    with_past, without = [], []
    for query in dashboard_queries():
        if query.kind != "panel" or query.instant:
            continue
        (with_past if set(METRIC.findall(query.expr)) <= WITH_PAST else without).append(query)
        expr = substitute(query.expr, project_id=project_id, rate_interval="1d")
        if query in with_past:
            assert prom.range(expr, end - 30 * DAY, end), f"{query.source} / {query.title}: {expr}"
    titles = {(q.source, q.title) for q in with_past}
    assert {("scanwatch-overview", "Project scores"), ("scanwatch-overview", "Open issues by severity"),
            ("scanwatch-overview", "New and fixed per day, by severity"),
            ("scanwatch-project", "Scores over time"), ("scanwatch-project", "Open issues by severity")} <= titles
    # The rest read lifecycle and pipeline counters or quotas, which only exist from the first sync on.
    for query in without:
        assert set(METRIC.findall(query.expr)) - WITH_PAST, query


def test_no_block_reaches_the_first_sync(backfilled) -> None:
    db, data, _, _ = backfilled
    [(first_observed_at,)] = _rows(db, "SELECT first_observed_at FROM first_observations")
    metas = [json.loads(p.read_text()) for p in data.glob("*/meta.json")]
    assert metas and max(m["maxTime"] for m in metas) <= first_observed_at.timestamp() * 1000


def test_a_missing_promtool_is_one_clear_line(synced, tmp_path: Path) -> None:
    db, _ = synced
    done = backfill_cli(db, tmp_path / "data", "--promtool", str(tmp_path / "no-promtool"))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "not found" in done.stderr and "promtool" in done.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
