"""Exporter benchmark: scrape latency and memory at the large world's series count, and the snapshot's cost
per tick.

`python -m benchmarks.scrape [--quick] [--workspaces N] [--store files|postgres]` (or the `python -m
benchmarks` runner through `run(quick)`). Builds a history the size of the simulator's `--scale large` world
directly in DuckDB (20 projects, 200 targets, 50,000 issues with their events, 20,000 scans, a year of sync
runs; `--workspaces N` copies it under N workspaces), times the snapshot build, writes one part per workspace,
then starts `scanwatch exporter` as a subprocess and scrapes it: once at rest, and once while a writer
replaces the parts one after another as fast as a sync loop could (every scrape then re-reads a new part).
Prints a table and writes JSON to benchmarks/results/.

`--store postgres` keeps the snapshot as a PostgreSQL history keeps it: the same history copied into a scratch
PostgreSQL 15 server (tests/pg_server.py), its parts built there and written to `snapshot_parts`, the exporter
reading them with its own connection (no file), the writer replacing rows; it also times one workspace's part
build on each engine, as a run's step opens the history.

`python -m benchmarks.scrape --tick 1,10,50` measures what a schedule tick costs the snapshot with K
workspaces: each workspace's run rebuilds its own part, so a tick is K part builds (each filtered to its
workspace), each on the history opened afresh as a run's step opens it (96 MB, one thread, cold buffer).
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LARGE = {"projects": 20, "targets": 200, "issues": 50_000, "scans": 20_000, "sync_runs": 6 * 24 * 30}
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def build_history(path: Path, scale: dict[str, int]):
    """A synthetic history with the large world's shape, generated set-wise in SQL (seconds, not minutes)."""
    import duckdb

    from pipelines.storage import migrate
    from tests.helpers import history

    conn = history(duckdb.connect(str(path)))
    migrate(conn)
    p, t, i, s, r = scale["projects"], scale["targets"], scale["issues"], scale["scans"], scale["sync_runs"]
    conn.execute(f"""
    INSERT INTO accounts SELECT 'ws-1', 'Acme Corp', 'pro', true, NULL, TIMESTAMPTZ '2026-10-15', TIMESTAMPTZ
      '2026-11-14', 0, 50, 10, 25, {p}, 1, 20, '{{"full_audit": true, "repositories": true}}', '2026-10-13',
      TIMESTAMPTZ '2026-01-01', TIMESTAMPTZ '2026-10-31 23:45:00+00', NULL;
    INSERT INTO projects SELECT 'ws-1', 'p' || g, 'Project ' || g, 40 + g % 60, chr(CAST(65 + g % 5 AS INTEGER)),
      0, g = 3, TIMESTAMPTZ '2026-10-31', TIMESTAMPTZ '2026-01-01', TIMESTAMPTZ '2026-10-31', NULL FROM range({p}) r(g);
    INSERT INTO targets SELECT 'ws-1', 't' || g, 'p' || (g % {p}), CASE WHEN g % 10 = 0 THEN 'repository'
      ELSE 'domain' END, 'site' || g || '.example.com', g % 7 <> 0, 30 + g % 70, chr(CAST(65 + g % 5 AS INTEGER)),
      TIMESTAMPTZ '2026-10-31', CASE WHEN g % 7 = 0 THEN g % 13 END, TIMESTAMPTZ '2026-01-01',
      TIMESTAMPTZ '2026-10-31', NULL FROM range({t}) r(g);
    INSERT INTO scans SELECT 'ws-1', 's' || g, 't' || (g % {t}), 'p' || ((g % {t}) % {p}),
      (['quick', 'audit', 'repository'])[1 + g % 3], CASE WHEN g % 20 = 0 THEN 'failed' WHEN g % 97 = 0
      THEN 'queued' ELSE 'done' END, 50 + g % 50, 'C', (g % 100) / 100.0, false, false, NULL,
      TIMESTAMPTZ '2026-10-31' - to_minutes(g * 26), TIMESTAMPTZ '2026-10-31' - to_minutes(g * 26 - 1),
      TIMESTAMPTZ '2026-01-01', TIMESTAMPTZ '2026-10-31' FROM range({s}) r(g);
    CREATE TEMP TABLE gen AS SELECT g, 'i' || g AS id, 'p' || ((g % {t}) % {p}) AS project_id, 't' || (g % {t})
      AS target_id, sev.names[1 + (g * 7) % len(sev.names)] AS severity,
      (['database', 'secrets', 'exposedFiles', 'personalData', 'vulnerableVersions', 'configuration',
        'compliance', 'server', 'code'])[1 + g % 9] AS family,
      CASE WHEN g % 3 = 0 THEN 'open' WHEN g % 11 = 0 THEN 'accepted_risk' WHEN g % 13 = 0 THEN 'false_positive'
        ELSE 'fixed' END AS status,
      TIMESTAMPTZ '2026-10-31' - to_minutes(g * 10) AS first_seen FROM range({i}) r(g),
      (SELECT list(severity ORDER BY rank) AS names FROM severities) sev;  -- the vocabulary's, worst first
    INSERT INTO issues (workspace_id, id, project_id, target_id, address, control_id, family, severity, confidence,
      status, title, explanation, detail, location, evidence, fix_unlocked, first_seen_at, last_seen_at, fixed_at,
      first_observed_at, last_observed_at)
      SELECT 'ws-1', id, project_id, target_id, 'x.example.com', 'ctl-' || (g % 150), family, severity,
        'confirmed', status, 'title', 'e', 'd', '/', 'ev', false, first_seen, TIMESTAMPTZ '2026-10-31',
        CASE WHEN status = 'fixed' THEN first_seen + to_hours(1 + g % 2000) END, first_seen,
        TIMESTAMPTZ '2026-10-31' FROM gen;
    INSERT INTO issue_events SELECT 'ws-1', id, project_id, target_id, severity, first_seen, 'opened', NULL, 'open'
      FROM gen;
    INSERT INTO issue_events SELECT 'ws-1', id, project_id, target_id, severity, first_seen + to_hours(1 + g % 2000),
      'status_changed', 'open', status FROM gen WHERE status <> 'open';
    INSERT INTO issue_events SELECT 'ws-1', id, project_id, target_id, severity, first_seen + to_hours(3000),
      'reopened', 'fixed', 'open' FROM gen WHERE g % 3 = 0 AND g % 2 = 0;
    INSERT INTO quota_snapshots SELECT 'ws-1', TIMESTAMPTZ '2026-10-31' - to_minutes(15 * g), q, 100, 40, 60,
      TIMESTAMPTZ '2026-10-15', TIMESTAMPTZ '2026-11-14'
      FROM range(200) r(g), (VALUES ('quick_scans'), ('audits'), ('fixes')) v(q);
    INSERT INTO sync_runs SELECT 'ws-1', 'run' || (g // 6), (['account', 'projects', 'targets', 'issues', 'scans',
      'metrics_snapshot'])[1 + g % 6], TIMESTAMPTZ '2026-10-31' - to_minutes(15 * (g // 6)),
      TIMESTAMPTZ '2026-10-31' - to_minutes(15 * (g // 6)) + to_seconds(5), CASE WHEN g % 50 = 0 THEN 'failure'
      ELSE 'success' END, 3, g % 2, CASE WHEN g % 40 = 0 THEN 1 ELSE 0 END, 100, 20, '2026-10-13', NULL, NULL
      FROM range({r * 6}) r(g);
    """)
    return conn


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _rss_kib(pid: int) -> tuple[int, int]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def _cpu_ms(pid: int) -> float:
    """CPU time (user + system) the process has used: unlike latency, barely moved by a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _scrape(port: int, headers: dict[str, str] | None = None, timeout: float = 10) -> tuple[float, bytes]:
    """One `/metrics` scrape: its seconds and body (the exporter's shard benchmark scrapes through it too)."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("GET", "/metrics", headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    if resp.status != 200:
        raise RuntimeError(f"scrape answered {resp.status}")
    return time.perf_counter() - started, body


def first_answer(port: int, proc, timeout: float) -> tuple[bytes, int]:
    """The exporter's first `/metrics` body once it listens, and its series count; fails fast if it died."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, body = _scrape(port)
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the exporter did not start") from None
            time.sleep(0.1)
    return body, sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))


_STAMP = re.compile(rb"^secscan_snapshot_generated_timestamp_seconds(?:\{[^}]*\})? (\S+)$", re.MULTILINE)
_UNREADABLE = re.compile(rb"^secscan_snapshot_readable(?:\{[^}]*\})? 0", re.MULTILINE)


def _store(where: str):
    """The store a run writes to: a folder, or (a postgresql:// URL) the history's snapshot_parts table."""
    from pipelines.snapshot.store import FileStore

    if not where.startswith("postgresql://"):
        return FileStore(Path(where))
    import psycopg

    from pipelines.core.history_location import HistoryLocation
    from pipelines.storage.destinations.impl.postgres.snapshot_store import DatabaseStore

    return DatabaseStore(psycopg.connect(where, autocommit=True), HistoryLocation(where))


def _writer(parts: dict[str, dict], where: str, stop, writes, every: float) -> None:
    """Replace one workspace's part after another, atomically, as each workspace's run does; each replacement
    is a new file or row (its time moves)."""
    from pipelines.snapshot.format import encode_snapshot

    store, names = _store(where), sorted(parts)
    while not stop.is_set():
        name = names[writes.value % len(names)]
        part = parts[name]
        store.write(name, encode_snapshot({**part, "generated_at_seconds": part["generated_at_seconds"]
                                           + 1 + writes.value}))
        with writes.get_lock():
            writes.value += 1
        stop.wait(every)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered) * 1000, "p99_ms": p99 * 1000, "max_ms": ordered[-1] * 1000}


