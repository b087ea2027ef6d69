"""PostgreSQL's SQL client: a psycopg connection set up for the history (autocommit, UTC, bounded waits), and
the compatibility layer that gives the server the DuckDB functions the SQL files use.

The URL's password never leaves: libpq reads it (or `PGPASSWORD`, or `.pgpass`), and every message built
here shows the URL masked and scrubs what the driver wrote.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg
import psycopg.types.string
from psycopg import conninfo

from pipelines.core.history_location import HistoryLocation
from pipelines.core.sqlfiles import read_sql
from pipelines.storage.destinations.base import Connection
from pipelines.storage.destinations.errors import HistoryUnavailableError
from pipelines.storage.destinations.impl.postgres import deadline
from pipelines.storage.destinations.impl.postgres.errors import describe_failure, driver_reason

CONNECT_TIMEOUT_SECONDS = 10  # unless the URL says otherwise (connect_timeout=...)
# A path that dies is noticed by libpq within about 20 s: keepalive probes after 10 s idle, every 3 s, 3 unanswered
# end the connection, and so does data left unacknowledged for 30 s. A frozen peer still ACKs: `deadline` ends that.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 3, "keepalives_count": 3,
              "tcp_user_timeout": 30_000}
# A writer's bounds on the server: no statement and no lock wait (another sync of the workspace, a migration)
# outlives an hour, and a transaction left idle by a client that went silent ends after ten minutes, with its
# locks. A merge takes seconds; a sync's own deadline (SCANWATCH_SYNC_DEADLINE_SECONDS) is kept client-side.
WRITER_SETTINGS = {"statement_timeout": "1h", "lock_timeout": "1h", "idle_in_transaction_session_timeout": "10min"}
COMPAT_FILE = "engines/postgres/compat.sql"
LOCKS_FILE = "engines/postgres/locks.sql"  # installed with the compatibility layer, under one digest
WORKSPACE_LOCK_FILE = "engines/postgres/workspace_lock.sql"
VIEWS_UNGRANTED_FILE = "engines/postgres/views_ungranted.sql"
STALE_STATISTICS_FILE = "engines/postgres/statistics_stale.sql"
# The group role whose members (Grafana's data source) may read the views layer and nothing else.
VIEWS_ROLE = "scanwatch_views"
# The catching casts of the compatibility layer, one per type an API field has (pipelines/storage/entities.py).
_CATCHING = {"INTEGER": "scanwatch_try_integer", "DOUBLE PRECISION": "scanwatch_try_double",
             "BOOLEAN": "scanwatch_try_boolean", "TIMESTAMPTZ": "scanwatch_try_timestamptz",
             "JSON": "scanwatch_try_json"}



def connect(location: HistoryLocation, *, writer: bool = True) -> psycopg.Connection:
    """A connection in autocommit mode (transactions are explicit, as on DuckDB), in UTC; a writer's is
    refused at once when the server only reads (a hot standby, or `default_transaction_read_only`)."""
    options: dict[str, Any] = {"autocommit": True, "cursor_factory": psycopg.ClientCursor,
                               "application_name": "scanwatch"}
    try:
        given = conninfo.conninfo_to_dict(location.url)
    except psycopg.Error as exc:
        raise HistoryUnavailableError(f"SCANWATCH_DB is not a valid PostgreSQL URL ({location.masked}): "
                                      f"{driver_reason(exc, location)}") from None
    for name, value in {"connect_timeout": CONNECT_TIMEOUT_SECONDS, **KEEPALIVES}.items():
        if name not in given:  # what the URL sets wins
            options[name] = value
    if (late := deadline.expired()) is not None:
        raise HistoryUnavailableError(late)
    try:
        raw = psycopg.connect(location.url, **options)
    except psycopg.Error as exc:
        raise HistoryUnavailableError(describe_failure(exc, location)) from None
    deadline.track(raw)
    # JSON columns arrive as their text, as DuckDB gives them, whichever engine a reader asks.
    for name in ("json", "jsonb"):
        raw.adapters.register_loader(name, psycopg.types.string.TextLoader)
    try:
        raw.execute("SET TimeZone = 'UTC'")
        # A merge's statements are short and planned once: compiling them (JIT, on above a cost estimate
        # that a large stage reaches) took longer than running them, 4.4 s of a 4.9 s event diff of 20k
        # issues.
        raw.execute("SET jit = off")
        # A merge group's sorts and hashes (the latest sighting of each id, the joins with the history) fit
        # in memory instead of spilling to temp files: the server's memory, per writer, for a statement.
        raw.execute("SET work_mem = '64MB'")
        if writer:
            for setting, text in WRITER_SETTINGS.items():
                raw.execute(f"SET {setting} = '{text}'")
            standby, read_only = raw.execute(
                "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'").fetchone() or (False,
                                                                                                               False)
            if standby or read_only:
                what = "a hot standby (in recovery)" if standby else "read-only (default_transaction_read_only)"
                raise HistoryUnavailableError(
                    f"the PostgreSQL server of the history at {location.masked} is {what} and takes no writes: "
                    "point SCANWATCH_DB at the primary")
    except psycopg.Error as exc:
        raw.close()
        raise HistoryUnavailableError(describe_failure(exc, location)) from None
    except BaseException:
        raw.close()
        raise
    return raw



def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def compat_text() -> str:
    return read_sql(COMPAT_FILE) + "\n" + read_sql(LOCKS_FILE)


def compat_digest() -> str:
    return "scanwatch compat " + hashlib.sha256(compat_text().encode()).hexdigest()[:16]


def compat_held(conn: Connection) -> str | None:
    held: str | None = conn.execute(
        "SELECT obj_description(to_regprocedure('epoch(timestamptz)'), 'pg_proc')").fetchone()[0]
    return held


def install_compat(conn: Connection) -> None:
    """`sql/engines/postgres/compat.sql`, applied when its digest (kept as the comment of `epoch`) differs."""
    text = compat_text()
    digest = compat_digest()
    if compat_held(conn) == digest:
        return
    conn.execute("BEGIN")
    try:
        conn.execute(text)
        conn.execute("COMMENT ON FUNCTION epoch(timestamptz) IS $digest", {"digest": digest})
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


