"""A real Prometheus holding live data loads the backfilled blocks, shows the reconstruction, and nothing after
it; the blocks are what a production store takes (a UTC day at most each, no external labels, nothing in the
future, none overlapping another), and a second run adds nothing. Below, on the same history, the
VictoriaMetrics output, checked offline."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families as text_families

from pipelines.backfill import tsdb
from pipelines.backfill.openmetrics import FAMILIES, RULE_FAMILIES
from pipelines.storage.db import connect
from tests.backends import rows
from tests.backfill.prom_server import Prom, assert_answers_as_served, prometheus
from tests.backfill.prom_server import midnight as _midnight
from tests.grafana.queries import METRIC, dashboard_queries, substitute
from tests.prometheus.tools import require

# The blocks on the DuckDB history; the same SQL on PostgreSQL is compared with the service's dates through
# remote write (test_remote_write.py), which costs a tenth of the time (no block files to write).
pytestmark = pytest.mark.parametrize("synced", ["duckdb"], indirect=True)

DAY = timedelta(days=1)
DAY_MS = 86_400_000
# Series with a past before the first sync: /metrics' own that the reconstruction rebuilds, and the recording
# rules over them. Quotas are known only from the first sync on (quota_snapshots), like the pipeline's counters.
WITH_PAST = ({name for name in FAMILIES if not name.startswith("secscan_quota_")} | {"secscan:issues_open:sum"}
             | set(RULE_FAMILIES))


def _rows(db: Path | str, sql: str) -> list[tuple]:
    return rows(db, sql)


def backfill_cli(db: Path | str, data_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "backfill-prometheus", "--db", str(db),
                           "--data-dir", str(data_dir), *extra], capture_output=True, text=True, timeout=600)


def _metas(data: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in data.glob("*/meta.json")}


def _live_block(promtool: str, data: Path, since: datetime, work: Path) -> frozenset[str]:
    """The blocks of an hour of live scrapes from the first sync on, as the Prometheus scraping the exporter
    since then holds; returns their names (two when the hour crosses promtool's 2 h block boundary)."""
    lines = ["# TYPE up gauge"]
    lines += [f'up{{job="scanwatch",instance="localhost:9817"}} 1 {since.timestamp() + 15 * k:.3f}' for k in range(240)]
    (work / "live.om").write_text("\n".join([*lines, "# EOF"]) + "\n")
    before = set(_metas(data))
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(work / "live.om"), str(data)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    names = frozenset(set(_metas(data)) - before)
    assert 1 <= len(names) <= 2, names
    return names


class Backfilled:
    def __init__(self, db: Path | str, data: Path, prom: Prom, first_day: date, live: frozenset[str],
                 runs: list[subprocess.CompletedProcess], blocks_after: list[set[str]]) -> None:
        self.db, self.data, self.prom, self.first_day = db, data, prom, first_day
        self.live, self.runs, self.blocks_after = live, runs, blocks_after


@pytest.fixture(scope="module")
def backfilled(synced, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backfilled]:
    """Blocks written in two runs (the first stops 200 days before the first sync, the second adds the rest),
    a third that finds nothing to add, into a folder that already holds a live block, then loaded by a
    Prometheus."""
    promtool = require("promtool")
    db, _ = synced
    work = tmp_path_factory.mktemp("prom")
    data = work / "data"
    data.mkdir()
    [(first_day, first_observed_at)] = _rows(db, "SELECT first_observed_day, first_observed_at FROM first_observations")
    live = _live_block(promtool, data, first_observed_at, work)
    runs, blocks_after = [], []
    for extra in (("--end", (_midnight(first_day) - 200 * DAY).isoformat()), (), ()):
        runs.append(backfill_cli(db, data, *extra))
        assert runs[-1].returncode == 0, runs[-1].stderr
        blocks_after.append(set(_metas(data)))
    with prometheus(work, data, "--storage.tsdb.retention.time=2y") as prom:
        yield Backfilled(db, data, prom, first_day, live, runs, blocks_after)


def test_prometheus_answers_the_whole_past_as_the_service_dates_say(backfilled, served) -> None:
    """Every day of every series over the whole past (written by two runs), against the truth worked out from
    the served dates (served_past.py), not against scanwatch's own reconstructed tables, which would prove
    only the transport; the lifecycle rules count issues first seen, and fixed, in the day each sample closes.

    Mutation that fails it (and passed the former comparison with the tables): the reconstruction taking a
    fixed issue's end from its last sighting before its `fixed_at` (`coalesce(i.last_seen_at, i.fixed_at,
    ...)` in sql/backfill/issue_changes.sql)."""
    assert assert_answers_as_served(backfilled.prom, backfilled.first_day, served, back=400) >= 300


def test_blocks_are_day_aligned_at_most_a_day_without_external_labels_or_future(backfilled) -> None:
    """What Mimir's block upload and Prometheus's docs ask of backfilled blocks."""
    metas = {name: m for name, m in _metas(backfilled.data).items() if name not in backfilled.live}
    assert len(metas) >= 300
    [(first_observed_at,)] = _rows(backfilled.db, "SELECT first_observed_at FROM first_observations")
    for name, meta in metas.items():
        assert meta["maxTime"] - meta["minTime"] <= DAY_MS, name
        assert meta["minTime"] // DAY_MS == (meta["maxTime"] - 1) // DAY_MS, f"{name} crosses a UTC midnight"
        assert "thanos" not in meta and not meta.get("labels"), name
        assert meta["maxTime"] <= first_observed_at.timestamp() * 1000 <= datetime.now(UTC).timestamp() * 1000
    spans = sorted((m["minTime"], m["maxTime"]) for m in _metas(backfilled.data).values())
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(spans)), "two blocks overlap"


