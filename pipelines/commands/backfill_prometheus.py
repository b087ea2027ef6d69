"""`scanwatch backfill-prometheus`: the history's past into the store that scrapes the exporter.

The series are those /metrics serves (project and target scores, open issues by severity, quotas where a
sync saw them) plus the recording rules the dashboards read, one sample per step (a day by default) up to
the workspace's first sync. `--output` chooses the store's way in: day-aligned blocks of at most 24 h in a
data folder (Prometheus, Thanos), remote write (a Prometheus receiver with an out-of-order window, Mimir,
Cortex), or the VictoriaMetrics import API. Each prints one line saying what the store must allow, and
refuses before sending anything when it can read that the store would drop the past.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipelines.backfill.tsdb import Sink
    from pipelines.storage.destinations import Connection

_DURATION = re.compile(r"(\d{1,6})([mhd])")
# A sample every 15 minutes is already 35,000 a series over the service's year; more than a week apart, a
# dashboard's daily panels have nothing to show.
MIN_STEP, MAX_STEP = timedelta(minutes=15), timedelta(days=7)


def duration(text: str) -> timedelta:
    match = _DURATION.fullmatch(text.strip())
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a step like 1d, 6h or 30m")
    n, unit = int(match.group(1)), match.group(2)
    step = {"m": timedelta(minutes=n), "h": timedelta(hours=n), "d": timedelta(days=n)}[unit]
    if not MIN_STEP <= step <= MAX_STEP:
        raise argparse.ArgumentTypeError(f"{text!r} is outside 15m to 7d")
    if timedelta(days=1) % step and step % timedelta(days=1):
        raise argparse.ArgumentTypeError(f"{text!r} does not divide a day: samples would not fall on midnights")
    return step


def moment(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 time like 2026-06-01T00:00:00Z") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def wait_time(text: str) -> timedelta:
    match = _DURATION.fullmatch(text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a duration like 30m, 2h or 1d")
    n, unit = int(match.group(1)), match.group(2)
    return {"m": timedelta(minutes=n), "h": timedelta(hours=n), "d": timedelta(days=n)}[unit]


def _first_syncs_finished(conn: Connection, wait: timedelta) -> bool:
    """Whether every workspace in the history has finished its first sync (its end reconstructs the past
    and records it), polled for up to `wait`: a workspace half-way through its first sync has only part of
    its issues, and its past would be written short."""
    from pipelines.backfill.reconstruct import workspaces

    deadline = time.monotonic() + wait.total_seconds()
    while True:
        found = workspaces(conn)
        if found and all(done for _, done in found):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(15.0, max(0.0, deadline - time.monotonic())))


OUTPUTS = ("blocks", "remote-write", "victoriametrics")


def http_url(text: str) -> str:
    import urllib.parse

    parts = urllib.parse.urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not an http:// or https:// URL")
    return text.strip()


def label(text: str) -> tuple[str, str]:
    from pipelines.core.workspaces_file import IDENTIFIER

    name, sep, value = text.partition("=")
    if not sep or not IDENTIFIER.fullmatch(name):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not NAME=VALUE")
    return name, value


class _Terminated(Exception):
    """SIGTERM, unwound like Ctrl-C: every `finally` on the way stops the scratch Prometheus and removes the
    spool, where the default action would end the process on the spot and leave both behind."""


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    def terminated(_signum: int, _frame: object) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", choices=OUTPUTS, default="blocks",
                        help="blocks (default: into --data-dir), remote-write or victoriametrics (to --url)")
    parser.add_argument("--data-dir", type=Path,
                        help="blocks: the Prometheus data directory (--storage.tsdb.path), or a folder to upload")
    parser.add_argument("--url", type=http_url,
                        help="remote-write: the receiver's write URL (Prometheus: http://HOST:9090/api/v1/write; "
                             "Mimir: .../api/v1/push); victoriametrics: http://HOST:8428/api/v1/import/prometheus")
    parser.add_argument("--query-url", type=http_url,
                        help="the store's Prometheus query API root, read for its settings and the recording "
                             "rules (default: --url without its write path; Mimir: http://HOST/prometheus)")
    parser.add_argument("--step", type=duration, default=timedelta(days=1), help="time between samples (default 1d)")
    parser.add_argument("--end", type=moment,
                        help="write nothing at or after this time (default: the workspace's first sync); use the "
                             "time of your Prometheus's first scrape of the exporter if it started later")
    parser.add_argument("--instance", default="localhost:9817",
                        help="the exporter's instance label in your Prometheus (default localhost:9817)")
    parser.add_argument("--label", type=label, action="append", default=[], metavar="NAME=VALUE",
                        help="another label your scrape adds (repeatable)")
    parser.add_argument("--wait-for-first-sync", type=wait_time, default=timedelta(0), metavar="DURATION",
                        help="wait up to this long (e.g. 30m) for every workspace's first sync to finish, as a "
                             "deployment's job started beside the first sync must (default: do not wait)")
    parser.add_argument("--no-rules", action="store_true", help="write the raw series only, not the recording rules")
    parser.add_argument("--promtool", default="promtool", help="promtool binary (default: from PATH)")
    parser.add_argument("--prometheus", default="prometheus",
                        help="prometheus binary, run briefly over the new blocks to evaluate the rules")
    parser.add_argument("--db", help="the history: a DuckDB file or a postgresql:// URL (default: SCANWATCH_DB or "
                                     "data/scanwatch.duckdb)")


def _output(args: argparse.Namespace) -> str | None:
    """The one line that refuses a mismatched output and destination, or None."""
    if args.output == "blocks":
        if args.data_dir is None:
            return "--output blocks needs --data-dir DIR (Prometheus's --storage.tsdb.path)"
        if args.url or args.query_url:
            return "--url and --query-url are for --output remote-write or victoriametrics, not blocks"
        return None
    if args.url is None:
        return f"--output {args.output} needs --url (the store's write URL)"
    if args.data_dir is not None:
        return f"--data-dir is for --output blocks, not {args.output}"
    return None


def _sink(args: argparse.Namespace) -> Sink:
    from pipelines.backfill.remote import RemoteWriteSink, VictoriaMetricsSink, query_base

    kind = RemoteWriteSink if args.output == "remote-write" else VictoriaMetricsSink
    return kind(args.url, args.query_url or query_base(args.url))


def run(args: argparse.Namespace) -> int:
    from pipelines.backfill.tsdb import BackfillError, Plan, backfill, check_data_dir
    from pipelines.commands.backfill import open_history
    from pipelines.core.package_files import rule_files, scrape_job_name

    mismatch = _output(args)
    if mismatch:
        print(f"scanwatch backfill-prometheus: {mismatch}", file=sys.stderr)
        return 2
    try:
        if args.data_dir is not None:
            check_data_dir(args.data_dir)
    except BackfillError as exc:
        print(f"scanwatch backfill-prometheus: {exc}", file=sys.stderr)
        return 2
    labels = {"job": scrape_job_name(), "instance": args.instance, **dict(args.label)}
    plan = Plan(data_dir=args.data_dir, step=args.step, end=args.end, labels=labels,
                rule_files=[] if args.no_rules else [p for p in rule_files() if "record:" in p.read_text()],
                promtool=args.promtool, prometheus=args.prometheus)
    started = time.monotonic()
    conn = open_history(args.db, "backfill-prometheus")
    if conn is None:
        return 1
    where = args.data_dir if args.output == "blocks" else args.url
    try:
        with _sigterm_unwinds():
            if args.wait_for_first_sync and not _first_syncs_finished(conn, args.wait_for_first_sync):
                print(f"scanwatch backfill-prometheus: nothing to write (no first sync finished within "
                      f"{args.wait_for_first_sync.total_seconds() / 60:g} min; run it again once one has, as "
                      "the chart's post-upgrade job does)")
                return 0
            sink = None if args.output == "blocks" else _sink(args)
            outcome = backfill(conn, plan, sink,
                               announce=lambda line: print(f"scanwatch backfill-prometheus: {line}", flush=True))
    except BackfillError as exc:
        print(f"scanwatch backfill-prometheus: {exc}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Terminated) as exc:
        kept = (f"{args.data_dir} holds only whole blocks moved before the signal" if args.output == "blocks"
                else "the batches sent before the signal are in; a new run sends the same samples again")
        print(f"scanwatch backfill-prometheus: interrupted; the scratch Prometheus is stopped, the spool removed, "
              f"and {kept}", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT)
    finally:
        conn.close()
    if outcome.samples == 0:
        reason = (f"every day of the past is already in {args.data_dir}'s blocks ({outcome.skipped_days} days)"
                  if outcome.skipped_days else "no scans or issues before the first sync")
        print(f"scanwatch backfill-prometheus: nothing to write ({reason})")
        return 0
    made = f"{len(outcome.blocks)} blocks in {where}" if args.output == "blocks" else f"sent to {where}"
    skipped = (f"; {outcome.skipped_days} days already in the folder's blocks left as they are"
               if outcome.skipped_days else "")
    print(f"scanwatch backfill-prometheus: {outcome.samples} samples and {outcome.rule_samples} recording-rule "
          f"samples of {len(outcome.series)} series from {outcome.start:%Y-%m-%d %H:%M} to "
          f"{outcome.end:%Y-%m-%d %H:%M} UTC (excluded), {made}{skipped}, {time.monotonic() - started:.1f} s")
    return 0
