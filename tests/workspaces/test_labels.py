"""One workspace label everywhere: the backfilled past and the live present are the same series.

The demo's two workspaces are followed as `acme` and `globex`, names that differ from the service's. After a
real sync, `scanwatch backfill-prometheus` writes their past into a real Prometheus's data directory, which
then scrapes the real exporter as the demo's does (the shipped recording rules, a 1-day lookback). Every
backfilled series must carry exactly the label set of a live one: so a project has one score series over the
year, and a sum over the junction of past and present counts each issue once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import duckdb
import pytest
import yaml

from pipelines.backfill.openmetrics import FAMILIES, rule_pasts
from pipelines.core.package_files import scrape_job_name
from pipelines.core.processes import stop_process
from tests.prometheus.tools import free_port, require
from tests.workspaces.pair import NAMES, ROOT, Pair, synced_pair

pytestmark = pytest.mark.timeout(900)
WITH_PAST = ("secscan_project_score", "secscan_target_score", "secscan_issues_open")


class Prom:
    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: object) -> object:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def series(self, name: str, start: float, end: float) -> list[dict[str, str]]:
        return self.get("/api/v1/series", **{"match[]": name, "start": start, "end": end})  # type: ignore[return-value]

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr} if at is None else {"query": expr, "time": at}
        return self.get("/api/v1/query", **params)["result"]  # type: ignore[index]


def _poll(what: str, check, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = check()
        except OSError:
            found = None
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pair, Prom, float]]:
    prometheus = require("prometheus")
    require("promtool")
    tmp = tmp_path_factory.mktemp("labels")
    with synced_pair(tmp) as pair:
        assert pair.sync.returncode == 1, pair.sync.stderr  # initech's key is refused; acme and globex synced
        port = free_port()
        data = tmp / "prometheus"
        done = pair.cli("backfill-prometheus", "--data-dir", str(data), "--instance", f"127.0.0.1:{port}")
        assert done.returncode == 0, done.stderr
        with duckdb.connect(str(pair.db), read_only=True) as conn:
            [(first_sync,)] = conn.execute("SELECT epoch(min(first_observed_at)) FROM first_observations").fetchall()
        exporter = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address",
                                     "127.0.0.1", "--port", str(port)], env=pair.env, cwd=ROOT,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        config = tmp / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(ROOT / "prometheus" / "rules" / "secscan-recording.yml")],
            "scrape_configs": [{"job_name": scrape_job_name(), "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
        }))
        prom_port = free_port()
        log = open(tmp / "prometheus.log", "w")  # noqa: SIM115
        proc = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={data}",
                                 "--storage.tsdb.retention.time=2y", "--query.lookback-delta=1d",
                                 f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=log, stderr=subprocess.STDOUT)
        prom = Prom(f"http://127.0.0.1:{prom_port}")
        try:
            def live() -> bool:  # a scrape of each part, and the rules evaluated over it (not the past's samples)
                now = time.time()
                return {r["metric"].get("workspace") for r in prom.query("secscan_snapshot_readable == 1")} >= \
                    set(NAMES) and {s.get("workspace") for s in prom.series("secscan:issues_opened:increase1d",
                                                                            now - 5, now)} >= set(NAMES)

            _poll("the live series and rules of both workspaces", live)
            yield pair, prom, float(first_sync)
        finally:
            stop_process(proc)
            log.close()
            stop_process(exporter)


def _labelsets(found: list[dict[str, str]]) -> set[frozenset]:
    return {frozenset(s.items()) for s in found}


def test_backfilled_series_carry_exactly_the_labels_of_the_live_ones(stack) -> None:
    _, prom, first_sync = stack
    now = time.time()
    for name in [*WITH_PAST, *rule_pasts()]:
        past = _labelsets(prom.series(name, first_sync - 400 * 86400, first_sync - 1))
        live = _labelsets(prom.series(name, now - 30, now))
        assert past, f"{name} has no backfilled past"
        assert past <= live, (name, [dict(x) for x in past - live][:3], [dict(x) for x in live][:2])
        assert {dict(s)["workspace"] for s in past} == set(NAMES), name  # the followed names, not "Acme Corp"
    for name in WITH_PAST:
        [sample] = prom.series(name, now - 30, now)[:1]
        assert set(sample) == {"__name__", "job", "instance", *FAMILIES[name]}


def test_a_project_is_one_score_series_over_the_year(stack) -> None:
    pair, prom, first_sync = stack
    with duckdb.connect(str(pair.db), read_only=True) as conn:
        [(projects,)] = conn.execute("SELECT count(*) FROM projects WHERE removed_at IS NULL").fetchall()
    year = prom.series("secscan_project_score", first_sync - 400 * 86400, time.time())
    assert len(year) == projects == len(prom.query("secscan_project_score"))


def test_the_past_and_the_present_are_not_counted_twice_at_the_junction(stack) -> None:
    """With the demo's 1-day lookback, a query just after the first scrape still sees the last backfilled day:
    were they two series, the sum would double."""
    pair, prom, _ = stack
    with duckdb.connect(str(pair.db), read_only=True) as conn:
        open_now = dict(conn.execute("SELECT severity, count(*) FROM open_issues_now GROUP BY severity").fetchall())
    summed = {r["metric"]["severity"]: float(r["value"][1])
              for r in prom.query("sum by (severity) (secscan_issues_open)")}
    assert {s: v for s, v in summed.items() if v} == {s: float(n) for s, n in open_now.items()}


def test_the_recording_rule_window_is_read_from_the_shipped_rule(stack) -> None:
    pasts = rule_pasts()
    rules = yaml.safe_load((ROOT / "prometheus" / "rules" / "secscan-recording.yml").read_text())["groups"][0]["rules"]
    for record, past in pasts.items():
        [expr] = [r["expr"] for r in rules if r.get("record") == record]
        assert "[1d]" in expr and past.window_seconds == 86400 and past.labels == ("workspace", "severity")
    changed = [(r["record"], r["expr"].replace("[1d]", "[6h]"), {}) for r in rules if "record" in r]
    assert {p.window_seconds for p in rule_pasts(changed).values()} == {6 * 3600}