# The history's tables a snapshot reads, copied as they are from the DuckDB history into PostgreSQL.
COPIED = ("accounts", "projects", "targets", "scans", "issues", "issue_events", "quota_snapshots", "sync_runs")


def copy_history(duck, url: str) -> None:
    """The DuckDB history's rows into a fresh PostgreSQL history at `url` (migrated by scanwatch), by COPY."""
    from pipelines.storage import connect

    with connect(url) as pg:
        for table in COPIED:
            cursor = duck.execute(f"SELECT * FROM {table}")
            columns = ", ".join(f'"{d[0]}"' for d in cursor.description)
            with pg.raw.cursor() as out, out.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in cursor.fetchall():
                    copy.write_row(row)
        pg.execute("ANALYZE")


def part_build_seconds(db: str, workspace_id: str, repeats: int = 3) -> float:
    """The best of `repeats` builds of one workspace's part, each on the history opened afresh (a run's step)."""
    from pipelines.storage import connect
    from pipelines.sync.snapshot import build_part

    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        with connect(db) as conn:
            build_part(conn, workspace_id=workspace_id, label=None, now=NOW)
        best = min(best, time.perf_counter() - started)
    return best


def run(quick: bool = False, workspaces: int = 1, store: str = "files") -> dict:
    """Run the benchmark; `quick` scrapes fewer times (same world size); `workspaces` copies the large
    world's history that many times under distinct workspaces; `store` is where the exporter reads the parts
    (`files`, or `postgres`: the history's snapshot_parts). Returns the figures as a dict."""
    from pipelines.snapshot.format import EXPORTER_TOTAL_BYTES, encode_snapshot
    from pipelines.sync.snapshot import build_parts

    scrapes = 100 if quick else 300
    server = None
    with tempfile.TemporaryDirectory(prefix="scanwatch-bench-") as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        conn = build_history(tmp / "history.duckdb", LARGE)
        if workspaces > 1:
            from benchmarks.workspaces import replicate_workspaces

            replicate_workspaces(conn, workspaces)
        history_s = time.perf_counter() - started
        builds: dict[str, float] = {}
        if store == "postgres":
            from tests.pg_server import PgServer

            server = PgServer.start()
            url = server.url(server.create_database("history"))
            copy_history(conn, url)
            conn.close()
            builds = {"duckdb": part_build_seconds(str(tmp / "history.duckdb"), "ws-1"),
                      "postgres": part_build_seconds(url, "ws-1")}
            from pipelines.storage import connect

            conn = connect(url)
        started = time.perf_counter()
        parts = build_parts(conn, now=NOW)
        build_s = time.perf_counter() - started
        conn.close()
        where = url if store == "postgres" else str(tmp / "metrics.json")
        started = time.perf_counter()
        _store(where).replace_all({name: encode_snapshot(part) for name, part in parts.items()})
        write_s = time.perf_counter() - started
        snapshot_bytes = sum(len(encode_snapshot(part)) for part in parts.values())
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("SCANWATCH_SNAPSHOT", "SCANWATCH_DB")}
        env.update({"SCANWATCH_DB": url} if store == "postgres" else {"SCANWATCH_SNAPSHOT": where})
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "exporter", "--listen-address", "127.0.0.1",
                                 "--port", str(port), "--critical-issue-info", "50",
                                 # many workspaces' parts may exceed the default total: every one is served here
                                 "--max-total-bytes", str(max(EXPORTER_TOTAL_BYTES, 2 * snapshot_bytes))],
                                env=env, cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _, series = first_answer(port, proc, timeout=30)
            idle_rss, _ = _rss_kib(proc.pid)
            cpu_before = _cpu_ms(proc.pid)
            at_rest = [_scrape(port)[0] for _ in range(scrapes)]
            cpu_per_scrape = (_cpu_ms(proc.pid) - cpu_before) / scrapes
            rest_rss, _ = _rss_kib(proc.pid)

            # The writer is another process, as the pipeline is: it replaces the snapshot every 250 ms
            # (a real sync does every 15 minutes) while scrapes come every 20 ms, so about one scrape in
            # twelve lands on a new file and pays the re-parse and re-render: the p99 shows that cost.
            ctx = multiprocessing.get_context("spawn")
            stop = ctx.Event()
            writes = ctx.Value("i", 0)
            writer = ctx.Process(target=_writer, args=(parts, where, stop, writes, 0.25))
            writer.start()
            under_writes, first_after_change = [], []
            try:
                last_stamp, deadline = None, time.monotonic() + (3 if quick else 10)
                while time.monotonic() < deadline:
                    elapsed, body = _scrape(port)
                    under_writes.append(elapsed)
                    if _UNREADABLE.search(body) or b"secscan_snapshot_readable" not in body:
                        raise RuntimeError("a scrape saw an unreadable snapshot while the writer ran")
                    stamp = tuple(_STAMP.findall(body))
                    if last_stamp is not None and stamp != last_stamp:
                        first_after_change.append(elapsed)
                    last_stamp = stamp
                    time.sleep(0.02)
            finally:
                stop.set()
                writer.join(timeout=10)
            rss, hwm = _rss_kib(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            if server is not None:
                server.stop()
    result = {
        "benchmark": "scrape",
        "quick": quick,
        "store": store,
        "world": LARGE,
        "workspaces": workspaces,
        "part_build_s": {k: round(v, 3) for k, v in builds.items()},
        "series": series,
        "snapshot_bytes": snapshot_bytes,
        "history_build_s": round(history_s, 2),
        "snapshot_build_s": round(build_s, 3),
        "snapshot_write_s": round(write_s, 3),
        "scrapes": scrapes,
        "at_rest": {k: round(v, 2) for k, v in _percentiles(at_rest).items()},
        "exporter_cpu_ms_per_scrape_at_rest": round(cpu_per_scrape, 2),
        "under_writes": {k: round(v, 2) for k, v in _percentiles(under_writes).items()},
        "scrapes_under_writes": len(under_writes),
        "first_scrape_after_replacement": {k: round(v, 2) for k, v in _percentiles(first_after_change).items()}
        if first_after_change else {},
        "snapshot_replacements": writes.value,
        "exporter_rss_mib": {"idle": round(idle_rss / 1024, 1), "after_scrapes": round(rest_rss / 1024, 1),
                             "under_writes": round(rss / 1024, 1), "peak": round(hwm / 1024, 1)},
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    _report(result)
    return result


def _report(result: dict) -> None:
    engine = "PostgreSQL" if result["store"] == "postgres" else "DuckDB"
    rows = [
        ("series per scrape", f"{result['series']:,}"),
        ("snapshot size", f"{result['snapshot_bytes'] / 1024:,.0f} KiB"),
        (f"snapshot build ({engine}, 50k issues)", f"{result['snapshot_build_s'] * 1000:,.0f} ms"),
        *[(f"one workspace's part on a fresh connection ({name})", f"{seconds * 1000:,.0f} ms")
          for name, seconds in result["part_build_s"].items()],
        ("scrape at rest: median / p99",
         f"{result['at_rest']['median_ms']:.1f} / {result['at_rest']['p99_ms']:.1f} ms"),
        ("exporter CPU per scrape at rest", f"{result['exporter_cpu_ms_per_scrape_at_rest']:.2f} ms"),
        ("scrape under snapshot replacement: median / p99",
         f"{result['under_writes']['median_ms']:.1f} / {result['under_writes']['p99_ms']:.1f} ms"),
        ("first scrape after a replacement: median / max",
         "{median_ms:.1f} / {max_ms:.1f} ms".format(**result["first_scrape_after_replacement"])
         if result["first_scrape_after_replacement"] else "n/a"),
        ("snapshot replacements / scrapes during the run",
         f"{result['snapshot_replacements']} / {result['scrapes_under_writes']}"),
        ("exporter RSS idle / under writes / peak",
         "{idle} / {under_writes} / {peak} MiB".format(**result["exporter_rss_mib"])),
    ]
    print_and_save(f"scanwatch exporter benchmark ({result['workspaces']} x large world, {result['scrapes']} "
                   f"scrapes at rest, parts in {'PostgreSQL' if result['store'] == 'postgres' else 'files'})",
                   rows, result)


def print_and_save(title: str, rows: list[tuple[str, str]], result: dict) -> None:
    """Print the figures as a table and keep the result as JSON in benchmarks/results/."""
    width = max(len(k) for k, _ in rows)
    print(title)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{result['benchmark']}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"  written to {out.relative_to(ROOT)}")


def tick(counts: list[int]) -> dict:
    """The snapshot's cost per schedule tick with K workspaces of the large world: each workspace's run
    rebuilds its own part, so a tick is K part builds, each on the history opened afresh as a run's step
    opens it (`storage.connect`: the history's DuckDB settings, 96 MB and one thread, and a cold buffer)."""
    from benchmarks.workspaces import replicate_workspaces
    from pipelines.storage import connect
    from pipelines.sync.snapshot import build_part

    rows = {}
    for k in counts:  # a shared machine's load moves single figures by a fifth: the better of two ticks is kept
        with tempfile.TemporaryDirectory(prefix="scanwatch-bench-") as tmp_name:
            path = Path(tmp_name) / "history.duckdb"
            started = time.perf_counter()
            conn = build_history(path, LARGE)
            if k > 1:
                replicate_workspaces(conn, k)
            ids = [r[0] for r in conn.execute("SELECT workspace_id FROM accounts ORDER BY workspace_id").fetchall()]
            conn.close()
            history_s = time.perf_counter() - started
            ticks = []
            for _ in range(3):  # the first tick after the history was written, then two more: the best is kept
                builds, cpu = [], time.process_time()
                for workspace_id in ids:  # one tick: every workspace's run rebuilds its own part
                    started = time.perf_counter()
                    conn = connect(path)
                    try:
                        build_part(conn, workspace_id=workspace_id, label=None, now=NOW)
                    finally:
                        conn.close()
                    builds.append(time.perf_counter() - started)
                ticks.append((builds, time.process_time() - cpu))
        first = ticks[0][0]
        builds = min(ticks[1:], key=lambda t: sum(t[0]))[0]
        cpu_s = min(t[1] for t in ticks[1:])
        rows[k] = {"tick_s": round(sum(builds), 2), "tick_cpu_s": round(cpu_s, 2), "first_tick_s": round(sum(first), 2),
                   "part_median_s": round(statistics.median(builds), 3), "part_max_s": round(max(builds), 3),
                   "history_build_s": round(history_s, 1)}
        print(f"  K={k}: tick {rows[k]['tick_s']} s wall, {rows[k]['tick_cpu_s']} s CPU ({k} part builds, median "
              f"{rows[k]['part_median_s']} s, max {rows[k]['part_max_s']} s); first tick after writing the history "
              f"{rows[k]['first_tick_s']} s", flush=True)
    base = rows[min(rows)]
    result = {"benchmark": "snapshot-tick", "world": LARGE, "ticks": rows,
              "ratio_to_first": {k: round(r["tick_s"] / base["tick_s"], 1) for k, r in rows.items()},
              "cpu_ratio_to_first": {k: round(r["tick_cpu_s"] / base["tick_cpu_s"], 1) for k, r in rows.items()},
              "when": datetime.now(UTC).isoformat(timespec="seconds")}
    print_and_save("snapshot cost per tick (K part builds, large world per workspace)",
                   [(f"K = {k}", f"{r['tick_s']} s wall ({result['ratio_to_first'][k]}x K = {min(rows)}), "
                     f"{r['tick_cpu_s']} s CPU ({result['cpu_ratio_to_first'][k]}x)") for k, r in rows.items()], result)
    return result


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--tick" in args:
        given = args[args.index("--tick") + 1] if len(args) > args.index("--tick") + 1 else "1,10,50"
        tick([int(n) for n in given.split(",")])
    else:
        count = next((int(a.split("=", 1)[1]) for a in args if a.startswith("--workspaces=")), 1)
        if "--workspaces" in args:
            count = int(args[args.index("--workspaces") + 1])
        given = args[args.index("--store") + 1] if "--store" in args and len(args) > args.index("--store") + 1 \
            else "files"
        run(quick="--quick" in args, workspaces=count, store=given)
