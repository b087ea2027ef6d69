"""The VictoriaMetrics output, checked offline: no VictoriaMetrics can run here (no Debian package, no PyPI
wheel), so a stand-in records the requests and answers as VictoriaMetrics's documented API does. What is
checked is what the store would read: bodies in Prometheus's text format with millisecond timestamps
(/api/v1/import/prometheus), parsed by prometheus_client's own parser, carrying exactly the samples the blocks
output writes; the rollup cache reset after the last import; a -retentionPeriod shorter than the past
refused before any import."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families as text_families

from pipelines.backfill import tsdb
from pipelines.storage.db import connect

pytestmark = pytest.mark.parametrize("synced", ["duckdb"], indirect=True)


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