def test_prometheus_holding_live_data_loads_them_without_an_overlap_warning(backfilled) -> None:
    """Fails on 1458 h blocks: the raw series' and the rules' blocks covered the same months."""
    log = backfilled.prom.log.read_text()
    assert "Overlapping blocks" not in log, log[-2000:]
    assert "level=error" not in log, log[-2000:]
    [(since,)] = _rows(backfilled.db, "SELECT first_observed_at FROM first_observations")
    live = backfilled.prom.get("/api/v1/query", query="count_over_time(up[1h])", time=since.timestamp() + 3600)
    assert [r["value"][1] for r in live["result"]] == ["240"], "the live block is not loaded whole"


def test_a_second_run_adds_nothing_twice(backfilled) -> None:
    _, second, third = backfilled.runs
    written_first = len(backfilled.blocks_after[0]) - len(backfilled.live)
    assert written_first > 100
    assert f"{written_first} days already in the folder's blocks left as they are" in second.stdout, second.stdout
    assert "nothing to write (every day of the past is already in" in third.stdout, third.stdout
    assert backfilled.blocks_after[2] == backfilled.blocks_after[1]


def test_labels_are_those_of_the_exporter_and_the_scrape(backfilled) -> None:
    db, prom, first_day = backfilled.db, backfilled.prom, backfilled.first_day
    [series, *_] = prom.range("secscan_target_score", _midnight(first_day) - DAY, _midnight(first_day))
    assert set(series["metric"]) == {"__name__", "job", "instance", *FAMILIES["secscan_target_score"]}
    assert series["metric"]["job"] == "scanwatch"
    [(workspace,)] = _rows(db, "SELECT workspace_name FROM accounts LIMIT 1")
    assert series["metric"]["workspace"] == workspace


def test_every_dashboard_range_query_has_a_past_before_the_first_sync(backfilled) -> None:
    db, prom, first_day = backfilled.db, backfilled.prom, backfilled.first_day
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
    db, data = backfilled.db, backfilled.data
    [(first_observed_at,)] = _rows(db, "SELECT first_observed_at FROM first_observations")
    metas = [m for name, m in _metas(data).items() if name not in backfilled.live]
    assert metas and max(m["maxTime"] for m in metas) <= first_observed_at.timestamp() * 1000


