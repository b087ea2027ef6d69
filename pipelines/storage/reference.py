"""The vocabulary and the SLA policy, copied into the history for SQL to read.

`pipelines/core/vocabulary.py` stays the one definition; these tables are its projection, rewritten by the
writer, so a query never spells a severity list or an SLA of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipelines.core import vocabulary
from pipelines.core.sqlfiles import execute_file, read_sql, transaction

if TYPE_CHECKING:
    from pipelines.storage.destinations import Connection


def _lists() -> dict[str, list[str]]:
    return {
        "severities": list(vocabulary.SEVERITIES),
        "issue_statuses": list(vocabulary.ISSUE_STATUSES), "dismissed": list(vocabulary.DISMISSED_STATUSES),
        "scan_statuses": list(vocabulary.SCAN_STATUSES), "finished": list(vocabulary.FINISHED_SCAN_STATUSES),
    }


def vocabulary_current(conn: Connection) -> bool:
    """Whether the history's reference tables hold this scanwatch's vocabulary (a read)."""
    return bool(conn.execute(read_sql("reference/vocabulary_current.sql"), _lists()).fetchall()[0][0])


def write_vocabulary(conn: Connection) -> bool:
    """Rewrite `severities`, `issue_statuses` and `scan_statuses` in one transaction, and give `sla_policy`
    the default policy until a snapshot writes the one in force; returns whether anything was written.

    Every step of a sync opens the history, so an up-to-date copy (the usual case) costs one read, not a
    write transaction per open, and two workspaces' steps opening at once do not both rewrite it."""
    lists = _lists()
    if vocabulary_current(conn):
        return False
    with transaction(conn):
        execute_file(conn, "reference/vocabulary.sql", {
            **lists, "sla_severities": list(vocabulary.DEFAULT_SLA_DAYS),
            "sla_days": list(vocabulary.DEFAULT_SLA_DAYS.values())})
    return True


def write_sla_policy(conn: Connection, sla_days: Mapping[str, int]) -> None:
    """Record the SLA policy the snapshot about to be built uses."""
    with transaction(conn):
        execute_file(conn, "reference/sla_policy.sql",
                     {"severities": list(sla_days), "days": [int(d) for d in sla_days.values()]})
