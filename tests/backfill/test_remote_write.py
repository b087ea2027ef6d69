"""Remote write into Debian's Prometheus (2.42) started with the receiver and an out-of-order window, already
scraping live: the past it then answers equals the service's dates day by day for every series, a second run
changes nothing, and a receiver that would drop the past is refused before anything is sent."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from tests.backends import rows
from tests.backfill.prom_server import Prom, assert_answers_as_served, prometheus
from tests.prometheus.tools import free_port

# On the PostgreSQL history: the blocks test the same SQL on DuckDB (test_prometheus.py).
pytestmark = pytest.mark.parametrize("synced", ["postgres"], indirect=True)

SCRAPING = "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: live\n    static_configs:\n" \
           "      - targets: ['127.0.0.1:9']\n"
OUT_OF_ORDER = SCRAPING + "storage:\n  tsdb:\n    out_of_order_time_window: 400d\n"
PAST = '{__name__=~"secscan.*"}'


def remote_write(db: Path | str, url: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "backfill-prometheus", "--db", str(db),
                           "--output", "remote-write", "--url", f"{url}/api/v1/write", *extra],
                          capture_output=True, text=True, timeout=600)


def _live(prom: Prom) -> None:
    """Wait for the receiver's first scrape: its head then holds live data, later than the whole past."""
    deadline = time.monotonic() + 30
    while not prom.get("/api/v1/query", query="up")["result"]:
        assert time.monotonic() < deadline, "no scrape in 30 s"
        time.sleep(0.2)


class Received:
    def __init__(self, prom: Prom, first_day: date, runs: list[subprocess.CompletedProcess],
                 counts: list[int]) -> None:
        self.prom, self.first_day, self.runs, self.counts = prom, first_day, runs, counts


@pytest.fixture(scope="module")
def received(synced, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Received]:
    db, _ = synced
    work = tmp_path_factory.mktemp("rw")
    with prometheus(work, work / "data", "--web.enable-remote-write-receiver", "--storage.tsdb.retention.time=2y",
                    config=OUT_OF_ORDER) as prom:
        _live(prom)
        runs, counts = [], []
        for _ in range(2):
            runs.append(remote_write(db, prom.url))
            assert runs[-1].returncode == 0, runs[-1].stderr
            counts.append(sum(len(v) for v in prom.samples(PAST).values()))
        [(first_day,)] = rows(db, "SELECT first_observed_day FROM first_observations")
        yield Received(prom, first_day, runs, counts)


def test_the_receiver_answers_the_whole_past_as_the_service_dates_say(received, served) -> None:
    assert assert_answers_as_served(received.prom, received.first_day, served, back=400) >= 300


def test_every_sample_lands_once_and_a_second_run_changes_nothing(received) -> None:
    out = received.runs[0].stdout.strip().splitlines()[-1]
    samples, rule_samples = (int(w) for w in out.split(": ", 1)[1].split()[0:4:3])
    assert rule_samples > 0 and received.counts[0] == samples + rule_samples, out
    assert received.counts[1] == received.counts[0]
    assert "Out of order sample" not in received.prom.log.read_text()


def test_one_line_says_what_the_receiver_must_allow(received) -> None:
    first = received.runs[0].stdout.splitlines()[0]
    assert "--web.enable-remote-write-receiver" in first and "out_of_order_time_window" in first, first
    assert "retention" in first


@pytest.mark.parametrize(("flags", "config", "says"), [
    (("--storage.tsdb.retention.time=2y",), OUT_OF_ORDER, "--web.enable-remote-write-receiver"),
    (("--web.enable-remote-write-receiver", "--storage.tsdb.retention.time=2y"), SCRAPING,
     "out_of_order_time_window"),
    (("--web.enable-remote-write-receiver", "--storage.tsdb.retention.time=30d"), OUT_OF_ORDER,
     "--storage.tsdb.retention.time="),
], ids=["no-receiver", "no-out-of-order-window", "short-retention"])
def test_a_receiver_that_would_drop_the_past_is_refused_before_anything_is_sent(
        synced, tmp_path: Path, flags: tuple[str, ...], config: str, says: str) -> None:
    db, _ = synced
    with prometheus(tmp_path, tmp_path / "data", *flags, config=config) as prom:
        _live(prom)
        done = remote_write(db, prom.url)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
        assert prom.samples(PAST) == {}


def test_a_query_api_that_does_not_answer_the_rules_is_one_line(received, synced) -> None:
    db, _ = synced
    done = remote_write(db, received.prom.url, "--query-url", f"http://127.0.0.1:{free_port()}")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "--query-url" in done.stderr and "Traceback" not in done.stderr