def test_a_missing_promtool_is_one_clear_line(synced, tmp_path: Path) -> None:
    db, _ = synced
    done = backfill_cli(db, tmp_path / "data", "--promtool", str(tmp_path / "no-promtool"))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "not found" in done.stderr and "promtool" in done.stderr
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


# --- VictoriaMetrics, checked offline -------------------------------------------------------------------------
# The VictoriaMetrics output, checked offline: no VictoriaMetrics can run here (no Debian package, no PyPI
# wheel), so a stand-in records the requests and answers as VictoriaMetrics's documented API does. What is
# checked is what the store would read: bodies in Prometheus's text format with millisecond timestamps
# (/api/v1/import/prometheus), parsed by prometheus_client's own parser, carrying exactly the samples the blocks
# output writes; the rollup cache reset after the last import; a -retentionPeriod shorter than the past
# refused before any import.


class StandIn(ThreadingHTTPServer):
    """Records (method, path, body); serves `flag` metrics with the given -retentionPeriod."""

    def __init__(self, retention: str) -> None:
        self.retention, self.calls = retention, []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _answer(handler, status: int, body: bytes = b"") -> None:
                handler.send_response(status)
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            def do_GET(handler) -> None:
                self.calls.append(("GET", handler.path, b""))
                if handler.path == "/metrics":
                    handler._answer(200, f'flag{{name="retentionPeriod", value="{self.retention}", is_set="true"}} 1\n'
                                         .encode())
                elif handler.path == "/internal/resetRollupResultCache":
                    handler._answer(200)
                else:
                    handler._answer(404)

            def do_POST(handler) -> None:
                body = handler.rfile.read(int(handler.headers["Content-Length"]))
                self.calls.append(("POST", handler.path, body))
                handler._answer(204 if handler.path == "/api/v1/import/prometheus" else 404)

        super().__init__(("127.0.0.1", 0), Handler)


@contextmanager
def stand_in(retention: str) -> Iterator[StandIn]:
    server = StandIn(retention)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def import_cli(db: Path | str, server: StandIn) -> subprocess.CompletedProcess:
    url = f"http://127.0.0.1:{server.server_address[1]}/api/v1/import/prometheus"
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "backfill-prometheus", "--db", str(db), "--output",
                           "victoriametrics", "--url", url, "--no-rules"], capture_output=True, text=True, timeout=600)


def test_the_import_carries_exactly_the_blocks_samples_then_resets_the_cache(synced, tmp_path: Path) -> None:
    db, _ = synced
    with stand_in("2y") as server:
        done = import_cli(db, server)
    assert done.returncode == 0, done.stderr
    assert "-retentionPeriod=" in done.stdout.splitlines()[0]
    imports = [body for method, path, body in server.calls if method == "POST"]
    assert len(imports) > 1 and server.calls[-1][:2] == ("GET", "/internal/resetRollupResultCache")
    sent, last = set(), {}
    for body in imports:
        for family in text_families(body.decode()):
            for s in family.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                assert s.timestamp > last.get(key, 0), f"{key} out of time order"
                last[key] = s.timestamp
                sent.add((*key, s.timestamp, s.value))
    with connect(str(db)) as conn:
        tsdb.write_series(conn, tsdb.Plan(None, labels={"job": "scanwatch", "instance": "localhost:9817"}),
                          tmp_path / "series.om")
    # The OpenMetrics file's seconds, read by the text parser that takes them for milliseconds (its strict
    # OpenMetrics parser wants each series's samples together; promtool does not).
    document = (tmp_path / "series.om").read_text().removesuffix("# EOF\n")
    written = {(s.name, tuple(sorted(s.labels.items())), round(s.timestamp * 1000, 3), s.value)
               for family in text_families(document) for s in family.samples}
    assert sent == written and len(sent) > 1000


def test_a_retention_shorter_than_the_past_is_refused_before_any_import(synced) -> None:
    db, _ = synced
    with stand_in("1") as server:  # VictoriaMetrics's default: one month
        done = import_cli(db, server)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "-retentionPeriod=" in done.stderr
    assert [c for c in server.calls if c[0] == "POST"] == []
