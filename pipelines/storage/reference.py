"""The vocabulary and the SLA policy, copied into the history for SQL to read.

`pipelines/vocabulary.py` stays the one definition; these tables are its projection, rewritten by the
writer, so a query never spells a severity list or an SLA of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

from pipelines import vocabulary
from pipelines.sqlfiles import read_sql


def write_vocabulary(conn: duckdb.DuckDBPyConnection) -> None:
    """Rewrite `severities`, `issue_statuses` and `scan_statuses` in one transaction, and give `sla_policy`
    the default policy until a snapshot writes the one in force."""
    _in_transaction(conn, [
        ("reference/severities.sql", {"names": list(vocabulary.SEVERITIES)}),
        ("reference/issue_statuses.sql", {"names": list(vocabulary.ISSUE_STATUSES),
                                          "flagged": list(vocabulary.DISMISSED_STATUSES)}),
        ("reference/scan_statuses.sql", {"names": list(vocabulary.SCAN_STATUSES),
                                         "flagged": list(vocabulary.FINISHED_SCAN_STATUSES)}),
        ("reference/sla_policy_default.sql", _policy(vocabulary.DEFAULT_SLA_DAYS)),
    ])


def write_sla_policy(conn: duckdb.DuckDBPyConnection, sla_days: Mapping[str, int]) -> None:
    """Record the SLA policy the snapshot about to be built uses."""
    _in_transaction(conn, [("reference/sla_policy.sql", _policy(sla_days))])


def _policy(sla_days: Mapping[str, int]) -> dict[str, object]:
    return {"severities": list(sla_days), "days": [int(d) for d in sla_days.values()]}


def _in_transaction(conn: duckdb.DuckDBPyConnection, files: list[tuple[str, dict[str, object]]]) -> None:
    conn.execute("BEGIN TRANSACTION")
    try:
        for name, params in files:
            conn.execute(read_sql(name), params)
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise
