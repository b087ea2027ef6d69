"""`scanwatch prune --before DATE`: bound the history's growth without changing what anything reads.

Every sync appends samples (a score per project and target, a reading per quota, its warnings); the rest of
the history is the service's state and its changes, which grow with the workspace, not with time. The prune
thins the samples older than DATE to the day-level history (`sql/retention/prune.sql` says what is kept and
why), in one transaction: the metrics, the alerts, the dashboards and the cookbook read the same after it.
Run it from cron or a Dagster job of your own, e.g. monthly with a DATE 90 days back (docs/operations.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from pipelines.core.text import printable

EXIT_USAGE = 2


class _DryRun(Exception):
    """Raised inside the transaction to roll it back once the counts are known."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--before", required=True, metavar="DATE",
                        help="thin samples observed before this UTC day (YYYY-MM-DD) or instant (ISO 8601); it "
                             "must be in the past")
    parser.add_argument("--dry-run", action="store_true", help="count what would be dropped, change nothing")
    parser.add_argument("--db", help="the history: a DuckDB file or a postgresql:// URL (default: SCANWATCH_DB)")


def parse_before(text: str, now: dt.datetime) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--before must be a date (YYYY-MM-DD) or an ISO 8601 instant, got {text[:40]!r}") from None
    when = when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
    if when > now:
        raise ValueError(f"--before {text[:40]} is in the future: the prune only thins the past")
    return when


def prune(db: str, before: dt.datetime, *, dry_run: bool = False) -> dict[str, int]:
    """The rows dropped per table (would be, with `dry_run`)."""
    from pipelines.core.sqlfiles import execute_file, transaction
    from pipelines.storage.db import writer

    counts: dict[str, int] = {}
    with writer(db) as conn:
        try:
            with transaction(conn):
                counts = {name: int(n) for name, n in
                          execute_file(conn, "retention/prune.sql", {"before": before}).fetchall()}
                execute_file(conn, "retention/prune_done.sql")
                if dry_run:
                    raise _DryRun
        except _DryRun:
            pass
    return counts


def run(args: argparse.Namespace) -> int:
    from pipelines.core.settings import ConfigError, Settings
    from pipelines.storage import HistoryUnavailableError

    try:
        before = parse_before(args.before, dt.datetime.now(dt.UTC))
        from pipelines.core.history_location import HistoryLocation

        location = Settings.load().history if args.db is None else HistoryLocation.parse(args.db, "--db")
        db = location.value
        from pipelines.storage.destinations.impl import engine_for

        if not engine_for(location).exists(location):
            raise ValueError(f"no history at {location.masked}: nothing to prune")
    except (ValueError, ConfigError) as exc:
        print(f"scanwatch prune: {printable(exc)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        counts = prune(db, before, dry_run=args.dry_run)
    except (HistoryUnavailableError, RuntimeError) as exc:
        print(f"scanwatch prune: {printable(str(exc).splitlines()[0] if str(exc) else exc)}", file=sys.stderr)
        return 1
    verb = "would drop" if args.dry_run else "dropped"
    print(f"scanwatch prune: {verb} before {before.isoformat()}: "
          + ", ".join(f"{n} {name} rows" for name, n in counts.items()))
    return 0
